// A crash at the edge. The payments service (tier 2: it can be looked up) plays the
// target; when the refund request arrives it first reads the journal from outside (the
// Durable Object's SQLite file with the sqlite3 CLI, or serve's journal.jsonl): DISPATCHED
// must already be there, committed, or the send left before the intent was durable. It then
// applies the refund, SIGKILLs the server and never answers. The server restarts over the
// same storage; recovery finds the effect DISPATCHED, looks it up and closes it COMMITTED:
// one refund.
//
// workerd runs twice: relying on the output gate alone (the runtime holds outgoing fetches
// until the turn's writes are committed), and with INTERLOCK_EXPLICIT_SYNC=1 (the gate's
// loop also awaits ctx.storage.sync() before any step leaves). `interlock serve` once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SERVERS, paymentsServer, api, refund, tempDir, cleanup } from './helpers.js';

const FAR = 4_102_444_800_000;

const RUNS = [
  ...['0', '1'].map((explicit) => ({ server: SERVERS[0], env: { INTERLOCK_EXPLICIT_SYNC: explicit }, what: `explicit sync ${explicit}` })),
  // The file journal fsyncs DISPATCHED before the gate asks for the send.
  { server: SERVERS[1], env: {}, what: 'file journal' },
];

for (const { server, env: extra, what } of RUNS) {
  test(`${server.name} SIGKILLed after DISPATCHED was recorded and the refund request left (${what}): recovery gives one refund`, { skip: server.skip }, async () => {
    const disk = tempDir();
    let w;
    /** @type {string[] | undefined} */
    let seenAtSend;
    const pay = await paymentsServer({
      onApply: async () => {
        seenAtSend = server.states(disk, 'crash');
        await w.kill();
        return 'hang';
      },
    });
    try {
      const env = { INTERLOCK_TARGETS: pay.targets, ...extra };
      w = await server.start({ disk, env });
      assert.equal((await api(w.url, 'crash', 'PUT', '/leases/case-4471', { expires_at_ms: FAR })).status, 204);
      await assert.rejects(api(w.url, 'crash', 'POST', '/effects', refund()), 'the server died mid-request');
      const killed = await w.exited;
      assert.equal(killed.signal, 'SIGKILL');
      assert.deepEqual(seenAtSend, ['GRANTED', 'PROPOSED', 'AUTHORIZED', 'DISPATCHED'], 'the intent was committed before the send left');
      assert.equal(pay.service.refundCount(), 1, 'the refund landed');

      w = await server.start({ disk, env });
      const r = await api(w.url, 'crash', 'POST', '/recover');
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.length, 1);
      const o = r.json[0].outcome;
      assert.equal(o.state, 'COMMITTED', JSON.stringify(o));
      assert.equal(o.executed, 'yes');
      assert.equal(pay.service.refundCount(), 1, 'one refund, not two');
      assert.equal(pay.service.refundedCents('order_881'), 2000);
      const last = JSON.parse((await api(w.url, 'crash', 'GET', '/entries')).text.trim().split('\n').at(-1));
      assert.equal(last.via, 'recovery-query');
      assert.deepEqual((await api(w.url, 'crash', 'POST', '/verify')).json.problems, []);
    } finally {
      await w?.stop();
      await pay.close();
      cleanup(disk);
    }
  });
}
