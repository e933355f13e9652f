// The PostgreSQL journal (Node): many workers on many machines share one database. The
// schema, the statements and every rule are the Rust backend's (adapters/sql-journal,
// src/pg.rs; its README says how each rule of the journal contract is translated), so a
// journal written by the CLI is read here and the other way round.
//
// The gate's journal import is synchronous and the `pg` client is async, so the client lives
// in a worker thread (./postgres-worker.js). Each call posts one request to the worker and
// blocks this thread on a shared flag (Atomics.wait, bounded by `timeoutMs`), then takes the
// worker's one reply with receiveMessageOnPort: no event loop turn is needed on this side,
// and the worker needs nothing from this thread to answer. A call that gets no answer in
// time is an `io` error: the worker is ended (its connection closes, so the server rolls
// back an unfinished transaction) and the next call starts another, which connects again.
import { Worker, MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { JournalError } from '../errors.js';
import { appendNothing } from './sql.js';

/**
 * @import { JournalBackend } from '../types.js'
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

/** @implements {JournalBackend} */
export class PostgresJournal {
  /** How long a call waits for the database, by default (ms). */
  static DEFAULT_TIMEOUT_MS = 30_000;

  /** @type {{ worker: Worker, port: import('node:worker_threads').MessagePort, flag: Int32Array } | null} */
  #worker = null;
  #url;
  #connectTimeoutMs;
  #next = 0;
  #closed = false;

  /**
   * Connects to the journal at `url` (`postgres://user@host:port/db?...` or
   * `postgresql://...`; a host that is a percent-encoded directory is a unix socket), creates
   * the schema if needed and checks the format version (a newer one is refused, nothing
   * changed). The database must be UTF8. `timeoutMs` bounds every call (default 30 s, above
   * the 10 s connect timeout a URL without `connect_timeout` gets).
   * @param {string} url
   * @param {{ timeoutMs?: number }} [options]
   * @returns {PostgresJournal}
   */
  static open(url, { timeoutMs } = {}) {
    const journal = new PostgresJournal(url, timeoutMs ?? PostgresJournal.DEFAULT_TIMEOUT_MS);
    try {
      journal.#call({ op: 'open' });
    } catch (e) {
      journal.close();
      throw e;
    }
    return journal;
  }

  /**
   * Use PostgresJournal.open.
   * @param {string} url
   * @param {number} timeoutMs
   */
  constructor(url, timeoutMs) {
    const { name, connectTimeoutMs } = describe(url);
    this.#url = url;
    this.#connectTimeoutMs = connectTimeoutMs;
    /** `database on host:port as user`, for messages. */
    this.name = name;
    /** How long a call waits for the database (ms). */
    this.timeoutMs = timeoutMs;
    /** Transactions this journal committed (appends; a sync that flushed counts too). */
    this.commits = 0;
    /** Commits that waited for the WAL flush: durable appends and syncs that flushed. */
    this.durableCommits = 0;
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
   * @param {Request} request
   * @returns {any}
   */
  #call(request) {
    if (this.#closed) throw new JournalError('other', 'journal is closed');
    const w = (this.#worker ??= this.#start());
    const id = ++this.#next;
    Atomics.store(w.flag, 0, 0);
    w.port.postMessage({ id, request });
    Atomics.wait(w.flag, 0, 0, this.timeoutMs);
    const got = receiveMessageOnPort(w.port);
    if (!got) {
      this.#stop();
      const fate = request.op === 'append' ? ' The append may or may not be recorded: read the stream again.' : '';
      const text = `PostgreSQL journal ${this.name}: no answer to ${request.op} within ${this.timeoutMs} ms; ` +
        `its connection was closed and the next call connects again.${fate}`;
      throw new JournalError('io', text, text);
    }
    const reply = /** @type {Reply} */ (got.message);
    if (reply.id !== id) throw new JournalError('other', `PostgreSQL journal ${this.name}: the worker answered call ${reply.id}, not ${id}`);
    if (reply.ok) return reply.value;
    const { tag, val } = reply.error;
    throw tag === 'conflict' ? new JournalError('conflict', val) : new JournalError(tag, val, val);
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
   * An empty batch writes nothing and leaves the stream (and its `open`) as it is; if
   * `durable`, it still syncs. A conflict is reported before the entries are checked.
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
    this.#call({ op: 'append', stream, expectedLength, entries, durable, open });
    this.commits += 1;
    if (durable) this.durableCommits += 1;
  }

  /**
   * @param {string} stream
   * @param {number} start
   * @returns {string[]}
   */
  read(stream, start) {
    return this.#call({ op: 'read', stream, start });
  }

  /**
   * @param {string} stream
   * @returns {number}
   */
  length(stream) {
    return this.#call({ op: 'length', stream });
  }

  /** @returns {string[]} */
  openStreams() {
    return this.#call({ op: 'openStreams' });
  }

  /** @returns {string[]} */
  streams() {
    return this.#call({ op: 'streams' });
  }

  /** Flushes the WAL up to every commit so far, this worker's and every other's. */
  sync() {
    if (this.#call({ op: 'sync' })) {
      this.commits += 1;
      this.durableCommits += 1;
    }
  }

  /**
   * Every entry of the journal in append order (by `ordinal`): each followed by a newline,
   * the bytes a file journal of the same appends holds.
   * @returns {string[]}
   */
  entriesInOrder() {
    return this.#call({ op: 'entriesInOrder' });
  }

  /** The journal as journal.jsonl bytes (entries in append order, each + "\n"). */
  bytes() {
    return Buffer.from(this.entriesInOrder().map((e) => `${e}\n`).join(''));
  }

  /** Closes the connection and ends the worker. */
  close() {
    if (this.#closed) return;
    try {
      if (this.#worker) this.#call({ op: 'close' });
    } catch {
      // Closing anyway: the worker's end closes the connection too.
    } finally {
      this.#closed = true;
      this.#stop();
    }
  }
}
