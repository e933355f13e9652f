// The gate component in workerd. workerd refuses to compile wasm from bytes at run time, so
// each jco core module is a wasm module of the Worker (listed in its config; the bundle keeps
// these imports as they are): jco's `instantiate` gets them already compiled, and the gate
// runs unchanged. The journal-format component is made ready before any journal exists.
import { instantiate as instantiateGate } from '../../node/gen/gate/interlock_gate.js';
import { GateComponent } from '../../node/src/gate.js';
import { useCoreModules } from '../../node/src/journal/format.js';
import gate1 from '../../node/gen/gate/interlock_gate.core.wasm';
import gate2 from '../../node/gen/gate/interlock_gate.core2.wasm';
import gate3 from '../../node/gen/gate/interlock_gate.core3.wasm';
import format1 from '../../node/gen/journal-format/journal_format.core.wasm';

/** @type {Record<string, WebAssembly.Module>} */
const GATE = {
  'interlock_gate.core.wasm': gate1,
  'interlock_gate.core2.wasm': gate2,
  'interlock_gate.core3.wasm': gate3,
};

useCoreModules((name) => {
  if (name !== 'journal_format.core.wasm') throw new Error(`no core module ${name} in this Worker`);
  return format1;
});

/** @param {Record<string, WebAssembly.Module>} modules */
export const getter = (modules) => async (/** @type {string} */ name) => {
  const m = modules[name];
  if (!m) throw new Error(`no core module ${name} in this Worker (hosts/edge/scripts/bundle.js lists them)`);
  return m;
};

/** @type {GateComponent<any> | undefined} */
let gate;

/** The gate component, from the Worker's wasm modules. */
export function gateComponent() {
  gate ??= new GateComponent(instantiateGate, getter(GATE));
  return gate;
}

/** The same, async, as protectWith()'s host takes it (examples/agent). */
export async function gateComponentAsync() {
  return gateComponent();
}
