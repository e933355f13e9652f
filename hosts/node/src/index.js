// @interlock/gate for Node: the gate component with the file journal (the CLI's format).
import { Interlock as Base } from './interlock.js';
import { FileJournal } from './journal/file.js';
import { MemoryJournal } from './journal/memory.js';
import { gateComponent, paymentsComponent } from './load-node.js';
import { PaymentsService } from './payments.js';
import fs from 'node:fs';
import { dirname } from 'node:path';

export class Interlock extends Base {
  /**
   * Opens (or creates) the journal in folder `dir` and starts a gate on it. The folder is
   * locked for this process (flock on journal.lock, shared with the CLI). Pass
   * `{ journal: 'memory' }` instead of a folder for a journal that lives in memory.
   */
  static async open(dir, options = {}) {
    const journal = dir === ':memory:' ? new MemoryJournal() : FileJournal.open(dir);
    try {
      return await Base.create(gateComponent(), journal, options);
    } catch (e) {
      journal.close();
      throw e;
    }
  }

  /** A gate over any journal backend. */
  static async withJournal(journal, options = {}) {
    return Base.create(gateComponent(), journal, options);
  }

  /** Repairs a torn journal tail in `dir` (see FileJournal.repair). */
  static repair(dir) {
    return FileJournal.repair(dir);
  }
}

/**
 * Saves a payments snapshot the way the Rust crate does: `<file>.tmp`, fsync, rename,
 * fsync the folder. Same bytes (snapshot + "\n"), so the CLI reads it.
 */
export function writeStateFile(path, snapshot) {
  const tmp = `${path}.tmp`;
  const fd = fs.openSync(tmp, 'w');
  try {
    fs.writeSync(fd, `${snapshot}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, path);
  const d = fs.openSync(dirname(path), 'r');
  try {
    fs.fsyncSync(d);
  } finally {
    fs.closeSync(d);
  }
}

/** The simulated payments service, its state in `file` (payments.json, the CLI's format). */
export const Payments = {
  async create(file, tier) {
    return PaymentsService.create(await paymentsComponent(), tier, { persist: (s) => writeStateFile(file, s) });
  },
  async open(file) {
    const text = fs.readFileSync(file, 'utf8');
    return PaymentsService.restore(await paymentsComponent(), text, { persist: (s) => writeStateFile(file, s) });
  },
  async inMemory(tier) {
    return PaymentsService.create(await paymentsComponent(), tier);
  },
};

export { Gate, toOutcome } from './gate.js';
export { FileJournal } from './journal/file.js';
export { MemoryJournal } from './journal/memory.js';
export { SystemClock, FakeClock } from './clock.js';
export { PaymentsService, paymentsTarget, ServiceError } from './payments.js';
export { gateComponent, paymentsComponent } from './load-node.js';
export * from './errors.js';
