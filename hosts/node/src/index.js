// @interlock/gate for Node: the gate component over a file journal's folder (the CLI's
// files), a SQLite or PostgreSQL database, or memory, each chosen by the one argument of
// Interlock.open. The journal's rules run inside the gate; the storage here is I/O only.
import { Interlock as Base } from './interlock.js';
import { FileJournal } from './journal/file.js';
import { openJournal, isSqlJournalUrl } from './journal/open.js';
import { UnsupportedJournalError } from './errors.js';
import { repairJournal } from './component.js';
import { SystemClock } from './clock.js';
import { gateComponent, paymentsComponent } from './load-node.js';
import { PaymentsService } from './payments.js';
import { runExport } from './export.js';
export { ExportError, ExportFailedError } from './export.js';
import fs from 'node:fs';
import { dirname, join } from 'node:path';

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
   * Opens (or creates) the journal `location` names and starts a gate on it:
   * - a folder: the file journal, locked for this process (flock on journal.lock, shared
   *   with the CLI);
   * - `sqlite:///abs/path.db`: a SQLite journal, shared by the processes of one machine;
   * - `postgres://user@host:port/db` (or `postgresql://`): a PostgreSQL journal, shared by
   *   many machines;
   * - `':memory:'`: a journal that lives in memory.
   * Any other URL (`file://`, `http://`, ...) rejects with UnsupportedJournalError.
   * @param {string} location
   * @param {OpenOptions} [options]
   */
  static async open(location, options = {}) {
    const storage = openJournal(location, options);
    try {
      return await Interlock.create(gateComponent(), storage, options);
    } catch (e) {
      storage.close();
      throw e;
    }
  }

  /**
   * A gate over any journal storage.
   * @param {Storage} storage
   * @param {OpenOptions} [options]
   */
  static async withJournal(storage, options = {}) {
    return Interlock.create(gateComponent(), storage, options);
  }

  /**
   * Repairs a torn journal tail in `dir`: saves it to `journal.torn-<offset>` (`savedTo`, its
   * path) and cuts the journal to its last whole line (the gate's rule). A SQLite or PostgreSQL journal has
   * none to repair (a transaction commits whole or not at all): its URL is refused with
   * UnsupportedJournalError, nothing opened.
   * @param {string} dir
   * @param {{ lockWaitMs?: number }} [options]
   * @returns {Promise<RepairReport>}
   */
  static async repair(dir, options = {}) {
    if (isSqlJournalUrl(dir)) {
      throw new UnsupportedJournalError(dir, `journal ${JSON.stringify(dir)} is a SQLite or PostgreSQL journal: it has no torn tail to repair (a transaction commits whole or not at all)`);
    }
    const storage = FileJournal.open(dir, options);
    try {
      const report = await repairJournal(await gateComponent(), storage, new SystemClock());
      return { ...report, savedTo: report.savedTo === null ? null : join(dir, report.savedTo) };
    } finally {
      storage.close();
    }
  }

  /**
   * Exports the journal past its recorded position (ARCHITECTURE.md, "Export") to `to`:
   * `otlp=URL` (OpenTelemetry's SDK exporters), or `bigquery`, `cloud-logging`, `siem`
   * (JSON lines appended to `options.out`). A batch a crash left in doubt is sent again
   * first, the same records under the same ids; nothing after it is skipped. Options:
   * `out`, `name` (the position's, default the sink's), `content` (OTLP spans carry the
   * tool's arguments and result), `maxRecords` (per batch, default 512), `timeoutMs`.
   * @param {string} to
   * @param {import('./export.js').ExportOptions} [options]
   * @returns {Promise<import('./export.js').ExportReport>}
   */
  export(to, options) {
    return runExport(this.gate, to, options);
  }
}

/**
 * Saves a payments snapshot the way the Rust crate does: `<file>.tmp`, fsync, rename,
 * fsync the folder. Same bytes (snapshot + "\n"), so the CLI reads it.
 * @param {string} path
 * @param {string} snapshot
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
  /**
   * A new, empty service of `tier` ("1", "2", "3" or "1+lookup"), its state in `file`.
   * @param {string} file
   * @param {string} tier
   */
  async create(file, tier) {
    return PaymentsService.create(await paymentsComponent(), tier, { persist: (s) => writeStateFile(file, s) });
  },
  /**
   * The service whose state `file` holds (written by any host).
   * @param {string} file
   */
  async open(file) {
    const text = fs.readFileSync(file, 'utf8');
    return PaymentsService.restore(await paymentsComponent(), text, { persist: (s) => writeStateFile(file, s) });
  },
  /**
   * A new, empty service of `tier`, its state in memory only.
   * @param {string} tier
   */
  async inMemory(tier) {
    return PaymentsService.create(await paymentsComponent(), tier);
  },
};

export { Gate, toOutcome } from './gate.js';
export { GateComponent, gateRoot, openedRoot, repairJournal } from './component.js';
export { FileJournal } from './journal/file.js';
export { MemoryJournal } from './journal/memory.js';
export { SqliteJournal } from './journal/sqlite.js';
export { PostgresJournal } from './journal/postgres.js';
export { openJournal } from './journal/open.js';
export { protect, PremiseReadError } from './tools.js';
export { SystemClock, FakeClock } from './clock.js';
export { PaymentsService, paymentsTarget, ServiceError } from './payments.js';
export { gateComponent, paymentsComponent } from './load-node.js';
export * from './errors.js';
export { readKey, writePrivateKey, SIGNING_KEY_ENV, PUBLIC_KEY_ENV } from './keys.js';
