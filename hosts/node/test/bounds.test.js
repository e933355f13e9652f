// Bounds through the effect API (issue 11, item 1): the effect id was asked on a proposal
// that had the bounds but not yet the premises they bound, so every call with `bounds` and
// `premises` failed with InvalidField /bounds/...
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Interlock, Payments, FakeClock } from '../src/index.js';

const T0 = 1_800_000_000_000;

/**
 * A refund effect whose premises are read from the service and bounded. `handRefundCents`:
 * a clerk refunds that much by hand right after the agent decided (after the first premise
 * read, before the gate's re-check).
 */
async function setup({ handRefundCents = 0 } = {}) {
  const clock = new FakeClock(T0);
  const payments = await Payments.inMemory('2');
  payments.addOrder('order_881', 10_000);
  const gate = await Interlock.open(':memory:', { clock, agent: 'refund-agent' });
  await gate.lease('case-4471', { ttlMs: 3_600_000 });
  let reads = 0;
  const refund = gate.effect(
    {
      target: 'payments',
      params: ['order', 'amount_cents'],
      key: (e) => `refund:${e.order}`,
      lease: 'case-4471',
      premises: async (e, { effectId }) => {
        const now = payments.premises(e.order, effectId);
        if (reads++ === 0 && handRefundCents) payments.refundByHand(e.order, handRefundCents, clock.nowMs());
        return now;
      },
      bounds: { refunded_by_others_cents: { at_most: 1000 } },
      lookup: async (_e, { effectId }) => payments.findByReference(effectId),
    },
    async (order, amount, key, { effectId }) => {
      const r = payments.refund(order, amount, key, effectId, clock.nowMs());
      return { refund_id: r.id };
    },
  );
  return { gate, refund, payments, reads: () => reads };
}

test('bounds: a premise that moved inside its bound commits', async () => {
  const { refund, payments, reads } = await setup({ handRefundCents: 500 });
  const o = await refund('order_881', 2000);
  assert.equal(o.state, 'COMMITTED', JSON.stringify(o));
  assert.deepEqual(o.changed, []);
  assert.equal(reads(), 2, 'read when deciding, then again at the re-check');
  assert.equal(payments.refundedCents('order_881'), 2500);
});

test('bounds: a premise past its bound at the re-check is REFUSED premise_changed', async () => {
  const { refund, payments } = await setup({ handRefundCents: 1500 });
  const o = await refund('order_881', 2000);
  assert.equal(o.state, 'REFUSED');
  assert.equal(o.reason, 'premise_changed');
  assert.deepEqual(o.changed, [{ name: 'refunded_by_others_cents', was: { at_most: 1000 }, now: 1500 }]);
  assert.equal(payments.refundedCents('order_881'), 1500, 'only the hand refund');
});

test('bounds: effectId() works and is the id the call gets', async () => {
  const { refund } = await setup();
  const id = await refund.effectId('order_881', 2000);
  assert.match(id, /^[0-9a-f]{32}$/);
  const o = await refund('order_881', 2000);
  assert.equal(o.state, 'COMMITTED');
  assert.equal(o.effectId, id);
});
