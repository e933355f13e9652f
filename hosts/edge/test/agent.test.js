// The Agents SDK example (examples/agent) in workerd, with a scripted model: a local
// OpenAI-compatible chat-completions server that answers with a create_refund tool call
// and then with text. The payments service plays the API. The model asks for the refund
// twice (a retry, as models do): one refund; the second call is the recorded outcome.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { startWorkerd, paymentsServer, tempDir, cleanup, TOKEN } from './helpers.js';

const FAR = 4_102_444_800_000;
let disk, pay, w, model;
/** What the model saw: every tool message of every request. */
const seen = [];

/** Replies by turn: a tool call until it has seen a tool result, then text. */
async function scriptedModel() {
  let calls = 0;
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    const { messages } = JSON.parse(body);
    const last = messages.at(-1);
    let message;
    if (last.role === 'tool') {
      seen.push(last.content);
      message = { role: 'assistant', content: `Done: ${last.content}` };
    } else {
      calls += 1;
      message = {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: `call_${calls}`, type: 'function', function: { name: 'create_refund', arguments: JSON.stringify({ order_id: 'order_881', amount_cents: 2000 }) } }],
      };
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 'x', object: 'chat.completion', model: 'scripted', choices: [{ index: 0, message, finish_reason: message.tool_calls ? 'tool_calls' : 'stop' }] }));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

before(async () => {
  disk = tempDir();
  pay = await paymentsServer();
  model = await scriptedModel();
  w = await startWorkerd({ worker: 'agent', disk, env: { MODEL_URL: model.url, PAYMENTS_URL: pay.base } });
});
after(async () => {
  await w?.stop();
  await pay?.close();
  await model?.close();
  cleanup(disk);
});

const agent = (path, body, token = TOKEN) => fetch(`${w.url}/agents/refund-agent/case-4471${path}`, {
  method: path === '/lease' ? 'PUT' : 'POST',
  headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

test('no token: 401, the agent never runs', async () => {
  const r = await agent('', { message: 'refund $20 on order_881' }, 'wrong');
  assert.equal(r.status, 401);
  assert.equal(pay.stats.applies, 0);
});

/** A lease request with exactly this Authorization header (none for null). */
const withAuthorization = (/** @type {string | null} */ authorization) => fetch(`${w.url}/agents/refund-agent/case-4471/lease`, {
  method: 'PUT',
  headers: { 'content-type': 'application/json', ...(authorization === null ? {} : { authorization }) },
  body: JSON.stringify({ expires_at_ms: FAR }),
});

test('the token rule is the component\'s (http-api.refusal), as the gate\'s Worker and serve apply it', async () => {
  // The scheme in any case, one or more spaces before the token (RFC 9110, 11.1).
  for (const authorization of [`Bearer ${TOKEN}`, `bearer ${TOKEN}`, `BEARER ${TOKEN}`, `Bearer   ${TOKEN}`]) {
    const r = await withAuthorization(authorization);
    assert.equal(r.status, 204, `${authorization}: ${await r.text()}`);
  }
  for (const authorization of [null, '', `Bearer ${TOKEN}x`, `Bearer${TOKEN}`, `Basic ${TOKEN}`, TOKEN, 'Bearer']) {
    const r = await withAuthorization(authorization);
    assert.equal(r.status, 401, String(authorization));
    assert.equal(r.headers.get('www-authenticate'), 'Bearer');
    assert.equal((await r.json()).error.kind, 'unauthorized', 'the component\'s answer');
  }
  assert.equal(pay.stats.applies, 0);
});

test('a Worker with no token set refuses every request (the component\'s rule: never served open)', async () => {
  const open = tempDir();
  const bare = await startWorkerd({ worker: 'agent', disk: open, env: { INTERLOCK_TOKEN: '', MODEL_URL: model.url, PAYMENTS_URL: pay.base } });
  try {
    for (const authorization of [null, 'Bearer ', `Bearer ${TOKEN}`]) {
      const r = await fetch(`${bare.url}/agents/refund-agent/case-4471/lease`, {
        method: 'PUT',
        headers: authorization === null ? {} : { authorization },
        body: JSON.stringify({ expires_at_ms: FAR }),
      });
      assert.equal(r.status, 401, String(authorization));
      assert.equal((await r.json()).error.kind, 'unauthorized');
    }
  } finally {
    await bare.stop();
    cleanup(open);
  }
});

test('a gated refund tool: refunded once, though the model asks twice', async () => {
  assert.equal((await agent('/lease', { expires_at_ms: FAR })).status, 204);
  const first = await (await agent('', { message: 'refund $20 on order_881' })).json();
  assert.equal(first.tools.length, 1, JSON.stringify(first));
  assert.equal(first.tools[0].ok, true, JSON.stringify(first));
  assert.equal(first.tools[0].outcome.state, 'COMMITTED');
  const second = await (await agent('', { message: 'did it go through? refund $20 on order_881 again to be sure' })).json();
  assert.equal(second.tools[0].outcome.replayed, true, JSON.stringify(second));
  assert.equal(pay.service.refundCount(), 1, 'one refund');
  assert.equal(pay.stats.applies, 1, 'one send');
  assert.equal(seen.length, 2);
  assert.match(second.reply, /^Done: /);
});
