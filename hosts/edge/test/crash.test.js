// A crash at the edge. The payments service (tier 2: it can be looked up) plays the
// target; when the refund request arrives it first reads the Durable Object's SQLite file
// from outside (the sqlite3 CLI): DISPATCHED must already be there, committed, or the send
// left before the intent was durable. It then applies the refund, SIGKILLs workerd and
// never answers. workerd restarts over the same storage; recovery finds the effect
// DISPATCHED, looks it up and closes it COMMITTED: one refund.
//
// Run twice: relying on the output gate alone (the runtime holds outgoing fetches until
// the turn's writes are committed), and with INTERLOCK_EXPLICIT_SYNC=1 (the gate's loop
// also awaits ctx.storage.sync() before any step leaves).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startWorkerd, paymentsServer, api, refund, tempDir, cleanup, journalFiles, statesOnDisk } from './helpers.js';

const FAR = 4_102_444_800_000;

for (const explicit of ['0', '1']) {
  test(`workerd SIGKILLed after DISPATCHED was recorded and the refund request left (explicit sync ${explicit}): recovery gives one refund`, async () => {
    const disk = tempDir();
    let w;
    /** @type {string[] | undefined} */
    let seenAtSend;
    const pay = await paymentsServer({
      onApply: async () => {
        seenAtSend = statesOnDisk(journalFiles(disk)[0]);
        await w.kill();
        return 'hang';
      },
    });
    try {
      const env = { INTERLOCK_TARGETS: pay.targets, INTERLOCK_EXPLICIT_SYNC: explicit };
      w = await startWorkerd({ disk, env });
      assert.equal((await api(w.url, 'crash', 'PUT', '/leases/case-4471', { expires_at_ms: FAR })).status, 204);
      await assert.rejects(api(w.url, 'crash', 'POST', '/effects', refund()), 'the Worker died mid-request');
      const killed = await w.exited;
      assert.equal(killed.signal, 'SIGKILL');
      assert.deepEqual(seenAtSend, ['GRANTED', 'PROPOSED', 'AUTHORIZED', 'DISPATCHED'], 'the intent was committed before the send left');
      assert.equal(pay.service.refundCount(), 1, 'the refund landed');

      w = await startWorkerd({ disk, env });
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
