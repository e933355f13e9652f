// The original product's MCP configuration, as written (issue 23, item 1): it names no
// authority and its premise tool cannot leave the effect out. Through each Node front door,
// protect() under the official `openai` SDK and protectTools under the Vercel AI SDK, the
// OpenAI Agents SDK for JS and LangChain.js (each driven by its own SDK with a scripted
// model, as quickstart.test.js does): the refund commits once under the agent's standing
// lease, granted once in the journal, named in the receipt, announced once on console.warn;
// with { strict: true } each refuses at start at the tool's authority pointer, nothing opened.
// Before commits 5bf9d6b and 76c5c15 every one of these front doors refused this configuration.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Payments, InvalidFieldError, protect } from '@interlock/gate';
import { generateText, tool, stepCountIs } from 'ai';
import { z } from 'zod';
import { protectTools as protectAiTools } from '@interlock/gate/ai';
import { Agent, run } from '@openai/agents';
import { protectTools as protectAgentTools } from '@interlock/gate/openai-agents';
import { tool as lcTool } from '@langchain/core/tools';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { MemorySaver } from '@langchain/langgraph';
import { protectTools as protectLangChainTools } from '@interlock/gate/langchain';
import { scriptedModel as aiModel } from './drivers/ai-sdk.js';
import { scriptedModel as agentsModel } from './drivers/openai-agents.js';
import { ScriptedChatModel } from './drivers/langgraph.js';
import { openaiLoop } from '../fixtures/mcp/agent-loop.js';
import { startScriptedLlm } from '../fixtures/mcp/scripted-llm.js';

// The text, byte for byte: the file a user of the original already has.
const ORIGINAL = `{"journal_dir": ".interlock/mcp",
 "tools": {"create_refund": {
   "key": ["order_id"],
   "premises": {"tool": "get_order", "arguments": {"order_id": "order_id"}, "fields": ["refunded_total"]},
   "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"},
   "idempotency_argument": "reference",
   "dedupes": false}}}`;
const REFUND = { order_id: '881', amount_cents: 2000 };
const STANDING = 'agent-standing'; // the default agent's standing lease

/** A fresh folder as the working directory, and the service's functions (the developer's own). */
async function place() {
  process.chdir(fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-original-config-')));
  const payments = await Payments.inMemory('2');
  payments.addOrder('881', 10000);
  const get_order = ({ order_id, excluding }) => ({ refunded_total: payments.premises(order_id, excluding).refunded_by_others_cents });
  const create_refund = ({ order_id, amount_cents, reference }) => payments.refund(order_id, amount_cents, null, reference, Date.now());
  const find_refund = ({ reference }) => ({ found: payments.findByReference(reference) });
  return { payments, get_order, create_refund, find_refund };
}

/**
 * Runs `body` with console.warn recorded; what it returned and every warning.
 * @template T
 * @param {() => Promise<T>} body
 */
async function warnings(body) {
  /** @type {string[]} */
  const warned = [];
  const warn = console.warn;
  console.warn = (...args) => { warned.push(args.map(String).join(' ')); };
  try {
    return { value: await body(), warned };
  } finally {
    console.warn = warn;
  }
}

/**
 * Each front door: `open(fns, config, options)` gates the developer's functions by `config`
 * (the model sees create_refund; get_order and find_refund are not its tools), `drive(tools)`
 * runs the framework's own loop with a scripted model that calls create_refund once.
 */
const FRONT_DOORS = [
  {
    name: 'protect() (official openai SDK loop)',
    open: (/** @type {any} */ f, /** @type {any} */ config, options = {}) =>
      protect({ get_order: f.get_order, create_refund: f.create_refund, find_refund: f.find_refund }, config, options),
    async drive(/** @type {any} */ tools) {
      const llm = await startScriptedLlm([{ tools: [{ name: 'create_refund', arguments: REFUND }] }, { text: 'done' }]);
      try {
        assert.equal(await openaiLoop(llm.openaiURL, tools), 'done');
        const told = llm.requests.at(-1).body.messages.filter((/** @type {any} */ m) => m.role === 'tool').map((/** @type {any} */ m) => m.content);
        assert.equal(told.length, 1);
        return told[0];
      } finally {
        await llm.close();
      }
    },
  },
  {
    name: 'protectTools, Vercel AI SDK',
    open: (/** @type {any} */ f, /** @type {any} */ config, options = {}) => protectAiTools({
      create_refund: tool({
        description: 'Refund part of an order',
        inputSchema: z.object({ order_id: z.string(), amount_cents: z.number().int() }),
        execute: f.create_refund,
      }),
    }, config, { functions: { get_order: f.get_order, find_refund: f.find_refund }, ...options }),
    async drive(/** @type {any} */ tools) {
      const { text, steps } = await generateText({ model: aiModel(REFUND), tools, prompt: 'Refund $20 on order 881', stopWhen: stepCountIs(5) });
      assert.equal(text, 'done');
      return steps[0].toolResults[0].output.message;
    },
  },
  {
    name: 'protectTools, OpenAI Agents SDK',
    open: (/** @type {any} */ f, /** @type {any} */ config, options = {}) => protectAgentTools([{
      name: 'create_refund',
      description: 'Refund part of an order',
      parameters: z.object({ order_id: z.string(), amount_cents: z.number().int() }),
      execute: f.create_refund,
    }], config, { functions: { get_order: f.get_order, find_refund: f.find_refund }, ...options }),
    async drive(/** @type {any} */ tools) {
      const agent = new Agent({ name: 'refunds', instructions: 'Refund what the case approved.', model: agentsModel(REFUND), tools });
      const result = await run(agent, 'Refund $20 on order 881');
      assert.equal(result.finalOutput, 'done');
      const told = result.newItems.filter((/** @type {any} */ i) => i.type === 'tool_call_output_item');
      assert.equal(told.length, 1);
      return String(/** @type {any} */ (told[0]).output);
    },
  },
  {
    name: 'protectTools, LangChain.js / LangGraph.js',
    open: (/** @type {any} */ f, /** @type {any} */ config, options = {}) => protectLangChainTools([
      lcTool(f.create_refund, {
        name: 'create_refund',
        description: 'Refund part of an order',
        schema: z.object({ order_id: z.string(), amount_cents: z.number().int() }),
      }),
    ], config, { functions: { get_order: f.get_order, find_refund: f.find_refund }, ...options }),
    async drive(/** @type {any} */ tools) {
      const agent = createReactAgent({ llm: new ScriptedChatModel(REFUND), tools, checkpointer: new MemorySaver() });
      const { messages } = await agent.invoke({ messages: [{ role: 'user', content: 'Refund $20 on order 881' }] },
        { configurable: { thread_id: 'case-4471' } });
      const told = messages.filter((/** @type {any} */ m) => m.getType() === 'tool');
      assert.equal(told.length, 1);
      assert.equal(/** @type {any} */ (told[0]).artifact.outcome.state, 'COMMITTED');
      return String(told[0].content);
    },
  },
];

/**
 * Every entry of the journal, parsed, in append order.
 * @param {any} gate
 */
function entries(gate) {
  return gate.entriesInOrder().map((/** @type {string} */ e) => JSON.parse(e));
}

/** The journal's streams, in order of their first entry. */
const streams = (/** @type {any} */ gate) => [...new Set(entries(gate).map((e) => e.stream))];

for (const door of FRONT_DOORS) {
  test(`${door.name}: the original's configuration as written runs under the standing lease: one refund, GRANTED once, named in the receipt, said once`, async () => {
    const f = await place();
    const { value: tools, warned } = await warnings(async () => {
      const t = /** @type {any} */ (await door.open(f, ORIGINAL));
      await t.recover(); // once, at startup
      assert.match(await door.drive(t), /^create_refund done; it happened once/);
      return t;
    });
    try {
      assert.equal(f.payments.refundCount(), 1, 'the service committed the refund once');
      const all = entries(tools.gate);
      const granted = all.filter((e) => e.state === 'GRANTED');
      assert.deepEqual(granted.map((e) => [e.stream, e.lease]), [[`lease:${STANDING}`, STANDING]]);
      const effects = streams(tools.gate).filter((/** @type {string} */ s) => s.startsWith('effect:'));
      assert.equal(effects.length, 1);
      const receipt = tools.gate.receipt(effects[0].slice('effect:'.length));
      assert.equal(receipt.final, 'COMMITTED');
      assert.deepEqual(receipt.proposed.authority, { lease: STANDING });
      assert.equal(receipt.authorized[0].checks.lease.name, STANDING);
      // The gate's notice, once, at start; nothing else was warned.
      assert.deepEqual(warned, [tools.gate.standingNotice('agent')]);
      assert.match(warned[0], new RegExp(`standing lease ${STANDING}`));
      assert.deepEqual(tools.gate.verify().problems, []);
      assert.ok(fs.existsSync('.interlock/mcp'), 'the journal is where the configuration says');
    } finally {
      tools.close();
    }
  });

  test(`${door.name}: { strict: true } refuses the original's configuration at start at /tools/create_refund/authority; nothing opened, nothing said`, async () => {
    const f = await place();
    const { warned } = await warnings(() => assert.rejects(door.open(f, ORIGINAL, { strict: true }),
      (e) => e instanceof InvalidFieldError && /** @type {any} */ (e).payload.field === '/tools/create_refund/authority'));
    assert.equal(fs.existsSync('.interlock'), false, 'no journal folder was created');
    assert.deepEqual(warned, []);
    assert.equal(f.payments.refundCount(), 0);
  });

  test(`${door.name}: protect()'s options reach the gate: agent, journal, authority`, async () => {
    const f = await place();
    // agent and journal: the standing lease is the named agent's, the journal where options say.
    const { value: tools, warned } = await warnings(() => door.open(f, ORIGINAL, { agent: 'support', journal: 'elsewhere' }));
    try {
      assert.deepEqual(warned, [tools.gate.standingNotice('support')]);
      assert.equal(await door.drive(tools).then((m) => /^create_refund done/.test(m)), true);
      const effect = streams(tools.gate).find((/** @type {string} */ s) => s.startsWith('effect:'));
      assert.deepEqual(tools.gate.receipt(effect.slice('effect:'.length)).proposed.authority, { lease: 'support-standing' });
      assert.ok(fs.existsSync('elsewhere') && !fs.existsSync('.interlock'));
    } finally {
      tools.close();
    }
    // authority: a lease the host names is every such tool's, strict or not; nothing announced.
    const g = await place();
    const again = await warnings(() => door.open(g, ORIGINAL, { authority: { lease: 'ops' }, strict: true }));
    try {
      assert.deepEqual(again.warned, []);
      await again.value.gate.grantLease('ops', Date.now() + 60_000);
      assert.equal(await door.drive(again.value).then((m) => /^create_refund done/.test(m)), true);
      assert.equal(g.payments.refundCount(), 1);
      const effect = streams(again.value.gate).find((/** @type {string} */ s) => s.startsWith('effect:'));
      assert.deepEqual(again.value.gate.receipt(effect.slice('effect:'.length)).proposed.authority, { lease: 'ops' });
      assert.deepEqual(entries(again.value.gate).filter((e) => e.state === 'GRANTED').map((e) => e.lease), ['ops']);
    } finally {
      again.value.close();
    }
  });
}
