// The HTTP API (docs/http-api.yaml), run against both of its servers: the Worker in real
// workerd over a Durable Object journal, and `interlock serve` (the wasi:http component on
// wasmtime) over file journals. A bearer token on every request (401 without it, nothing recorded); bad input is
// a 4xx with the gate's typed error, nothing recorded; the server performs an HTTP target
// (apply with the Idempotency-Key header, lookup, premises), or hands the steps to the caller.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { SERVERS, paymentsServer, api, refund, tempDir, cleanup, TOKEN } from './helpers.js';

for (const server of SERVERS) describe(server.name, { skip: server.skip }, () => {
  let disk, pay, w;
  const FAR = 4_102_444_800_000; // 2100-01-01

  before(async () => {
    disk = tempDir();
    pay = await paymentsServer();
    w = await server.start({ disk, env: { INTERLOCK_TARGETS: pay.targets, INTERLOCK_RECEIPT_KEY: 'receipt-key' } });
  });
  after(async () => {
    await w?.stop();
    await pay?.close();
    cleanup(disk);
  });

  test('no token, a wrong token, another scheme: 401, and nothing is recorded', async () => {
    const j = 'auth';
    for (const token of [null, 'wrong', `${TOKEN}x`, '']) {
      for (const [method, path, body] of [['PUT', '/leases/case-4471', { expires_at_ms: FAR }], ['POST', '/effects', refund()], ['POST', '/submit', refund()], ['GET', '/entries']]) {
        const r = await api(w.url, j, method, path, body, token);
        assert.equal(r.status, 401, `${method} ${path} with ${token}`);
        assert.equal(r.json.error.kind, 'unauthorized');
        assert.equal(r.headers.get('www-authenticate'), 'Bearer');
      }
    }
    const basic = await fetch(`${w.url}/v1/journals/${j}/entries`, { headers: { authorization: `Basic ${btoa(`x:${TOKEN}`)}` } });
    assert.equal(basic.status, 401);
    assert.equal(server.made(disk, j), false, 'a refused request reaches no journal: nothing made on disk');
    assert.equal((await api(w.url, j, 'GET', '/entries')).text, '', 'nothing recorded');
    assert.equal(pay.stats.applies, 0, 'nothing sent');
  });

  test('the scheme is case-insensitive, with one or more spaces before the token (RFC 9110, 11.1)', async () => {
    const j = 'scheme';
    const get = (authorization) => fetch(`${w.url}/v1/journals/${j}/entries`, { headers: { authorization } });
    for (const authorization of [`bearer ${TOKEN}`, `BEARER ${TOKEN}`, `bEaReR ${TOKEN}`, `Bearer   ${TOKEN}`, `bearer  ${TOKEN}`]) {
      const r = await get(authorization);
      assert.equal(r.status, 200, `${authorization}: ${await r.text()}`);
    }
    for (const authorization of [`bearer ${TOKEN}x`, `Bearer${TOKEN}`, `bearers ${TOKEN}`, `Basic ${TOKEN}`, 'bearer', TOKEN]) {
      const r = await get(authorization);
      assert.equal(r.status, 401, authorization);
    }
    const put = await fetch(`${w.url}/v1/journals/${j}/leases/case-4471`, {
      method: 'PUT',
      headers: { authorization: `bearer  ${TOKEN}` },
      body: JSON.stringify({ expires_at_ms: FAR }),
    });
    assert.equal(put.status, 204, await put.text());
  });

  test('a body that is not UTF-8: 400 invalid-body from the component, nothing recorded, nothing sent', async () => {
    const j = 'bytes';
    assert.equal((await api(w.url, j, 'PUT', '/leases/case-4471', { expires_at_ms: FAR })).status, 204);
    const text = JSON.stringify({ ...refund(), agent: 'AGENT' });
    const at = text.indexOf('AGENT');
    const enc = new TextEncoder();
    // The agent is the bytes \xff\xfe, which are not UTF-8: refused, never mended to U+FFFD.
    const body = new Uint8Array([...enc.encode(text.slice(0, at)), 0xff, 0xfe, ...enc.encode(text.slice(at + 'AGENT'.length))]);
    for (const path of ['/effects', '/submit', '/approvals']) {
      const r = await fetch(`${w.url}/v1/journals/${j}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body,
      });
      const answer = await r.text();
      assert.equal(r.status, 400, `${path}: ${answer}`);
      const e = JSON.parse(answer).error;
      assert.equal(e.kind, 'invalid-body', `${path}: ${answer}`);
      assert.match(e.message, /UTF-8/);
    }
    const states = (await api(w.url, j, 'GET', '/entries')).text.trim().split('\n').map((l) => JSON.parse(l).state);
    assert.deepEqual(states, ['GRANTED'], 'nothing recorded');
    assert.equal(pay.stats.applies, 0, 'nothing sent');
  });

  test('bad input: 4xx with the typed gate error, nothing recorded, nothing sent', async () => {
    const j = 'bad';
    const bad = [
      ['POST', '/submit', '{"agent":', 400, 'invalid-json'],
      ['POST', '/effects', '{"agent":', 400, 'invalid-json'],
      ['POST', '/effects', { ...refund(), premise: {} }, 400, 'invalid-field'],
      ['POST', '/effects', { ...refund(), effect: { order: 'order_881', amount_cents: 2 ** 60 } }, 400, 'invalid-field'],
      ['POST', '/effects', { ...refund(), target: { name: 'mail' } }, 422, 'unknown-target'],
      ['POST', '/effects', 'x'.repeat(70 * 1024), 413, 'too-large'],
      ['POST', '/ops/999', { reply: 'applied', value: {} }, 404, 'unknown-operation'],
      ['POST', '/ops/1', { reply: 'maybe' }, 400, 'invalid-field'],
      ['GET', '/effects/0123456789abcdef0123456789abcdef', undefined, 404, 'unknown-effect'],
      ['PUT', '/leases/x', { expires_at_ms: 'soon' }, 400, 'invalid-field'],
      ['POST', '/nothing', {}, 404, 'not-found'],
    ];
    for (const [method, path, body, status, kind] of bad) {
      const r = await api(w.url, j, method, path, body);
      assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
      assert.equal(r.json.error.kind, kind, `${method} ${path}: ${r.text}`);
      assert.equal(typeof r.json.error.message, 'string');
    }
    const field = await api(w.url, j, 'POST', '/effects', { ...refund(), premise: {} });
    assert.deepEqual(Object.keys(field.json.error.value).sort(), ['field', 'problem']);
    assert.equal((await api(w.url, j, 'GET', '/entries')).text, '', 'nothing recorded');
    assert.equal(pay.stats.applies, 0, 'nothing sent');
  });

  test('the server performs an HTTP target: one refund, a receipt, verify, the same request replayed', async () => {
    const j = 'served';
    assert.equal((await api(w.url, j, 'PUT', '/leases/case-4471', { expires_at_ms: FAR })).status, 204);
    const r = await api(w.url, j, 'POST', '/effects', refund());
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.state, 'COMMITTED');
    assert.equal(r.json.result.amount_cents, 2000);
    assert.equal(r.json.result.reference, r.json.effect_id, 'the idempotency key is the effect id');
    const again = await api(w.url, j, 'POST', '/effects', refund());
    assert.equal(again.json.replayed, true);
    assert.equal(pay.service.refundedCents('order_881'), 2000);
    const read = await api(w.url, j, 'GET', `/effects/${r.json.effect_id}`);
    assert.equal(read.json.state, 'COMMITTED');
    const receipt = await api(w.url, j, 'GET', `/effects/${r.json.effect_id}/receipt`);
    assert.equal(receipt.json.final, 'COMMITTED');
    assert.ok(receipt.json.signature, 'signed with the server key');
    const v = await api(w.url, j, 'POST', '/verify', { anchors: [receipt.json] });
    assert.deepEqual(v.json.problems, []);
    const states = (await api(w.url, j, 'GET', '/entries')).text.trim().split('\n').map((l) => JSON.parse(l).state);
    assert.deepEqual(states, ['GRANTED', 'PROPOSED', 'AUTHORIZED', 'DISPATCHED', 'COMMITTED']);
  });

  test('the caller performs the target: submit, then answer each step', async () => {
    const j = 'stepped';
    await api(w.url, j, 'PUT', '/leases/case-4471', { expires_at_ms: FAR });
    const proposal = { ...refund(500), key: 'stepped:1', target: { name: 'mail', dedupes: true, lookup: false } };
    let step = (await api(w.url, j, 'POST', '/submit', proposal)).json;
    const asked = [];
    while (step.ask !== 'done') {
      asked.push(step.ask);
      const reply = step.ask === 'capture'
        ? { reply: 'captured', value: { eligible: true, refunded_by_others_cents: 0 } }
        : { reply: 'applied', value: { sent: step.request.idempotency_key } };
      const r = await api(w.url, j, 'POST', `/ops/${step.op}`, reply);
      assert.equal(r.status, 200, r.text);
      step = r.json;
    }
    assert.deepEqual(asked, ['capture', 'apply']);
    assert.equal(step.outcome.state, 'COMMITTED');
    assert.equal(step.outcome.result.sent, step.outcome.effect_id);
    const stale = await api(w.url, j, 'POST', `/ops/${step.op}`, { reply: 'applied', value: {} });
    assert.equal(stale.status, 404, 'a finished operation is gone');
    // The server reaches no `mail` target: its recovery leaves such an effect to the caller.
    assert.deepEqual((await api(w.url, j, 'POST', '/recover')).json, []);
  });
});
