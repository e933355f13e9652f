// Recovery by a host that cannot act for an effect (issue 11, items 2 and 3): a gate that
// does not define an effect's target, or whose own check throws, must leave the effect open
// for later, never close it REFUSED or AMBIGUOUS: its refund may already have been made.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Interlock, Payments, FakeClock, Gate, MemoryJournal, gateComponent, paymentsTarget } from '../src/index.js';
import { tempDir } from './helpers.js';

const T0 = 1_800_000_000_000;
const TIMEOUT_MS = 20;

/**
 * Defines the payments refund on `gate` (tier 1: the service dedupes by key). `sent`: the
 * answer never comes back after the refund is made (the process is as good as killed).
 * `allowed`: the host's own check, if any.
 */
function defineRefund(gate, payments, clock, { sent = false, allowed } = {}) {
  const calls = [];
  const refund = gate.effect(
    {
      target: 'payments',
      params: ['order', 'amount_cents'],
      key: (e) => `refund:${e.order}`,
      lease: 'case-4471',
      dedupes: true,
      timeoutMs: TIMEOUT_MS,
      allowed,
    },
    async (order, amount, key, { effectId, attempt }) => {
      calls.push(attempt);
      const r = payments.refund(order, amount, key, effectId, clock.nowMs());
      if (sent) await new Promise(() => {});
      return { refund_id: r.id };
    },
  );
  return { refund, calls };
}

/** A journal folder with one refund DISPATCHED and made at the service, its answer lost. */
async function sentAndLost({ allowed } = {}) {
  const dir = tempDir();
  const clock = new FakeClock(T0);
  const payments = await Payments.inMemory('1');
  payments.addOrder('order_881', 10_000);
  const gate = await Interlock.open(dir, { clock, agent: 'refund-agent' });
  await gate.lease('case-4471', { ttlMs: 3_600_000 });
  const { refund } = defineRefund(gate, payments, clock, { sent: true, allowed });
  const o = await refund('order_881', 2000);
  assert.equal(o.state, 'DISPATCHED');
  assert.equal(payments.refundCount(), 1, 'the refund was made');
  gate.close();
  clock.advance(TIMEOUT_MS + 1); // the dead worker's claim is over
  const bytes = () => readFileSync(join(dir, 'journal.jsonl'));
  return { dir, clock, payments, effectId: o.effectId, bytes };
}

test('a gate that does not define the target leaves the effect open and untouched; one that does recovers it once', async () => {
  const { dir, clock, payments, effectId, bytes } = await sentAndLost();
  try {
    const gate = await Interlock.open(dir, { clock });
    let mails = 0;
    gate.effect({ target: 'mail', lease: 'case-4471' }, async () => { mails++; });
    const before = bytes();
    const [r] = await gate.recover();
    assert.equal(r.effectId, effectId);
    assert.equal(r.outcome.state, 'DISPATCHED', JSON.stringify(r));
    assert.equal(r.outcome.reason, 'target_unroutable');
    assert.equal(r.outcome.executed, 'unknown');
    assert.deepEqual(bytes(), before, 'nothing written');
    assert.deepEqual(gate.openEffects(), [effectId]);
    assert.equal(mails, 0);

    // The same gate learns the target: now it recovers it (a resend the service dedupes).
    const { calls } = defineRefund(gate, payments, clock);
    const [again] = await gate.recover();
    assert.equal(again.outcome.state, 'COMMITTED', JSON.stringify(again));
    assert.equal(gate.receipt(effectId).via, 'recovery-retry');
    assert.deepEqual(calls, [1]);
    assert.equal(payments.refundCount(), 1, 'one refund');
    assert.deepEqual(gate.openEffects(), []);
    gate.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a gate with no effect defined recovers nothing and writes nothing', async () => {
  const { dir, clock, effectId, bytes } = await sentAndLost();
  try {
    const gate = await Interlock.open(dir, { clock });
    const before = bytes();
    const [r] = await gate.recover();
    assert.deepEqual([r.effectId, r.outcome.state, r.outcome.reason], [effectId, 'DISPATCHED', 'target_unroutable']);
    assert.deepEqual(bytes(), before);
    gate.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a host check that throws at submit leaves the effect open, nothing sent; a later call commits', async () => {
  const clock = new FakeClock(T0);
  const payments = await Payments.inMemory('1');
  payments.addOrder('order_881', 10_000);
  const gate = await Interlock.open(':memory:', { clock, agent: 'refund-agent' });
  await gate.lease('case-4471', { ttlMs: 3_600_000 });
  let down = true;
  const { refund, calls } = defineRefund(gate, payments, clock, {
    allowed: async () => {
      if (down) throw new Error('policy service unreachable');
      return true;
    },
  });
  const before = gate.storage.bytes();
  const o = await refund('order_881', 2000);
  assert.deepEqual([o.state, o.reason, o.executed], ['PROPOSED', 'read_failed', 'no'], JSON.stringify(o));
  assert.deepEqual(calls, [], 'nothing sent');
  assert.deepEqual(gate.storage.bytes(), before, 'nothing recorded');
  down = false;
  const again = await refund('order_881', 2000);
  assert.equal(again.state, 'COMMITTED');
  assert.deepEqual(calls, [0]);
  assert.equal(gate.receipt(again.effectId).authorized.at(-1).checks.host_check, 'allowed');
});

test('a host check that throws at recovery leaves the effect open; a later recovery commits it once', async () => {
  const { dir, clock, payments, effectId, bytes } = await sentAndLost({ allowed: () => true });
  try {
    const gate = await Interlock.open(dir, { clock });
    let down = true;
    const { calls } = defineRefund(gate, payments, clock, {
      allowed: () => {
        if (down) throw new Error('policy service unreachable');
        return true;
      },
    });
    const before = bytes();
    const [r] = await gate.recover();
    assert.deepEqual([r.effectId, r.outcome.state, r.outcome.reason], [effectId, 'DISPATCHED', 'read_failed'], JSON.stringify(r));
    assert.deepEqual(bytes(), before, 'nothing written');
    assert.deepEqual(calls, []);
    down = false;
    const [again] = await gate.recover();
    assert.equal(again.outcome.state, 'COMMITTED', JSON.stringify(again));
    assert.deepEqual(calls, [1]);
    assert.equal(payments.refundCount(), 1, 'one refund');
    gate.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a recorded host check this gate has no allowed() for leaves the effect open', async () => {
  const { dir, clock, payments, bytes } = await sentAndLost({ allowed: () => true });
  try {
    const gate = await Interlock.open(dir, { clock });
    const { calls } = defineRefund(gate, payments, clock); // no `allowed` here
    const before = bytes();
    const [r] = await gate.recover();
    assert.deepEqual([r.outcome.state, r.outcome.reason], ['DISPATCHED', 'read_failed'], JSON.stringify(r));
    assert.deepEqual(bytes(), before);
    assert.deepEqual(calls, []);
    gate.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('low-level Gate: a target object\'s `routes` goes to setRoutes; another target is asked nothing', async () => {
  const clock = new FakeClock(T0);
  const payments = await Payments.inMemory('1');
  payments.addOrder('order_881', 10_000);
  const journal = new MemoryJournal();
  const gate = await Gate.instantiate(await gateComponent(), { storage: journal, clock });
  await gate.grantLease('l', T0 + 60_000);
  const target = paymentsTarget(payments, clock);
  assert.deepEqual(target.routes, ['payments']);
  const before = journal.bytes();
  const mail = { agent: 'a', target: { name: 'mail' }, effect: { to: 'x' }, authority: { lease: 'l' } };
  const o = await gate.submit(mail, target);
  assert.deepEqual([o.state, o.reason, o.executed], ['PROPOSED', 'target_unroutable', 'no']);
  assert.deepEqual(journal.bytes(), before, 'nothing recorded');
  const refund = { ...mail, target: { name: 'payments', dedupes: true }, effect: { order: 'order_881', amount_cents: 2000 } };
  assert.equal((await gate.submit(refund, target)).state, 'COMMITTED');
  assert.equal(payments.refundCount(), 1);
});
