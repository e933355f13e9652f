// People in the loop over HTTP (docs/http-api.yaml), against both servers: the inbox and a
// decision in the decider's own name, the scoreboard, a service's webhook authenticated by
// its signature (signed by the `standardwebhooks` library, not by us), and a route's
// notices, delivered to a real receiver that checks them with the same library.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { SERVERS, paymentsServer, api, refund, tempDir, cleanup, startServe } from './helpers.js';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const NOTIFY_SECRET = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';
const FAR = 4102444800000;

/**
 * A receiver of notices: each verified with the Standard Webhooks library, kept.
 * `failFirst`: the first delivery is answered 503 (and not kept).
 */
async function receiver({ failFirst = false } = {}) {
  const got = [];
  let failed = 0;
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    if (failFirst && failed++ === 0) {
      res.writeHead(503).end();
      return;
    }
    try {
      got.push(new Webhook(NOTIFY_SECRET).verify(body, /** @type {any} */ (req.headers)));
      res.writeHead(204).end();
    } catch (e) {
      got.push({ refused: String(e) });
      res.writeHead(400).end();
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${/** @type {any} */ (server.address()).port}/inbox-notices`;
  return { got, url, close: () => new Promise((r) => server.close(r)) };
}

for (const server of SERVERS) describe(server.name, { skip: server.skip }, () => {
  let disk, pay, hooks, w;
  before(async () => {
    disk = tempDir();
    pay = await paymentsServer();
    hooks = await receiver();
    w = await server.start({
      disk,
      env: {
        INTERLOCK_TARGETS: pay.targets,
        INTERLOCK_DECIDERS: JSON.stringify({ 'alice@shop': 'alice-token', 'bob@shop': 'bob-token' }),
        INTERLOCK_WEBHOOK_SECRETS: JSON.stringify({ 'standard-webhooks': SECRET }),
        INTERLOCK_NOTIFY_SECRET: NOTIFY_SECRET,
      },
    });
  });
  after(async () => {
    await w?.stop();
    await pay?.close();
    await hooks?.close();
    cleanup(disk);
  });

  test('a large refund waits in the inbox, is approved by its decider in their own name, then goes out once', async () => {
    const rules = {
      rules: [{ name: 'large', when: [{ field: '/effect/amount_cents', over: 5000 }], then: 'person', route: 'finance' }],
      routes: { finance: { primary_approvers: ['alice@shop'], duration_before_expiry_ms: 86400000, notify_url: hooks.url } },
    };
    assert.equal((await api(w.url, 'shop', 'PUT', '/approval-rules', rules)).status, 200);
    for (const lease of ['case-4471', 'alice@shop', 'bob@shop']) {
      assert.equal((await api(w.url, 'shop', 'PUT', `/leases/${lease}`, { expires_at_ms: FAR })).status, 204);
    }
    const proposal = refund(9000, { key: 'refund:large' });
    const waiting = await api(w.url, 'shop', 'POST', '/effects', proposal);
    assert.equal(waiting.json.reason, 'approval_pending', waiting.text);
    assert.equal(pay.stats.applies, 0);

    const inbox = await api(w.url, 'shop', 'GET', '/inbox', undefined, 'alice-token');
    assert.equal(inbox.status, 200);
    assert.equal(inbox.json.length, 1);
    const item = inbox.json[0].item;

    // The route's notice: signed, checked by the Standard Webhooks library, delivered once.
    const sent = await api(w.url, 'shop', 'POST', '/notices');
    assert.equal(sent.status, 200, sent.text);
    assert.deepEqual(sent.json.map((n) => [n.event, n.delivered]), [['approval.entered', true]]);
    assert.equal(hooks.got.length, 1);
    assert.equal(hooks.got[0].type, 'interlock.approval.entered');
    assert.equal(hooks.got[0].data.item, item);
    assert.deepEqual((await api(w.url, 'shop', 'POST', '/notices')).json, [], 'not twice');

    const path = `/inbox/${item}/decision`;
    const byServer = await api(w.url, 'shop', 'POST', path, { verdict: 'approve' });
    assert.equal(byServer.status, 403);
    assert.equal(byServer.json.error.kind, 'decider-required');
    const asOther = await api(w.url, 'shop', 'POST', path, { verdict: 'approve', decider: 'bob@shop' }, 'alice-token');
    assert.equal(asOther.json.error.kind, 'not-your-name');
    const notOnRoute = await api(w.url, 'shop', 'POST', path, { verdict: 'approve' }, 'bob-token');
    assert.equal(notOnRoute.status, 400);
    assert.match(notOnRoute.json.error.message, /bob@shop is not an approver of route finance/);
    const elsewhere = await api(w.url, 'shop', 'GET', '/entries', undefined, 'alice-token');
    assert.equal(elsewhere.status, 403, 'a decider opens only the inbox, the scoreboard and decisions');

    const approved = await api(w.url, 'shop', 'POST', path, { verdict: 'approve', why: 'order checked' }, 'alice-token');
    assert.equal(approved.status, 200, approved.text);
    assert.deepEqual(approved.json.approved_by, ['alice@shop']);
    const done = await api(w.url, 'shop', 'POST', '/effects', proposal);
    assert.equal(done.json.state, 'COMMITTED', done.text);
    assert.equal(pay.stats.applies, 1);
    const receipt = await api(w.url, 'shop', 'GET', `/effects/${item}/receipt`);
    assert.equal(receipt.json.people.decisions[0].decider, 'alice@shop');
    const board = await api(w.url, 'shop', 'GET', '/scoreboard', undefined, 'bob-token');
    assert.equal(board.json.routes.finance.approved, 1);
    assert.deepEqual((await api(w.url, 'shop', 'GET', '/inbox', undefined, 'alice-token')).json, []);
  });

  test('a webhook is authenticated by its signature (the library signs it), and a bad one records nothing', async () => {
    const entries = async () => (await api(w.url, 'shop', 'GET', '/entries')).text;
    const before = await entries();
    const hook = (body, headers) => fetch(`${w.url}/v1/journals/shop/webhooks/standard-webhooks`, { method: 'POST', headers, body });
    const wh = new Webhook(SECRET);
    const body = JSON.stringify({ type: 'refund.succeeded', data: { interlock_effect_id: '0123456789abcdef0123456789abcdef', status: 'succeeded' } });
    const at = new Date();
    const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': wh.sign('msg_1', at, body) };
    const unknown = await hook(body, headers);
    assert.equal(unknown.status, 400, 'no bearer token needed, but an unknown effect records nothing');
    assert.match((await unknown.json()).error.message, /no effect/);
    const tampered = await hook(body.replace('succeeded', 'failed'), headers);
    assert.equal(tampered.status, 400);
    assert.match((await tampered.json()).error.message, /no signature matches/);
    assert.equal(await entries(), before, 'nothing recorded');
  });
});

describe('interlock serve --notify-every', { skip: SERVERS[1].skip }, () => {
  test('delivers a route\'s notices by itself, each once, and a receiver that fails gets it again', async () => {
    const disk = tempDir();
    const hooks = await receiver({ failFirst: true });
    const url = hooks.url;
    const w = await startServe({ disk, env: { INTERLOCK_NOTIFY_SECRET: NOTIFY_SECRET }, args: ['--notify-every', '1'] });
    try {
      const rules = {
        rules: [{ name: 'large', when: [{ field: '/effect/amount_cents', over: 5000 }], then: 'person', route: 'finance' }],
        routes: { finance: { primary_approvers: ['alice@shop'], notify_url: url } },
      };
      assert.equal((await api(w.url, 'shop', 'PUT', '/approval-rules', rules)).status, 200);
      await api(w.url, 'shop', 'PUT', '/leases/case-4471', { expires_at_ms: FAR });
      const step = await api(w.url, 'shop', 'POST', '/submit', refund(9000, { key: 'refund:notified' }));
      assert.equal(step.json.outcome.reason, 'approval_pending', step.text);
      for (let i = 0; hooks.got.length === 0 && i < 100; i++) await new Promise((r) => setTimeout(r, 100));
      assert.equal(hooks.got.length, 1, 'delivered by the server itself, after one failed try');
      assert.equal(hooks.got[0].type, 'interlock.approval.entered');
      await new Promise((r) => setTimeout(r, 2500));
      assert.equal(hooks.got.length, 1, 'once');
      assert.match(w.log(), /notice \S+\.approval\.entered\.0 \(approval\.entered\) to \S+: not delivered \(503\), due again/);
    } finally {
      await w.stop();
      await hooks.close();
      cleanup(disk);
    }
  });
});
