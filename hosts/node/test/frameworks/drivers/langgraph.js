// The LangGraph.js worker of the framework scenarios: the prebuilt ReAct agent
// (createReactAgent) with LangGraph's SQLite checkpointer (@langchain/langgraph-checkpoint-sqlite)
// and LangChain's fake chat model (FakeChatModel, scripted: it calls create_refund once, then
// answers "done" once a tool result is among its messages). A restarted worker resumes the
// thread from its checkpoint: the tool node runs again.
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { FakeChatModel } from '@langchain/core/utils/testing';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';
import { protectTools } from '../../../src/frameworks/langchain.js';
import { summary } from './ai-sdk.js';

/** LangChain's fake chat model, scripted: one call of `create_refund` with `args`, then "done". */
export class ScriptedChatModel extends FakeChatModel {
  /** @param {Record<string, unknown>} args */
  constructor(args) {
    super({});
    this.args = args;
  }
  bindTools() {
    return this;
  }
  /** @param {import('@langchain/core/messages').BaseMessage[]} messages */
  async _generate(messages) {
    const answered = messages.some((m) => m.getType() === 'tool');
    const message = answered
      ? new AIMessage('done')
      : new AIMessage({ content: '', tool_calls: [{ id: 'call-1', name: 'create_refund', args: this.args, type: 'tool_call' }] });
    return { generations: [{ text: String(message.content), message }] };
  }
}

/** The developer's LangChain tools over their own functions. */
export function chainTools(/** @type {Record<string, (a: any) => unknown>} */ f) {
  const json = (/** @type {(a: any) => unknown} */ fn) => async (/** @type {any} */ a) => JSON.stringify(await fn(a));
  return [
    tool(async (a) => /** @type {any} */ (await f.get_order(a)), { name: 'get_order', description: 'An order: what was paid and refunded', schema: z.object({ order_id: z.string(), excluding: z.string().optional() }) }),
    tool(json(f.create_refund), {
      name: 'create_refund',
      description: 'Refund part of an order',
      schema: z.object({ order_id: z.string(), amount_cents: z.number().int(), case_id: z.string().optional(), reference: z.string().optional() }),
    }),
    tool(async (a) => /** @type {any} */ (await f.find_refund(a)), { name: 'find_refund', description: 'The refund with this reference', schema: z.object({ reference: z.string() }) }),
  ];
}

/** @param {{ job: any, functions: any, call: any, options: any, state: string }} w */
export async function run({ job, functions, call, options, state }) {
  /** @type {any[]} */
  const outputs = [];
  // What a tool answered, as the service or the gate gave it.
  const watched = Object.fromEntries(Object.entries(functions).map(([k, fn]) => [k, async (/** @type {any} */ a) => {
    const r = await /** @type {any} */ (fn)(a);
    if (k === 'create_refund' && job.mode !== 'with') outputs.push(summary(r));
    return r;
  }]));
  let tools = chainTools(watched);
  let recovered = [];
  /** @type {any} */
  let gated;
  if (job.mode === 'with') {
    gated = await protectTools(tools, job.config, options);
    recovered = await gated.recover();
    tools = gated;
  }
  const checkpointer = SqliteSaver.fromConnString(`${state}.db`);
  const agent = createReactAgent({ llm: new ScriptedChatModel(call), tools, checkpointer });
  const config = { configurable: { thread_id: 'case-4471' } };
  const pending = (await agent.getState(config)).next;
  // A thread with a pending step was cut short: resume it from the checkpoint (input null).
  const result = await agent.invoke(pending.length ? null : { messages: [new HumanMessage('Refund $20 on order 881.')] }, config);
  if (job.mode === 'with') {
    for (const m of result.messages) if (m.getType() === 'tool' && m.artifact) outputs.push(summary(m.artifact));
  }
  gated?.close();
  return { recovered: recovered.map(summary), outputs, answer: String(result.messages.at(-1).content), resumed: pending.length > 0 };
}
