// @interlock/gate in a browser: the same gate component, with an in-memory journal or the
// durable IndexedDB journal (see README, "Browser durability").
import { Interlock as Base } from './interlock.js';
import { MemoryJournal } from './journal/memory.js';
import { IndexedDbJournal } from './journal/indexeddb.js';
import { gateComponent, paymentsComponent } from './load-browser.js';
import { PaymentsService } from './payments.js';

export class Interlock extends Base {
  /** A gate over the durable IndexedDB journal `name` (one writer per name, across tabs). */
  static async open(name = 'interlock-journal', options = {}) {
    const journal = await IndexedDbJournal.open(name);
    try {
      return await Base.create(gateComponent(), journal, options);
    } catch (e) {
      journal.close();
      throw e;
    }
  }

  /** A gate over an in-memory journal (gone with the page). */
  static async memory(options = {}) {
    return Base.create(gateComponent(), new MemoryJournal(), options);
  }

  static async withJournal(journal, options = {}) {
    return Base.create(gateComponent(), journal, options);
  }
}

/** The simulated payments service (state in memory; persist with `snapshot()` if needed). */
export const Payments = {
  async inMemory(tier, { persist } = {}) {
    return PaymentsService.create(await paymentsComponent(), tier, { persist });
  },
  async restore(snapshot, { persist } = {}) {
    return PaymentsService.restore(await paymentsComponent(), snapshot, { persist });
  },
};

export { Gate, toOutcome } from './gate.js';
export { MemoryJournal } from './journal/memory.js';
export { IndexedDbJournal } from './journal/indexeddb.js';
export { SystemClock, FakeClock } from './clock.js';
export { PaymentsService, paymentsTarget, ServiceError } from './payments.js';
export { gateComponent, paymentsComponent } from './load-browser.js';
export * from './errors.js';
