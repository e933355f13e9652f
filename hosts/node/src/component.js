// The gate component's instances: its imports (storage, clock) over a host's storage and
// clock, and the journal opened through `journal-admin`. Runtime-agnostic: a loader
// (load-node.js, load-browser.js, load-workerd.js) gives the compiled component.
import { StorageError, journalError } from './errors.js';

/**
 * @import { Storage, Clock } from './types.js'
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 */

/**
 * The compiled component, ready to instantiate many times (one instance per Gate).
 * `getCoreModule(name)` resolves to a compiled WebAssembly.Module of its core modules.
 * `Root` is what jco's `instantiate` resolves to (the component's exports).
 * @template Root
 */
export class GateComponent {
  /**
   * @param {(getCoreModule: (name: string) => Promise<WebAssembly.Module>, imports: any) => Root | Promise<Root>} instantiate
   *   jco's `instantiate` of gen/<component>
   * @param {(name: string) => WebAssembly.Module | Promise<WebAssembly.Module>} getCoreModule
   */
  constructor(instantiate, getCoreModule) {
    this.instantiate = instantiate;
    /** @type {Map<string, Promise<WebAssembly.Module>>} */
    const cache = new Map();
    /** @type {(name: string) => Promise<WebAssembly.Module>} */
    this.getCoreModule = (name) => {
      let module = cache.get(name);
      if (!module) cache.set(name, (module = Promise.resolve(getCoreModule(name))));
      return module;
    };
  }
}

/**
 * The storage import over `storage`: numbers cross as bigints, and a StorageError as the
 * WIT `storage-error` (a plain value thrown from an import is its `err`; an Error a trap).
 * @param {Storage} storage
 */
export function storageImport(storage) {
  /**
   * @template {unknown[]} A
   * @template R
   * @param {(...args: A) => R} fn
   * @returns {(...args: A) => R}
   */
  const guard = (fn) => (...args) => {
    try {
      return fn(...args);
    } catch (e) {
      if (!(e instanceof StorageError)) throw e;
      throw { tag: e.tag, val: e.tag === 'conflict' ? BigInt(e.val) : e.val };
    }
  };
  return {
    fileSize: guard((/** @type {string} */ name) => {
      const n = storage.fileSize(name);
      return n === undefined ? undefined : BigInt(n);
    }),
    fileRead: guard((/** @type {string} */ name, /** @type {bigint} */ offset, /** @type {bigint} */ len) => storage.fileRead(name, Number(offset), Number(len))),
    fileAppend: guard((/** @type {string} */ name, /** @type {bigint} */ at, /** @type {Uint8Array} */ bytes) => storage.fileAppend(name, Number(at), bytes)),
    fileSync: guard((/** @type {string} */ name) => storage.fileSync(name)),
    fileTruncate: guard((/** @type {string} */ name, /** @type {bigint} */ len) => storage.fileTruncate(name, Number(len))),
    fileReplace: guard((/** @type {string} */ name, /** @type {Uint8Array} */ bytes) => storage.fileReplace(name, bytes)),
    fileCreate: guard((/** @type {string} */ name, /** @type {Uint8Array} */ bytes) => storage.fileCreate(name, bytes)),
    sqlBatch: guard(/** @type {Storage['sqlBatch']} */ ((statements, write, durable) => storage.sqlBatch(statements, write, durable))),
  };
}

/** @param {Clock} clock */
function clockImport(clock) {
  return {
    now() {
      const ms = clock.nowMs();
      return { seconds: BigInt(Math.floor(ms / 1000)), nanoseconds: (ms % 1000) * 1_000_000 };
    },
    resolution() {
      return { seconds: 0n, nanoseconds: 1_000_000 };
    },
  };
}

/**
 * A bare instance of the gate component over `storage` and `clock`, its journal not opened:
 * its exports as jco gives them (an `err` is thrown with a `payload`).
 * @param {GateComponent<GateRoot>} component
 * @param {{ storage: Storage, clock: Clock }} options
 * @returns {Promise<GateRoot>}
 */
export async function gateRoot(component, { storage, clock }) {
  const s = storageImport(storage);
  const c = clockImport(clock);
  return component.instantiate(component.getCoreModule, {
    'interlock:gate/storage': s,
    'interlock:gate/storage@0.1.0': s,
    'wasi:clocks/wall-clock': c,
    'wasi:clocks/wall-clock@0.2.6': c,
  });
}

/**
 * Runs `fn` (a component export), its `err` (jco throws it with a `payload`) thrown as
 * `as(payload)`; anything else (a trap) as it came.
 * @template T
 * @param {() => T} fn
 * @param {(payload: { tag: string, val?: unknown }) => Error} as
 * @returns {T}
 */
export function unwrap(fn, as) {
  try {
    return fn();
  } catch (e) {
    const payload = /** @type {any} */ (e)?.payload;
    if (e instanceof Error && typeof payload?.tag === 'string') throw as(payload);
    throw e;
  }
}

/**
 * Runs `fn` (a `journal-admin` call), its `err` thrown as a typed JournalError.
 * @template T
 * @param {() => T} fn
 * @returns {T}
 */
export const admin = (fn) => unwrap(fn, journalError);

/**
 * An instance whose journal (the `backend` kind over `storage`) is open: torn tails and
 * corrupt lines are refused with a JournalError, nothing changed.
 * @param {GateComponent<GateRoot>} component
 * @param {{ storage: Storage, clock: Clock }} options
 * @returns {Promise<GateRoot>}
 */
export async function openedRoot(component, { storage, clock }) {
  const root = await gateRoot(component, { storage, clock });
  admin(() => root.journalAdmin.open(storage.backend));
  return root;
}

/**
 * Repairs a torn file journal over `storage` (saves the torn tail to `journal.torn-<offset>`,
 * then cuts the journal to its last whole line): what it did.
 * @param {GateComponent<GateRoot>} component
 * @param {Storage} storage
 * @param {Clock} clock
 */
export async function repairJournal(component, storage, clock) {
  const root = await gateRoot(component, { storage, clock });
  const r = admin(() => root.journalAdmin.repair());
  return {
    tornOffset: r.tornOffset === undefined ? null : Number(r.tornOffset),
    tornBytes: Number(r.tornBytes),
    savedTo: r.savedTo ?? null,
  };
}
