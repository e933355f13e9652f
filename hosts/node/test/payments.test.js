// The payments target routes the gate's steps to the service's component, which answers
// them itself (adapters/payments-sim `target`): the replies are the component's, unchanged,
// and a refusal lands in the journal as the service's code, the same text the CLI and
// Python hosts record (hosts/cli/tests/rejection.rs, hosts/python/tests/test_payments_target.py).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runVector } from '../conformance/driver.js';
import { FakeClock, MemoryJournal, Payments, PaymentsService, ServiceError, paymentsTarget } from '../src/index.js';
import { gateComponent, paymentsComponent } from '../src/load-node.js';

const T0 = 1_800_000_000_000;
const EFFECT = JSON.stringify({ order: 'order_881', amount_cents: 2000 });
const ID = '0123456789abcdef0123456789abcdef';

// The order was paid 1000 cents; the agent refunds 2000. The premises hold, so the gate
// sends, and the service refuses: over the balance.
const VECTOR = {
  id: 'rejected-t1', fault: '-', title: 'the service refuses the refund (over the balance)',
  tier: '1', paid_cents: 1000,
  steps: [{ op: 'decide', task: 't1', amount_cents: 2000 }, { op: 'send', task: 't1' }],
  expect: {
    refunded_cents: 0, refund_records: 0,
    tasks: { t1: { state: 'REFUSED', reason: 'target_rejected', executed: 'no' } },
  },
};
const DETAIL = '"detail":"exceeds_balance: order=\\"order_881\\" requested_cents=2000 remaining_cents=1000"';

test('a refusal records the service\'s code, as every host does', async () => {
  const journal = new MemoryJournal();
  const report = await runVector(VECTOR, {
    gate: await gateComponent(), storage: journal, host: 'node',
  });
  assert.deepEqual(report.failures, []);
  const refused = new TextDecoder().decode(journal.bytes()).split('\n').filter((l) => l.includes('REFUSED'));
  assert.equal(refused.length, 1);
  assert.ok(refused[0].includes(DETAIL), refused[0]);
});

/** A tier-`tier` service with order_881 paid 10000 cents, and its target. */
async function setup(tier, { persist } = {}) {
  const service = await PaymentsService.create(await paymentsComponent(), tier, { persist });
  service.addOrder('order_881', 10_000);
  return { service, target: paymentsTarget(service, new FakeClock(T0)) };
}

const apply = (effect = EFFECT, key = ID) => ({ effectId: ID, target: 'payments', effect, idempotencyKey: key, attempt: 0 });
const query = (effect = EFFECT) => ({ effectId: ID, target: 'payments', effect });
const capture = (names, effect = EFFECT) => ({ effectId: ID, target: 'payments', effect, names });

test('each step is answered by the service, its codes passed through', async () => {
  const { service, target } = await setup('2');
  const applied = { tag: 'applied', val: '{"amount_cents":2000,"refund_id":"re_0001"}' };
  assert.deepEqual(target.apply(apply()), applied);
  assert.deepEqual(target.apply(apply(JSON.stringify({ order: 'nope', amount_cents: 1 }))),
    { tag: 'rejected', val: 'unknown_order: order="nope"' });
  assert.deepEqual(target.apply(apply(JSON.stringify({ order: 'order_881', amount_cents: 8001 }))),
    { tag: 'rejected', val: 'exceeds_balance: order="order_881" requested_cents=8001 remaining_cents=8000' });
  assert.deepEqual(target.apply(apply('{not json')), { tag: 'rejected', val: 'invalid_effect: not_json' });
  assert.deepEqual(target.capture(capture(['refunded_by_others_cents', 'eligible'])),
    { tag: 'captured', val: '{"eligible":true,"refunded_by_others_cents":0}' });
  assert.deepEqual(target.capture(capture(['mood'])), { tag: 'failed', val: 'unknown_premise: name="mood"' });
  assert.deepEqual(target.capture(capture(['eligible'], '{"order":1}')), { tag: 'failed', val: 'invalid_effect: field="/order"' });
  assert.deepEqual(target.query(query()), { tag: 'found', val: applied.val });
  assert.deepEqual(target.query({ ...query(), effectId: 'f'.repeat(32) }), { tag: 'not-found' });
  assert.equal(service.refundCount(), 1);

  const tier1 = await setup('1');
  assert.deepEqual(tier1.target.query(query()), { tag: 'failed', val: 'lookup_unsupported' });
  tier1.target.apply(apply());
  assert.deepEqual(tier1.target.apply(apply(JSON.stringify({ order: 'order_881', amount_cents: 1 }))),
    { tag: 'rejected', val: `idempotency_mismatch: key="${ID}"` });
});

test('an applied refund is persisted before the reply; if it cannot be, the reply is unknown', async () => {
  const saved = [];
  let failing = false;
  const { service, target } = await setup('1', {
    persist: (s) => {
      if (failing) throw new Error('disk full');
      saved.push(s);
    },
  });
  saved.length = 0;
  assert.equal(target.apply(apply()).tag, 'applied');
  assert.equal(saved.length, 1);
  assert.equal(JSON.parse(saved[0]).refunds.length, 1);
  // A refusal changed nothing: nothing to persist, and a failing store does not matter.
  failing = true;
  assert.equal(target.apply(apply(JSON.stringify({ order: 'nope', amount_cents: 1 }), 'k2')).tag, 'rejected');
  assert.deepEqual(target.apply({ ...apply(), effectId: 'e'.repeat(32), idempotencyKey: 'k3' }),
    { tag: 'unknown', val: 'state_io: message="disk full"' });
  assert.equal(service.refundCount(), 2, 'the service made it; whether it survives is unknown');
});

test('a step for another target is a host bug: thrown, never answered', async () => {
  const { target } = await setup('1');
  for (const step of ['capture', 'authorize', 'apply', 'query']) {
    assert.throws(() => target[step]({ ...apply(), names: [], agent: 'a', target: 'mail' }), /routes only "payments"/, step);
  }
});

test('service errors carry the case, the payload and the crate\'s words', async () => {
  const service = await Payments.inMemory('1');
  assert.throws(() => service.refund('nope', 1, null, null, T0),
    (e) => e instanceof ServiceError && e.case === 'unknown-order' && e.payload === 'nope' && e.message === 'unknown order nope');
  service.addOrder('order_881', 1000);
  assert.throws(() => service.refund('order_881', 2000, null, null, T0),
    (e) => e instanceof ServiceError && e.case === 'exceeds-balance' && e.payload.remainingCents === 1000n
      && e.message === 'refund of 2000 cents on order order_881 exceeds the remaining 1000 cents');
  assert.throws(() => service.findByReference('x'),
    (e) => e instanceof ServiceError && e.message === 'this payments service offers no lookup by reference');
});
