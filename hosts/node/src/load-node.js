// Loading the transpiled components in Node: core modules are read from gen/ and compiled
// once per process; every Gate or PaymentsService is a cheap new instance of them.
import { readFile } from 'node:fs/promises';
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
  const mod = await import(new URL(jsName, base).href).catch((e) => {
    throw new Error(`cannot load gen/${dir}/${jsName}: run \`npm run build\` in hosts/node (${e.message})`);
  });
  return new GateComponent(mod.instantiate, async (name) => WebAssembly.compile(await readFile(new URL(name, base))));
}

/**
 * The gate component (gen/gate), compiled once.
 * @returns {Promise<GateComponent<GateRoot>>}
 */
export function gateComponent() {
  gate ??= load('gate', 'interlock_gate.js');
  return gate;
}

/**
 * The payments simulator component (gen/payments), compiled once.
 * @returns {Promise<GateComponent<PaymentsRoot>>}
 */
export function paymentsComponent() {
  payments ??= load('payments', 'payments_sim.js');
  return payments;
}
