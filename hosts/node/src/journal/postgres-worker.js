// The PostgreSQL storage's worker thread: it owns the connection (the `pg` client, which is
// async) and runs one batch at a time for PostgresJournal (./postgres.js), whose thread waits
// on a shared flag (Atomics.wait) and takes the answer with receiveMessageOnPort:
//
//   main -> worker  { id, batch: { statements, write, durable } } or { id, close: true }
//   worker -> main  { id, ok: true, rows } or { id, ok: false, error: { tag, val } }
//                   (a WIT storage-error), then flag = 1 and Atomics.notify
//
// A batch is one transaction, committed with synchronous_commit on (durable) or off, as the
// CLI's (adapters/sql-journal, src/pg.rs). The statements are the gate's. A failure of the
// server or the connection drops the connection (the next batch connects again); a commit
// whose answer does not come is `io`, never a success.
import { workerData } from 'node:worker_threads';
import { createRequire } from 'node:module';

/**
 * @import { Client } from 'pg'
 * @import { Statement, SqlValue } from '../types.js'
 * @typedef {{ id: number, batch?: { statements: Statement[], write: boolean, durable: boolean }, close?: boolean }} Request
 * @typedef {{ tag: 'unexpected-changes', val: number } | { tag: 'io', val: string }} WireError
 * @typedef {{ id: number, ok: true, rows: SqlValue[][][] } | { id: number, ok: false, error: WireError }} Reply
 * @typedef {{ url: string, name: string, connectTimeoutMs: number,
 *   port: import('node:worker_threads').MessagePort, flag: SharedArrayBuffer }} WorkerData
 */

const { url, name, connectTimeoutMs, port, flag: shared } = /** @type {WorkerData} */ (workerData);
const flag = new Int32Array(shared);
/** @type {typeof import('pg')} */
const pg = createRequire(import.meta.url)('pg');
// Every column as the server's text: converted below by its type, as pg.rs does.
const raw = { getTypeParser: () => (/** @type {string} */ v) => v };
const INTEGER = new Set([20, 21, 23]);
const TEXT = new Set([25, 1043, 19, 1042]);
const BOOL = 16;

/** @type {{ client: Client, synchronous?: boolean, lost?: Error } | null} */
let conn = null;
/** @type {Map<string, string>} statement text -> prepared statement name */
const names = new Map();

class Failure extends Error {
  /** @param {WireError} wire */
  constructor(wire) {
    super(String(wire.val));
    this.wire = wire;
  }
}
/** @param {string} text */
const io = (text) => new Failure({ tag: 'io', val: `PostgreSQL journal ${name}: ${text}` });

function drop() {
  const c = conn;
  conn = null;
  c?.client.end().catch(() => {});
}

/** The connection, made again if the last one was lost. */
async function connection() {
  if (conn?.lost) drop();
  if (conn) return conn;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: connectTimeoutMs, types: raw });
  /** @type {{ client: Client, synchronous?: boolean, lost?: Error }} */
  const c = { client };
  // An error on an idle connection (the server restarted) would otherwise end the thread.
  client.on('error', (e) => {
    c.lost = e;
  });
  try {
    await client.connect();
    const encoding = (await client.query('SHOW server_encoding')).rows[0].server_encoding;
    if (encoding !== 'UTF8') {
      throw new Error(`the database must be UTF8 to store entries byte for byte: it is ${encoding} (CREATE DATABASE ... ENCODING 'UTF8')`);
    }
  } catch (e) {
    client.end().catch(() => {});
    throw io(`cannot connect: ${/** @type {Error} */ (e).message}`);
  }
  names.clear();
  conn = c;
  return c;
}

/**
 * A column's text as the storage's `sql-value`, by its type.
 * @param {string | null} v
 * @param {number} type
 * @param {number} column
 * @param {number} statement
 * @returns {SqlValue}
 */
function value(v, type, column, statement) {
  if (v === null) return { tag: 'null' };
  if (INTEGER.has(type)) return { tag: 'integer', val: BigInt(v) };
  if (type === BOOL) return { tag: 'integer', val: v === 't' ? 1n : 0n };
  if (TEXT.has(type)) return { tag: 'text', val: v };
  throw io(`column ${column} of statement ${statement} is of type ${type}, neither integer nor text`);
}

/** @param {NonNullable<Request['batch']>} batch */
async function run({ statements, write, durable }) {
  const c = await connection();
  const { client } = c;
  try {
    if (write && c.synchronous !== durable) {
      await client.query(durable ? 'SET synchronous_commit = on' : 'SET synchronous_commit = off');
      c.synchronous = durable;
    }
    await client.query('BEGIN');
    /** @type {SqlValue[][][]} */
    const out = [];
    for (const [i, s] of statements.entries()) {
      let n = names.get(s.sql);
      if (!n) names.set(s.sql, (n = `interlock_${names.size}`));
      const values = s.params.map((p) => (p.tag === 'null' ? null : String(p.val)));
      const r = await client.query({ name: n, text: s.sql, values, rowMode: 'array' });
      if (r.fields.length > 0) {
        out.push(r.rows.map((row) => row.map((v, col) => value(v, r.fields[col].dataTypeID, col, i))));
      } else {
        if (s.expectChanges !== undefined && BigInt(r.rowCount ?? 0) !== BigInt(s.expectChanges)) {
          await client.query('ROLLBACK');
          throw new Failure({ tag: 'unexpected-changes', val: i });
        }
        out.push([]);
      }
    }
    try {
      await client.query('COMMIT');
    } catch (e) {
      drop();
      throw io(`the commit of a batch of ${statements.length} statements was not acknowledged (${/** @type {Error} */ (e).message}); ` +
        'it may or may not have committed: read the journal again');
    }
    return out;
  } catch (e) {
    if (e instanceof Failure && e.wire.tag === 'unexpected-changes') throw e;
    // The connection may be lost, or left inside a failed transaction: the next batch
    // connects again.
    const lost = Boolean(c.lost);
    drop();
    if (e instanceof Failure) throw e;
    throw io(`${lost ? 'connection lost: ' : ''}${/** @type {Error} */ (e).message}`);
  }
}

port.on('message', async (/** @type {Request} */ request) => {
  /** @type {Reply} */
  let reply;
  try {
    if (request.close) {
      drop();
      reply = { id: request.id, ok: true, rows: [] };
    } else {
      reply = { id: request.id, ok: true, rows: await run(/** @type {NonNullable<Request['batch']>} */ (request.batch)) };
    }
  } catch (e) {
    reply = { id: request.id, ok: false, error: e instanceof Failure ? e.wire : { tag: 'io', val: `PostgreSQL journal ${name}: ${/** @type {Error} */ (e).message}` } };
  }
  port.postMessage(reply);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
});
