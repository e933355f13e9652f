// The README's quickstarts for the framework bindings: the lines between the markers are the
// README's snippets, as is. Around them: a payments service (the simulator) whose get_order /
// create_refund / find_refund stand for the developer's own functions, and each framework's
// own test model (scripted: it calls create_refund once, then says "done").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Payments } from '@interlock/gate';
import { scriptedModel as aiModel } from './drivers/ai-sdk.js';
import { scriptedModel as agentsModel } from './drivers/openai-agents.js';
import { ScriptedChatModel } from './drivers/langgraph.js';
// README: ai (begin)
import { generateText, tool, stepCountIs } from 'ai';
import { z } from 'zod';
import { protectTools } from '@interlock/gate/ai';
// README: ai (end)
// README: openai-agents (begin)
import { Agent, run } from '@openai/agents';
import { protectTools as protectAgentTools } from '@interlock/gate/openai-agents';
// README: openai-agents (end)
// README: langchain (begin)
import { tool as lcTool } from '@langchain/core/tools';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { protectTools as protectLangChainTools } from '@interlock/gate/langchain';
// README: langchain (end)

/** A fresh folder, and the service's functions (the developer's own). */
async function place() {
  process.chdir(fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-fw-quickstart-')));
  const payments = await Payments.inMemory('2');
  payments.addOrder('881', 10000);
  const get_order = ({ order_id, excluding }) => ({ refunded_total: payments.premises(order_id, excluding).refunded_by_others_cents });
  const create_refund = ({ order_id, amount_cents, reference }) => payments.refund(order_id, amount_cents, null, reference, Date.now());
  const find_refund = ({ reference }) => ({ found: payments.findByReference(reference) });
  return { payments, get_order, create_refund, find_refund };
}
const REFUND = { order_id: '881', amount_cents: 2000 };
// README: config (begin)
const config = {
  journal_dir: '.interlock/tools',
  tools: { create_refund: {
    key: ['order_id'],
    premises: { tool: 'get_order', arguments: { order_id: 'order_id', excluding: '$effect_id' }, fields: ['refunded_total'] },
    lookup: { tool: 'find_refund', arguments: { reference: '$effect_id' }, found: 'found' },
    idempotency_argument: 'reference',
    authority: { lease: 'case-4471' },
  } },
};
// README: config (end)

test('the README quickstart for the Vercel AI SDK runs as written: one refund, the model told once', async () => {
  const { payments, get_order, create_refund, find_refund } = await place();
  const model = aiModel(REFUND);
  // README: ai (begin)
  const tools = await protectTools({
    create_refund: tool({
      description: 'Refund part of an order',
      inputSchema: z.object({ order_id: z.string(), amount_cents: z.number().int() }),
      execute: create_refund,
    }),
  }, config, { functions: { get_order, find_refund } }); // premise and lookup: not the model's tools
  await tools.gate.grantLease('case-4471', Date.now() + 3_600_000); // a person grants the case's lease
  await tools.recover(); // once, at startup: settles what a crash left open

  const { text, steps } = await generateText({ model, tools, prompt: 'Refund $20 on order 881', stopWhen: stepCountIs(5) });
  // the model saw the component's message; the program gets { ok, message, outcome, result }
  console.log(steps[0].toolResults[0].output.outcome.state); // COMMITTED
  // README: ai (end)
  assert.equal(text, 'done');
  assert.equal(steps[0].toolResults[0].output.ok, true);
  assert.equal(payments.refundCount(), 1);
  tools.close();
});

test('the README quickstart for the OpenAI Agents SDK runs as written: one refund', async () => {
  const { payments, get_order, create_refund, find_refund } = await place();
  const model = agentsModel(REFUND);
  // README: openai-agents (begin)
  const tools = await protectAgentTools([{
    name: 'create_refund',
    description: 'Refund part of an order',
    parameters: z.object({ order_id: z.string(), amount_cents: z.number().int() }),
    execute: create_refund,
  }], config, { functions: { get_order, find_refund } });
  await tools.gate.grantLease('case-4471', Date.now() + 3_600_000);
  await tools.recover();

  const agent = new Agent({ name: 'refunds', instructions: 'Refund what the case approved.', model, tools });
  const result = await run(agent, 'Refund $20 on order 881');
  // README: openai-agents (end)
  assert.equal(result.finalOutput, 'done');
  assert.equal(payments.refundCount(), 1);
  const told = result.newItems.find((i) => i.type === 'tool_call_output_item');
  assert.match(String(/** @type {any} */ (told).output), /^create_refund done; it happened once/);
  tools.close();
});

test('the README quickstart for LangChain.js / LangGraph.js runs as written: one refund, the outcome as the artifact', async () => {
  const { payments, get_order, create_refund, find_refund } = await place();
  const llm = new ScriptedChatModel(REFUND);
  // README: langchain (begin)
  const tools = await protectLangChainTools([
    lcTool(create_refund, {
      name: 'create_refund',
      description: 'Refund part of an order',
      schema: z.object({ order_id: z.string(), amount_cents: z.number().int() }),
    }),
  ], config, { functions: { get_order, find_refund } });
  await tools.gate.grantLease('case-4471', Date.now() + 3_600_000);
  await tools.recover();

  const checkpointer = SqliteSaver.fromConnString('checkpoints.db'); // a resumed thread re-runs its tool node: the gate answers it
  const agent = createReactAgent({ llm, tools, checkpointer });
  const { messages } = await agent.invoke({ messages: [{ role: 'user', content: 'Refund $20 on order 881' }] },
    { configurable: { thread_id: 'case-4471' } });
  // README: langchain (end)
  const toolMessage = messages.find((m) => m.getType() === 'tool');
  assert.match(String(toolMessage.content), /^create_refund done; it happened once/);
  assert.equal(toolMessage.artifact.outcome.state, 'COMMITTED');
  assert.equal(payments.refundCount(), 1);
  tools.close();
});
