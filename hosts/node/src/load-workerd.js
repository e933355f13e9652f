// @interlock/gate/workerd: the gate component in workerd (Cloudflare Workers), and the
// storage a Durable Object gives it. A Worker serves HTTP, so it runs the gate with its HTTP
// API (gen/gate-api: dist/interlock_gate_api.wasm, world gate-api); every other host runs the
// lean gate (gen/gate), which carries none.
//
// workerd compiles no wasm from bytes at run time, so each of jco's core modules is a wasm
// module of the Worker: a bundler keeps these `.wasm` imports as imports and the Worker's
// config lists them (hosts/edge/scripts/bundle.js does both). jco's `instantiate` gets them
// already compiled.
//
// The storage is the object's SQLite (`ctx.storage.sql`) through `sql-batch`: the journal's
// schema, statements and compare-and-append run inside the component (adapters/journal);
// this file runs the statements, one batch in one `transactionSync`, and answers rows.
// A Durable Object is one instance in the world and runs one event at a time, so a batch
// has the database to itself, as SQLite's `BEGIN IMMEDIATE` gives elsewhere; its output
// gate holds every message until the batch's commit is durable, so `durable` asks nothing
// more here (a runtime without one awaits `ctx.storage.sync()` before anything leaves).
import { instantiate } from '../gen/gate-api/interlock_gate_api.js';
import { GateComponent } from './component.js';
import { StorageError } from './errors.js';
import { SqlStorage } from './journal/sql-storage.js';
// @ts-ignore a Worker's wasm module (no type: tsc knows no .wasm import)
import gate1 from '../gen/gate-api/interlock_gate_api.core.wasm';
// @ts-ignore
import gate2 from '../gen/gate-api/interlock_gate_api.core2.wasm';
// @ts-ignore
import gate3 from '../gen/gate-api/interlock_gate_api.core3.wasm';

/**
 * @import { Root as GateRoot } from '../gen/gate-api/interlock_gate_api.js'
 * @import { Storage, Statement, SqlValue } from './types.js'
 * @typedef {{
 *   columnNames: string[], raw(): IterableIterator<unknown[]>, toArray(): unknown[],
 * }} SqlCursor  a Durable Object's `SqlStorageCursor`, as used here
 * @typedef {{
 *   sql: { exec(sql: string, ...params: unknown[]): SqlCursor },
 *   transactionSync<T>(fn: () => T): T,
 * }} DurableObjectStorage  a Durable Object's `ctx.storage` (SQLite-backed), as used here
 */

/** @type {Record<string, WebAssembly.Module>} */
const MODULES = {
  'interlock_gate_api.core.wasm': gate1,
  'interlock_gate_api.core2.wasm': gate2,
  'interlock_gate_api.core3.wasm': gate3,
};

/** @type {GateComponent<GateRoot> | undefined} */
let gate;

/** The gate component, from the Worker's wasm modules. */
export function gateComponent() {
  gate ??= new GateComponent(instantiate, (name) => {
    const m = MODULES[name];
    if (!m) throw new Error(`no core module ${name} in this Worker (its config lists gen/gate-api/*.wasm)`);
    return m;
  });
  return gate;
}

/**
 * A parameter as the Durable Object binds it. Its numbers are doubles, exact to 2^53: a
 * larger integer is bound as its decimal text, which SQLite turns back into the exact
 * integer where it meets an INTEGER column or a CAST (every place the journal binds one).
 * @param {SqlValue} v
 */
function param(v) {
  if (v.tag === 'null') return null;
  if (v.tag === 'text') return v.val;
  const n = Number(v.val);
  return Number.isSafeInteger(n) ? n : String(v.val);
}

/**
 * A column as the component reads it: integer, text or null; anything else is an error.
 * @param {unknown} v
 * @param {number} column
 * @param {number} index
 * @returns {SqlValue}
 */
function column(v, column, index) {
  if (v === null) return { tag: 'null' };
  if (typeof v === 'string') return { tag: 'text', val: v };
  if (typeof v === 'number' && Number.isSafeInteger(v)) return { tag: 'integer', val: BigInt(v) };
  const what = typeof v !== 'number' ? 'a blob' : Number.isInteger(v) ? `an integer past 2^53 (${v}), which a Durable Object does not read exactly` : 'a real number';
  throw new StorageError('io', `column ${column} of statement ${index} is ${what}, neither integer nor text`);
}

/**
 * A SQL journal's storage in a Durable Object's SQLite (dialect sqlite): `sql-batch`; the
 * file calls answer `unsupported`.
 * @implements {Storage}
 */
export class DurableObjectSql extends SqlStorage {
  backend = /** @type {const} */ ('sqlite');

  /**
   * @param {DurableObjectStorage} storage the object's `ctx.storage`
   * @param {string} name which journal, for error texts
   */
  constructor(storage, name) {
    super(`journal ${name}`);
    this.storage = storage;
    this.name = name;
  }

  /**
   * Runs `statements` as one transaction: each statement's rows, or nothing of it happens.
   * @param {Statement[]} statements
   * @returns {SqlValue[][][]}
   */
  sqlBatch(statements) {
    const { storage } = this;
    const { sql } = storage;
    try {
      // A throw inside rolls the whole batch back.
      return storage.transactionSync(() => statements.map((s, i) => {
        const cursor = sql.exec(s.sql, ...s.params.map(param));
        if (cursor.columnNames.length > 0) return [...cursor.raw()].map((row) => row.map((v, c) => column(v, c, i)));
        cursor.toArray();
        if (s.expectChanges !== undefined) {
          // SQLite's count of the rows the statement changed (a cursor's rowsWritten
          // counts index writes too).
          const [[changed]] = sql.exec('SELECT changes()').raw();
          if (BigInt(/** @type {number} */ (changed)) !== BigInt(s.expectChanges)) throw new StorageError('unexpected-changes', i);
        }
        return [];
      }));
    } catch (e) {
      if (e instanceof StorageError) throw e;
      throw new StorageError('io', `${this.name}: ${/** @type {Error} */ (e)?.message ?? e}`);
    }
  }
}
