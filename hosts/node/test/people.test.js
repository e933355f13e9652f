// People in the loop through the Node API: approval rules, the inbox, decisions, and a
// refund confirmed by a webhook that Stripe's official SDK signs (not our signer).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Stripe from 'stripe';
import { Interlock, InvalidFieldError } from '../src/index.js';

const RULES = {
  rules: [{ name: 'large', target: 'refund', when: [{ field: '/effect/amount_cents', over: 5000 }],
            then: 'person', route: 'finance', approvers_needed: 2 }],
  routes: { finance: { primary_approvers: ['alice@shop', 'bob@shop'] } },
};

async function setup() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-people-'));
  const gate = await Interlock.open(dir, { standingLease: true });
  await gate.setApprovalRules(RULES);
  for (const who of ['alice@shop', 'bob@shop']) await gate.lease(who, { ttlMs: 3_600_000 });
  const sent = [];
  const refund = gate.effect(
    { target: 'refund', params: ['order', 'amount_cents'], key: (e) => `refund:${e.order}`, dedupes: true },
    async (order, amountCents, idempotencyKey) => { sent.push(idempotencyKey); return { id: `re_${sent.length}` }; },
  );
  return { gate, refund, sent };
}

test('a large refund waits in the inbox until two distinct people approve it, then goes out once', async () => {
  const { gate, refund, sent } = await setup();
  assert.deepEqual(gate.approvalRules(), RULES);
  const out = await refund('order_881', 9000);
  assert.deepEqual([out.state, out.reason, out.returnTo], ['PROPOSED', 'approval_pending', 'finance']);
  const items = gate.inbox();
  assert.deepEqual(items.map((i) => [i.item, i.kind, i.status]), [[out.effectId, 'approval', 'pending']]);
  await gate.decide({ item: out.effectId, decider: 'alice@shop', verdict: 'approve', why: 'verified' });
  await assert.rejects(
    gate.decide({ item: out.effectId, decider: 'alice@shop', verdict: 'approve' }),
    (e) => e instanceof InvalidFieldError && /already approved/.test(e.message),
  );
  assert.equal((await refund('order_881', 9000)).reason, 'approval_pending');
  const after = await gate.decide({ item: out.effectId, decider: 'bob@shop', verdict: 'approve' });
  assert.deepEqual(after.approved_by, ['alice@shop', 'bob@shop']);
  assert.deepEqual(gate.inbox(), []);
  assert.equal((await refund('order_881', 9000)).state, 'COMMITTED');
  const board = gate.scoreboard();
  assert.equal(board.requests, 1);
  assert.equal(board.routes.finance.approved, 1);
  assert.equal(board.routes.finance.decided, 1);
  assert.equal(sent.length, 1);
});

test('a webhook Stripe\'s SDK signs confirms the refund; tampered, wrongly signed or replayed, it records nothing', async () => {
  const { gate, refund } = await setup();
  const out = await refund('order_881', 2000);
  assert.equal(out.state, 'COMMITTED');
  const secret = 'whsec_test_people';
  const payload = JSON.stringify({ id: 'evt_1', type: 'refund.updated', data: { object: {
    object: 'refund', id: 're_1', status: 'succeeded', metadata: { interlock_effect_id: out.effectId } } } });
  const stripe = new Stripe('sk_test_unused');
  const timestamp = Math.floor(gate.clock.nowMs() / 1000);
  const header = stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp });
  const bad = [
    [{ 'Stripe-Signature': header }, payload.replace('succeeded', 'failed'), secret, /changed, or signed with another secret/],
    [{ 'Stripe-Signature': header }, payload, 'whsec_other', /changed, or signed with another secret/],
    [{ 'Stripe-Signature': stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp: timestamp - 301 }) }, payload, secret, /tolerance/],
  ];
  for (const [headers, body, s, why] of bad) {
    await assert.rejects(gate.webhook('stripe', headers, body, s), (e) => e instanceof InvalidFieldError && why.test(e.message));
  }
  assert.deepEqual(await gate.webhook('stripe', { 'Stripe-Signature': header }, payload, secret),
    { effect_id: out.effectId, event: 'evt_1', recorded: 'confirmed' });
  await assert.rejects(gate.webhook('stripe', { 'Stripe-Signature': header }, payload, secret), /replay/);
  assert.equal(gate.receipt(out.effectId).final, 'CONFIRMED');
});
