// @interlock/gate under Deno. The package's Node entry loads fs-ext, a native addon of the
// old (non Node-API) kind that Deno refuses; everything else of the package is plain ES
// modules and runs unchanged. This entry loads the components from gen/ with Deno's own
// file API, and gives Deno a journal that suits it: SQLite through Deno's `node:sqlite`
// (synchronous, as the gate's journal import is), the shared journals' one schema, so a
// `sqlite:///path` journal written here is read by the CLI, Node and Python, and back.
//
//   deno run --allow-read --allow-write --allow-env=JCO_DEBUG app.js
import { DatabaseSync } from 'node:sqlite';
import { Interlock as Base } from '../../node/src/interlock.js';
import { GateComponent } from '../../node/src/gate.js';
import { MemoryJournal } from '../../node/src/journal/memory.js';
import { PaymentsService } from '../../node/src/payments.js';
import { useCoreModules } from '../../node/src/journal/format.js';
import { instantiate as gateInstantiate } from '../../node/gen/gate/interlock_gate.js';
import { instantiate as paymentsInstantiate } from '../../node/gen/payments/payments_sim.js';
import { SqlJournal } from '../src/sql-journal.js';

const GEN = new URL('../../node/gen/', import.meta.url);

/** @param {string} dir */
const compiler = (dir) => async (/** @type {string} */ name) => WebAssembly.compile(await Deno.readFile(new URL(`${dir}/${name}`, GEN)));

// The journal-format component, compiled synchronously on first use (Deno allows it).
useCoreModules((name) => new WebAssembly.Module(Deno.readFileSync(new URL(`journal-format/${name}`, GEN))));

/** @type {GateComponent<any> | undefined} */
let gate;
/** The gate component (gen/gate), compiled once. */
export function gateComponent() {
  gate ??= new GateComponent(gateInstantiate, compiler('gate'));
  return gate;
}

/** How long a write waits for another process's transaction before it fails (ms). */
const BUSY_TIMEOUT_MS = 10_000;

/**
 * The SQLite journal at `path` (created if missing) over node:sqlite. WAL mode, and every
 * commit with synchronous = FULL (one fsync of the log): node:sqlite cannot fsync the log
 * by itself, so every append is durable when it returns, and `sync` has nothing left to do.
 * An append is one `BEGIN IMMEDIATE` transaction: the write lock is taken before the length
 * is read, so processes sharing the file cannot both advance one stream.
 * @param {string} path
 */
export function openSqliteJournal(path) {
  const db = new DatabaseSync(path);
  db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = FULL');
  const schema = Deno.readTextFileSync(new URL('schema.sql', GEN));
  const handle = {
    all: (/** @type {string} */ sql, /** @type {any[]} */ ...p) => db.prepare(sql).all(...p),
    run: (/** @type {string} */ sql, /** @type {any[]} */ ...p) => {
      db.prepare(sql).run(...p);
    },
    transaction(/** @type {() => any} */ fn) {
      db.exec('BEGIN IMMEDIATE');
      try {
        const r = fn();
        db.exec('COMMIT');
        return r;
      } catch (e) {
        db.exec('ROLLBACK');
        throw e;
      }
    },
  };
  const journal = SqlJournal.open(handle, `SQLite journal ${path}`, schema);
  journal.close = () => db.close();
  return journal;
}

export class Interlock extends Base {
  /**
   * A gate over the SQLite journal at `path` (a file; `sqlite:///abs/path.db` as well).
   * @param {string} path
   * @param {import('../../node/src/types.js').OpenOptions} [options]
   */
  static async open(path, options = {}) {
    const journal = openSqliteJournal(path.startsWith('sqlite://') ? path.slice('sqlite://'.length) : path);
    try {
      return await Base.create(gateComponent(), journal, options);
    } catch (e) {
      journal.close();
      throw e;
    }
  }

  /** A gate over an in-memory journal. */
  static async memory(options = {}) {
    return Base.create(gateComponent(), new MemoryJournal(), options);
  }
}

/** The simulated payments service (state in memory). */
export const Payments = {
  /** @param {string} tier */
  async inMemory(tier) {
    return PaymentsService.create(new GateComponent(paymentsInstantiate, compiler('payments')), tier);
  },
};

export { Gate, toOutcome } from '../../node/src/gate.js';
export { MemoryJournal } from '../../node/src/journal/memory.js';
export { SqlJournal } from '../src/sql-journal.js';
export { SystemClock, FakeClock } from '../../node/src/clock.js';
export { PaymentsService, paymentsTarget, ServiceError } from '../../node/src/payments.js';
export * from '../../node/src/errors.js';
