// A slow target holds up nobody else on the same journal, against both servers. One request's
// refund is held at the payments service (answered only when the test lets it go); meanwhile
// another refund the server performs, a submit whose steps the caller performs, a lease and a
// read of the same journal are each answered at once. The held refund is let go only after
// they are answered (or after a few seconds, when the test has already failed), so a server
// that serves a journal's requests one at a time, a slow fetch included, fails here.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { SERVERS, paymentsServer, api, refund, tempDir, cleanup } from './helpers.js';

const FAR = 4_102_444_800_000;
/** How long each other request may take while the slow refund is held, in ms. */
const AT_ONCE_MS = 3000;

/**
 * `p`, or a failure after `ms` saying `what` was held up.
 * @template T
 * @param {Promise<T>} p
 * @param {number} ms
 * @param {string} what
 * @returns {Promise<T>}
 */
function within(p, ms, what) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const late = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms while another request's target was slow`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

for (const server of SERVERS) describe(server.name, { skip: server.skip }, () => {
  let disk, pay, w;
  /** Lets the held refund be answered. */
  let letGo = () => {};
  const held = new Promise((r) => (letGo = r));
  /** @type {(v?: unknown) => void} */
  let arrived = () => {};
  const slowArrived = new Promise((r) => (arrived = r));
  /** Whether the slow refund was still held when each other refund reached the service. */
  const overlapped = [];

  before(async () => {
    disk = tempDir();
    pay = await paymentsServer({
      orders: { order_881: 10000, order_900: 10000 },
      onApply: async ({ order }) => {
        if (order === 'order_881') {
          arrived();
          // The safety net: the test has failed by then; let the server finish.
          await Promise.race([held, new Promise((r) => setTimeout(r, 2 * AT_ONCE_MS))]);
        } else {
          overlapped.push(order);
        }
      },
    });
    w = await server.start({ disk, env: { INTERLOCK_TARGETS: pay.targets } });
  });
  after(async () => {
    letGo();
    await w?.stop();
    await pay?.close();
    cleanup(disk);
  });

  test('a slow target\'s fetch on one request holds up no other request to the same journal', async () => {
    const j = 'slow';
    assert.equal((await api(w.url, j, 'PUT', '/leases/case-4471', { expires_at_ms: FAR })).status, 204);
    // The slow one: its send's timeout well past the hold, so it ends COMMITTED.
    const slow = refund(2000, { key: 'slow:881' });
    slow.target.timeout_ms = 30_000;
    const slowAnswer = api(w.url, j, 'POST', '/effects', slow);
    await within(slowArrived, AT_ONCE_MS, 'the slow refund reaching the service');
    try {
      const fast = await within(api(w.url, j, 'POST', '/effects', refund(1000, { key: 'fast:900', order: 'order_900' })), AT_ONCE_MS, 'a refund the server performs');
      assert.equal(fast.json?.state, 'COMMITTED', fast.text);
      assert.deepEqual(overlapped, ['order_900'], 'the other refund reached the service while the slow one was held');

      // A submit whose steps the caller performs, on the same journal.
      const mail = { ...refund(500, { key: 'mail:1' }), target: { name: 'mail', dedupes: true, lookup: false } };
      let step = (await within(api(w.url, j, 'POST', '/submit', mail), AT_ONCE_MS, 'a caller-performed submit')).json;
      while (step.ask !== 'done') {
        const reply = step.ask === 'capture' ? { reply: 'captured', value: { eligible: true, refunded_by_others_cents: 0 } } : { reply: 'applied', value: { sent: true } };
        step = (await within(api(w.url, j, 'POST', `/ops/${step.op}`, reply), AT_ONCE_MS, `the caller's answer to ${step.ask}`)).json;
      }
      assert.equal(step.outcome.state, 'COMMITTED', JSON.stringify(step));

      const lease = await within(api(w.url, j, 'PUT', '/leases/case-9', { expires_at_ms: FAR }), AT_ONCE_MS, 'a lease grant');
      assert.equal(lease.status, 204, lease.text);
      const entries = await within(api(w.url, j, 'GET', '/entries'), AT_ONCE_MS, 'a read of the journal');
      // The slow refund is in flight: DISPATCHED, not yet COMMITTED, while the others ended.
      const byState = entries.text.trim().split('\n').map((l) => JSON.parse(l).state);
      assert.equal(byState.filter((s) => s === 'COMMITTED').length, 2, entries.text);
      assert.equal(byState.filter((s) => s === 'DISPATCHED').length, 3, entries.text);
    } finally {
      letGo();
    }
    const r = await slowAnswer;
    assert.equal(r.json?.state, 'COMMITTED', r.text);
    assert.equal(pay.service.refundedCents('order_881'), 2000);
    assert.equal(pay.service.refundedCents('order_900'), 1000);
    assert.equal(pay.stats.applies, 2, 'one send each');
  });
});
