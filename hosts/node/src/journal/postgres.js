// A SQL journal's storage in PostgreSQL (Node): many workers on many machines share one
// database. The schema and every statement are the gate's (it runs the SQL journal inside,
// over `sql-batch`), the CLI's too, so a journal written by one host is read by the other.
//
// The storage import is synchronous and the `pg` client is async, so the client lives in a
// worker thread (./postgres-worker.js). Each batch posts one request to the worker and
// blocks this thread on a shared flag (Atomics.wait, bounded by `timeoutMs`), then takes the
// worker's one reply with receiveMessageOnPort: no event loop turn is needed on this side,
// and the worker needs nothing from this thread to answer. A call that gets no answer in
// time is an `io` error: the worker is ended (its connection closes, so the server rolls
// back an unfinished transaction) and the next call starts another, which connects again.
import { Worker, MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { JournalError, StorageError } from '../errors.js';
import { SqlStorage } from './sql-storage.js';

/**
 * @import { Storage, Statement, SqlValue } from '../types.js'
 * @import { Request, Reply } from './postgres-worker.js'
 */

const require = createRequire(import.meta.url);
const WORKER = new URL('./postgres-worker.js', import.meta.url);

/** How long a connection attempt may take when the URL does not say (`connect_timeout`). */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * `pg`'s own URL reader (its dependency pg-connection-string), or a clear error when the
 * optional dependency is missing.
 * @returns {(url: string) => Record<string, string | undefined>}
 */
function connectionStringParser() {
  let pgMain;
  try {
    pgMain = require.resolve('pg');
  } catch (e) {
    throw new JournalError('other', `PostgreSQL journals need the optional dependency pg (8.x), which is not installed: npm install pg (${/** @type {Error} */ (e).message})`);
  }
  return createRequire(pgMain)('pg-connection-string').parse;
}

/**
 * `database on host:port as user`, for messages (never the password), as the Rust crate
 * says it; and the connect timeout the URL asks for.
 * @param {string} url
 */
function describe(url) {
  const c = connectionStringParser()(url);
  const port = c.port ?? '5432';
  const host = c.host ? (c.host.startsWith('/') ? `${c.host}/.s.PGSQL.${port}` : `${c.host}:${port}`) : '(default host)';
  const seconds = Number(c.connect_timeout);
  return {
    name: `${c.database || '(default database)'} on ${host} as ${c.user || '(default user)'}`,
    connectTimeoutMs: c.connect_timeout !== undefined && seconds > 0 ? seconds * 1000 : CONNECT_TIMEOUT_MS,
  };
}

/** @implements {Storage} */
export class PostgresJournal extends SqlStorage {
  backend = /** @type {const} */ ('postgres');
  /** How long a call waits for the database, by default (ms). */
  static DEFAULT_TIMEOUT_MS = 30_000;

  /** @type {{ worker: Worker, port: import('node:worker_threads').MessagePort, flag: Int32Array } | null} */
  #worker = null;
  #url;
  #connectTimeoutMs;
  #next = 0;
  #closed = false;

  /**
   * The journal at `url` (`postgres://user@host:port/db?...` or `postgresql://...`; a host
   * that is a percent-encoded directory is a unix socket). It connects at its first batch
   * (the gate's open). The database must be UTF8. `timeoutMs` bounds every batch (default
   * 30 s, above the 10 s connect timeout a URL without `connect_timeout` gets).
   * @param {string} url
   * @param {{ timeoutMs?: number }} [options]
   * @returns {PostgresJournal}
   */
  static open(url, { timeoutMs } = {}) {
    return new PostgresJournal(url, timeoutMs ?? PostgresJournal.DEFAULT_TIMEOUT_MS);
  }

  /**
   * Use PostgresJournal.open.
   * @param {string} url
   * @param {number} timeoutMs
   */
  constructor(url, timeoutMs) {
    const { name, connectTimeoutMs } = describe(url);
    super(`PostgreSQL journal ${name}`);
    this.#url = url;
    this.#connectTimeoutMs = connectTimeoutMs;
    /** `database on host:port as user`, for messages. */
    this.name = name;
    /** How long a batch waits for the database (ms). */
    this.timeoutMs = timeoutMs;
  }

  #start() {
    const flag = new Int32Array(new SharedArrayBuffer(4));
    const { port1, port2 } = new MessageChannel();
    const worker = new Worker(WORKER, {
      workerData: { url: this.#url, name: this.name, connectTimeoutMs: this.#connectTimeoutMs, port: port2, flag: flag.buffer },
      transferList: [port2],
    });
    // The journal's owner decides when the process ends, not this thread.
    worker.unref();
    return { worker, port: port1, flag };
  }

  /**
   * Sends `request` to the worker and waits for its reply.
   * @param {Omit<Request, 'id'>} request
   * @returns {SqlValue[][][]}
   */
  #call(request) {
    if (this.#closed) throw new StorageError('io', `PostgreSQL journal ${this.name} is closed`);
    const w = (this.#worker ??= this.#start());
    const id = ++this.#next;
    Atomics.store(w.flag, 0, 0);
    w.port.postMessage({ id, ...request });
    Atomics.wait(w.flag, 0, 0, this.timeoutMs);
    const got = receiveMessageOnPort(w.port);
    if (!got) {
      this.#stop();
      throw new StorageError('io', `PostgreSQL journal ${this.name}: no answer within ${this.timeoutMs} ms; ` +
        'its connection was closed and the next call connects again. A batch that writes may or may not have committed: read the journal again.');
    }
    const reply = /** @type {Reply} */ (got.message);
    if (reply.id !== id) throw new StorageError('io', `PostgreSQL journal ${this.name}: the worker answered call ${reply.id}, not ${id}`);
    if (reply.ok) return reply.rows;
    throw new StorageError(reply.error.tag, reply.error.val);
  }

  /** Ends the worker (and so its connection). */
  #stop() {
    const w = this.#worker;
    this.#worker = null;
    if (w) {
      w.port.close();
      void w.worker.terminate();
    }
  }

  /**
   * Runs `statements` as one transaction: each statement's rows, or nothing of it happens.
   * @param {Statement[]} statements
   * @param {boolean} write
   * @param {boolean} durable
   */
  sqlBatch(statements, write, durable) {
    const rows = this.#call({ batch: { statements, write, durable } });
    this.count(write, durable);
    return rows;
  }

  /** Closes the connection and ends the worker. */
  close() {
    if (this.#closed) return;
    try {
      if (this.#worker) this.#call({ close: true });
    } catch {
      // Closing anyway: the worker's end closes the connection too.
    } finally {
      this.#closed = true;
      this.#stop();
    }
  }
}
