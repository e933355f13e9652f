// The journal contract suite (adapters/journal's, dist/journal_contract.wasm: a component
// that imports only `storage`) over this host's storages: every case, each over a fresh,
// empty storage. Node and the browser run it; the suite's cases are the rules, the storage is
// the host's.
import { GateComponent, storageImport } from '../src/component.js';

/**
 * @import { Storage } from '../src/types.js'
 * @typedef {'file' | 'sqlite' | 'postgres'} Kind
 */

/** @type {Promise<GateComponent<any>> | undefined} */
let contract;

/** The contract component (conformance/gen/contract), compiled once. */
function contractComponent() {
  contract ??= (async () => {
    const base = new URL('./gen/contract/', import.meta.url);
    const mod = await import(new URL('journal_contract.js', base).href);
    return new GateComponent(mod.instantiate, async (name) => {
      const url = new URL(name, base);
      if (url.protocol !== 'file:') return WebAssembly.compileStreaming(fetch(url));
      const { readFile } = await import('node:fs/promises');
      return WebAssembly.compile(await readFile(url));
    });
  })();
  return contract;
}

/**
 * The suite's instance over `storage`.
 * @param {Storage} storage
 */
async function suite(storage) {
  const c = await contractComponent();
  const s = storageImport(storage);
  const root = await c.instantiate(c.getCoreModule, { 'interlock:gate/storage': s, 'interlock:gate/storage@0.1.0': s });
  return root.suite;
}

/**
 * The names of the suite's cases for a journal of `kind`.
 * @param {Kind} kind
 * @returns {Promise<string[]>}
 */
export async function contractCases(kind) {
  const { MemoryJournal } = await import('../src/journal/memory.js');
  return (await suite(new MemoryJournal())).cases(kind);
}

/**
 * Runs case `name` over `storage` (fresh and empty): null when it passes, else why not.
 * @param {string} name
 * @param {Kind} kind
 * @param {Storage} storage
 * @returns {Promise<string | null>}
 */
export async function runContractCase(name, kind, storage) {
  const s = await suite(storage);
  try {
    s.run(name, kind);
    return null;
  } catch (e) {
    return String(/** @type {any} */ (e)?.payload ?? e);
  }
}
