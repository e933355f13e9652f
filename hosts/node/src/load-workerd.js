// @interlock/gate/workerd: the gate component in workerd (Cloudflare Workers), and the
// storage a Durable Object gives it.
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
import { instantiate } from '../gen/gate/interlock_gate.js';
// @ts-ignore a Worker's wasm module (no type: tsc knows no .wasm import)
import gate1 from '../gen/gate/interlock_gate.core.wasm';
// @ts-ignore
import gate2 from '../gen/gate/interlock_gate.core2.wasm';
// @ts-ignore
import gate3 from '../gen/gate/interlock_gate.core3.wasm';

/**
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 * @import { Statement, SqlValue } from '../gen/gate/interfaces/interlock-gate-storage.js'
 * @typedef {typeof import('../gen/gate/interfaces/interlock-gate-storage.js')} StorageImport
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
  'interlock_gate.core.wasm': gate1,
  'interlock_gate.core2.wasm': gate2,
  'interlock_gate.core3.wasm': gate3,
};

/**
 * The gate component from the Worker's wasm modules: jco's `instantiate` and the core
 * modules it asks for (the shape `gateRoot` and the Gate take).
 */
export const gateComponent = () => ({
  instantiate: /** @type {typeof instantiate} */ (instantiate),
  /** @param {string} name */
  getCoreModule: async (name) => {
    const m = MODULES[name];
    if (!m) throw new Error(`no core module ${name} in this Worker (its config lists gen/gate/*.wasm)`);
    return m;
  },
});

/** A `sql-batch` statement that changed other than the rows it expected. */
class UnexpectedChanges {
  /** @param {number} index */
  constructor(index) {
    this.index = index;
  }
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
  throw new Error(`column ${column} of statement ${index} is ${what}, neither integer nor text`);
}

/**
 * The `interlock:gate/storage` import over a Durable Object's SQLite: `sql-batch` (dialect
 * sqlite); the file calls answer `unsupported`. `name` says which journal in error texts.
 * @param {DurableObjectStorage} storage
 * @param {string} name
 * @returns {StorageImport}
 */
export function durableObjectStorage(storage, name) {
  const files = () => {
    throw { tag: 'unsupported', val: `${name} is a SQL journal: it holds no files` };
  };
  return {
    fileSize: files,
    fileRead: files,
    fileAppend: files,
    fileSync: files,
    fileTruncate: files,
    fileReplace: files,
    fileCreate: files,
    /** @param {Statement[]} statements */
    sqlBatch(statements) {
      try {
        return storage.transactionSync(() => statements.map((s, i) => {
          const cursor = storage.sql.exec(s.sql, ...s.params.map(param));
          if (cursor.columnNames.length > 0) return [...cursor.raw()].map((row) => row.map((v, c) => column(v, c, i)));
          cursor.toArray();
          if (s.expectChanges !== undefined) {
            // SQLite's count of the rows the statement changed (a cursor's rowsWritten
            // counts index writes too).
            const [[changed]] = storage.sql.exec('SELECT changes()').raw();
            if (BigInt(/** @type {number} */ (changed)) !== s.expectChanges) throw new UnexpectedChanges(i);
          }
          return [];
        }));
      } catch (e) {
        // transactionSync rolled the batch back.
        if (e instanceof UnexpectedChanges) throw { tag: 'unexpected-changes', val: e.index };
        throw { tag: 'io', val: `${name}: ${/** @type {Error} */ (e)?.message ?? e}` };
      }
    },
  };
}
