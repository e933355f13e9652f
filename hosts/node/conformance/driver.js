// This host's driver of the conformance runner (tests/conformance/runner, the one
// interpreter of the vectors, a component every host runs), in Node and in a browser, as
// hosts/cli/src/conformance.rs is the CLI's. What is here is this host's own: gate
// instances (jco) over one storage, a fake clock, and the storage operations `tear`,
// `reopen` and `repair` act on, through the storage and the component's `journal-admin`.
// The step language, the world, the crash points, the expectations and the pins are the
// runner's; every gate and tools call it makes goes to the current worker as it is.
//
// One idiom of the browser shapes it: a page may not compile or instantiate a large wasm
// module synchronously, and the runner asks for worker processes synchronously
// (`new-worker`). So the gate instances a vector can need (the runner's `workers`) are
// instantiated before the run, and `new-worker` hands out the next one.
import { GateComponent, gateRoot } from '../src/component.js';
import { FakeClock } from '../src/clock.js';
import { StorageError } from '../src/errors.js';

/**
 * @import { Storage } from '../src/types.js'
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 * @typedef {{ id: string, steps: object[] } & Record<string, unknown>} Vector
 * @typedef {{
 *   id: string, skipped: string | undefined, failures: string[], journalSha256: string,
 *   refundedCents: number, refundRecords: number, tasks: Record<string, Record<string, unknown>>,
 * }} Report
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

const JOURNAL = 'journal.jsonl';

/**
 * One storage behind every worker, which `reopen` replaces under them.
 * @param {Storage} first
 */
function shared(first) {
  /** @type {{ current: Storage | null }} */
  const at = { current: first };
  const live = () => {
    if (!at.current) throw new StorageError('io', 'journal is closed');
    return at.current;
  };
  /** @type {Storage} */
  const storage = {
    backend: first.backend,
    fileSize: (n) => live().fileSize(n),
    fileRead: (n, o, l) => live().fileRead(n, o, l),
    fileAppend: (n, a, b) => live().fileAppend(n, a, b),
    fileSync: (n) => live().fileSync(n),
    fileTruncate: (n, l) => live().fileTruncate(n, l),
    fileReplace: (n, b) => live().fileReplace(n, b),
    fileCreate: (n, b) => live().fileCreate(n, b),
    sqlBatch: (s, w, d) => live().sqlBatch(s, w, d),
  };
  return { at, storage };
}

/**
 * `fn()`, a `journal-admin` error as the runner's (`{ tag, val }`), any other failure as text.
 * @template T
 * @param {() => T} fn
 */
function adminCall(fn) {
  try {
    return fn();
  } catch (e) {
    throw /** @type {any} */ (e)?.payload ?? { tag: 'io', val: String(/** @type {Error} */ (e)?.message ?? e) };
  }
}

/**
 * Plays `vector` through the runner on this host's gate over `storage` (a new, empty one).
 * `host`: the key in a vector's `skip` (`node`, `browser`); `reopen`: for a file journal,
 * opens its storage again as a new process would (the runner's reopen, tear and repair need
 * it); `pins`: journal-pins.json as text (omit to not compare); `note(event)`: the runner's
 * events, for a person watching; `wrap(root, worker)`: to watch a worker's calls;
 * `runner`: the runner component, where it cannot be loaded from files (else
 * `runnerComponent()`).
 * @param {Vector} vector
 * @param {{ gate: GateComponent<GateRoot>, storage: Storage, host: string, reopen?: () => Storage,
 *   pins?: string, note?: (event: any) => void, wrap?: (root: GateRoot, worker: number) => GateRoot,
 *   runner?: GateComponent<any> }} env
 * @returns {Promise<Report>}
 */
export async function runVector(vector, { gate, storage: first, host, reopen, pins, note, wrap, runner }) {
  const component = runner ?? await runnerComponent();
  const { at, storage } = shared(first);
  const clock = new FakeClock(0);
  // A page may not instantiate a module synchronously, and the runner asks for workers
  // synchronously: the instances a vector needs (and one for `journal-admin`) are made first.
  /** @type {GateRoot[]} */
  const pool = [];
  const admin = await gateRoot(gate, { storage, clock });
  let current = -1;
  let started = 0;
  /** @param {'gate' | 'tools'} iface */
  const forward = (iface) => new Proxy({}, {
    get: (_, name) => (/** @type {unknown[]} */ ...args) => {
      if (current < 0) throw new Error('the runner called the gate with no worker alive');
      return /** @type {any} */ (pool[current][iface])[name](...args);
    },
  });
  const isFile = storage.backend === 'file';
  const root = await component.instantiate(component.getCoreModule, {
    'interlock:gate/gate': forward('gate'),
    'interlock:gate/tools': forward('tools'),
    'interlock:conformance/driver': {
      newWorker() {
        if (started >= pool.length) throw new Error(`the vector needs more than ${pool.length} workers`);
        current = started++;
        adminCall(() => pool[current].journalAdmin.open(storage.backend));
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
      journalBytes() {
        if (isFile) {
          const size = storage.fileSize(JOURNAL) ?? 0;
          return size === 0 ? new Uint8Array() : storage.fileRead(JOURNAL, 0, size);
        }
        // The entries in append order, each followed by a newline: a file's bytes.
        adminCall(() => admin.journalAdmin.open(storage.backend));
        return new TextEncoder().encode(adminCall(() => admin.journalAdmin.entriesInOrder()).map((e) => `${e}\n`).join(''));
      },
      tearJournal(/** @type {bigint} */ bytes) {
        try {
          storage.fileTruncate(JOURNAL, Math.max(0, (storage.fileSize(JOURNAL) ?? 0) - Number(bytes)));
        } catch (e) {
          throw `cannot tear ${JOURNAL}: ${/** @type {Error} */ (e).message}`;
        }
      },
      reopenJournal() {
        if (!reopen) throw new Error('reopen-journal asked of a journal that is not a file');
        // Closed under every instance (the folder's lock let go), then opened as a new
        // process would: the journal opened over it says whether it is whole.
        at.current?.close?.();
        at.current = null;
        try {
          at.current = reopen();
        } catch (e) {
          throw { tag: 'io', val: String(/** @type {Error} */ (e).message) };
        }
        adminCall(() => admin.journalAdmin.open(storage.backend));
      },
      repairJournal() {
        try {
          adminCall(() => admin.journalAdmin.repair());
        } catch (e) {
          throw String(/** @type {any} */ (e).val ?? e);
        }
      },
      note: (/** @type {string} */ event) => note?.(JSON.parse(event)),
    },
  });
  const api = root.runner;
  clock.set(Number(api.startMs()));
  const text = JSON.stringify(vector);
  for (let i = 0; i < api.workers(text); i++) {
    const r = await gateRoot(gate, { storage, clock });
    pool.push(wrap ? wrap(r, i + 1) : r);
  }
  try {
    const report = api.run(text, pins ?? '{}', { host, fileJournal: isFile && Boolean(reopen), checkPin: pins !== undefined });
    return {
      ...report,
      refundedCents: Number(report.refundedCents),
      refundRecords: Number(report.refundRecords),
      tasks: JSON.parse(report.tasks),
    };
  } finally {
    // The caller closes the storage it gave; one opened here by `reopen` is closed here.
    if (at.current !== first) at.current?.close?.();
  }
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
