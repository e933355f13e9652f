// docs/host-api.md in Node, beyond the shared vectors (tests/api): the defaults are the
// gate's, a send waits at most its recorded timeout, the standing lease is the gate's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Interlock } from '../src/index.js';
import { tempDir } from './helpers.js';

/** @param {string} dir */
const entries = (dir) => readFileSync(join(dir, 'journal.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

test('the defaults are read from the gate, which fills them into a proposal', async () => {
  const dir = join(tempDir(), '.interlock');
  const gate = await Interlock.open(dir, { standingLease: true });
  try {
    const d = gate.gate.defaults();
    assert.deepEqual(d.claim_wait, { poll_ms: 200, max_polls: 150 });
    assert.equal(d.timeout_ms, 30_000);
    assert.equal(d.dedupe_window_ms, 86_400_000);
    const refund = gate.effect({ target: 'refund', key: (e) => `refund:${e.order}` }, async () => ({ ok: true }));
    const out = await refund({ order: 'order_881' });
    assert.equal(out.state, 'COMMITTED');
    const [first] = entries(dir).filter((e) => e.stream === `effect:${out.effectId}`);
    // The gate records the proposal with its defaults filled in.
    assert.equal(first.proposal.target.timeout_ms, d.timeout_ms);
    assert.equal(first.proposal.target.dedupe_window_ms, d.dedupe_window_ms);
    assert.equal(gate.gate.sendTimeoutMs(out.effectId), d.timeout_ms);
  } finally {
    await gate.close();
  }
});

test('a resend at recovery waits the recorded timeout, not a default of the host', async () => {
  const dir = join(tempDir(), '.interlock');
  const first = await Interlock.open(dir);
  await first.lease('case-4471', { ttlMs: 3_600_000 });
  const def = { target: 'refund', key: (/** @type {any} */ e) => `refund:${e.order}`, lease: 'case-4471', dedupes: true };
  const refund = first.effect({ ...def, timeoutMs: 50 }, async () => { throw new Error('connection reset'); });
  const open = await refund({ order: 'order_881' });
  assert.equal(open.reason, 'target_unavailable');
  await first.close();

  // The restarted process defines the effect without a timeout, and its send hangs: the
  // recorded 50 ms bound it, where a host default would have waited 30 s.
  const again = await Interlock.open(dir);
  let aborted = false;
  again.effect(def, (_e, _key, { signal }) => new Promise((_, reject) => {
    signal.addEventListener('abort', () => { aborted = true; reject(signal.reason); });
  }));
  const started = Date.now();
  const [r] = await again.recover();
  assert.ok(Date.now() - started < 5_000, `took ${Date.now() - started} ms`);
  assert.equal(r.outcome?.reason, 'target_unavailable', JSON.stringify(r));
  assert.ok(aborted);
  await again.close();
});

test('standing authority is asked for, granted once by the gate, and stays revoked', async () => {
  const dir = join(tempDir(), '.interlock');
  const gate = await Interlock.open(dir, { agent: 'refund-agent', standingLease: true });
  try {
    const refund = gate.effect({ target: 'refund', key: (e) => `refund:${e.order}` }, async () => ({ ok: true }));
    assert.equal((await refund({ order: 'a' })).state, 'COMMITTED');
    assert.equal((await refund({ order: 'b' })).state, 'COMMITTED');
    const grants = entries(dir).filter((e) => e.stream === 'lease:refund-agent-standing');
    assert.deepEqual(grants.map((e) => e.state), ['GRANTED']);
    await gate.revokeLease(gate.gate.standingLeaseName('refund-agent'));
    const out = await refund({ order: 'c' });
    assert.deepEqual([out.state, out.reason], ['REFUSED', 'lease_revoked']);
  } finally {
    await gate.close();
  }
});

test('clockSkewMs goes into every proposal and lengthens the claim', async () => {
  const dir = join(tempDir(), '.interlock');
  const gate = await Interlock.open(dir, { standingLease: true, clockSkewMs: 500 });
  try {
    const refund = gate.effect({ target: 'refund', key: (e) => `refund:${e.order}`, timeoutMs: 1000 }, async () => ({ ok: true }));
    const out = await refund({ order: 'order_881' });
    assert.equal(out.state, 'COMMITTED');
    const stream = entries(dir).filter((e) => e.stream === `effect:${out.effectId}`);
    assert.equal(stream[0].proposal.target.clock_skew_ms, 500);
    const sent = stream.find((e) => e.state === 'DISPATCHED');
    assert.equal(sent.claim_until_ms, sent.at_ms + 1000 + 500);
  } finally {
    await gate.close();
  }
});
