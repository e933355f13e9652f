// protect() in the tool-calling loops of the official `openai` and `@anthropic-ai/sdk` SDKs,
// against a local server replaying scripted tool calls (test/fixtures/mcp/scripted-llm.js;
// no key, no network). The kills are real: the agent is a child process that SIGKILLs
// itself mid-send, and a new one recovers from the journal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { protect } from '../src/tools.js';
import { Interlock, Payments } from '../src/index.js';
import { startScriptedLlm } from './fixtures/mcp/scripted-llm.js';
import { LOOPS } from './fixtures/mcp/agent-loop.js';
import { paymentsTools, refundConfig, ORDER, LEASE } from './fixtures/mcp/payments-tools.js';

const AGENT = fileURLToPath(new URL('./fixtures/mcp/llm-agent.js', import.meta.url));
const REFUND = { order_id: ORDER, amount_cents: 2000 };
const call = (/** @type {Record<string, unknown>} */ args = REFUND) => ({ tools: [{ name: 'create_refund', arguments: args }] });
const DONE = { text: 'done' };

/** A folder with the payments state (order 881, $100) and a journal holding the lease. */
async function place(tier = '2') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-llm-'));
  const pay = await Payments.create(path.join(dir, 'payments.json'), tier);
  pay.addOrder(ORDER, 10000);
  const gate = await Interlock.open(path.join(dir, 'journal'));
  await gate.lease(LEASE, { ttlMs: 3_600_000 });
  gate.close();
  return {
    dir,
    refunds: async () => (await Payments.open(path.join(dir, 'payments.json'))).refunds(ORDER),
  };
}

/** What the loop handed back to the model as tool results, in order. */
function toolResults(requests) {
  const last = requests.at(-1).body.messages;
  return last.flatMap((m) => (m.role === 'tool' ? [m.content] : Array.isArray(m.content) ? m.content.filter((b) => b.type === 'tool_result').map((b) => b.content) : []));
}

/** Runs the agent process once; its exit and its JSON line. */
function agent(api, llm, dir, tier = '2') {
  const baseURL = api === 'openai' ? llm.openaiURL : llm.anthropicURL;
  const child = spawn(process.execPath, [AGENT, JSON.stringify({ api, baseURL, dir, tier })], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, err, report: out.trim() ? JSON.parse(out) : null })));
}

for (const api of /** @type {const} */ (['openai', 'anthropic'])) {
  const loop = LOOPS[api];
  const url = (llm) => (api === 'openai' ? llm.openaiURL : llm.anthropicURL);

  /** protect() in this process over a fresh place. */
  async function inProcess(tier = '2', extra = {}) {
    const p = await place(tier);
    const { functions } = await paymentsTools(path.join(p.dir, 'payments.json'));
    const tools = await protect(functions, refundConfig(tier, extra, path.join(p.dir, 'journal')), { agent: 'refund-agent' });
    await tools.recover();
    return { ...p, tools };
  }

  test(`${api}: killed mid-send (after the refund applied), restart, recover: one refund, the retry answered from the journal`, async () => {
    const p = await place('2');
    fs.writeFileSync(path.join(p.dir, 'crash'), 'after-apply');
    const llm = await startScriptedLlm([call(), call(), DONE]);
    try {
      const first = await agent(api, llm, p.dir);
      assert.equal(first.signal, 'SIGKILL', first.err);
      const second = await agent(api, llm, p.dir);
      assert.equal(second.code, 0, second.err);
      assert.deepEqual(second.report.recovered.map((r) => r.state), ['COMMITTED']);
      assert.match(second.report.recovered[0].message, /create_refund done; it happened once/);
      assert.match(toolResults(llm.requests)[0], /already done by an earlier identical call/);
      assert.equal(second.report.answer, 'done');
    } finally {
      await llm.close();
    }
    assert.equal((await p.refunds()).length, 1);
  });

  test(`${api}: F8: killed before the send, a hand refund, restart: REFUSED with what changed, $20 total`, async () => {
    const p = await place('2');
    fs.writeFileSync(path.join(p.dir, 'crash'), 'before-apply');
    const llm = await startScriptedLlm([call(), call(), DONE]);
    try {
      const first = await agent(api, llm, p.dir);
      assert.equal(first.signal, 'SIGKILL', first.err);
      (await Payments.open(path.join(p.dir, 'payments.json'))).refundByHand(ORDER, 2000, Date.now());
      const second = await agent(api, llm, p.dir);
      assert.equal(second.code, 0, second.err);
      assert.deepEqual(second.report.recovered.map((r) => [r.state, r.reason]), [['REFUSED', 'premise_changed']]);
      const [retry] = toolResults(llm.requests);
      assert.match(retry, /NOT done .*refunded_total was 0, is now 2000/);
    } finally {
      await llm.close();
    }
    assert.deepEqual((await p.refunds()).map((r) => [r.amount_cents, r.by_hand]), [[2000, true]]);
  });

  test(`${api}: F9: killed before the send, the lease revoked, restart: REFUSED, nothing sent`, async () => {
    const p = await place('2');
    fs.writeFileSync(path.join(p.dir, 'crash'), 'before-apply');
    const llm = await startScriptedLlm([call(), call(), DONE]);
    try {
      assert.equal((await agent(api, llm, p.dir)).signal, 'SIGKILL');
      const gate = await Interlock.open(path.join(p.dir, 'journal'));
      await gate.revokeLease(LEASE);
      gate.close();
      const second = await agent(api, llm, p.dir);
      assert.equal(second.code, 0, second.err);
      assert.deepEqual(second.report.recovered.map((r) => r.reason), ['lease_revoked']);
      assert.match(toolResults(llm.requests)[0], /no longer allowed \(lease_revoked\)/);
    } finally {
      await llm.close();
    }
    assert.equal((await p.refunds()).length, 0);
  });

  test(`${api}: tier 3: killed after the send, restart: AMBIGUOUS said to the model, nothing resent`, async () => {
    const p = await place('3');
    fs.writeFileSync(path.join(p.dir, 'crash'), 'after-apply');
    const llm = await startScriptedLlm([call(), call(), DONE]);
    try {
      assert.equal((await agent(api, llm, p.dir, '3')).signal, 'SIGKILL');
      const second = await agent(api, llm, p.dir, '3');
      assert.equal(second.code, 0, second.err);
      assert.deepEqual(second.report.recovered.map((r) => r.state), ['AMBIGUOUS']);
      assert.match(toolResults(llm.requests)[0], /UNKNOWN whether create_refund happened/);
    } finally {
      await llm.close();
    }
    assert.equal((await p.refunds()).length, 1);
  });

  test(`${api}: F3 and F5: the same call again, then another amount: one refund; the model is told each`, async () => {
    const { tools, refunds } = await inProcess('2');
    const llm = await startScriptedLlm([call(), call(), call({ ...REFUND, amount_cents: 5000 }), { tools: [{ name: 'echo', arguments: { text: 'hi' } }] }, DONE]);
    try {
      assert.equal(await loop(url(llm), tools), 'done');
      const [first, again, other, echo] = toolResults(llm.requests);
      assert.match(first, /create_refund done; it happened once/);
      assert.match(again, /already done by an earlier identical call/);
      assert.match(other, /NOT done .*other arguments/);
      assert.equal(echo, '{"text":"hi"}');
    } finally {
      await llm.close();
      tools.close();
    }
    assert.equal((await refunds()).length, 1);
  });

  test(`${api}: F11: one turn calling two refunds at once under a $30 cap: one lands`, async () => {
    const extra = { key: ['order_id', 'case_id'], cap: { name: `order_${ORDER}`, limit_cents: 3000, amount_argument: 'amount_cents' } };
    const { tools, refunds } = await inProcess('2', extra);
    const both = { tools: ['c1', 'c2'].map((case_id) => ({ name: 'create_refund', arguments: { ...REFUND, case_id } })) };
    const llm = await startScriptedLlm([both, DONE]);
    try {
      await loop(url(llm), tools);
      const results = toolResults(llm.requests);
      assert.equal(results.length, 2);
      assert.equal(results.filter((m) => /happened once/.test(m)).length, 1, results.join('\n'));
      assert.equal(results.filter((m) => /exceed a shared spending cap/.test(m)).length, 1, results.join('\n'));
    } finally {
      await llm.close();
      tools.close();
    }
    assert.equal((await refunds()).length, 1);
  });
}
