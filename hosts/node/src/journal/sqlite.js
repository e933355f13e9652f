// The SQLite journal (Node): the processes of one machine share one database file. The
// schema, the statements and every rule are the Rust backend's (adapters/sql-journal,
// src/sqlite.rs; its README says how each rule of the journal contract is translated), so
// a journal written by the CLI is read here and the other way round.
//
// better-sqlite3 is synchronous, as the gate's journal import is: no thread is needed.
// WAL mode; an append is one `BEGIN IMMEDIATE` transaction (the write lock is taken before
// the length is read, so no other process can advance the stream between the check and the
// insert); a durable append commits with synchronous = FULL (one fsync of the WAL, which
// holds every earlier commit of every process), a non-durable one with NORMAL (group
// commit: the next durable commit or `sync` of any process makes it durable, in order).
import fs from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createRequire } from 'node:module';
import { JournalError } from '../errors.js';
import './format-node.js';
import { validateAppend, formatFileText } from './format.js';
import { FORMAT_KEY, schemaStatements, checkStoredFormat, checkRun, journalError, appendNothing } from './sql.js';

/**
 * @import { JournalBackend } from '../types.js'
 * @import { Database, Statement } from 'better-sqlite3'
 */

const require = createRequire(import.meta.url);

/** How long a write waits for another process's transaction before it fails (ms). */
const BUSY_TIMEOUT_MS = 10_000;

const LENGTH = 'SELECT length FROM interlock_streams WHERE name = ?';
const CREATE_STREAM = 'INSERT INTO interlock_streams (name, length, open) VALUES (?, ?, ?)';
const UPDATE_STREAM = 'UPDATE interlock_streams SET length = ?, open = ? WHERE name = ?';
// The ordinal is max + 1: the write lock (BEGIN IMMEDIATE) is held, and the UNIQUE index
// answers the max.
const INSERT_ENTRY = 'INSERT INTO interlock_entries (stream, seq, entry, ordinal) ' +
  'VALUES (?, ?, ?, (SELECT COALESCE(MAX(ordinal), 0) + 1 FROM interlock_entries))';
const IN_ORDER = 'SELECT entry FROM interlock_entries ORDER BY ordinal';
const READ = 'SELECT seq, entry FROM interlock_entries WHERE stream = ? AND seq >= ? ORDER BY seq';
/** Recovery's work list: answered from the partial index `interlock_open_streams`. */
export const OPEN_STREAMS = 'SELECT name FROM interlock_streams WHERE open ORDER BY position';
const STREAMS = 'SELECT name FROM interlock_streams ORDER BY position';
const FORMAT_ROW = 'SELECT value FROM interlock_meta WHERE key = ?';
const STAMP_FORMAT = 'INSERT INTO interlock_meta (key, value) VALUES (?, ?)';
const HAS_META = "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'interlock_meta')";

/** better-sqlite3, or a clear error when the optional dependency is missing. */
function betterSqlite3() {
  try {
    return /** @type {typeof import('better-sqlite3')} */ (require('better-sqlite3'));
  } catch (e) {
    throw new JournalError('other', `SQLite journals need the optional dependency better-sqlite3 (12.x), which is not installed or did not build: npm install better-sqlite3@12 (${/** @type {Error} */ (e).message})`);
  }
}

/**
 * Creates the database file (empty: a valid empty database) and its missing parent folders
 * readable by their owner only, whatever the umask, as the file journal does: a journal
 * holds customers' orders and amounts. SQLite gives its -wal and -shm files the database
 * file's mode.
 * @param {string} path
 */
function createOwnerOnly(path) {
  const parent = dirname(path);
  const first = fs.mkdirSync(parent, { recursive: true, mode: 0o700 });
  if (first !== undefined) {
    for (let d = parent; ; d = dirname(d)) {
      fs.chmodSync(d, 0o700);
      if (d === first) break;
    }
  }
  let fd;
  try {
    fd = fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
  } catch (e) {
    if (/** @type {NodeJS.ErrnoException} */ (e).code === 'EEXIST') return;
    throw e;
  }
  try {
    fs.fchmodSync(fd, 0o600);
  } finally {
    fs.closeSync(fd);
  }
}

/** @implements {JournalBackend} */
export class SqliteJournal {
  /** @type {Database | null} null once closed */
  #db;
  /** @type {Record<'length' | 'create' | 'update' | 'insert' | 'read' | 'inOrder' | 'open' | 'all', Statement>} */
  #st;
  /** @type {(stream: string, expectedLength: number, entries: string[], open: boolean) => void} */
  #appendImmediate;
  /** The `synchronous` setting in force on the connection (true: FULL). */
  #synchronousFull = false;

  /**
   * Opens (or creates, readable by its owner only, with missing parent folders) the journal
   * database at `path`, switches it to WAL mode, creates the schema if needed and checks its
   * format version (a newer one is refused, nothing changed).
   * @param {string} path
   * @returns {SqliteJournal}
   */
  static open(path) {
    const file = resolve(path);
    const name = `SQLite journal ${file}`;
    /**
     * @template T
     * @param {string} what
     * @param {() => T} f
     * @returns {T}
     */
    const step = (what, f) => {
      try {
        return f();
      } catch (e) {
        if (e instanceof JournalError) throw e;
        throw journalError('io', `${name}: ${what}: ${/** @type {Error} */ (e).message}`);
      }
    };
    const Database = betterSqlite3();
    step('cannot create the database file', () => createOwnerOnly(file));
    const db = step('cannot open', () => new Database(file, { timeout: BUSY_TIMEOUT_MS }));
    try {
      // A newer journal is refused before anything (even its journal mode) is changed.
      const stamped = step('cannot read the format version', () =>
        db.prepare(HAS_META).pluck().get() ? db.prepare(FORMAT_ROW).pluck().get(FORMAT_KEY) : undefined);
      checkStoredFormat(/** @type {string | undefined} */ (stamped), name);
      const mode = step('cannot switch to WAL mode', () => db.pragma('journal_mode = WAL', { simple: true }));
      if (String(mode).toLowerCase() !== 'wal') throw journalError('io', `${name}: cannot switch to WAL mode: it stays in ${mode} mode`);
      step('cannot set synchronous', () => db.pragma('synchronous = NORMAL'));
      step('cannot set up the schema', () => setUp(db, name));
      return new SqliteJournal(file, db);
    } catch (e) {
      db.close();
      throw e;
    }
  }

  /**
   * Use SqliteJournal.open. (`db` is better-sqlite3's Database, kept out of this package's
   * declarations: its types are not a dependency of code that uses the package.)
   * @param {string} path
   * @param {unknown} connection
   */
  constructor(path, connection) {
    const db = /** @type {Database} */ (connection);
    /** The database file. */
    this.path = path;
    /** The write-ahead log, which `sync` flushes. */
    this.wal = `${path}-wal`;
    /** Transactions this journal committed (appends). */
    this.commits = 0;
    /** fsyncs this journal asked for: durable appends and syncs. */
    this.durableCommits = 0;
    this.#db = db;
    this.#st = {
      length: db.prepare(LENGTH).pluck(),
      create: db.prepare(CREATE_STREAM),
      update: db.prepare(UPDATE_STREAM),
      insert: db.prepare(INSERT_ENTRY),
      read: db.prepare(READ).raw(),
      inOrder: db.prepare(IN_ORDER).pluck(),
      open: db.prepare(OPEN_STREAMS).pluck(),
      all: db.prepare(STREAMS).pluck(),
    };
    const st = this.#st;
    // IMMEDIATE takes the write lock before the length is read. A throw rolls back.
    this.#appendImmediate = db.transaction((/** @type {string} */ stream, /** @type {number} */ expectedLength, /** @type {string[]} */ entries, /** @type {boolean} */ open) => {
      const actual = /** @type {number | undefined} */ (st.length.get(stream)) ?? 0;
      if (actual !== expectedLength) throw new JournalError('conflict', actual);
      validateAppend(entries, stream, expectedLength, open);
      const newLength = expectedLength + entries.length;
      if (actual === 0) st.create.run(stream, newLength, open ? 1 : 0);
      else st.update.run(newLength, open ? 1 : 0, stream);
      entries.forEach((entry, i) => st.insert.run(stream, expectedLength + i, entry));
    }).immediate;
  }

  #usable() {
    if (!this.#db) throw new JournalError('other', 'journal is closed');
    return this.#db;
  }

  /**
   * The gate's error for a failed SQLite call.
   * @param {unknown} e
   * @returns {unknown}
   */
  #error(e) {
    if (e instanceof JournalError) return e;
    const Database = betterSqlite3();
    if (!(e instanceof Database.SqliteError)) return e; // a bug here: the gate traps
    if (e.code.startsWith('SQLITE_BUSY')) {
      return journalError('io', `SQLite journal ${this.path}: other writers held the database for longer than ${BUSY_TIMEOUT_MS / 1000} s: ${e.message}`);
    }
    return journalError('io', `SQLite journal ${this.path}: ${e.message}`);
  }

  /**
   * @template T
   * @param {(db: Database) => T} f
   * @returns {T}
   */
  #run(f) {
    const db = this.#usable();
    try {
      return f(db);
    } catch (e) {
      throw this.#error(e);
    }
  }

  /**
   * An empty batch writes nothing and leaves the stream (and its `open`) as it is; if
   * `durable`, it still syncs. As with the file journal, a conflict is reported before the
   * entries are checked.
   * @param {string} stream
   * @param {number} expectedLength
   * @param {string[]} entries
   * @param {boolean} durable
   * @param {boolean} open
   */
  append(stream, expectedLength, entries, durable, open) {
    if (entries.length === 0) {
      appendNothing(this, stream, expectedLength, durable);
      return;
    }
    this.#run((db) => {
      if (this.#synchronousFull !== durable) {
        db.pragma(durable ? 'synchronous = FULL' : 'synchronous = NORMAL');
        this.#synchronousFull = durable;
      }
      this.#appendImmediate(stream, expectedLength, entries, open);
    });
    this.commits += 1;
    if (durable) this.durableCommits += 1;
  }

  /**
   * @param {string} stream
   * @param {number} start
   * @returns {string[]}
   */
  read(stream, start) {
    const rows = /** @type {[number, unknown][]} */ (this.#run(() => this.#st.read.all(stream, start)));
    checkRun(stream, start, rows.map(([seq]) => seq));
    return rows.map(([seq, entry]) => {
      if (typeof entry !== 'string') {
        throw journalError('corrupt', `SQLite journal ${this.path}: a stored value is unreadable: entry ${seq} of stream ${JSON.stringify(stream)} is not text`);
      }
      return entry;
    });
  }

  /**
   * @param {string} stream
   * @returns {number}
   */
  length(stream) {
    return /** @type {number | undefined} */ (this.#run(() => this.#st.length.get(stream))) ?? 0;
  }

  /** @returns {string[]} */
  openStreams() {
    return /** @type {string[]} */ (this.#run(() => this.#st.open.all()));
  }

  /** @returns {string[]} */
  streams() {
    return /** @type {string[]} */ (this.#run(() => this.#st.all.all()));
  }

  /**
   * One fsync of the write-ahead log. Every commit of every process is in the log (or was
   * checkpointed into the database file, which SQLite syncs when it checkpoints), so this
   * makes every append so far durable, including other processes' non-durable ones.
   */
  sync() {
    this.#usable();
    let fd;
    try {
      fd = fs.openSync(this.wal, 'r');
    } catch (e) {
      // No log: everything was checkpointed into the database file and synced.
      if (/** @type {NodeJS.ErrnoException} */ (e).code !== 'ENOENT') {
        throw journalError('io', `SQLite journal ${this.path}: cannot open ${this.wal} to sync it: ${/** @type {Error} */ (e).message}`);
      }
    }
    if (fd !== undefined) {
      try {
        fs.fdatasyncSync(fd);
      } catch (e) {
        throw journalError('io', `SQLite journal ${this.path}: fsync of ${this.wal} failed: ${/** @type {Error} */ (e).message}`);
      } finally {
        fs.closeSync(fd);
      }
    }
    this.durableCommits += 1;
  }

  /**
   * Every entry of the journal in append order (by `ordinal`): each followed by a newline,
   * the bytes a file journal of the same appends holds.
   * @returns {string[]}
   */
  entriesInOrder() {
    return /** @type {string[]} */ (this.#run(() => this.#st.inOrder.all()));
  }

  /** The journal as journal.jsonl bytes (entries in append order, each + "\n"). */
  bytes() {
    return Buffer.from(this.entriesInOrder().map((e) => `${e}\n`).join(''));
  }

  close() {
    this.#db?.close();
    this.#db = null;
  }
}

/**
 * Creates the schema under the write lock, so that processes opening a new journal at once
 * do not race; a newer format is refused before anything but the meta table (the same in
 * every version) is created, and the transaction is rolled back.
 * @param {Database} db
 * @param {string} name
 */
function setUp(db, name) {
  const schema = schemaStatements('sqlite');
  db.transaction(() => {
    db.exec(schema[0]);
    const stamped = /** @type {string | undefined} */ (db.prepare(FORMAT_ROW).pluck().get(FORMAT_KEY));
    checkStoredFormat(stamped, name);
    for (const statement of schema.slice(1)) db.exec(statement);
    if (stamped === undefined) db.prepare(STAMP_FORMAT).run(FORMAT_KEY, formatFileText());
  }).immediate();
}
