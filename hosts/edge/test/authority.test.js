// Authority over the HTTP API (issue 23, item 3), against both servers (the Worker in
// workerd and `interlock serve`): a proposal naming no `authority` runs under its agent's
// standing lease (`<agent>-standing`, granted and recorded once, at first use, named in the
// receipt); a server started with INTERLOCK_STRICT_AUTHORITY=1 refuses it (400 invalid-field
// at /authority, nothing recorded, nothing sent); and a misspelled member at any depth is
// refused at its JSON pointer with nothing recorded or sent: `host_chek` once silently dropped
// the host's check.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { SERVERS, paymentsServer, api, refund, tempDir, cleanup } from './helpers.js';

const FAR = 4_102_444_800_000; // 2100-01-01
const STANDING = 'refund-agent-standing'; // refund()'s agent is refund-agent

/** refund() with no authority at all. */
function unnamed(cents = 2000, options = {}) {
  const { authority, ...p } = refund(cents, options);
  return p;
}

/** The journal's entries as the API gives them (`GET .../entries`), parsed. */
async function entries(url, journal) {
  const r = await api(url, journal, 'GET', '/entries');
  assert.equal(r.status, 200, r.text);
  return r.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

for (const server of SERVERS) describe(server.name, { skip: server.skip }, () => {
  let disk, pay, w;

  before(async () => {
    disk = tempDir();
    pay = await paymentsServer();
    w = await server.start({ disk, env: { INTERLOCK_TARGETS: pay.targets } });
  });
  after(async () => {
    await w?.stop();
    await pay?.close();
    cleanup(disk);
  });

  test('a proposal naming no authority commits under the standing lease: GRANTED once, named in the receipt', async () => {
    const j = 'standing';
    const before = pay.stats.applies;
    const r = await api(w.url, j, 'POST', '/effects', unnamed());
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.state, 'COMMITTED', r.text);
    assert.equal(pay.service.refundedCents('order_881'), 2000);
    assert.equal(pay.stats.applies - before, 1, 'sent once');
    const receipt = await api(w.url, j, 'GET', `/effects/${r.json.effect_id}/receipt`);
    assert.equal(receipt.status, 200, receipt.text);
    assert.deepEqual(receipt.json.proposed.authority, { lease: STANDING });
    assert.equal(receipt.json.authorized[0].checks.lease.name, STANDING);
    // A second effect of the same agent, again naming none: the lease is granted only once.
    const second = await api(w.url, j, 'POST', '/effects', unnamed(500, { key: 'refund:order_900', order: 'order_900' }));
    assert.equal(second.json.state, 'COMMITTED', second.text);
    // The caller-performed path takes it the same way (and grants nothing more).
    const step = await api(w.url, j, 'POST', '/submit', { ...unnamed(300, { key: 'stepped:1' }), target: { name: 'mail', dedupes: true, lookup: false } });
    assert.equal(step.status, 200, step.text);
    assert.equal(step.json.ask, 'capture', step.text);
    const all = await entries(w.url, j);
    assert.deepEqual(all.filter((e) => e.state === 'GRANTED').map((e) => [e.stream, e.lease]), [[`lease:${STANDING}`, STANDING]]);
    assert.equal(all.filter((e) => e.state === 'COMMITTED').length, 2);
    assert.deepEqual((await api(w.url, j, 'POST', '/verify', {})).json.problems, []);
  });

  test('a misspelled member at any depth: 400 invalid-field at its pointer, nothing recorded, nothing sent', async () => {
    const j = 'misspelled';
    assert.equal((await api(w.url, j, 'PUT', '/leases/L', { expires_at_ms: FAR })).status, 204);
    const granted = await entries(w.url, j);
    const applies = pay.stats.applies;
    const base = { ...refund(), authority: { lease: 'L' } };
    const cases = [
      // The case: the check the caller asked for would have been dropped without a word.
      [{ ...base, authority: { lease: 'L', host_chek: true } }, '/authority/host_chek'],
      [{ ...base, authority: { leese: 'L' } }, '/authority/leese'],
      [{ ...base, target: { name: 'payments', dedupe: true, lookup: true } }, '/target/dedupe'],
      [{ ...base, target: { name: 'payments', dedupes: false, lookups: true } }, '/target/lookups'],
      [{ ...base, cap: { name: 'order_881', limit: 3000, amount_cents: 2000 } }, '/cap/limit'],
    ];
    for (const [proposal, pointer] of cases) {
      for (const path of ['/effects', '/submit']) {
        const r = await api(w.url, j, 'POST', path, proposal);
        assert.equal(r.status, 400, `${path} ${pointer}: ${r.text}`);
        assert.equal(r.json.error.kind, 'invalid-field', `${path} ${pointer}: ${r.text}`);
        assert.equal(r.json.error.value.field, pointer, `${path}: ${r.text}`);
      }
    }
    assert.deepEqual(await entries(w.url, j), granted, 'nothing recorded (the lease L alone)');
    assert.equal(pay.stats.applies, applies, 'nothing sent');
    // Spelled right, the same proposal commits under L.
    const right = await api(w.url, j, 'POST', '/effects', base);
    assert.equal(right.json.state, 'COMMITTED', right.text);
  });
});

for (const server of SERVERS) describe(`${server.name}, INTERLOCK_STRICT_AUTHORITY=1`, { skip: server.skip }, () => {
  let disk, pay, w;

  before(async () => {
    disk = tempDir();
    pay = await paymentsServer();
    w = await server.start({ disk, env: { INTERLOCK_TARGETS: pay.targets, INTERLOCK_STRICT_AUTHORITY: '1' } });
  });
  after(async () => {
    await w?.stop();
    await pay?.close();
    cleanup(disk);
  });

  test('a proposal naming no authority: 400 invalid-field at /authority, nothing recorded, nothing sent', async () => {
    const j = 'strict';
    for (const path of ['/effects', '/submit']) {
      const r = await api(w.url, j, 'POST', path, unnamed());
      assert.equal(r.status, 400, `${path}: ${r.text}`);
      assert.equal(r.json.error.kind, 'invalid-field', `${path}: ${r.text}`);
      assert.equal(r.json.error.value.field, '/authority', `${path}: ${r.text}`);
      assert.match(r.json.error.message, /strict authority/, r.text);
    }
    assert.deepEqual(await entries(w.url, j), [], 'nothing recorded: no standing lease, no effect');
    assert.equal(pay.stats.applies, 0, 'nothing sent');
    // A named lease is still served.
    assert.equal((await api(w.url, j, 'PUT', '/leases/case-4471', { expires_at_ms: FAR })).status, 204);
    const named = await api(w.url, j, 'POST', '/effects', refund());
    assert.equal(named.json.state, 'COMMITTED', named.text);
    assert.deepEqual((await entries(w.url, j)).filter((e) => e.state === 'GRANTED').map((e) => e.lease), ['case-4471']);
  });
});
