// One SQLite or PostgreSQL journal, two hosts: a journal this host wrote is recovered,
// verified and read by the CLI (`interlock recover|verify|receipt URL`), and what the CLI
// wrote is read here, entry for entry: each host's receipt of an effect (its entries' hashes,
// the stream's head) and each host's verify agree, and the rows hold one journal whose
// entries in append order are what the other host reads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Interlock, Payments } from '../src/index.js';
import { refundAgent } from './fixtures/refund-agent.js';
import { sqlite, postgres } from './sql-backends.js';
import { PKG, cliBinary, GATE_WASM, tempDir } from './helpers.js';

const cli = cliBinary();
const noCli = cli ? undefined : 'the CLI binary is missing: cargo build -p interlock-cli (or set INTERLOCK_BIN)';
const pg = postgres();
const backends = [{ backend: sqlite, skip: noCli }, { backend: pg.backend, skip: noCli ?? pg.skip }];
const run = (...args) => spawnSync(/** @type {string} */ (cli), ['--wasm', GATE_WASM, ...args], { encoding: 'utf8' });
const AGENT = join(PKG, 'test/fixtures/sql-agent.js');

/** Every entry of the journal at `url`, in append order, as this host reads it. */
async function entriesOf(url) {
  const gate = await Interlock.open(url);
  try {
    return gate.gate.entriesInOrder();
  } finally {
    await gate.close();
  }
}

/** `interlock verify --json URL`, which must pass: its report. */
function cliVerify(url) {
  const res = run('--json', 'verify', url);
  assert.equal(res.status, 0, res.stdout + res.stderr);
  return JSON.parse(res.stdout);
}

for (const { backend, skip } of backends) {
  const name = backend?.name ?? 'postgres';

  for (const tier of ['1', '2']) {
    test(`${name}: Node crashes after the send (tier ${tier}); the CLI recovers it; each reads the other's entries`, { skip }, async () => {
      const dir = tempDir();
      try {
        const url = await backend.fresh();
        const file = join(dir, 'payments.json');
        const payments = await Payments.create(file, tier);
        payments.addOrder('order_881', 10_000);
        let gate = await Interlock.open(url);
        await gate.lease('case-4471', { ttlMs: 3_600_000 });
        await gate.close();
        const child = spawn(process.execPath, [AGENT, 'crash', url, file], { stdio: ['ignore', 'pipe', 'inherit'] });
        child.stdout.on('data', (d) => String(d).includes('SENT') && child.kill('SIGKILL'));
        await new Promise((resolve) => child.on('exit', resolve));
        assert.equal(child.signalCode, 'SIGKILL');
        const written = await entriesOf(url);

        // The CLI finishes what Node left: it waits out the claim, then resends or looks up.
        const rec = run('recover', url, '--payments', file);
        assert.equal(rec.status, 0, rec.stdout + rec.stderr);
        assert.match(rec.stdout, /COMMITTED/);
        const effect = rec.stdout.trim().split(/\s+/)[0];
        assert.match(effect, /^[0-9a-f]{32}$/);
        const after = await entriesOf(url);
        assert.deepEqual(after.slice(0, written.length), written, 'the CLI appended after what Node wrote, changing nothing');
        assert.ok(after.length > written.length, 'the CLI recorded its recovery');
        assert.equal(JSON.parse(readFileSync(file, 'utf8')).refunds.length, 1, 'one refund');

        // Node reads what the CLI wrote: the same receipt, a clean verify, nothing open.
        const receipt = run('receipt', url, effect);
        assert.equal(receipt.status, 0, receipt.stderr);
        const agent = await refundAgent(url, file);
        gate = agent.gate;
        assert.deepEqual(gate.receipt(effect), JSON.parse(receipt.stdout));
        assert.equal(gate.receipt(effect).via, tier === '1' ? 'recovery-retry' : 'recovery-query');
        const report = gate.verify();
        assert.deepEqual(report.problems, []);
        const cliReport = cliVerify(url);
        assert.equal(cliReport.streams, report.streams, JSON.stringify(cliReport));
        assert.equal(cliReport.entries, report.entries, JSON.stringify(cliReport));
        assert.deepEqual(gate.openEffects(), []);
        const again = await agent.refund('order_881', 2000);
        assert.equal(again.state, 'COMMITTED');
        assert.equal(again.replayed, true);
        await gate.close();
        assert.equal(JSON.parse(readFileSync(file, 'utf8')).refunds.length, 1);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  test(`${name}: the CLI creates the journal and grants the lease; Node submits under it; the CLI reads Node's entries`, { skip }, async () => {
    const dir = tempDir();
    try {
      const url = await backend.fresh();
      const grant = run('lease', 'grant', url, 'case-4471', '--for', '1h');
      assert.equal(grant.status, 0, grant.stdout + grant.stderr);
      const byCli = await entriesOf(url);
      assert.equal(byCli.length, 1);
      assert.equal(JSON.parse(byCli[0]).stream, 'lease:case-4471');

      const file = join(dir, 'payments.json');
      const payments = await Payments.create(file, '1');
      payments.addOrder('order_881', 10_000);
      const { gate, refund } = await refundAgent(url, file);
      const outcome = await refund('order_881', 2000);
      assert.equal(outcome.state, 'COMMITTED', JSON.stringify(outcome));
      const mine = gate.receipt(outcome.effectId);
      const report = gate.verify();
      await gate.close();
      const all = await entriesOf(url);
      assert.deepEqual(all.slice(0, 1), byCli);

      const receipt = run('receipt', url, outcome.effectId);
      assert.equal(receipt.status, 0, receipt.stderr);
      assert.deepEqual(JSON.parse(receipt.stdout), mine);
      const cliReport = cliVerify(url);
      assert.equal(cliReport.streams, report.streams);
      assert.equal(cliReport.entries, all.length);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
