// The PostgreSQL journal's worker thread: it owns the connection (the `pg` client, which is
// async) and answers one journal call at a time for PostgresJournal (./postgres.js), whose
// thread waits on a shared flag (Atomics.wait) and takes the answer with
// receiveMessageOnPort. Each call is one request and one reply:
//
//   main -> worker  { id, request }            request: Request (below)
//   worker -> main  { id, ok: true, value }    then flag = 1 and Atomics.notify
//                   { id, ok: false, error: { tag, val } }   (a WIT journal-error)
//
// What each call does is adapters/sql-journal/src/pg.rs, statement for statement (its
// README says why): an append is one transaction, the stream's row locked FOR UPDATE, the
// batch checked by the journal-format component after the length, committed with
// synchronous_commit on (durable) or off (group commit). A failure of the server or the
// connection is `io` and drops the connection (the next call connects again); a commit
// whose answer does not come is `io` too, never a success.
import { workerData } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { JournalError } from '../errors.js';
import './format-node.js';
import { validateAppend, formatFileText } from './format.js';
import { FORMAT_KEY, schemaStatements, checkStoredFormat, checkRun } from './sql.js';

/**
 * @import { Client, QueryResult } from 'pg'
 * @typedef {{ op: 'open' }
 *   | { op: 'append', stream: string, expectedLength: number, entries: string[], durable: boolean, open: boolean }
 *   | { op: 'read', stream: string, start: number }
 *   | { op: 'length', stream: string }
 *   | { op: 'openStreams' } | { op: 'streams' } | { op: 'sync' } | { op: 'entriesInOrder' } | { op: 'close' }} Request
 * @typedef {{ tag: 'conflict', val: number } | { tag: 'io' | 'corrupt' | 'other', val: string }} WireError
 * @typedef {{ id: number, ok: true, value: unknown } | { id: number, ok: false, error: WireError }} Reply
 * @typedef {{ url: string, name: string, connectTimeoutMs: number,
 *   port: import('node:worker_threads').MessagePort, flag: SharedArrayBuffer }} WorkerData
 */

const LOCK_STREAM = 'SELECT length FROM interlock_streams WHERE name = $1 FOR UPDATE';
const LENGTH = 'SELECT length FROM interlock_streams WHERE name = $1';
// Two writers may create one stream at once: the second waits for the first, inserts
// nothing, and reports the conflict.
const CREATE_STREAM = 'INSERT INTO interlock_streams (name, length, open) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING';
const UPDATE_STREAM = 'UPDATE interlock_streams SET length = $2, open = $3 WHERE name = $1';
// Ordinals are taken in the batch's order.
const INSERT_ENTRIES = 'INSERT INTO interlock_entries (stream, seq, entry) ' +
  'SELECT $1, $2::bigint + e.i - 1, e.entry FROM unnest($3::text[]) WITH ORDINALITY AS e(entry, i) ORDER BY e.i';
const IN_ORDER = 'SELECT entry FROM interlock_entries ORDER BY ordinal';
const READ = 'SELECT seq, entry FROM interlock_entries WHERE stream = $1 AND seq >= $2 ORDER BY seq';
// Recovery's work list: answered from the partial index interlock_open_streams.
const OPEN_STREAMS = 'SELECT name FROM interlock_streams WHERE open ORDER BY position';
const STREAMS = 'SELECT name FROM interlock_streams ORDER BY position';
// Flushes the WAL up to everything committed so far. A commit flushes only if its
// transaction wrote WAL; a transactional logical message is the smallest such write (no
// table, no lock). Nothing is written when the WAL is already flushed.
const SYNC = 'BEGIN; SET LOCAL synchronous_commit = on; ' +
  'SELECT CASE WHEN pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn() ' +
  "THEN pg_logical_emit_message(true, 'interlock-journal', 'sync') END AS flushed; COMMIT";
// Serializes schema creation between workers opening a new database at once (CREATE TABLE
// IF NOT EXISTS alone races in PostgreSQL). The key spells "intlock".
const SCHEMA_LOCK = 'SELECT pg_advisory_xact_lock(29670243599410027)';

const { url, name, connectTimeoutMs, port, flag: shared } = /** @type {WorkerData} */ (workerData);
const flag = new Int32Array(shared);
/** @type {typeof import('pg')} */
const pg = createRequire(import.meta.url)('pg');

/**
 * The connection, with what it has set: `synchronous` is the session's synchronous_commit
 * (undefined: not set yet). `lost` is set when the client reports an error of its own.
 * @type {{ client: Client, synchronous?: boolean, lost?: Error } | null}
 */
let conn = null;

/**
 * A statement, prepared once per connection (a named query).
 * @param {Client} client
 * @param {string} text
 * @param {unknown[]} values
 * @returns {Promise<QueryResult<any>>}
 */
const run = (client, text, values) => client.query({ name: statementName(text), text, values });

/** @type {Map<string, string>} */
const names = new Map();
/** @param {string} text */
function statementName(text) {
  let n = names.get(text);
  if (!n) names.set(text, (n = `interlock_${names.size}`));
  return n;
}

/** @param {string} text */
const io = (text) => new JournalError('io', text, text);
/** @param {string} text */
const other = (text) => new JournalError('other', text, text);

/** Ends the connection, if any; the next call connects again. */
function drop() {
  const c = conn;
  conn = null;
  c?.client.end().catch(() => {});
}

/** The connection, made again if the last one was lost. */
async function connection() {
  if (conn?.lost) drop();
  if (conn) return conn;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: connectTimeoutMs });
  /** @type {{ client: Client, synchronous?: boolean, lost?: Error }} */
  const c = { client };
  // An error on an idle connection (the server restarted) would otherwise end the thread.
  client.on('error', (e) => {
    c.lost = e;
  });
  try {
    await client.connect();
  } catch (e) {
    client.end().catch(() => {});
    throw io(`PostgreSQL journal ${name}: cannot connect: ${/** @type {Error} */ (e).message}`);
  }
  conn = c;
  return c;
}

/**
 * The gate's error for a failed statement: a lost connection, or the server's own
 * failure, is `io`; anything else (a statement the server refused) is `other`.
 * @param {unknown} e
 * @param {boolean} lost
 */
function pgError(e, lost) {
  const text = /** @type {Error} */ (e)?.message ?? String(e);
  if (lost || !(e instanceof pg.DatabaseError) || !e.code) {
    return io(`PostgreSQL journal ${name}: connection lost: ${text}; the next call reconnects`);
  }
  // Connection (08), resources (53), operator intervention (57: a shutdown, a cancel),
  // system (58) and internal (XX) errors: the storage failed.
  if (['08', '53', '57', '58', 'XX'].some((p) => e.code?.startsWith(p))) return io(`PostgreSQL journal ${name}: ${text}`);
  return other(`PostgreSQL journal ${name}: ${text}`);
}

/**
 * Runs `f` on the connection. A JournalError of its own (a conflict, a refused batch) is
 * `f`'s answer; after any other error the connection is dropped (it may be lost, or left
 * inside a failed transaction).
 * @template T
 * @param {(c: { client: Client, synchronous?: boolean }) => Promise<T>} f
 * @returns {Promise<T>}
 */
async function withConnection(f) {
  const c = await connection();
  try {
    return await f(c);
  } catch (e) {
    if (e instanceof JournalError) throw e;
    const lost = Boolean(c.lost);
    drop();
    throw pgError(e, lost);
  }
}

/**
 * Sets synchronous_commit for the session's next commits (only when it changes).
 * @param {{ client: Client, synchronous?: boolean }} c
 * @param {boolean} on
 */
async function setSynchronous(c, on) {
  if (c.synchronous !== on) {
    await c.client.query(on ? 'SET synchronous_commit = on' : 'SET synchronous_commit = off');
    c.synchronous = on;
  }
}

/**
 * @param {Client} client
 * @param {string} stream
 */
async function length(client, stream) {
  const row = (await run(client, LENGTH, [stream])).rows[0];
  return row ? Number(row.length) : 0;
}

/**
 * Connects, checks the encoding, creates the schema if needed and checks the format row,
 * in one transaction under an advisory lock; a newer format is refused before anything but
 * the meta table (the same in every version) is created, and the transaction rolled back.
 */
async function open() {
  const { client } = await connection();
  const step = async (/** @type {string} */ what, /** @type {() => Promise<void>} */ f) => {
    try {
      await f();
    } catch (e) {
      if (e instanceof JournalError) throw e;
      drop();
      throw io(`PostgreSQL journal ${name}: ${what}: ${/** @type {Error} */ (e).message}`);
    }
  };
  await step('cannot read the server encoding', async () => {
    const encoding = (await client.query('SHOW server_encoding')).rows[0].server_encoding;
    if (encoding !== 'UTF8') {
      drop();
      throw other(`PostgreSQL journal ${name}: the database must be UTF8 to store entries byte for byte: it is ${encoding} (CREATE DATABASE ... ENCODING 'UTF8')`);
    }
  });
  await step('cannot set up the schema', async () => {
    const schema = schemaStatements('postgres');
    await client.query('BEGIN');
    await client.query(SCHEMA_LOCK);
    await client.query(schema[0]);
    const row = (await client.query('SELECT value FROM interlock_meta WHERE key = $1', [FORMAT_KEY])).rows[0];
    try {
      checkStoredFormat(row?.value, `PostgreSQL journal ${name}`);
    } catch (e) {
      await client.query('ROLLBACK');
      throw e;
    }
    for (const statement of schema.slice(1)) await client.query(statement);
    if (!row) await client.query('INSERT INTO interlock_meta (key, value) VALUES ($1, $2)', [FORMAT_KEY, formatFileText()]);
    await client.query('COMMIT');
  });
  return null;
}

/**
 * One append: the transaction of pg.rs. Returns nothing, or throws a conflict, a refusal
 * of the batch (nothing written), or `io` for a commit that was not acknowledged.
 * @param {{ client: Client, synchronous?: boolean }} c
 * @param {Extract<Request, { op: 'append' }>} r
 */
async function append(c, { stream, expectedLength, entries, durable, open }) {
  const { client } = c;
  await setSynchronous(c, durable);
  await client.query('BEGIN');
  const refused = await appendInTransaction(client, stream, expectedLength, entries, open);
  if (refused) {
    await client.query('ROLLBACK');
    // The unique key stopped a second entry at one place (only a writer that skipped the
    // row lock can get there): the stream's length, read after the rollback, is the answer.
    throw refused === 'unique' ? new JournalError('conflict', await length(client, stream)) : refused;
  }
  try {
    await client.query('COMMIT');
  } catch (e) {
    drop();
    throw io(`PostgreSQL journal ${name}: the commit of ${entries.length} entries to stream ${JSON.stringify(stream)} ` +
      `was not acknowledged (${/** @type {Error} */ (e).message}); they may or may not be recorded: read the stream again`);
  }
}

/**
 * The statements of an append inside its transaction; what refuses it, if anything.
 * @param {Client} client
 * @param {string} stream
 * @param {number} expected
 * @param {string[]} entries
 * @param {boolean} open
 * @returns {Promise<JournalError | 'unique' | undefined>}
 */
async function appendInTransaction(client, stream, expected, entries, open) {
  const row = (await run(client, LOCK_STREAM, [stream])).rows[0];
  const actual = row ? Number(row.length) : 0;
  if (actual !== expected) return new JournalError('conflict', actual);
  try {
    validateAppend(entries, stream, expected, open);
  } catch (e) {
    if (e instanceof JournalError) return e;
    throw e;
  }
  const newLength = expected + entries.length;
  if (!row) {
    if ((await run(client, CREATE_STREAM, [stream, newLength, open])).rowCount === 0) {
      // Another writer created the stream first; it holds at least one entry.
      return new JournalError('conflict', Number((await run(client, LOCK_STREAM, [stream])).rows[0].length));
    }
  } else {
    await run(client, UPDATE_STREAM, [stream, newLength, open]);
  }
  try {
    await run(client, INSERT_ENTRIES, [stream, expected, entries]);
  } catch (e) {
    if (e instanceof pg.DatabaseError && e.code === '23505') return 'unique';
    throw e;
  }
  return undefined;
}

/**
 * @param {Request} r
 * @returns {Promise<unknown>}
 */
async function handle(r) {
  switch (r.op) {
    case 'open':
      return open();
    case 'append':
      return withConnection((c) => append(c, r));
    case 'read': {
      const rows = await withConnection(async (c) => (await run(c.client, READ, [r.stream, r.start])).rows);
      checkRun(r.stream, r.start, rows.map((row) => Number(row.seq)));
      return rows.map((row) => row.entry);
    }
    case 'length':
      return withConnection((c) => length(c.client, r.stream));
    case 'openStreams':
      return withConnection(async (c) => (await run(c.client, OPEN_STREAMS, [])).rows.map((row) => row.name));
    case 'streams':
      return withConnection(async (c) => (await run(c.client, STREAMS, [])).rows.map((row) => row.name));
    case 'entriesInOrder':
      return withConnection(async (c) => (await run(c.client, IN_ORDER, [])).rows.map((row) => row.entry));
    case 'sync':
      // Whether a message was written (and so flushed by its COMMIT).
      return withConnection(async (c) => {
        const results = /** @type {QueryResult<any>[]} */ (/** @type {unknown} */ (await c.client.query(SYNC)));
        return results.some((res) => res.command === 'SELECT' && res.rows[0]?.flushed != null);
      });
    case 'close':
      if (conn) {
        const { client } = conn;
        conn = null;
        await client.end().catch(() => {});
      }
      return null;
  }
}

/**
 * The error as it crosses to the journal's thread.
 * @param {unknown} e
 * @returns {WireError}
 */
function wire(e) {
  if (e instanceof JournalError) {
    if (e.tag === 'conflict') return { tag: 'conflict', val: Number(e.val) };
    return { tag: e.tag === 'io' || e.tag === 'corrupt' ? e.tag : 'other', val: String(e.val) };
  }
  // A bug of this worker, not the database's: still an answer, never a hang.
  return { tag: 'other', val: `PostgreSQL journal ${name}: the journal's worker failed: ${/** @type {Error} */ (e)?.stack ?? e}` };
}

port.on('message', async (/** @type {{ id: number, request: Request }} */ { id, request }) => {
  /** @type {Reply} */
  let reply;
  try {
    reply = { id, ok: true, value: await handle(request) };
  } catch (e) {
    reply = { id, ok: false, error: wire(e) };
  }
  port.postMessage(reply);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
});
