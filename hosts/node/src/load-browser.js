// Loading the transpiled components in a browser: core modules are fetched relative to this
// file and compiled once per page; every Gate or PaymentsService is a new instance of them.
import { GateComponent } from './component.js';

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
 * @returns {Promise<GateComponent<Root>>}
 */
async function load(dir, jsName) {
  const base = new URL(`../gen/${dir}/`, import.meta.url);
  const mod = await import(new URL(jsName, base).href);
  return new GateComponent(mod.instantiate, (name) => WebAssembly.compileStreaming(fetch(new URL(name, base))));
}

/**
 * The gate component (gen/gate), compiled once per page.
 * @returns {Promise<GateComponent<GateRoot>>}
 */
export function gateComponent() {
  gate ??= load('gate', 'interlock_gate.js');
  return gate;
}

/**
 * The payments simulator component (gen/payments), compiled once per page.
 * @returns {Promise<GateComponent<PaymentsRoot>>}
 */
export function paymentsComponent() {
  payments ??= load('payments', 'payments_sim.js');
  return payments;
}
