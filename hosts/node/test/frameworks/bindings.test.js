// The framework bindings on bad input: a bad configuration is the gate's typed error before
// any journal exists; a bad call reaches the model as "NOT done", with nothing recorded or
// sent; a tool that is not a tool is a TypeError. In process, each framework's own tools.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { InvalidFieldError } from '../../src/errors.js';
import { protectTools as protectAi } from '../../src/frameworks/ai-sdk.js';
import { protectTools as protectAgents } from '../../src/frameworks/openai-agents.js';
import { protectTools as protectLangChain } from '../../src/frameworks/langchain.js';
import { paymentsTools, refundConfig, ORDER, LEASE } from '../fixtures/mcp/payments-tools.js';
import { aiTools } from './drivers/ai-sdk.js';
import { agentTools } from './drivers/openai-agents.js';
import { chainTools } from './drivers/langgraph.js';

const BINDINGS = [
  { name: 'ai-sdk', protect: protectAi, make: aiTools, call: (/** @type {any} */ t, /** @type {any} */ a) => t.create_refund.execute(a, {}) },
  { name: 'openai-agents', protect: protectAgents, make: agentTools, call: (/** @type {any} */ t, /** @type {any} */ a) => t.find((/** @type {any} */ x) => x.name === 'create_refund').invoke({}, JSON.stringify(a)) },
  { name: 'langchain', protect: protectLangChain, make: chainTools, call: (/** @type {any} */ t, /** @type {any} */ a) => t.find((/** @type {any} */ x) => x.name === 'create_refund').func(a) },
];

for (const b of BINDINGS) {
  test(`${b.name}: a bad configuration is InvalidFieldError at its pointer; no journal is created`, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-fw-bad-'));
    const { functions } = await paymentsTools(path.join(dir, 'payments.json'));
    const config = refundConfig('2', { key: 'order_id' }, path.join(dir, 'journal'));
    await assert.rejects(b.protect(/** @type {any} */ (b.make(functions)), config, { agent: 'refund-agent' }), (e) => e instanceof InvalidFieldError && /\/tools\/create_refund\/key/.test(e.message));
    assert.equal(fs.existsSync(path.join(dir, 'journal')), false);
  });

  test(`${b.name}: a call missing its key argument is NOT done, nothing recorded or sent`, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-fw-bad-'));
    const { pay, functions } = await paymentsTools(path.join(dir, 'payments.json'));
    const tools = /** @type {any} */ (await b.protect(/** @type {any} */ (b.make(functions)), refundConfig('2', {}, path.join(dir, 'journal')), { agent: 'refund-agent' }));
    try {
      await tools.gate.grantLease(LEASE, Date.now() + 3_600_000);
      const before = tools.gate.entriesInOrder();
      const out = await b.call(tools, { amount_cents: 2000 });
      const text = typeof out === 'string' ? out : Array.isArray(out) ? out[0] : out.message;
      assert.match(String(text), /create_refund was NOT done and nothing was recorded: .*order_id/);
      assert.deepEqual(tools.gate.entriesInOrder(), before);
      assert.equal(pay.refundCount(), 0);
      assert.deepEqual(tools.gated, ['create_refund']);
      assert.equal(pay.refundedCents(ORDER), 0);
    } finally {
      tools.close();
    }
  });
}

test('each binding refuses what is not its framework\'s tools with a TypeError', async () => {
  await assert.rejects(protectAi(/** @type {any} */ (null), {}), TypeError);
  await assert.rejects(protectAi(/** @type {any} */ ({ recover: { execute: () => 1 } }), {}), TypeError);
  await assert.rejects(protectAgents(/** @type {any} */ ({}), {}), TypeError);
  await assert.rejects(protectAgents(/** @type {any} */ ([{ name: 'x' }]), {}), TypeError);
  await assert.rejects(protectLangChain(/** @type {any} */ ({}), {}), TypeError);
  await assert.rejects(protectLangChain(/** @type {any} */ ([{ name: 'x' }]), {}), TypeError);
});
