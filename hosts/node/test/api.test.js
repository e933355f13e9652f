// The public API: effects as async functions, typed outcomes and errors, traps, the file
// journal's torn-tail handling.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  Interlock, Payments, FakeClock, MemoryJournal, FileJournal, InvalidJsonError, InvalidFieldError,
  TooLargeError, JournalFailedError, GateError, TornTailError, JournalError, Rejected, StorageError,
} from '../src/index.js';
import { tempDir } from './helpers.js';

const T0 = 1_800_000_000_000;

async function setup({ timeoutMs = 1000, tier = '2', hang = false } = {}) {
  const clock = new FakeClock(T0);
  const payments = await Payments.inMemory(tier);
  payments.addOrder('order_881', 10_000);
  const gate = await Interlock.open(':memory:', { clock, agent: 'refund-agent' });
  await gate.lease('case-4471', { ttlMs: 48 * 3_600_000 });
  const calls = [];
  const refund = gate.effect(
    {
      target: 'payments',
      params: ['order', 'amount_cents'],
      key: (e) => `refund:${e.order}`,
      lease: 'case-4471',
      premises: async (e, { effectId }) => payments.premises(e.order, effectId),
      lookup: async (_e, { effectId }) => payments.findByReference(effectId),
      timeoutMs,
    },
    async (order, amount, idempotencyKey, { effectId, attempt }) => {
      calls.push({ order, amount, idempotencyKey, attempt });
      await new Promise((r) => setTimeout(r, 1));
      const r = payments.refund(order, amount, idempotencyKey, effectId, clock.nowMs());
      if (hang) await new Promise(() => {});
      return { refund_id: r.id, amount_cents: r.amount_cents };
    },
  );
  return { clock, payments, gate, refund, calls };
}

test('an async effect commits once; the same request replays; another amount is refused', async () => {
  const { gate, refund, payments, calls } = await setup();
  const o = await refund('order_881', 2000);
  assert.equal(o.state, 'COMMITTED');
  assert.equal(o.executed, 'yes');
  assert.deepEqual(o.result, { refund_id: 're_0001', amount_cents: 2000 });
  assert.equal(o.effectId, await refund.effectId('order_881', 2000));
  assert.equal(calls[0].idempotencyKey, o.effectId);
  const again = await refund('order_881', 2000);
  assert.equal(again.replayed, true);
  const other = await refund('order_881', 3000);
  assert.equal(other.state, 'REFUSED');
  assert.equal(other.reason, 'conflicting_payload');
  assert.equal(payments.refundedCents('order_881'), 2000);
  const receipt = gate.receipt(o.effectId);
  assert.equal(receipt.final, 'COMMITTED');
  assert.equal(receipt.via, 'send');
  assert.deepEqual(gate.verify().problems, []);
});

test('a premise that changes before the send refuses it, saying which', async () => {
  const { refund, payments } = await setup();
  const decided = await refund.with({ premises: payments.premises('order_881', null) });
  payments.setEligible('order_881', false);
  const o = await decided('order_881', 2000);
  assert.equal(o.state, 'REFUSED');
  assert.equal(o.reason, 'premise_changed');
  assert.deepEqual(o.changed, [{ name: 'eligible', was: true, now: false }]);
  assert.equal(payments.refundCount(), 0);
});

test('a send that times out stays open; recovery after the claim finds it by lookup', async () => {
  const { gate, refund, payments, clock } = await setup({ timeoutMs: 20, hang: true });
  const o = await refund('order_881', 2000);
  assert.equal(o.state, 'DISPATCHED');
  assert.equal(o.reason, 'target_unavailable');
  assert.deepEqual(gate.openEffects(), [o.effectId]);
  clock.advance(25);
  const [r] = await gate.recover();
  assert.equal(r.outcome.state, 'COMMITTED');
  assert.equal(gate.receipt(r.effectId).via, 'recovery-query');
  assert.equal(payments.refundCount(), 1);
});

test('Rejected from the effect function is a definitive refusal', async () => {
  const gate = await Interlock.open(':memory:', { clock: new FakeClock(T0) });
  await gate.lease('l', { ttlMs: 1000 });
  const send = gate.effect({ target: 'mail', lease: 'l' }, async () => {
    throw new Rejected('400: no such mailbox');
  });
  const o = await send({ to: 'x' });
  assert.equal(o.state, 'REFUSED');
  assert.equal(o.reason, 'target_rejected');
  assert.equal(o.executed, 'no');
});

test('gate errors are typed subclasses carrying the payload', async () => {
  const { gate } = await setup();
  assert.throws(() => gate.gate.submitStep('{'), (e) => e instanceof InvalidJsonError && e instanceof GateError && e.case === 'invalid-json' && typeof e.payload === 'string');
  assert.throws(() => gate.gate.submitStep('{"agent":"a"}'), (e) => e instanceof InvalidFieldError && typeof e.payload.field === 'string');
  assert.throws(() => gate.gate.submitStep(' '.repeat(70_000)), (e) => e instanceof TooLargeError && typeof e.payload === 'number');
  await assert.rejects(gate.submit({ agent: 'a', target: { name: 't' }, effect: {}, authority: { lease: 'l' }, premise: {} }), InvalidFieldError);
});

test('a journal failure is the gate error `journal`; nothing is sent', async () => {
  const journal = new MemoryJournal();
  const gate = await Interlock.withJournal(journal, { clock: new FakeClock(T0) });
  await gate.lease('l', { ttlMs: 1000 });
  let sent = 0;
  const fx = gate.effect({ target: 't', lease: 'l' }, async () => { sent++; });
  const append = journal.fileAppend.bind(journal);
  journal.fileAppend = () => { throw new StorageError('io', 'disk full'); };
  await assert.rejects(fx({ n: 1 }), (e) => e instanceof JournalFailedError && e.payload.tag === 'io');
  assert.equal(sent, 0);
  journal.fileAppend = append;
  assert.equal((await fx({ n: 1 })).state, 'COMMITTED');
});

test('a host that throws an Error traps the instance, and it stays trapped', async () => {
  const journal = new MemoryJournal();
  const gate = await Interlock.withJournal(journal, { clock: new FakeClock(T0) });
  await gate.lease('l', { ttlMs: 1000 });
  journal.fileAppend = () => { throw new TypeError('host bug'); };
  let boom;
  await assert.rejects(gate.lease('m', { ttlMs: 1000 }), (e) => ((boom = e), !(e instanceof GateError)));
  journal.fileAppend = MemoryJournal.prototype.fileAppend.bind(journal);
  assert.throws(() => gate.openEffects(), (e) => e === boom);
});

test('file journal: the CLI format; a torn tail refuses to open and repair saves it', async () => {
  const dir = tempDir();
  try {
    const gate = await Interlock.open(dir, { clock: new FakeClock(T0) });
    await gate.lease('l', { ttlMs: 1000 });
    await gate.revokeLease('l');
    gate.close();
    const text = readFileSync(join(dir, 'journal.jsonl'), 'utf8');
    const lines = text.split('\n');
    assert.equal(lines.pop(), '');
    assert.deepEqual(lines.map((l) => JSON.parse(l).seq), [0, 1]);
    appendFileSync(join(dir, 'journal.jsonl'), '{"stream":"x"');
    await assert.rejects(Interlock.open(dir), (e) => e instanceof TornTailError && e instanceof JournalError
      && e.message.includes(`byte offset ${text.length} (13 bytes`));
    const r = await Interlock.repair(dir);
    assert.equal(r.tornOffset, text.length);
    assert.ok(readdirSync(dir).includes(`journal.torn-${text.length}`));
    assert.equal(readFileSync(join(dir, 'journal.jsonl'), 'utf8'), text);
    const again = await Interlock.open(dir);
    assert.deepEqual(again.verify(), { streams: 1, entries: 2, problems: [] });
    again.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
