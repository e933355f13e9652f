// This host's driver of the conformance runner (tests/conformance/runner, the one
// interpreter of the vectors, a component every host runs), in Node and in a browser. What
// is here is this host's own: gate instances (jco) over a journal backend, a fake clock,
// and the journal's storage operations. The step language, the world, the crash points,
// the expectations and the pins are the runner's.
//
// One idiom of the browser shapes it: a page may not compile or instantiate a large wasm
// module synchronously, and the runner asks for worker processes synchronously
// (`new-worker`). So the gate instances a vector can need (the runner's `workers`) are
// instantiated before the run, and `new-worker` hands out the next one.
import { gateRoot, GateComponent } from '../src/gate.js';
import { FakeClock } from '../src/clock.js';
import { JournalError } from '../src/errors.js';

/**
 * @import { JournalBackend } from '../src/types.js'
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 * @typedef {{ id: string, steps: object[] } & Record<string, unknown>} Vector
 * @typedef {{
 *   id: string, skipped: string | undefined, failures: string[], journalSha256: string,
 *   refundedCents: number, refundRecords: number, tasks: Record<string, Record<string, unknown>>,
 * }} Report
 * @typedef {{
 *   bytes(): Uint8Array, tear?(bytes: number): void, reopen?(): JournalBackend, repair?(): void,
 * }} Storage  the journal's storage operations: `bytes` is the file's, or, for a journal that
 *   is not a file (memory, IndexedDB, SQLite, PostgreSQL), every entry followed by "\n" in
 *   append order; the last three only for a file journal
 */

/** @type {Promise<GateComponent<any>> | undefined} */
let runner;

/**
 * The runner component (conformance/gen, made by `npm run build`), compiled once; in Node
 * from the file, in a browser by fetch.
 * @returns {Promise<GateComponent<any>>}
 */
export function runnerComponent() {
  runner ??= (async () => {
    const base = new URL('./gen/', import.meta.url);
    const mod = await import(new URL('conformance_runner.js', base).href).catch((e) => {
      throw new Error(`cannot load conformance/gen: run \`npm run build\` in hosts/node (${e.message})`);
    });
    /** @param {string} name */
    const compile = async (name) => {
      const url = new URL(name, base);
      if (url.protocol === 'file:') {
        const { readFile } = await import('node:fs/promises');
        return WebAssembly.compile(await readFile(url));
      }
      return WebAssembly.compileStreaming(fetch(url));
    };
    return new GateComponent(mod.instantiate, compile);
  })();
  return runner;
}

/** One journal behind every worker, which `reopen` replaces under them. */
class SharedJournal {
  /** @param {JournalBackend} journal */
  constructor(journal) {
    /** @type {JournalBackend | null} */
    this.current = journal;
  }
  #j() {
    if (!this.current) throw new JournalError('other', 'journal is closed');
    return this.current;
  }
  /** @type {JournalBackend['append']} */
  append(...a) { return this.#j().append(...a); }
  /** @type {JournalBackend['read']} */
  read(...a) { return this.#j().read(...a); }
  /** @type {JournalBackend['length']} */
  length(...a) { return this.#j().length(...a); }
  openStreams() { return this.#j().openStreams(); }
  streams() { return this.#j().streams(); }
  sync() { return this.#j().sync(); }
}

const GATE_CALLS = ['submit', 'resume', 'recover', 'openEffects', 'setRoutes', 'setStrictAuthority', 'defaults', 'grantLease', 'revokeLease', 'approve', 'receipt', 'verify'];
/** The gate's tool mapping (`interlock:gate/tools`), which the tool-gating vectors drive. */
const TOOLS_CALLS = ['checkConfig', 'checkAuthority', 'checkTools', 'premiseCall', 'proposal', 'sendCall', 'lookupCall', 'premises', 'mcpAnswer', 'reply', 'found'];

/**
 * Plays `vector` through the runner on this host's gate over `journal`.
 * `host`: the key in a vector's `skip` (`node`, `browser`); `storage`: the journal's bytes
 * and, for a file journal, tear/reopen/repair; `pins`: journal-pins.json as text (omit to
 * not compare); `note(event)`: the runner's events, for a person watching.
 * @param {Vector} vector
 * `runner`: the runner component, where it cannot be loaded from files (a Worker's modules);
 * else `runnerComponent()`.
 * @param {{ gate: GateComponent<GateRoot>, journal: JournalBackend, storage: Storage, host: string,
 *   pins?: string, note?: (event: any) => void, wrap?: (root: GateRoot, worker: number) => GateRoot,
 *   runner?: GateComponent<any> }} env
 * @returns {Promise<Report>}
 */
export async function runVector(vector, { gate, journal, storage, host, pins, note, wrap, runner }) {
  const component = runner ?? await runnerComponent();
  const shared = new SharedJournal(journal);
  const clock = new FakeClock(0);
  /** @type {Pick<GateRoot, 'gate' | 'tools'>[]} */
  const pool = [];
  let current = -1;
  let started = 0;
  const live = () => {
    if (current < 0) throw new Error('the runner called the gate with no worker alive');
    return pool[current];
  };
  /** @type {Record<string, Function>} */
  const forward = {};
  /** @type {Record<string, Function>} */
  const forwardTools = {};
  // A gate export's `err` (jco throws it with a `payload`) crosses back as the same err.
  for (const name of GATE_CALLS) forward[name] = (/** @type {unknown[]} */ ...args) => /** @type {any} */ (live().gate)[name](...args);
  for (const name of TOOLS_CALLS) forwardTools[name] = (/** @type {unknown[]} */ ...args) => /** @type {any} */ (live().tools)[name](...args);
  const root = await component.instantiate(component.getCoreModule, {
    'interlock:gate/gate': forward,
    'interlock:gate/tools': forwardTools,
    'interlock:conformance/driver': {
      newWorker() {
        if (started >= pool.length) throw new Error(`the vector needs more than ${pool.length} workers`);
        current = started++;
        return current + 1;
      },
      /** @param {number} w */
      useWorker(w) {
        if (w < 1 || w > started) throw new Error(`no worker ${w}`);
        current = w - 1;
      },
      endWorkers() {
        current = -1;
      },
      nowMs: () => BigInt(clock.nowMs()),
      advanceMs: (/** @type {bigint} */ ms) => clock.advance(Number(ms)),
      journalBytes: () => storage.bytes(),
      tearJournal(/** @type {bigint} */ bytes) {
        if (!storage.tear) throw 'this journal is not a file';
        storage.tear(Number(bytes));
      },
      reopenJournal() {
        if (!storage.reopen) throw { tag: 'other', val: 'this journal is not a file' };
        /** @type {any} */ (shared.current)?.close?.();
        shared.current = null;
        try {
          shared.current = storage.reopen();
        } catch (e) {
          if (e instanceof JournalError) throw { tag: e.tag, val: e.message };
          throw e;
        }
      },
      repairJournal() {
        if (!storage.repair) throw 'this journal is not a file';
        try {
          storage.repair();
        } catch (e) {
          throw String(/** @type {Error} */ (e).message ?? e);
        }
      },
      note: (/** @type {string} */ event) => note?.(JSON.parse(event)),
    },
  });
  const api = root.runner;
  clock.set(Number(api.startMs()));
  const text = JSON.stringify(vector);
  for (let i = 0; i < api.workers(text); i++) {
    const r = await gateRoot(gate, { journal: shared, clock });
    const w = wrap ? wrap(r, i + 1) : r;
    pool.push({ gate: w.gate, tools: w.tools ?? r.tools });
  }
  const options = { host, fileJournal: Boolean(storage.reopen), checkPin: pins !== undefined };
  const report = api.run(text, pins ?? '{}', options);
  return {
    ...report,
    refundedCents: Number(report.refundedCents),
    refundRecords: Number(report.refundRecords),
    tasks: JSON.parse(report.tasks),
  };
}

/** Where the runner starts its fake clock (Unix ms). */
export async function startMs() {
  return Number((await bare()).runner.startMs());
}

/** A runner instance for the calls that drive no gate (`baseline`, `start-ms`). */
async function bare() {
  const component = await runnerComponent();
  const unused = () => {
    throw new Error('this call of the runner drives no gate');
  };
  const none = new Proxy({}, { get: () => unused });
  return component.instantiate(component.getCoreModule, {
    'interlock:gate/gate': none,
    'interlock:gate/tools': none,
    'interlock:conformance/driver': none,
  });
}

/**
 * The fault table's baseline `approach` on `vector` (no gate): the runner's `baseline`.
 * @param {Vector} vector
 * @param {string} approach
 * @returns {Promise<{ refunded_cents: number, refund_records: number, trace: string[],
 *   steps: { lines: string[], refunded_cents: number }[], not_modelled: string | null }>}
 */
export async function baseline(vector, approach) {
  return JSON.parse((await bare()).runner.baseline(JSON.stringify(vector), approach));
}
