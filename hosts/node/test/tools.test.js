// protect(): plain tool functions behind the gate (ARCHITECTURE.md, "Tool gating"), over the
// payments simulator with its state in a file. A crash is the gate's crash injection
// (`crashAt`: the instance is dropped mid-step) and a new protect() on the same journal; the
// real kill of a process is in tools-llm.test.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { protect, PremiseReadError } from '../src/tools.js';
import { InvalidFieldError, InvalidJsonError, Rejected, CrashedError } from '../src/errors.js';
import { paymentsTools, refundConfig, ORDER, LEASE } from './fixtures/mcp/payments-tools.js';

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-tools-'));

/** A protected set of payments tools at `tier`, the lease granted. */
async function setup(tier = '2', { extra = {}, dir = tmp(), crashAt, journal } = /** @type {any} */ ({})) {
  const { pay, functions } = await paymentsTools(path.join(dir, 'payments.json'), { tier });
  const config = refundConfig(tier, extra, path.join(dir, 'journal'));
  const tools = await protect(functions, config, { crashAt, journal, agent: 'refund-agent' });
  await tools.gate.grantLease(LEASE, Date.now() + 3_600_000);
  return { dir, pay, functions, config, tools };
}

/** Everything the journal holds, in append order. */
function journalText(tools) {
  return tools.gate.entriesInOrder();
}

test('a gated refund happens once: ok, the component\'s message, the outcome, the result', async () => {
  const { pay, tools } = await setup('2');
  assert.deepEqual(await tools.recover(), []);
  const out = await tools.create_refund({ order_id: ORDER, amount_cents: 2000 });
  assert.equal(out.ok, true, out.message);
  assert.equal(out.outcome.state, 'COMMITTED');
  assert.match(out.message, /^create_refund done; it happened once \(effect [0-9a-f]{32}\)\. Result: /);
  assert.equal(out.result.amount_cents, 2000);
  // The send carried the gate's key in the idempotency argument: the lookup finds it by it.
  assert.equal(out.result.reference, out.outcome.effect_id);
  assert.equal(pay.refundCount(), 1);
  assert.deepEqual(tools.gate.verify().problems, []);
  assert.equal(tools.gate.receipt(out.outcome.effect_id).final, 'COMMITTED');
  tools.close();
});

test('an un-gated tool passes through untouched (no journal entry)', async () => {
  const { tools, functions } = await setup('2');
  const before = journalText(tools);
  assert.equal(tools.echo, functions.echo);
  assert.deepEqual(await tools.echo({ text: 'hello' }), { text: 'hello' });
  assert.deepEqual(tools.gated, ['create_refund']);
  assert.deepEqual(journalText(tools), before);
  tools.close();
});

test('F3: the same call twice, and twice at once: one refund', async () => {
  const { pay, tools } = await setup('2');
  const a = await tools.create_refund({ order_id: ORDER, amount_cents: 2000 });
  const b = await tools.create_refund({ order_id: ORDER, amount_cents: 2000, reference: 'the model made this up' });
  assert.equal(b.ok, true);
  assert.equal(b.outcome.replayed, true);
  assert.match(b.message, /already done by an earlier identical call/);
  assert.equal(b.outcome.effect_id, a.outcome.effect_id);
  assert.equal(pay.refundCount(), 1);

  const { pay: pay2, tools: tools2 } = await setup('2');
  const both = await Promise.all([1, 2].map(() => tools2.create_refund({ order_id: ORDER, amount_cents: 2000 })));
  assert.equal(pay2.refundCount(), 1);
  assert.ok(both.some((o) => o.ok), JSON.stringify(both.map((o) => o.message)));
  tools.close();
  tools2.close();
});

test('F5: the same key with another amount is refused with isError, nothing more sent', async () => {
  const { pay, tools } = await setup('2');
  await tools.create_refund({ order_id: ORDER, amount_cents: 2000 });
  const out = await tools.create_refund({ order_id: ORDER, amount_cents: 3000 });
  assert.equal(out.ok, false);
  assert.equal(out.outcome.state, 'REFUSED');
  assert.equal(out.outcome.reason, 'conflicting_payload');
  assert.match(out.message, /NOT done .*other arguments/);
  assert.equal(pay.refundCount(), 1);
  tools.close();
});

test('F8: crash before the send, a hand refund, restart: REFUSED with what changed, $20 total', async () => {
  const { dir, pay, tools } = await setup('2', { crashAt: 'before-send' });
  await assert.rejects(tools.create_refund({ order_id: ORDER, amount_cents: 2000 }), CrashedError);
  tools.close();
  pay.refundByHand(ORDER, 2000, Date.now());

  const again = await setup('2', { dir });
  const [r] = await again.tools.recover();
  assert.equal(r.outcome.state, 'REFUSED');
  assert.equal(r.outcome.reason, 'premise_changed');
  assert.deepEqual(r.outcome.changed, [{ name: 'refunded_total', was: 0, now: 2000 }]);
  assert.match(r.message, /what the decision rested on changed: refunded_total was 0, is now 2000/);
  // The model's retry of the same call is answered from the journal: refused, nothing sent.
  const retry = await again.tools.create_refund({ order_id: ORDER, amount_cents: 2000 });
  assert.equal(retry.ok, false);
  assert.equal(retry.outcome.reason, 'premise_changed');
  assert.equal(again.pay.refundedCents(ORDER), 2000);
  assert.equal(again.pay.refundCount(), 1);
  again.tools.close();
});

test('F9: crash before the send, the lease revoked, restart: REFUSED, nothing sent', async () => {
  const dir = tmp();
  const first = await setup('2', { crashAt: 'before-send', dir });
  await assert.rejects(first.tools.create_refund({ order_id: ORDER, amount_cents: 2000 }), CrashedError);
  first.tools.close();

  const { pay, functions } = await paymentsTools(path.join(dir, 'payments.json'));
  const tools = await protect(functions, refundConfig('2', {}, path.join(dir, 'journal')));
  await tools.gate.revokeLease(LEASE);
  const [r] = await tools.recover();
  assert.equal(r.outcome.state, 'REFUSED');
  assert.equal(r.outcome.reason, 'lease_revoked');
  assert.match(r.message, /no longer allowed \(lease_revoked\)/);
  assert.equal(pay.refundCount(), 0);
  tools.close();
});

test('F11: two calls racing one $30 cap at once: one lands, the other is REFUSED', async () => {
  const extra = { key: ['order_id', 'case_id'], cap: { name: `order_${ORDER}`, limit_cents: 3000, amount_argument: 'amount_cents' } };
  const { pay, tools } = await setup('2', { extra });
  const outs = await Promise.all(['case-1', 'case-2'].map((case_id) => tools.create_refund({ order_id: ORDER, amount_cents: 2000, case_id })));
  assert.deepEqual(outs.map((o) => o.ok).sort(), [false, true]);
  const refused = outs.find((o) => !o.ok);
  // The cap is reserved when the effect is authorized, before either send.
  assert.equal(refused.outcome.reason, 'cap_exceeded', refused.message);
  assert.match(refused.message, /exceed a shared spending cap/);
  assert.equal(pay.refundedCents(ORDER), 2000);
  tools.close();
});

test('tier 2: crash after the send, restart: the lookup tool settles it, one refund', async () => {
  const dir = tmp();
  const first = await setup('2', { crashAt: 'after-send', dir });
  await assert.rejects(first.tools.create_refund({ order_id: ORDER, amount_cents: 2000 }), CrashedError);
  first.tools.close();

  const again = await setup('2', { dir });
  const [r] = await again.tools.recover();
  assert.equal(r.outcome.state, 'COMMITTED', r.message);
  assert.equal(r.ok, true);
  assert.equal(again.tools.gate.receipt(r.effectId).via, 'recovery-query');
  const retry = await again.tools.create_refund({ order_id: ORDER, amount_cents: 2000 });
  assert.equal(retry.ok, true);
  assert.equal(again.pay.refundCount(), 1);
  again.tools.close();
});

test('tier 3: the send\'s reply lost (any throw but Rejected): AMBIGUOUS said to the model, nothing resent', async () => {
  const dir = tmp();
  const { pay, functions } = await paymentsTools(path.join(dir, 'payments.json'), { tier: '3' });
  const lossy = { ...functions, create_refund: (a) => { functions.create_refund(a); throw new Error('connection reset'); } };
  const tools = await protect(lossy, refundConfig('3', { timeout_ms: 300 }, path.join(dir, 'journal')));
  await tools.gate.grantLease(LEASE, Date.now() + 3_600_000);
  const out = await tools.create_refund({ order_id: ORDER, amount_cents: 2000 });
  // The send's fate is unknown and its claim still live: open, not resent.
  assert.equal(out.ok, false);
  assert.equal(out.outcome.state, 'DISPATCHED', out.message);
  assert.match(out.message, /may or may not have happened yet/);
  await new Promise((r) => setTimeout(r, 400));
  const [r] = await tools.recover();
  assert.equal(r.outcome.state, 'AMBIGUOUS', r.message);
  assert.equal(r.ok, false);
  assert.match(r.message, /UNKNOWN whether create_refund happened .* a person must check/);
  const again = await tools.create_refund({ order_id: ORDER, amount_cents: 2000 });
  assert.equal(again.outcome.state, 'AMBIGUOUS');
  assert.match(again.message, /UNKNOWN whether create_refund happened/);
  assert.equal(pay.refundCount(), 1);
  tools.close();
});

test('a function throwing Rejected at the send: REFUSED target_rejected, nothing applied', async () => {
  const dir = tmp();
  const { pay, functions } = await paymentsTools(path.join(dir, 'payments.json'), { tier: '2' });
  const refusing = { ...functions, create_refund: () => { throw new Rejected('card network declined'); } };
  const tools = await protect(refusing, refundConfig('2', {}, path.join(dir, 'journal')));
  await tools.gate.grantLease(LEASE, Date.now() + 3_600_000);
  const out = await tools.create_refund({ order_id: ORDER, amount_cents: 2000 });
  assert.equal(out.ok, false);
  assert.equal(out.outcome.reason, 'target_rejected');
  assert.match(out.message, /the service refused it and applied nothing/);
  assert.equal(pay.refundCount(), 0);
  tools.close();
});

test('authority from options when the config names none; none at all: the standing lease, said once, or refused when strict', async () => {
  const dir = tmp();
  const { functions } = await paymentsTools(path.join(dir, 'payments.json'));
  const config = refundConfig('2', {}, path.join(dir, 'journal'));
  delete config.tools.create_refund.authority;
  await assert.rejects(protect(functions, config, { strict: true }), (e) => e instanceof InvalidFieldError && e.payload.field === '/tools/create_refund/authority');
  assert.equal(fs.existsSync(path.join(dir, 'journal')), false, 'nothing opened');
  const tools = await protect(functions, config, { authority: { lease: 'ops' } });
  await tools.gate.grantLease('ops', Date.now() + 60_000);
  const out = await tools.create_refund({ order_id: ORDER, amount_cents: 500 });
  assert.equal(out.ok, true, out.message);
  assert.deepEqual(tools.gate.receipt(out.outcome.effect_id).proposed.authority, { lease: 'ops' });
  tools.close();
  // Neither: the agent's standing lease, announced on console.warn at start, granted at first use.
  const warned = [];
  const warn = console.warn;
  console.warn = (m) => warned.push(String(m));
  let standing;
  try {
    standing = await protect(functions, { ...config, journal_dir: path.join(dir, 'journal2') }, { agent: 'support' });
  } finally {
    console.warn = warn;
  }
  assert.deepEqual(warned, [standing.gate.standingNotice('support')]);
  const again = await standing.create_refund({ order_id: ORDER, amount_cents: 700 });
  assert.equal(again.ok, true, again.message);
  assert.deepEqual(standing.gate.receipt(again.outcome.effect_id).proposed.authority, { lease: 'support-standing' });
  standing.close();
});

test('a bad config is refused at protect() with its JSON pointer, nothing opened', async () => {
  const dir = tmp();
  const { functions } = await paymentsTools(path.join(dir, 'payments.json'));
  const journal = path.join(dir, 'journal');
  /** @type {[unknown, string | null, Function][]} */
  const cases = [
    [{ ...refundConfig('2', { keys: ['order_id'] }, journal) }, '/tools/create_refund/keys', InvalidFieldError],
    [refundConfig('2', { key: [] }, journal), '/tools/create_refund/key', InvalidFieldError],
    [refundConfig('2', { premises: { tool: 'get_order', fields: 'refunded_total' } }, journal), '/tools/create_refund/premises/fields', InvalidFieldError],
    [refundConfig('2', { premises: { tool: 'read_order', fields: ['refunded_total'] } }, journal), '/tools/create_refund/premises/tool', InvalidFieldError],
    [{ journal_dir: journal, tools: { send_email: { key: ['to'], authority: { lease: LEASE } } } }, '/tools/send_email', InvalidFieldError],
    ['{"tools": ', null, InvalidJsonError],
  ];
  for (const [config, field, type] of cases) {
    await assert.rejects(protect(functions, /** @type {any} */ (config)), (e) => {
      assert.ok(e instanceof type, `${JSON.stringify(config)}: ${e}`);
      if (field) assert.equal(e.payload.field, field);
      return true;
    });
  }
  assert.equal(fs.existsSync(journal), false, 'nothing opened');
  await assert.rejects(protect({ ...functions, then: () => {} }, refundConfig('2', {}, journal)), TypeError);
});

test('bad calls: the model gets a typed error, nothing recorded, nothing sent, nothing lost', async () => {
  const { dir, pay, functions, tools } = await setup('2');
  const ok = await tools.create_refund({ order_id: ORDER, amount_cents: 1000 });
  assert.equal(ok.ok, true);
  const before = journalText(tools);

  const missing = await tools.create_refund({ amount_cents: 2000 });
  assert.equal(missing.ok, false);
  assert.ok(missing.error instanceof InvalidFieldError);
  assert.equal(missing.error.payload.field, '/arguments/order_id');
  assert.match(missing.message, /^create_refund was NOT done and nothing was recorded: .*\/arguments\/order_id.*Fix the call/);

  const notJson = await tools.create_refund({ order_id: ORDER, amount_cents: 10n });
  assert.ok(notJson.error instanceof InvalidFieldError);
  assert.equal(notJson.error.payload.field, '/amount_cents');

  const notObject = await tools.create_refund('refund 881');
  assert.ok(notObject.error instanceof InvalidJsonError || notObject.error instanceof InvalidFieldError, String(notObject.error));
  assert.deepEqual(journalText(tools), before);
  tools.close();

  // A premise tool that throws, and one whose answer lacks the field.
  for (const [get_order, type, field] of [
    [() => { throw new Error('orders database down'); }, PremiseReadError, null],
    [({ order_id }) => ({ order_id }), InvalidFieldError, '/premises/refunded_total'],
  ]) {
    const t = await protect({ ...functions, get_order }, refundConfig('2', {}, path.join(dir, 'journal')));
    const out = await t.create_refund({ order_id: ORDER, amount_cents: 2500 });
    assert.equal(out.ok, false);
    assert.ok(out.error instanceof type, String(out.error));
    assert.match(out.message, type === PremiseReadError ? /could not be read \(.*orders database down\)/ : /\/premises\/refunded_total/);
    if (field) assert.equal(out.error.payload.field, field);
    assert.equal(out.outcome, null);
    assert.deepEqual(journalText(t), before);
    t.close();
  }
  assert.equal(pay.refundCount(), 1);
});

test('the journal may be a SQLite URL (options.journal), as Interlock.open takes it', async (t) => {
  try {
    await import('better-sqlite3');
  } catch {
    t.skip('better-sqlite3 is not installed');
    return;
  }
  const dir = tmp();
  const url = `sqlite://${path.join(dir, 'journal.db')}`;
  const { pay, tools } = await setup('2', { dir, journal: url });
  const out = await tools.create_refund({ order_id: ORDER, amount_cents: 2000 });
  assert.equal(out.ok, true, out.message);
  tools.close();
  const again = await setup('2', { dir, journal: url });
  const dup = await again.tools.create_refund({ order_id: ORDER, amount_cents: 2000 });
  assert.equal(dup.outcome.replayed, true);
  assert.equal(pay.refundCount(), 1);
  again.tools.close();
});

test('a decider named in the configuration, but no client to ask: the call waits for approval, as without one', async () => {
  // protect() carries no MCP client: the component's question for the decider is answered
  // that no one can be asked (Gate.loop), and the model is told the call is pending.
  const dir = tmp();
  const { pay, functions } = await paymentsTools(path.join(dir, 'payments.json'), { tier: '2' });
  const config = { ...refundConfig('2', {}, path.join(dir, 'journal')), decider: 'alice@shop' };
  const tools = await protect(functions, config, { agent: 'refund-agent' });
  for (const lease of [LEASE, 'alice@shop']) await tools.gate.grantLease(lease, Date.now() + 3_600_000);
  await tools.gate.setApprovalRules({
    rules: [{ name: 'large', target: 'create_refund', when: [{ field: '/effect/amount_cents', over: 1000 }], then: 'person', route: 'finance' }],
    routes: { finance: { primary_approvers: ['alice@shop'] } },
  });
  const out = await tools.create_refund({ order_id: ORDER, amount_cents: 2000 });
  assert.equal(out.ok, false);
  assert.equal(out.outcome.reason, 'approval_pending');
  assert.match(out.message, /^create_refund is pending a person's approval \(item [0-9a-f]{32}, route finance\)/);
  assert.equal(pay.refundCount(), 0);
  tools.close();
});
