// What the Chromium test runs inside the page: the conformance vectors (through the one
// runner, conformance/driver.js) and the journal contract suite on the in-memory and on the
// IndexedDB storage, and the durable journal's own checks. Results go back to Node.
import { runVector } from '../../conformance/driver.js';
import { contractCases, runContractCase } from '../../conformance/contract.js';
import { gateComponent, Interlock, Payments, IndexedDbJournal, MemoryJournal, JournalLockedError, Rejected } from '../../src/browser.js';

const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, '0')).join('');
const sha256 = async (bytes) => hex(await crypto.subtle.digest('SHA-256', bytes));

let dbs = 0;
const freshName = () => `interlock-test-${Date.now()}-${dbs++}`;

/** Runs one vector on `kind` ('memory' or 'indexeddb') with `pins` (text); returns the report. */
export async function vector(v, kind, pins) {
  const gate = await gateComponent();
  const name = freshName();
  const journal = kind === 'memory' ? new MemoryJournal() : await IndexedDbJournal.open(name);
  try {
    const report = await runVector(v, { gate, storage: journal, host: 'browser', pins });
    if (kind === 'indexeddb') {
      // What a reloaded page would find: the bytes read back from IndexedDB.
      await journal.flush();
      await journal.close();
      const again = await IndexedDbJournal.open(name);
      report.reloadedSha256 = await sha256(again.bytes());
      await again.close();
      await IndexedDbJournal.destroy(name);
    }
    return { ok: true, report };
  } catch (e) {
    return { ok: false, error: `${e?.stack ?? e}` };
  }
}

/** The durable journal: survives a reload, one writer at a time, an async effect. */
export async function durableJournal() {
  const name = freshName();
  const out = {};
  const payments = await Payments.inMemory('2');
  payments.addOrder('order_881', 10_000);
  const define = (gate, sent) => gate.effect(
    {
      target: 'payments',
      params: ['order', 'amount_cents'],
      key: 'refund:order_881',
      lease: 'case-4471',
      premises: async (e, { effectId }) => payments.premises(e.order, effectId),
      lookup: async (_e, { effectId }) => payments.findByReference(effectId),
      timeoutMs: 50,
    },
    async (order, amount, key, { effectId }) => {
      await new Promise((r) => setTimeout(r, 5)); // an async target (a fetch)
      const r = payments.refund(order, amount, key, effectId, Date.now());
      if (sent) return new Promise(() => {}); // committed, but the answer never comes back
      return { refund_id: r.id };
    },
  );
  let gate = await Interlock.open(name, { agent: 'refund-agent' });
  out.lockedSecond = await Interlock.open(name).then(async (g) => (await g.close(), 'opened'), (e) => (e instanceof JournalLockedError ? 'locked' : String(e)));
  await gate.lease('case-4471', { ttlMs: 3_600_000 });
  // The send hangs past timeoutMs: its fate is unknown, the effect stays open.
  const first = await define(gate, true)('order_881', 2000);
  out.first = [first.state, first.reason];
  await gate.close();
  // A "reload": a new gate on the same database, after the claim (timeoutMs) is over.
  await new Promise((r) => setTimeout(r, 60));
  gate = await Interlock.open(name, { agent: 'refund-agent' });
  const refund = define(gate, false);
  const recovered = await gate.recover();
  out.recovered = recovered.map((r) => [r.outcome.state, gate.receipt(r.effectId).via]);
  const again = await refund('order_881', 2000);
  out.again = [again.state, again.replayed];
  out.refunds = payments.refunds('order_881').length;
  out.problems = gate.verify().problems.length;
  await gate.close();
  await IndexedDbJournal.destroy(name);
  // Rejected from a target is a definitive refusal.
  const mem = await Interlock.memory();
  await mem.lease('l', { ttlMs: 1000 });
  const r = await mem.effect({ target: 't', lease: 'l' }, async () => { throw new Rejected('400 bad request'); })({ x: 1 });
  out.rejected = [r.state, r.reason];
  return out;
}

/**
 * Every case of the journal contract suite over `kind` ('memory' or 'indexeddb'), each over a
 * fresh, empty storage: the cases that failed, with why.
 */
export async function contract(kind) {
  const cases = await contractCases('file');
  const failed = [];
  for (const c of cases) {
    const name = freshName();
    const storage = kind === 'memory' ? new MemoryJournal() : await IndexedDbJournal.open(name);
    const why = await runContractCase(c, 'file', storage);
    if (why !== null) failed.push(`${c}: ${why}`);
    if (kind === 'indexeddb') {
      await storage.close();
      await IndexedDbJournal.destroy(name);
    }
  }
  return { cases: cases.length, failed };
}
