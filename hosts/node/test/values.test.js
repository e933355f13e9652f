// Values JSON cannot carry as given (issue 11, items 4 and 5): JSON.stringify turns NaN and
// Infinity into null and drops undefined and functions, so `refund(order, NaN)` was sent as
// `amount_cents: null` and the effect function still ran. Each is refused with
// InvalidFieldError at the value's JSON pointer: nothing recorded, nothing sent. Integers
// past 2^53-1 are the core's rule (invalid-field), passed through untouched.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Interlock, Payments, FakeClock, MemoryJournal, InvalidFieldError, GateError } from '../src/index.js';

const T0 = 1_800_000_000_000;

async function setup({ premises } = {}) {
  const clock = new FakeClock(T0);
  const payments = await Payments.inMemory('2');
  payments.addOrder('order_881', 10_000);
  const journal = new MemoryJournal();
  const gate = await Interlock.withJournal(journal, { clock, agent: 'refund-agent' });
  await gate.lease('case-4471', { ttlMs: 3_600_000 });
  const calls = [];
  let premiseReads = 0;
  const def = {
    target: 'payments',
    params: ['order', 'amount_cents'],
    key: (e) => `refund:${e.order}`,
    lease: 'case-4471',
    premises: async (e, { effectId }) => {
      premiseReads++;
      return premises ?? payments.premises(e.order, effectId);
    },
  };
  const refund = gate.effect(def, async (order, amount, key, { effectId }) => {
    calls.push([order, amount]);
    return payments.refund(order, amount, key, effectId, clock.nowMs());
  });
  // The same gate, an effect whose one argument is the effect object.
  const notify = gate.effect({ target: 'mail', lease: 'case-4471' }, async (msg) => {
    calls.push(['mail', msg]);
  });
  return { gate, journal, refund, notify, calls, payments, premiseReads: () => premiseReads };
}

/** `run()` rejects with InvalidFieldError at `field`, and nothing happened. */
async function refused(ctx, run, field) {
  const before = ctx.journal.bytes();
  await assert.rejects(run, (e) => {
    assert.ok(e instanceof InvalidFieldError && e instanceof GateError, `${e?.name}: ${e?.message}`);
    assert.equal(e.case, 'invalid-field');
    assert.equal(e.payload.field, field, e.message);
    assert.ok(e.payload.problem.length > 0);
    return true;
  });
  assert.deepEqual(ctx.journal.bytes(), before, 'nothing recorded');
  assert.deepEqual(ctx.calls, [], 'the effect function never ran');
  assert.equal(ctx.payments.refundCount(), 0, 'nothing sent');
}

test('arguments JSON would change or drop are refused at their pointer', async () => {
  const ctx = await setup();
  const { refund, notify } = ctx;
  const cyclic = { a: 1 };
  cyclic.self = cyclic;
  const cases = [
    [() => refund('order_881', NaN), '/effect/amount_cents'],
    [() => refund('order_881', Infinity), '/effect/amount_cents'],
    [() => refund('order_881', -Infinity), '/effect/amount_cents'],
    [() => refund('order_881', undefined), '/effect/amount_cents'],
    [() => refund('order_881'), '/effect/amount_cents'],
    [() => refund('order_881', () => 2000), '/effect/amount_cents'],
    [() => refund('order_881', 2000n), '/effect/amount_cents'],
    [() => refund(Symbol('order_881'), 2000), '/effect/order'],
    [() => refund('order_881', new Number(2000)), '/effect/amount_cents'],
    [() => refund(new Date(T0), 2000), '/effect/order'],
    [() => refund('order_881', 2000, 'one too many'), '/effect'],
    [() => notify(), '/effect'],
    [() => notify({ to: 'a@b.c', tags: new Set(['x']) }), '/effect/tags'],
    [() => notify({ to: 'a@b.c', meta: new Map([['k', 1]]) }), '/effect/meta'],
    [() => notify({ 'a/b~c': { n: NaN } }), '/effect/a~1b~0c/n'],
    [() => notify({ list: [1, , 3] }), '/effect/list/1'], // eslint-disable-line no-sparse-arrays
    [() => notify({ list: [1, undefined] }), '/effect/list/1'],
    [() => notify(cyclic), '/effect/self'],
    [() => notify({ when: { toJSON: () => 'later' } }), '/effect/when'],
    [() => notify({ to: 'a@b.c', [Symbol('s')]: 1 }), '/effect'],
  ];
  for (const [run, field] of cases) await refused(ctx, run, field);
  assert.equal(ctx.premiseReads(), 0, 'premises were never read for a refused call');
  await assert.rejects(refund.effectId('order_881', NaN), InvalidFieldError);
  // Good values still go through, on the same gate.
  assert.equal((await refund('order_881', 2000)).state, 'COMMITTED');
  assert.equal((await notify({ to: 'a@b.c', n: -0, list: [null, 1.5] })).state, 'COMMITTED');
});

test('premises JSON cannot carry are refused before anything is recorded', async () => {
  const ctx = await setup({ premises: { eligible: true, refunded_by_others_cents: NaN } });
  // The premises function's answer is the effects machine's to take: refused at /premises,
  // the value's own pointer in the words.
  await refused(ctx, () => ctx.refund('order_881', 2000), '/premises');
  await refused(ctx, () => ctx.refund.with({ premises: { eligible: undefined } })('order_881', 2000), '/premises/eligible');
});

test('raw inputs are checked the same way (submit, submitStep, approve)', async () => {
  const ctx = await setup();
  const proposal = {
    agent: 'refund-agent',
    target: { name: 'payments', lookup: false },
    key: 'refund:order_881',
    effect: { order: 'order_881', amount_cents: Infinity },
    authority: { lease: 'case-4471' },
  };
  await refused(ctx, () => ctx.gate.submit(proposal), '/effect/amount_cents');
  assert.throws(() => ctx.gate.gate.submitStep({ ...proposal, effect: { order: 'order_881', amount_cents: 10n } }),
    (e) => e instanceof InvalidFieldError && e.payload.field === '/effect/amount_cents');
  await refused(ctx, () => ctx.gate.approve({ approval: 'apr-1', approver: 'm', request: { key: 'k', effect: { a: NaN } } }), '/request/effect/a');
});

test('an integer past 2^53-1 is refused by the core (invalid-field), nothing recorded, fn not called', async () => {
  const ctx = await setup();
  await refused(ctx, () => ctx.refund('order_881', 2 ** 64), '/effect/amount_cents');
  await refused(ctx, () => ctx.refund('order_881', Number.MAX_SAFE_INTEGER + 1), '/effect/amount_cents');
  assert.equal(ctx.premiseReads(), 0);
  // The largest safe integer is an ordinary amount to the gate.
  assert.match(await ctx.refund.effectId('order_881', Number.MAX_SAFE_INTEGER), /^[0-9a-f]{32}$/);
});
