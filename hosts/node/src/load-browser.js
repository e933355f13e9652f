// Loading the transpiled components in a browser: core modules are fetched relative to this
// file and compiled once per page; every Gate or PaymentsService is a new instance of them.
import { GateComponent } from './gate.js';

let gate;
let payments;

function loader(dir, jsName) {
  const base = new URL(`../gen/${dir}/`, import.meta.url);
  return async () => {
    const mod = await import(new URL(jsName, base).href);
    return new GateComponent(mod.instantiate, (name) => WebAssembly.compileStreaming(fetch(new URL(name, base))));
  };
}

export function gateComponent() {
  gate ??= loader('gate', 'interlock_gate.js')();
  return gate;
}

export function paymentsComponent() {
  payments ??= loader('payments', 'payments_sim.js')();
  return payments;
}
