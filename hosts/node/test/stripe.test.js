// The built-in target stripe.refund through the official `stripe` SDK for Node
// (@interlock/gate/stripe), against localstripe (PyPI 1.15.10, its own process) with a proxy
// in front that answers badly when armed: the original's three live Stripe faults and bad
// answers from the service, as hosts/python/tests/test_stripe_target.py runs them (which
// also says which documented Stripe behaviour each relies on). localstripe does not
// implement Idempotency-Key, so the target is declared `dedupes: false` here (tier 2: it is
// recovered by listing the charge's refunds by their metadata).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Interlock, FakeClock, CrashedError } from '@interlock/gate';
import { stripeRefunds, stripeClient } from '@interlock/gate/stripe';
import Stripe from 'stripe';
import { tempDir } from './helpers.js';
import { LOCALSTRIPE_PYTHON, startLocalstripe, startProxy, stripeAt, charge, refunded } from './stripe-support.js';

const skip = LOCALSTRIPE_PYTHON ? false : 'INTERLOCK_LOCALSTRIPE_PYTHON (a Python with localstripe 1.15.10) is not set: hosts/node/test.sh sets it';
const LEASE = 'case-4471';
const KEY = 'refund:case-4471';
const TIMEOUT_MS = 1000;

/** @type {Awaited<ReturnType<typeof startLocalstripe>>} */
let server;
/** @type {any} */
let direct;
before(async () => {
  if (skip) return;
  server = await startLocalstripe();
  direct = stripeAt(server.port);
});
after(async () => server?.stop());

/**
 * The agent's process on a journal, its refunds through the proxy; `restart()` is a new
 * process on the same journal, its clock past the claim.
 * @param {{ crashAt?: 'before-send' | 'after-send', dedupes?: boolean }} [options]
 */
async function shop({ crashAt, dedupes = false } = {}) {
  const proxy = await startProxy(server.port);
  const dir = join(tempDir(), 'journal');
  const clock = new FakeClock(1_800_000_000_000);
  const sdk = stripeClient('sk_test_interlock', { host: '127.0.0.1', port: proxy.port, protocol: 'http' });
  const open = async (/** @type {any} */ crash) => {
    const gate = await Interlock.open(dir, { clock, crashAt: crash });
    const refund = stripeRefunds(gate, sdk, { dedupes, lease: LEASE, timeoutMs: TIMEOUT_MS });
    return { gate, refund };
  };
  const s = { proxy, clock, ...(await open(crashAt)) };
  await s.gate.lease(LEASE, { ttlMs: 48 * 3600_000 });
  return Object.assign(s, {
    async restart() {
      await s.gate.close();
      clock.advance(TIMEOUT_MS + 1);
      Object.assign(s, await open(undefined));
    },
    async stop() {
      await s.gate.close();
      await proxy.stop();
    },
  });
}

test('a refund lands once, carrying the effect id as Idempotency-Key and metadata', { skip }, async () => {
  const s = await shop();
  const ch = await charge(direct, 10_000);
  const out = await s.refund.with({ key: KEY })({ charge: ch, amount_cents: 2000 });
  assert.equal(out.state, 'COMMITTED');
  const { data: [r], count } = await refunded(direct, ch);
  assert.equal(count, 1);
  assert.equal(r.metadata.interlock_effect_id, out.effectId);
  assert.deepEqual(out.result, { id: r.id, amount: 2000, charge: ch, status: 'succeeded' });
  assert.deepEqual(s.gate.receipt(out.effectId).proposed.premises, { eligible: true, refunded_by_others_cents: 0 });
  await s.stop();
});

test('fault 1 of the original: the reply is lost after Stripe took the refund; a restart finds it, one refund', { skip }, async () => {
  const s = await shop({ crashAt: 'after-send' });
  const ch = await charge(direct, 10_000);
  await assert.rejects(s.refund.with({ key: KEY })({ charge: ch, amount_cents: 2000 }), CrashedError);
  await s.restart();
  const [{ outcome }] = await s.gate.recover();
  assert.equal(outcome.state, 'COMMITTED');
  assert.equal(s.gate.receipt(outcome.effectId).via, 'recovery-query');
  assert.deepEqual([(await refunded(direct, ch)).cents, s.proxy.state.forwarded], [2000, 1]);
  await s.stop();
});

test('fault 2 of the original: support refunds by hand during the outage; the retry is refused, $20 in all', { skip }, async () => {
  const s = await shop({ crashAt: 'before-send' });
  const ch = await charge(direct, 10_000);
  await assert.rejects(s.refund.with({ key: KEY })({ charge: ch, amount_cents: 2000 }), CrashedError);
  await direct.refunds.create({ charge: ch, amount: 2000 });
  await s.restart();
  const [{ outcome }] = await s.gate.recover();
  assert.deepEqual([outcome.state, outcome.reason], ['REFUSED', 'premise_changed']);
  assert.deepEqual(outcome.changed.map((c) => [c.name, c.was, c.now]), [['refunded_by_others_cents', 0, 2000]]);
  assert.equal((await refunded(direct, ch)).cents, 2000);
  await s.stop();
});

test('fault 3 of the original: the approval is revoked during the outage; nothing is sent', { skip }, async () => {
  const s = await shop({ crashAt: 'before-send' });
  const ch = await charge(direct, 10_000);
  const proposal = JSON.parse(await s.refund.proposal({ charge: ch, amount_cents: 2000 }));
  // The proposal names no key (the effect object is the request), nor does the call.
  assert.equal(proposal.key, undefined);
  await s.gate.approve({ approval: 'apr-7', approver: 'manager@shop', request: { effect: proposal.effect }, premises_seen: proposal.premises });
  await assert.rejects(s.refund.with({ approval: 'apr-7' })({ charge: ch, amount_cents: 2000 }), CrashedError);
  await s.restart();
  await s.gate.revokeApproval('apr-7');
  const [{ outcome }] = await s.gate.recover();
  assert.deepEqual([outcome.state, outcome.reason], ['REFUSED', 'approval_revoked']);
  assert.deepEqual([(await refunded(direct, ch)).count, s.proxy.state.forwarded], [0, 0]);
  await s.stop();
});

for (const [mode, via] of [['500-after', 'recovery-query'], ['garbage-after', 'recovery-query'], ['delay-after', 'recovery-query'],
  ['drop-after', 'recovery-query'], ['500-before', 'recovery-retry'], ['429-before', 'recovery-retry']]) {
  test(`a bad answer (${mode}) is unknown, never guessed: settled by the lookup, one refund`, { skip }, async () => {
    const s = await shop();
    const ch = await charge(direct, 10_000);
    s.proxy.arm(mode);
    const first = await s.refund.with({ key: KEY })({ charge: ch, amount_cents: 2000 });
    assert.deepEqual([first.state, first.reason], ['DISPATCHED', 'target_unavailable']);
    s.clock.advance(TIMEOUT_MS + 1);
    const [{ outcome }] = await s.gate.recover();
    assert.equal(outcome.state, 'COMMITTED');
    assert.equal(s.gate.receipt(outcome.effectId).via, via);
    assert.deepEqual([(await refunded(direct, ch)).cents, s.proxy.state.forwarded], [2000, 1]);
    await s.stop();
  });
}

test('stripe-node resends a request whose connection closed, even with maxNetworkRetries 0: the target takes only a client that does not', { skip }, async () => {
  const proxy = await startProxy(server.port);
  const ch = await charge(direct, 10_000);
  // The SDK alone, as documented in its RequestSender: a closed connection is sent again once.
  const plain = new Stripe('sk_test_interlock', { host: '127.0.0.1', port: proxy.port, protocol: 'http', maxNetworkRetries: 0 });
  proxy.arm('drop-after');
  await plain.refunds.create({ charge: ch, amount: 100 });
  assert.deepEqual([proxy.state.forwarded, (await refunded(direct, ch)).count], [2, 2]);
  const gate = await Interlock.open(join(tempDir(), 'journal'), { clock: new FakeClock(1_800_000_000_000) });
  await gate.lease(LEASE, { ttlMs: 3600_000 });
  assert.throws(() => stripeRefunds(gate, plain, { dedupes: false, lease: LEASE }), /stripeClient/);
  // Through the target's client: one send, its fate unknown, for the gate to settle.
  const refund = stripeRefunds(gate, stripeClient('sk_test_interlock', { host: '127.0.0.1', port: proxy.port, protocol: 'http', maxNetworkRetries: 3 }),
    { dedupes: false, lease: LEASE, timeoutMs: TIMEOUT_MS });
  proxy.arm('drop-after');
  const out = await refund.with({ key: KEY })({ charge: ch, amount_cents: 2000 });
  assert.deepEqual([out.state, out.reason], ['DISPATCHED', 'target_unavailable']);
  assert.deepEqual([proxy.state.forwarded, (await refunded(direct, ch)).count], [3, 3]);
  await gate.close();
  await proxy.stop();
});

test("a refund event signed by Stripe's own SDK confirms the refund", { skip }, async () => {
  const s = await shop();
  const ch = await charge(direct, 10_000);
  const out = await s.refund.with({ key: KEY })({ charge: ch, amount_cents: 2000 });
  const { data: [r] } = await refunded(direct, ch);
  const payload = JSON.stringify({ id: 'evt_refund_1', object: 'event', type: 'charge.refund.updated', data: { object: r } });
  const secret = 'whsec_interlock_refunds';
  const timestamp = Math.floor(Date.now() / 1000);
  s.clock.set(timestamp * 1000);
  const header = direct.webhooks.generateTestHeaderString({ payload, secret, timestamp });
  assert.deepEqual(await s.gate.webhook('stripe', { 'Stripe-Signature': header }, payload, secret),
    { effect_id: out.effectId, event: 'evt_refund_1', recorded: 'confirmed' });
  assert.equal(s.gate.receipt(out.effectId).final, 'CONFIRMED');
  await s.stop();
});
