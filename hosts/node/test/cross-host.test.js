// Cross-host recovery: a journal crashed by Node mid-send is recovered by the CLI, and a
// journal crashed by the CLI mid-send is recovered by Node; each ends with one refund.
// Also: Node and the CLI exclude each other on one journal folder (flock on journal.lock).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { readFileSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import { PKG, cliBinary, GATE_WASM, tempDir, sha256 } from './helpers.js';
import { Interlock, Payments, JournalLockedError } from '../src/index.js';

const cli = cliBinary();
const skip = cli ? false : 'the CLI binary is missing: cargo build -p interlock-cli (or set INTERLOCK_BIN)';
const run = (args) => spawnSync(cli, ['--wasm', GATE_WASM, ...args], { encoding: 'utf8' });
const refunds = (dir) => JSON.parse(readFileSync(join(dir, 'payments.json'), 'utf8')).refunds;

for (const tier of ['1', '2']) {
  test(`Node crashes after the send (tier ${tier}); the CLI recovers it: one refund`, { skip }, () => {
    const dir = tempDir();
    try {
      const out = execFileSync(process.execPath, [join(PKG, 'examples/refund.js'), '--tier', tier, '--dir', dir, '--no-recover'], { encoding: 'utf8' });
      assert.match(out, /killed \(SIGKILL\)/);
      assert.equal(refunds(dir).length, 1, 'the service committed before the crash');
      const rec = run(['recover', dir]);
      assert.equal(rec.status, 0, rec.stdout + rec.stderr);
      assert.match(rec.stdout, tier === '1' ? /COMMITTED/ : /COMMITTED/);
      const ver = run(['verify', dir]);
      assert.equal(ver.status, 0, ver.stdout + ver.stderr);
      assert.equal(refunds(dir).length, 1);
      const effect = rec.stdout.trim().split(/\s+/)[0];
      const receipt = JSON.parse(run(['receipt', dir, effect]).stdout);
      assert.equal(receipt.via, tier === '1' ? 'recovery-retry' : 'recovery-query');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

for (const tier of ['1', '2']) {
  test(`the CLI crashes after the send (tier ${tier}); Node recovers it: one refund`, { skip }, async () => {
    const dir = tempDir();
    try {
      // The world as `interlock demo` sets it up, written by Node: payments.json, the
      // proposal, the lease.
      const payments = await Payments.create(join(dir, 'payments.json'), tier);
      payments.addOrder('order_881', 10_000);
      const proposal = {
        agent: 'refund-agent',
        target: { name: 'payments', dedupes: tier === '1', lookup: tier === '2', dedupe_window_ms: 86_400_000, timeout_ms: 1000 },
        key: 'refund:order_881',
        effect: { order: 'order_881', amount_cents: 2000 },
        authority: { lease: 'case-4471' },
        premises: payments.premises('order_881', null),
      };
      writeFileSync(join(dir, 'proposal.json'), JSON.stringify(proposal));
      let gate = await Interlock.open(dir);
      await gate.lease('case-4471', { ttlMs: 3_600_000 });
      gate.close();

      // The CLI's demo child submits and aborts after the service committed.
      const child = run(['demo-child', '--dir', dir, '--phase', 'send']);
      assert.notEqual(child.status, 0, `the CLI child did not crash: ${child.stdout}${child.stderr}`);
      assert.equal(child.signal ?? 'SIGABRT', 'SIGABRT');
      assert.equal(refunds(dir).length, 1, 'the service committed before the crash');
      const before = sha256(readFileSync(join(dir, 'journal.jsonl')));

      // Node restarts: the same effect definition, recover, then the agent's own retry.
      const service = await Payments.open(join(dir, 'payments.json'));
      gate = await Interlock.open(dir, { agent: 'refund-agent' });
      const refund = gate.effect(
        {
          target: 'payments',
          params: ['order', 'amount_cents'],
          key: 'refund:order_881',
          lease: 'case-4471',
          premises: (e, { effectId }) => service.premises(e.order, effectId),
          dedupes: tier === '1',
          dedupeWindowMs: 86_400_000,
          lookup: tier === '2' ? (_e, { effectId }) => service.findByReference(effectId) : undefined,
          timeoutMs: 1000,
        },
        async (order, amount, key, { effectId }) => {
          const r = service.refund(order, amount, key, effectId, Date.now());
          return { amount_cents: r.amount_cents, refund_id: r.id };
        },
      );
      const recovered = await gate.recover();
      assert.equal(recovered.length, 1);
      assert.equal(recovered[0].outcome.state, 'COMMITTED');
      assert.equal(gate.receipt(recovered[0].effectId).via, tier === '1' ? 'recovery-retry' : 'recovery-query');
      assert.notEqual(sha256(readFileSync(join(dir, 'journal.jsonl'))), before);
      const again = await refund('order_881', 2000);
      assert.equal(again.state, 'COMMITTED');
      assert.equal(again.replayed, true);
      assert.equal(gate.verify().problems.length, 0);
      gate.close();
      assert.equal(refunds(dir).length, 1);
      // And the CLI agrees with what Node wrote.
      const ver = run(['verify', dir]);
      assert.equal(ver.status, 0, ver.stdout + ver.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('Node and the CLI exclude each other on one journal folder', { skip }, async () => {
  const dir = tempDir();
  try {
    const gate = await Interlock.open(dir);
    const res = run(['--lock-wait-ms', '300', 'verify', dir]);
    assert.notEqual(res.status, 0);
    // It waited, then said how to run several writers.
    assert.match(res.stderr, /locked by another writer \(journal\.lock is held\), still after waiting 300 ms; .*sqlite:\/\/\/.*postgres:\/\//);
    await assert.rejects(Interlock.open(dir, { lockWaitMs: 0 }), JournalLockedError);
    gate.close();
    const ok = run(['verify', dir]);
    assert.equal(ok.status, 0, ok.stderr);
    assert.ok(existsSync(join(dir, 'journal.lock')));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
