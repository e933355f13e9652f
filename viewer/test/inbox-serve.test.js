// The inbox page against `interlock serve` (the CLI from INTERLOCK_CLI: the wasi:http
// component on wasmtime), through `viewer/serve.js --api`, in headless Chromium. The test
// is the agent: it records approval rules and leases over the HTTP API with the server's
// token, and submits refunds through `/submit`, answering the gate's steps from the
// simulated payments service (dist/payments_sim.wasm, the Node host's PaymentsService). The
// page is the person: each decider with their own token (INTERLOCK_DECIDERS).
//   - alice approves a refund in the page; the agent's next submit sends it, once;
//   - a send the network drops is AMBIGUOUS in the page's inbox; "did not happen" with
//     evidence; the agent's retry is replayed; a new request (a new key) is a new item and,
//     approved, goes out once;
//   - bob, whose lease was revoked, is refused in the gate's words; nothing recorded;
//   - the server's token alone decides nothing (403 decider-required, shown).
// Skipped, saying so, without INTERLOCK_CLI (scripts/test.sh sets it; INTERLOCK_REQUIRE_CLI=1
// makes that a failure).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { serve, ROOT } from '../serve.js';
import { launch, act } from './browser.js';
import { Payments } from '../../hosts/node/src/index.js';

const CLI = process.env.INTERLOCK_CLI;
const skip = CLI || process.env.INTERLOCK_REQUIRE_CLI ? undefined : 'INTERLOCK_CLI is not set (the interlock binary)';
const TOKEN = 'server-token-7f3a';
const DECIDERS = { 'alice@shop': 'alice-token-19c2', 'bob@shop': 'bob-token-5d80' };
const JOURNAL = 'shop';
const FAR = Date.now() + 30 * 86_400_000;
const RULES = {
  rules: [{ name: 'over-50', target: 'payments', when: [{ field: '/effect/amount_cents', over: 5_000 }], then: 'person', route: 'finance' }],
  routes: { finance: { primary_approvers: ['alice@shop', 'bob@shop'], justification_required: true } },
};

let api;
let proc;
let disk;
let viewer;
let chrome;
let page;
let service;

/** Starts `interlock serve` on a fresh folder; resolves to its URL. */
function startServe() {
  disk = mkdtempSync(join(tmpdir(), 'interlock-inbox-serve-'));
  proc = spawn(CLI, ['serve', disk, '--listen', '127.0.0.1:0'], {
    env: {
      PATH: process.env.PATH, INTERLOCK_TOKEN: TOKEN, INTERLOCK_DECIDERS: JSON.stringify(DECIDERS),
      INTERLOCK_HTTP_WASM: process.env.INTERLOCK_HTTP_WASM ?? join(ROOT, 'dist/interlock_http.wasm'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  return new Promise((ok, fail) => {
    const look = (d) => {
      out += d;
      const m = /listening on (http:\/\/[^\s]+)/.exec(out);
      if (m) ok(m[1]);
    };
    proc.stdout.on('data', look);
    proc.stderr.on('data', look);
    proc.once('exit', (code) => fail(new Error(`interlock serve exited (${code}): ${out}`)));
  });
}

/** The HTTP API as the agent (or an operator) calls it: { status, json, text }. */
async function call(method, path, body, token = TOKEN) {
  const res = await fetch(`${api}/v1/journals/${JOURNAL}${path}`, {
    method, headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, json, text };
}

/**
 * The agent submits a refund through the gate, performing each step it asks with the
 * payments service; resolves to the outcome.
 */
async function submit(order, cents, { key = `refund:${order}`, drop = false } = {}) {
  const proposal = {
    agent: 'refund-agent', target: { name: 'payments', dedupes: false, lookup: false, timeout_ms: 500 },
    key, effect: { order, amount_cents: cents }, authority: { lease: 'refund-agent' },
    premises: service.premises(order),
  };
  let r = await call('POST', '/submit', proposal);
  for (;;) {
    assert.equal(r.status, 200, r.text);
    const step = r.json;
    if (step.ask === 'done') return step.outcome;
    const q = step.request;
    let reply;
    if (step.ask === 'capture') reply = { reply: 'captured', value: service.premises(q.effect.order, q.effect_id) };
    // `drop`: the network drops the request, the service never sees it: no answer in time.
    else if (step.ask === 'apply' && drop) reply = { reply: 'unknown', value: `no answer within ${proposal.target.timeout_ms} ms` };
    else if (step.ask === 'apply') reply = { reply: 'applied', value: service.refund(q.effect.order, q.effect.amount_cents, q.idempotency_key, q.effect_id, Date.now()) };
    else reply = { reply: 'failed', value: `this agent cannot answer ${step.ask}` };
    r = await call('POST', `/ops/${step.op}`, reply);
  }
}

/** Submits again while the gate says to retry after a while (a send whose fate it does not know yet). */
async function submitUntilSettled(order, cents, options) {
  for (let i = 0; ; i += 1) {
    const o = await submit(order, cents, options);
    if (o.state !== 'DISPATCHED' || o.retry_after_ms === null || i > 20) return o;
    await new Promise((r) => setTimeout(r, o.retry_after_ms));
  }
}

before(async () => {
  if (skip) return;
  api = await startServe();
  viewer = await serve({ port: 0, api });
  service = await Payments.inMemory('3');
  for (const o of ['order_2002', 'order_2003', 'order_2004']) service.addOrder(o, 20_000);
  const rules = await call('PUT', '/approval-rules', RULES);
  assert.ok(rules.status < 300, rules.text);
  for (const lease of ['refund-agent', 'alice@shop', 'bob@shop']) {
    const r = await call('PUT', `/leases/${encodeURIComponent(lease)}`, { expires_at_ms: FAR });
    assert.equal(r.status, 204, r.text);
  }
  chrome = await launch();
  page = chrome.page;
});

after(async () => {
  await chrome?.close();
  viewer?.close();
  proc?.kill();
  if (disk) rmSync(disk, { recursive: true, force: true });
});

/** Opens the inbox of JOURNAL in the page with `token` (and the server's, for receipts). */
async function connect(token) {
  const url = `http://127.0.0.1:${viewer.address().port}/viewer/inbox.html?server&journal=${JOURNAL}`;
  if (page.url() !== url) {
    await page.goto(url);
    await page.waitForFunction(() => window.inbox?.ready === true, null, { timeout: 30_000 });
  }
  await page.fill('#token', token);
  await page.fill('#server-token', TOKEN);
  await page.click('#connect');
  await page.waitForFunction(() => ['ready', 'error'].includes(document.querySelector('#status').dataset.state), null, { timeout: 10_000 });
  const s = await page.$eval('#status', (e) => ({ state: e.dataset.state, text: e.textContent }));
  assert.equal(s.state, 'ready', s.text);
}

const card = (key) => `#items .item[data-key="${key}"]`;

/** Decides through the page's card; { ok } or { ok: false, error, text }. */
async function decide(key, verdict, why) {
  const sel = card(key);
  const item = await page.$eval(sel, (c) => c.dataset.item);
  await page.fill(`${sel} .why`, why);
  return act(page, sel, item, verdict);
}

test('against interlock serve: alice approves in the page, the agent\'s next submit sends it once', { skip }, async () => {
  assert.deepEqual([(await submit('order_2002', 8000)).reason, (await submit('order_2003', 12_000)).reason], ['approval_pending', 'approval_pending']);
  await connect(DECIDERS['alice@shop']);
  const keys = await page.$$eval('#items .item', (l) => l.map((c) => [c.dataset.key, c.dataset.kind, c.dataset.status]));
  assert.deepEqual(keys.sort(), [['refund:order_2002', 'approval', 'pending'], ['refund:order_2003', 'approval', 'pending']]);
  assert.match(await page.$eval(card('refund:order_2002'), (c) => c.querySelector('[data-fact="rule"] dd').textContent), /over-50 → route finance/);
  assert.match(await page.textContent('#rules'), /"primary_approvers"/);
  const ok = await decide('refund:order_2002', 'approve', 'carrier confirmed the loss');
  assert.ok(ok.ok, ok.text);
  const decisions = await page.$$eval(`#decided .item[data-item="${ok.item}"] .decisions li`, (l) => l.map((li) => [li.dataset.decider, li.dataset.verdict]));
  assert.deepEqual(decisions, [['alice@shop', 'approve']], 'the decider recorded is the token\'s owner');
  assert.deepEqual(service.refunds('order_2002'), [], 'nothing is sent by the approval itself');
  const sent = await submit('order_2002', 8000);
  assert.deepEqual([sent.state, sent.executed], ['COMMITTED', 'yes']);
  assert.equal((await submit('order_2002', 8000)).replayed, true);
  assert.equal(service.refunds('order_2002').length, 1);
  // The page shows the receipt (the server token's) with the decision beside it.
  await page.click(`#decided .item[data-item="${ok.item}"] .acts button`);
  await page.waitForSelector(`#receipt .receipt[data-effect="${ok.item}"]`);
  assert.equal(await page.$eval('#receipt .receipt', (r) => r.dataset.final), 'COMMITTED');
  assert.match(await page.textContent('#receipt .r-decisions'), /alice@shop.*approve.*carrier confirmed the loss/s);
  await page.click('#refresh');
  await page.waitForFunction(() => document.querySelector('#count').dataset.count === '1');
  assert.deepEqual(await page.$eval('#scoreboard tr[data-route="finance"]', (r) => [r.dataset.items, r.dataset.pending, r.dataset.approved]), ['2', '1', '1']);
});

test('against interlock serve: a dropped send is AMBIGUOUS in the page; "did not happen"; the retry sends nothing; a new request, once approved, goes out once', { skip }, async () => {
  await connect(DECIDERS['alice@shop']);
  assert.equal((await submit('order_2004', 6500)).reason, 'approval_pending');
  await page.click('#refresh');
  await page.waitForSelector(card('refund:order_2004'));
  assert.ok((await decide('refund:order_2004', 'approve', 'photo of the damage')).ok);
  const lost = await submitUntilSettled('order_2004', 6500, { drop: true });
  assert.deepEqual([lost.state, lost.executed], ['AMBIGUOUS', 'unknown']);
  await page.click('#refresh');
  await page.waitForFunction((s) => document.querySelector(s)?.dataset.kind === 'ambiguous', card('refund:order_2004'));
  assert.deepEqual(await page.$$eval(`${card('refund:order_2004')} .act`, (l) => l.map((b) => b.dataset.verdict)), ['happened', 'did_not_happen']);
  await page.fill(`${card('refund:order_2004')} .evidence`, '{"dashboard": "no refund on order_2004"}');
  const settled = await decide('refund:order_2004', 'did_not_happen', 'not at the service');
  assert.ok(settled.ok, settled.text);
  assert.ok(await page.$(`#decided .item[data-item="${settled.item}"] .resend`), 'the page says how a resend goes');
  const retry = await submit('order_2004', 6500);
  assert.deepEqual([retry.state, retry.replayed], ['AMBIGUOUS', true]);
  assert.deepEqual(service.refunds('order_2004'), []);
  // A new request: a new key, a new item, a new decision.
  assert.equal((await submit('order_2004', 6500, { key: 'refund:order_2004#2' })).reason, 'approval_pending');
  await page.click('#refresh');
  await page.waitForSelector(card('refund:order_2004#2'));
  assert.ok((await decide('refund:order_2004#2', 'approve', 'checked: never paid')).ok);
  assert.equal((await submit('order_2004', 6500, { key: 'refund:order_2004#2' })).state, 'COMMITTED');
  assert.equal(service.refunds('order_2004').length, 1);
});

test('against interlock serve: a decider whose lease is revoked is refused, in the gate\'s words', { skip }, async () => {
  const revoke = await call('DELETE', `/leases/${encodeURIComponent('bob@shop')}`);
  assert.equal(revoke.status, 204, revoke.text);
  await connect(DECIDERS['bob@shop']);
  const refused = await decide('refund:order_2003', 'reject', 'asked twice');
  assert.equal(refused.ok, false);
  assert.match(refused.text, /bob@shop may not decide: their lease is revoked/);
  const inbox = await call('GET', '/inbox');
  assert.deepEqual(inbox.json.map((i) => [i.key, i.status, i.decisions.length]), [['refund:order_2003', 'pending', 0]]);
});

test('against interlock serve: the server token alone decides nothing (403 decider-required)', { skip }, async () => {
  await connect(TOKEN);
  const refused = await decide('refund:order_2003', 'approve', 'as the server');
  assert.equal(refused.ok, false);
  assert.equal(refused.error, 'decider-required');
  const inbox = await call('GET', '/inbox');
  assert.deepEqual(inbox.json.map((i) => [i.key, i.status, i.decisions.length]), [['refund:order_2003', 'pending', 0]]);
  assert.deepEqual(chrome.pageErrors, []);
});
