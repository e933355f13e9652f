// @interlock/gate in a browser: the same gate component, its file journal in memory or in
// IndexedDB (see README, "Browser durability").
import { Interlock as Base } from './interlock.js';
import { MemoryJournal } from './journal/memory.js';
import { IndexedDbJournal } from './journal/indexeddb.js';
import { gateComponent, paymentsComponent } from './load-browser.js';
import { PaymentsService } from './payments.js';
import { protectWith } from './tools-core.js';

/**
 * The package's types (src/types.ts), named here so `import type { Outcome } from
 * '@interlock/gate'` works.
 * @typedef {import('./types.js').State} State
 * @typedef {import('./types.js').Executed} Executed
 * @typedef {import('./types.js').Reason} Reason
 * @typedef {import('./types.js').Json} Json
 * @typedef {import('./types.js').JsonObject} JsonObject
 * @typedef {import('./types.js').PremiseChange} PremiseChange
 * @typedef {import('./types.js').Outcome} Outcome
 * @typedef {import('./types.js').Receipt} Receipt
 * @typedef {import('./types.js').ProblemKind} ProblemKind
 * @typedef {import('./types.js').Problem} Problem
 * @typedef {import('./types.js').VerifyReport} VerifyReport
 * @typedef {import('./types.js').EffectContext} EffectContext
 * @typedef {import('./types.js').Cap} Cap
 * @typedef {import('./types.js').Bound} Bound
 * @typedef {import('./types.js').EffectOverrides} EffectOverrides
 * @typedef {import('./types.js').Storage} Storage
 * @typedef {import('./types.js').CrashPoint} CrashPoint
 * @typedef {import('./types.js').Clock} Clock
 * @typedef {import('./types.js').ClaimWait} ClaimWait
 * @typedef {import('./types.js').OpenOptions} OpenOptions
 * @typedef {import('./types.js').Recovered} Recovered
 * @typedef {import('./types.js').Targets} Targets
 * @typedef {import('./types.js').RepairReport} RepairReport
 * @typedef {import('./types.js').Refund} Refund
 * @typedef {import('./types.js').PaymentsPremises} PaymentsPremises
 * @typedef {import('./types.js').Reply} Reply
 * @typedef {import('./types.js').Step} Step
 * @typedef {import('./types.js').CaptureRequest} CaptureRequest
 * @typedef {import('./types.js').AuthorizeRequest} AuthorizeRequest
 * @typedef {import('./types.js').ApplyRequest} ApplyRequest
 * @typedef {import('./types.js').QueryRequest} QueryRequest
 */
/**
 * @template [E=JsonObject]
 * @typedef {import('./types.js').EffectDefinition<E>} EffectDefinition
 */
/**
 * @template {unknown[]} A
 * @typedef {import('./types.js').EffectFunction<A>} EffectFunction
 */
/**
 * @template {unknown[]} A
 * @typedef {import('./types.js').Effect<A>} Effect
 */

export class Interlock extends Base {
  /**
   * A gate over the durable IndexedDB journal `name` (one writer per name, across tabs).
   * A URL (`postgres://...`) rejects with UnsupportedJournalError.
   * @param {string} [name]
   * @param {OpenOptions} [options]
   */
  static async open(name = 'interlock-journal', options = {}) {
    const journal = await IndexedDbJournal.open(name);
    try {
      return await Base.create(gateComponent(), journal, options);
    } catch (e) {
      journal.close();
      throw e;
    }
  }

  /**
   * A gate over an in-memory journal (gone with the page).
   * @param {OpenOptions} [options]
   */
  static async memory(options = {}) {
    return Base.create(gateComponent(), new MemoryJournal(), options);
  }

  /**
   * A gate over any journal storage.
   * @param {Storage} storage
   * @param {OpenOptions} [options]
   */
  static async withJournal(storage, options = {}) {
    return Base.create(gateComponent(), storage, options);
  }
}

/** The simulated payments service (state in memory; persist with `snapshot()` if needed). */
export const Payments = {
  /**
   * A new, empty service of `tier` ("1", "2", "3" or "1+lookup"); `persist(snapshot)` is
   * called after every change.
   * @param {string} tier
   * @param {{ persist?: (snapshot: string) => void }} [options]
   */
  async inMemory(tier, { persist } = {}) {
    return PaymentsService.create(await paymentsComponent(), tier, { persist });
  },
  /**
   * The service a snapshot describes.
   * @param {string} snapshot
   * @param {{ persist?: (snapshot: string) => void }} [options]
   */
  async restore(snapshot, { persist } = {}) {
    return PaymentsService.restore(await paymentsComponent(), snapshot, { persist });
  },
};

/**
 * protect() in a browser: the gate in front of `functions`, as in Node (README, "protect()"),
 * with the journal in the IndexedDB database `options.journal` or `config.journal_dir`
 * (`':memory:'`: in memory, gone with the page). Any `scheme://` is refused with
 * UnsupportedJournalError, nothing created.
 * @template {Record<string, import('./types.js').ToolFunction>} F
 * @param {F} functions
 * @param {object | string} config
 * @param {import('./types.js').ProtectOptions} [options]
 * @returns {Promise<import('./types.js').ProtectedTools<F>>}
 */
export function protect(functions, config, options = {}) {
  return protectWith({
    gateComponent,
    openJournal: (name) => (name === ':memory:' ? new MemoryJournal() : IndexedDbJournal.open(name)),
  }, functions, config, options);
}

export { PremiseReadError } from './tools-core.js';
export { Gate, toOutcome } from './gate.js';
export { GateComponent, gateRoot, openedRoot } from './component.js';
export { MemoryJournal } from './journal/memory.js';
export { IndexedDbJournal } from './journal/indexeddb.js';
export { SystemClock, FakeClock } from './clock.js';
export { PaymentsService, paymentsTarget, ServiceError } from './payments.js';
export { gateComponent, paymentsComponent } from './load-browser.js';
export * from './errors.js';
