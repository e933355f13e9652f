// Entry hashes and a signed receipt recomputed from outside the component: the short script
// tests/outside/check_journal.mjs (RFC 8785 by the npm package `canonicalize`, node:crypto)
// checks the CLI-made fixture and a journal this host writes, and catches a one-byte edit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Interlock, Payments, FakeClock } from '../src/index.js';
import { REPO, tempDir } from './helpers.js';

const OUTSIDE = join(REPO, 'tests/outside');
const FIXTURE = join(OUTSIDE, 'fixture');
const KEY = Buffer.from('a key for the outside check, ключ 🔑');

function check(...args) {
  const run = spawnSync(process.execPath, [join(OUTSIDE, 'check_journal.mjs'), ...args], { encoding: 'utf8' });
  assert.ok(run.status === 0 || run.status === 1, run.stderr);
  return { rc: run.status, out: run.stdout };
}

test('the CLI fixture checks out', () => {
  const key = readFileSync(join(FIXTURE, 'key.hex'), 'utf8').trim();
  let { rc, out } = check(join(FIXTURE, 'journal.jsonl'), join(FIXTURE, 'receipt.json'), key);
  assert.equal(rc, 0, out);
  assert.match(out, /6 entries in 3 streams/);
  assert.match(out, /\nok\n$/);
  ({ rc, out } = check(join(FIXTURE, 'journal.jsonl'), join(FIXTURE, 'receipt.json'), KEY.toString('hex')));
  assert.equal(rc, 1, out);
  assert.match(out, /the signature does not hold/);
});

/**
 * A journal written by this host, with an effect whose JCS form differs from plain sorted
 * JSON (a key above U+FFFF before one at U+E000, 0.000001, -0), and its receipt signed with KEY.
 */
async function written() {
  const dir = tempDir();
  const clock = new FakeClock(1_800_000_000_000);
  const payments = await Payments.inMemory('2');
  payments.addOrder('order_881', 10_000);
  const gate = await Interlock.open(join(dir, 'journal'), { clock, agent: 'refund-agent' });
  await gate.lease('case-4471', { ttlMs: 3_600_000 });
  const refund = gate.effect(
    {
      target: 'payments',
      params: ['order', 'amount_cents', 'note', 'rate', 'tags'],
      key: (e) => `refund:${e.order}`,
      lease: 'case-4471',
      premises: async (e, { effectId }) => payments.premises(e.order, effectId),
      lookup: async (_e, { effectId }) => payments.findByReference(effectId),
    },
    async (order, amount, _note, _rate, _tags, idempotencyKey, { effectId }) => {
      const r = payments.refund(order, amount, idempotencyKey, effectId, clock.nowMs());
      return { refund_id: r.id, amount_cents: r.amount_cents };
    },
  );
  const o = await refund('order_881', 2000, 'café 😀 \u2028 \u001f', 0.000001,
    { '\ue000': 'private use', '😀': 'emoji', zero: -0 });
  assert.equal(o.state, 'COMMITTED');
  const receipt = join(dir, 'receipt.json');
  writeFileSync(receipt, JSON.stringify(gate.receipt(o.effectId, { key: KEY })));
  await gate.close();
  const journal = join(dir, 'journal', 'journal.jsonl');
  const text = readFileSync(journal, 'utf8');
  // What the check below proves would not hold for serde_json's sorted output.
  assert.ok(text.includes('"rate":0.000001') && text.includes('"zero":0,'), text);
  assert.ok(text.indexOf('"😀":"emoji"') < text.indexOf('"\ue000":"private use"'), text);
  return { journal, receipt };
}

test('a journal written by this host checks out', async () => {
  const { journal, receipt } = await written();
  const { rc, out } = check(journal, receipt, KEY.toString('hex'));
  assert.equal(rc, 0, out);
  assert.match(out, /\nok\n$/);
});

test('a one-byte edit of the journal is caught', async () => {
  for (const target of ['"rate":0.00000', '"amount_cents":200', '"hash":"']) {
    const { journal, receipt } = await written();
    const data = readFileSync(journal);
    const at = data.indexOf(target) + target.length;
    data[at] = data[at] === 0x37 ? 0x38 : 0x37;
    writeFileSync(journal, data);
    const { rc, out } = check(journal, receipt, KEY.toString('hex'));
    assert.equal(rc, 1, `${target}: ${out}`);
    assert.match(out, /MISMATCH/);
  }
});

test('an edited receipt is caught', async () => {
  const { journal, receipt } = await written();
  writeFileSync(receipt, readFileSync(receipt, 'utf8').replace('"attempts":1', '"attempts":0'));
  const { rc, out } = check(journal, receipt, KEY.toString('hex'));
  assert.equal(rc, 1, out);
  assert.match(out, /the signature does not hold/);
});
