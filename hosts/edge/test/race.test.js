// Two concurrent requests on one journal: racing one effect, and two effects racing one cap,
// against both servers. A Durable Object runs one event at a time and every gate call (with
// its appends) is synchronous; `interlock serve` holds a journal's instance for each gate
// call alone. So requests interleave only between gate calls (while one awaits its target),
// and there compare-and-append decides each race: one send.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { SERVERS, paymentsServer, api, refund, tempDir, cleanup } from './helpers.js';

const FAR = 4_102_444_800_000;
for (const server of SERVERS) describe(server.name, { skip: server.skip }, () => {
  let disk, pay, w;

  before(async () => {
    disk = tempDir();
    // The refund takes a while, so the second request arrives while the first is in flight.
    pay = await paymentsServer({ applyDelayMs: 300, orders: { order_881: 10000, order_900: 10000, order_901: 10000 } });
    w = await server.start({ disk, env: { INTERLOCK_TARGETS: pay.targets } });
  });
  after(async () => {
    await w?.stop();
    await pay?.close();
    cleanup(disk);
  });

  test('two requests racing one effect: one send', async () => {
    const j = 'race-effect';
    await api(w.url, j, 'PUT', '/leases/case-4471', { expires_at_ms: FAR });
    const before = pay.stats.applies;
    const rs = await Promise.all([api(w.url, j, 'POST', '/effects', refund()), api(w.url, j, 'POST', '/effects', refund())]);
    for (const r of rs) assert.equal(r.status, 200, r.text);
    assert.equal(pay.stats.applies - before, 1, 'one send');
    const states = rs.map((r) => r.json.state).sort();
    assert.ok(states.includes('COMMITTED'), JSON.stringify(rs.map((r) => r.json)));
    const other = rs.find((r) => !(r.json.state === 'COMMITTED' && !r.json.replayed)) ?? rs[1];
    assert.ok(other.json.reason === 'claim_live' || other.json.replayed, JSON.stringify(other.json));
    assert.equal(pay.service.refundedCents('order_881'), 2000);
  });

  test('two effects racing one cap: one send, the other refused cap_exceeded', async () => {
    const j = 'race-cap';
    await api(w.url, j, 'PUT', '/leases/case-4471', { expires_at_ms: FAR });
    const before = pay.stats.applies;
    // Two orders under one budget: neither refund changes the other's premises, so the cap
    // alone decides, however the two requests interleave.
    const cap = { name: 'budget-2026-11', limit_cents: 3000, amount_cents: 2000 };
    const rs = await Promise.all([['cap:a', 'order_900'], ['cap:b', 'order_901']].map(([key, order]) => api(w.url, j, 'POST', '/effects', refund(2000, { key, cap, order }))));
    const outcomes = rs.map((r) => `${r.json.state} ${r.json.reason}`).sort();
    assert.deepEqual(outcomes, ['COMMITTED null', 'REFUSED cap_exceeded'], JSON.stringify(rs.map((r) => r.json)));
    assert.equal(pay.stats.applies - before, 1, 'one send');
    assert.equal(pay.service.refundedCents('order_900') + pay.service.refundedCents('order_901'), 2000);
  });
});
