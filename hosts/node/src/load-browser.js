// Loading the transpiled components in a browser: core modules are fetched relative to this
// file and compiled once per page; every Gate or PaymentsService is a new instance of them.
import { GateComponent } from './gate.js';
import { useCoreModules, formatReady } from './journal/format.js';

/**
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 * @import { Root as PaymentsRoot } from '../gen/payments/payments_sim.js'
 */

/** @type {Promise<GateComponent<GateRoot>> | undefined} */
let gate;
/** @type {Promise<GateComponent<PaymentsRoot>> | undefined} */
let payments;

/**
 * @template Root
 * @param {string} dir
 * @param {string} jsName
 * @returns {() => Promise<GateComponent<Root>>}
 */
function loader(dir, jsName) {
  const base = new URL(`../gen/${dir}/`, import.meta.url);
  return async () => {
    const mod = await import(new URL(jsName, base).href);
    return new GateComponent(mod.instantiate, (/** @type {string} */ name) => WebAssembly.compileStreaming(fetch(new URL(name, base))));
  };
}

/**
 * The gate component (gen/gate), compiled once per page.
 * @returns {Promise<GateComponent<GateRoot>>}
 */
export function gateComponent() {
  gate ??= loader('gate', 'interlock_gate.js')();
  return gate;
}

/**
 * The payments simulator component (gen/payments), compiled once per page.
 * @returns {Promise<GateComponent<PaymentsRoot>>}
 */
export function paymentsComponent() {
  payments ??= loader('payments', 'payments_sim.js')();
  return payments;
}

/** @type {Promise<void> | undefined} */
let format;

/**
 * Loads the journal-format component (gen/journal-format) once per page: every journal
 * checks its entries with it. A page may not compile a large module synchronously, so its
 * core modules are compiled here, before any journal is made; Interlock.open and
 * Interlock.memory await this themselves.
 * @returns {Promise<void>}
 */
export function journalFormat() {
  format ??= (async () => {
    if (formatReady()) return;
    const base = new URL('../gen/journal-format/', import.meta.url);
    const manifest = await (await fetch(new URL('../manifest.json', base))).json();
    /** @type {Map<string, WebAssembly.Module>} */
    const compiled = new Map();
    for (const name of manifest['journal-format'].cores) {
      compiled.set(name, await WebAssembly.compileStreaming(fetch(new URL(name, base))));
    }
    useCoreModules((name) => {
      const m = compiled.get(name);
      if (!m) throw new Error(`gen/journal-format/${name} was not in gen/manifest.json: run npm run build`);
      return m;
    });
  })();
  return format;
}
