// @interlock/gate under Deno. The package's Node entry loads fs-ext, a native addon of the
// old (non Node-API) kind that Deno refuses; its core (`@interlock/gate/core`) is plain ES
// modules and runs unchanged, and its browser loader fetches the components' wasm, which
// Deno's fetch reads from file: URLs. This entry gives Deno a journal that suits it: SQLite
// through Deno's `node:sqlite` (synchronous, as the gate's storage import is), the gate's
// SQL journal over it, so a `sqlite:///path` journal written here is read by the CLI, Node
// and Python, and back; or memory.
//
//   deno run --allow-read --allow-write --allow-env app.js
import { DatabaseSync } from 'node:sqlite';
import { Interlock as Base, MemoryJournal, PaymentsService, SqlStorage, StorageError } from '@interlock/gate/core';
import { gateComponent, paymentsComponent } from '@interlock/gate/browser';

/**
 * @import { Storage, Statement, SqlValue, OpenOptions } from '@interlock/gate/core'
 */

/** How long a write waits for another process's transaction before it fails (ms). */
const BUSY_TIMEOUT_MS = 10_000;

/**
 * A column as the gate reads it: integer, text or null.
 * @param {unknown} v
 * @param {number} column
 * @param {number} statement
 * @returns {SqlValue}
 */
function value(v, column, statement) {
  if (v === null) return { tag: 'null' };
  if (typeof v === 'bigint') return { tag: 'integer', val: v };
  if (typeof v === 'string') return { tag: 'text', val: v };
  throw new StorageError('io', `column ${column} of statement ${statement} is ${typeof v}, neither integer nor text`);
}

/**
 * A SQL journal's storage in the SQLite file at `path` (created if missing), over
 * node:sqlite: the gate's schema and statements run as `sql-batch`es. WAL mode; a writing
 * batch is one `BEGIN IMMEDIATE` transaction (the write lock taken before its first
 * statement, so processes sharing the file cannot both advance one stream); a durable one
 * commits with synchronous = FULL (one fsync of the log, which holds every earlier commit),
 * any other with NORMAL.
 * @implements {Storage}
 */
export class DenoSqlite extends SqlStorage {
  backend = /** @type {const} */ ('sqlite');
  /** @type {Map<string, import('node:sqlite').StatementSync>} */
  #prepared = new Map();
  #full = false;

  /** @param {string} path */
  constructor(path) {
    super(`SQLite journal ${path}`);
    this.path = path;
    this.db = new DatabaseSync(path);
    this.db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec('PRAGMA synchronous = NORMAL');
  }

  /** @param {string} sql */
  #statement(sql) {
    let st = this.#prepared.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      st.setReadBigInts(true);
      st.setReturnArrays(true);
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
    const db = this.db;
    try {
      if (write && this.#full !== durable) {
        db.exec(durable ? 'PRAGMA synchronous = FULL' : 'PRAGMA synchronous = NORMAL');
        this.#full = durable;
      }
      db.exec(write ? 'BEGIN IMMEDIATE' : 'BEGIN');
      const out = statements.map((s, i) => {
        const st = this.#statement(s.sql);
        const params = s.params.map((p) => (p.tag === 'null' ? null : p.val));
        if (st.columns().length > 0) return /** @type {unknown[][]} */ (/** @type {unknown} */ (st.all(...params))).map((row) => row.map((v, c) => value(v, c, i)));
        const { changes } = st.run(...params);
        if (s.expectChanges !== undefined && BigInt(changes) !== BigInt(s.expectChanges)) throw new StorageError('unexpected-changes', i);
        return [];
      });
      db.exec('COMMIT');
      return out;
    } catch (e) {
      if (db.isTransaction) db.exec('ROLLBACK');
      if (e instanceof StorageError) throw e;
      throw new StorageError('io', `SQLite journal ${this.path}: ${/** @type {Error} */ (e).message}`);
    }
  }


  close() {
    this.db.close();
  }
}

export class Interlock extends Base {
  /**
   * A gate over the SQLite journal at `path` (a file; `sqlite:///abs/path.db` as well).
   * @param {string} path
   * @param {OpenOptions} [options]
   */
  static async open(path, options = {}) {
    const storage = new DenoSqlite(path.startsWith('sqlite://') ? path.slice('sqlite://'.length) : path);
    try {
      return await Base.create(gateComponent(), storage, options);
    } catch (e) {
      storage.close();
      throw e;
    }
  }

  /**
   * A gate over a journal in memory.
   * @param {OpenOptions} [options]
   */
  static async memory(options = {}) {
    return Base.create(gateComponent(), new MemoryJournal(), options);
  }
}

/** The simulated payments service (state in memory). */
export const Payments = {
  /** @param {string} tier */
  async inMemory(tier) {
    return PaymentsService.create(await paymentsComponent(), tier);
  },
};

export { gateComponent };
export * from '@interlock/gate/core';
