// load-node.js's names, for protect() in a Worker: the gate from the Worker's modules.
export { gateComponentAsync as gateComponent } from './load-workerd.js';
