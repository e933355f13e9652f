// The gate over the SQLite and PostgreSQL journals, through this host's own API
// (Interlock.open with a journal URL): a submit is one durable commit; a worker process
// killed (SIGKILL) right after the payments service committed its refund is recovered by
// another, once, by what the target can do; and two worker processes submitting the same
// effects at once on one journal send each effect once (compare-and-append: one wins).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { Interlock, Payments, JournalFailedError, openJournal } from '../src/index.js';
import { refundAgent } from './fixtures/refund-agent.js';
import { sqlite, postgres } from './sql-backends.js';
import { PKG, tempDir } from './helpers.js';

const pg = postgres();
const backends = [{ backend: sqlite, skip: undefined }, { backend: pg.backend, skip: pg.skip }];
const AGENT = join(PKG, 'test/fixtures/sql-agent.js');

/** A new journal at `url` with the refund world: an order paid $100, the lease. */
async function world(url, dir, tier) {
  const file = join(dir, 'payments.json');
  const payments = await Payments.create(file, tier);
  payments.addOrder('order_881', 10_000);
  const gate = await Interlock.open(url);
  await gate.lease('case-4471', { ttlMs: 3_600_000 });
  await gate.close();
  return file;
}

/** Starts `node sql-agent.js ...args`; `{ child, out }` (out resolves to stdout at exit). */
function agent(...args) {
  const child = spawn(process.execPath, [AGENT, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const done = new Promise((resolve, reject) => child.on('exit', (code, signal) =>
    (code === 0 || signal === 'SIGKILL' ? resolve(out) : reject(new Error(`sql-agent ${args[0]} exited ${code}: ${err}`)))));
  return { child, out: done };
}

for (const { backend, skip } of backends) {
  const name = backend?.name ?? 'postgres';

  test(`${name}: a submit that sends is one durable commit`, { skip }, async () => {
    const dir = tempDir();
    try {
      const url = await backend.fresh();
      const file = await world(url, dir, '1');
      const { gate, refund } = await refundAgent(url, file);
      const j = /** @type {any} */ (gate.storage);
      const before = [j.commits, j.durableCommits];
      const outcome = await refund('order_881', 2000);
      assert.equal(outcome.state, 'COMMITTED');
      assert.equal(j.durableCommits - before[1], 1, 'the intent, durable before the send; the rest grouped');
      assert.ok(j.commits - before[0] >= 2, `${j.commits - before[0]} commits`);
      assert.deepEqual(gate.verify().problems, []);
      await gate.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const [tier, state, via] of [['1', 'COMMITTED', 'recovery-retry'], ['2', 'COMMITTED', 'recovery-query'], ['3', 'AMBIGUOUS', undefined]]) {
    test(`${name}: a worker killed after the send (tier ${tier}) is recovered by another: ${state}, one refund`, { skip }, async () => {
      const dir = tempDir();
      try {
        const url = await backend.fresh();
        const file = await world(url, dir, tier);
        // A real process, killed with SIGKILL once the service committed the refund: the
        // reply never reaches its gate.
        const { child, out } = agent('crash', url, file);
        child.stdout.on('data', (d) => String(d).includes('SENT') && child.kill('SIGKILL'));
        await out;
        assert.equal(child.signalCode, 'SIGKILL');
        assert.equal(JSON.parse(readFileSync(file, 'utf8')).refunds.length, 1, 'the service committed before the crash');

        // Another worker: the same effect definition; recovery waits out the claim (1 s).
        const { gate, refund, payments } = await refundAgent(url, file);
        assert.equal(gate.openEffects().length, 1);
        const recovered = await gate.recover();
        assert.equal(recovered.length, 1, JSON.stringify(recovered));
        assert.equal(recovered[0].outcome?.state, state, JSON.stringify(recovered));
        const receipt = gate.receipt(recovered[0].effectId);
        if (via) assert.equal(receipt.via, via);
        if (state === 'COMMITTED') {
          const again = await refund('order_881', 2000);
          assert.equal(again.state, 'COMMITTED');
          assert.equal(again.replayed, true);
        }
        assert.equal(payments.refunds('order_881').length, 1, 'refunded once');
        assert.deepEqual(gate.openEffects(), []);
        assert.deepEqual(gate.verify().problems, []);
        await gate.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  test(`${name}: two worker processes submit the same effects at once; each is sent once`, { skip }, async () => {
    const dir = tempDir();
    try {
      const url = await backend.fresh();
      openJournal(url).close();
      const log = join(dir, 'sends.log');
      const go = join(dir, 'go');
      const n = 12;
      // The target neither dedupes nor can be queried: a second send would be a second payout.
      // One goes through the orders first to last, the other last to first: they meet.
      const racers = [agent('race', url, log, go, String(n)), agent('race', url, log, go, String(-n))];
      await new Promise((r) => setTimeout(r, 400)); // both have opened the journal
      writeFileSync(go, '');
      const outcomes = (await Promise.all(racers.map((r) => r.out))).map((o) => JSON.parse(o));
      const sends = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [];
      const perOrder = new Map();
      for (const line of sends) {
        const order = line.split(' ')[1];
        perOrder.set(order, (perOrder.get(order) ?? 0) + 1);
      }
      assert.equal(perOrder.size, n, `every order paid: ${sends.join('; ')}`);
      for (const [order, count] of perOrder) assert.equal(count, 1, `${order} paid ${count} times`);
      // What each racer saw: COMMITTED (its own send or a replay), or the other's send
      // still in flight (DISPATCHED, claim_live); nothing else.
      for (const state of outcomes.flat()) assert.ok(['COMMITTED', 'DISPATCHED'].includes(state), state);
      const gate = await Interlock.open(url);
      assert.deepEqual(gate.verify().problems, []);
      assert.deepEqual(gate.openEffects(), []);
      await gate.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('postgres: the gate loses the acknowledgement of its intent\'s commit: a journal error, nothing sent; recovery sends once', { skip: pg.skip }, async () => {
  const dir = tempDir();
  try {
    const b = pg.backend;
    const url = await b.fresh();
    const file = await world(url, dir, '1');
    const { gate, refund, payments } = await refundAgent(url, file);
    const restore = await b.loseCommitAcknowledgements();
    try {
      // The first durable commit of the submit is the intent (DISPATCHED), before the send.
      await assert.rejects(refund('order_881', 2000), (e) =>
        e instanceof JournalFailedError && e.payload.tag === 'io' && /was not acknowledged/.test(e.payload.val));
    } finally {
      await restore();
    }
    assert.equal(payments.refunds('order_881').length, 0, 'nothing sent on an intent not known durable');
    // The intent was recorded: recovery waits out its claim and sends, once.
    const recovered = await gate.recover();
    assert.equal(recovered.length, 1, JSON.stringify(recovered));
    assert.equal(recovered[0].outcome?.state, 'COMMITTED', JSON.stringify(recovered));
    assert.equal(payments.refunds('order_881').length, 1);
    assert.equal((await refund('order_881', 2000)).replayed, true);
    assert.equal(payments.refunds('order_881').length, 1);
    assert.deepEqual(gate.verify().problems, []);
    await gate.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
