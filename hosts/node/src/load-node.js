// Loading the transpiled components in Node: core modules are read from gen/ and compiled
// once per process; every Gate or PaymentsService is a cheap new instance of them.
import { readFile } from 'node:fs/promises';
import { GateComponent } from './gate.js';

let gate;
let payments;

function loader(dir, jsName) {
  const base = new URL(`../gen/${dir}/`, import.meta.url);
  return async () => {
    const mod = await import(new URL(jsName, base)).catch((e) => {
      throw new Error(`cannot load gen/${dir}/${jsName}: run \`npm run build\` in hosts/node (${e.message})`);
    });
    return new GateComponent(mod.instantiate, async (name) => WebAssembly.compile(await readFile(new URL(name, base))));
  };
}

/** The gate component (gen/gate), compiled once. */
export function gateComponent() {
  gate ??= loader('gate', 'interlock_gate.js')();
  return gate;
}

/** The payments simulator component (gen/payments), compiled once. */
export function paymentsComponent() {
  payments ??= loader('payments', 'payments_sim.js')();
  return payments;
}
