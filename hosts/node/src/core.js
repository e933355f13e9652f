// @interlock/gate/core: what runs in any JavaScript runtime (Node, a browser, workerd,
// Deno), given a compiled gate component (a GateComponent: jco's `instantiate` and the core
// modules) and a storage: the friendly API (Interlock, protectWith), the low-level Gate,
// the component's instances (gateRoot, openedRoot, storageImport), the errors, the clocks
// and the in-memory file storage. The runtime entries (`.`, `./browser`, `./workerd`) add a
// loader and their own storage.
export { Interlock } from './interlock.js';
export { Gate, toOutcome } from './gate.js';
export { GateComponent, gateRoot, openedRoot, repairJournal, storageImport, admin } from './component.js';
export { MemoryJournal } from './journal/memory.js';
export { SqlStorage } from './journal/sql-storage.js';
export { SystemClock, FakeClock } from './clock.js';
export { PaymentsService, paymentsTarget, ServiceError } from './payments.js';
export { protectWith, PremiseReadError } from './tools-core.js';
export { jsonText, assertJson } from './json.js';
export * from './errors.js';
