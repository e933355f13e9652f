// A SQL journal's storage in SQLite (Node): the processes of one machine share one database
// file, as the CLI's (adapters/sql-journal, src/sqlite.rs). The schema and every statement
// are the gate's (it runs the SQL journal inside, over `sql-batch`); this file runs a batch
// as one transaction, nothing more. better-sqlite3 is synchronous, as the storage import is.
//
// WAL mode; a writing batch is one `BEGIN IMMEDIATE` transaction (the write lock is taken
// before its first statement); a durable one commits with synchronous = FULL (one fsync of
// the WAL, which holds every earlier commit of every process), any other with NORMAL.
import fs from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createRequire } from 'node:module';
import { JournalError, StorageError } from '../errors.js';
import { SqlStorage } from './sql-storage.js';

/**
 * @import { Storage, SqlValue, Statement } from '../types.js'
 * @import { Database, Statement as Prepared } from 'better-sqlite3'
 */

/** How long a write waits for another process's transaction before it fails (ms). */
const BUSY_TIMEOUT_MS = 10_000;

/** better-sqlite3, or a clear error when the optional dependency is missing. */
function betterSqlite3() {
  try {
    return /** @type {typeof import('better-sqlite3')} */ (createRequire(import.meta.url)('better-sqlite3'));
  } catch (e) {
    throw new JournalError('other', `SQLite journals need the optional dependency better-sqlite3 (12.x), which is not installed or did not build: npm install better-sqlite3@12 (${/** @type {Error} */ (e).message})`);
  }
}

/**
 * Creates the database file (empty: a valid empty database) and its missing parent folders
 * readable by their owner only, whatever the umask: a journal holds customers' orders and
 * amounts. SQLite gives its -wal and -shm files the database file's mode.
 * @param {string} path
 */
function createOwnerOnly(path) {
  const parent = dirname(path);
  const first = fs.mkdirSync(parent, { recursive: true, mode: 0o700 });
  for (let d = parent; first !== undefined; d = dirname(d)) {
    fs.chmodSync(d, 0o700);
    if (d === first) break;
  }
  try {
    fs.closeSync(fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600));
    fs.chmodSync(path, 0o600);
  } catch (e) {
    if (/** @type {NodeJS.ErrnoException} */ (e).code !== 'EEXIST') throw e;
  }
}

/** @implements {Storage} */
export class SqliteJournal extends SqlStorage {
  backend = /** @type {const} */ ('sqlite');
  /** @type {Database | null} null once closed */
  #db;
  /** @type {Map<string, Prepared>} */
  #prepared = new Map();
  /** The `synchronous` setting in force on the connection (true: FULL). */
  #full = false;

  /**
   * Opens (or creates, owner-only, with missing parent folders) the database at `path` and
   * switches it to WAL mode. The gate creates the schema and checks its version when the
   * journal is opened.
   * @param {string} path
   * @returns {SqliteJournal}
   */
  static open(path) {
    const file = resolve(path);
    const Database = betterSqlite3();
    /** @type {Database | undefined} */
    let db;
    try {
      createOwnerOnly(file);
      db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
      const mode = db.pragma('journal_mode = WAL', { simple: true });
      if (String(mode).toLowerCase() !== 'wal') throw new Error(`cannot switch to WAL mode: it stays in ${mode} mode`);
      db.pragma('synchronous = NORMAL');
      return new SqliteJournal(file, db);
    } catch (e) {
      db?.close();
      throw new JournalError('io', `SQLite journal ${file}: ${/** @type {Error} */ (e).message}`);
    }
  }

  /**
   * Use SqliteJournal.open.
   * @param {string} path
   * @param {unknown} db better-sqlite3's Database
   */
  constructor(path, db) {
    super(`SQLite journal ${path}`);
    this.path = path;
    this.#db = /** @type {Database} */ (db);
  }

  /** @param {string} sql */
  #statement(sql) {
    let st = this.#prepared.get(sql);
    if (!st) {
      st = /** @type {Database} */ (this.#db).prepare(sql);
      if (st.reader) st.safeIntegers(true).raw(true);
      else st.safeIntegers(true);
      this.#prepared.set(sql, st);
    }
    return st;
  }

  /**
   * Runs `statements` as one transaction: each statement's rows, or nothing of it happens.
   * @param {Statement[]} statements
   * @param {boolean} write
   * @param {boolean} durable
   * @returns {SqlValue[][][]}
   */
  sqlBatch(statements, write, durable) {
    const db = this.#db;
    if (!db) throw new StorageError('io', `SQLite journal ${this.path} is closed`);
    try {
      if (write && this.#full !== durable) {
        db.pragma(durable ? 'synchronous = FULL' : 'synchronous = NORMAL');
        this.#full = durable;
      }
      db.exec(write ? 'BEGIN IMMEDIATE' : 'BEGIN');
    } catch (e) {
      throw this.#error(e);
    }
    try {
      const out = statements.map((s, i) => {
        const st = this.#statement(s.sql);
        // `?1`, `?2`, ...: better-sqlite3 binds numbered parameters by name.
        const params = Object.fromEntries(s.params.map((p, n) => [n + 1, p.tag === 'null' ? null : p.val]));
        if (st.reader) return /** @type {unknown[][]} */ (st.all(params)).map((row) => row.map((v, c) => value(v, c, i)));
        const { changes } = st.run(params);
        if (s.expectChanges !== undefined && BigInt(changes) !== BigInt(s.expectChanges)) throw new StorageError('unexpected-changes', i);
        return [];
      });
      db.exec('COMMIT');
      this.count(write, durable);
      return out;
    } catch (e) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw this.#error(e);
    }
  }

  /** @param {unknown} e */
  #error(e) {
    if (e instanceof StorageError) return e;
    const busy = /** @type {any} */ (e)?.code === 'SQLITE_BUSY';
    const why = busy ? `other writers held the database for longer than ${BUSY_TIMEOUT_MS / 1000} s: ` : '';
    return new StorageError('io', `SQLite journal ${this.path}: ${why}${/** @type {Error} */ (e).message}`);
  }

  close() {
    this.#db?.close();
    this.#db = null;
  }
}

/**
 * A column's value as the storage's `sql-value`.
 * @param {unknown} v
 * @param {number} column
 * @param {number} statement
 * @returns {SqlValue}
 */
export function value(v, column, statement) {
  if (v === null) return { tag: 'null' };
  if (typeof v === 'bigint') return { tag: 'integer', val: v };
  if (typeof v === 'string') return { tag: 'text', val: v };
  throw new StorageError('io', `column ${column} of statement ${statement} is ${typeof v}, neither integer nor text`);
}
