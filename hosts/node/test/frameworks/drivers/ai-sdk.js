// The Vercel AI SDK (`ai` 7) worker of the framework scenarios: generateText's multi-step
// tool loop with the SDK's own MockLanguageModelV4 (ai/test), scripted: it calls
// create_refund once, then answers "done" once a tool result is in its prompt.
import { generateText, tool, stepCountIs } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { z } from 'zod';
import { protectTools } from '../../../src/frameworks/ai-sdk.js';

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** The scripted model: one call of `create_refund` with `args`, then "done". */
export function scriptedModel(/** @type {Record<string, unknown>} */ args) {
  return new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => (prompt.some((m) => m.role === 'tool')
      ? { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }
      : { content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'create_refund', input: JSON.stringify(args) }], finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] }),
  });
}

/** The developer's AI SDK tools over their own functions. */
export function aiTools(/** @type {Record<string, (a: any) => unknown>} */ f) {
  return {
    get_order: tool({ description: 'An order: what was paid and refunded', inputSchema: z.object({ order_id: z.string(), excluding: z.string().optional() }), execute: f.get_order }),
    create_refund: tool({
      description: 'Refund part of an order',
      inputSchema: z.object({ order_id: z.string(), amount_cents: z.number().int(), case_id: z.string().optional(), reference: z.string().optional() }),
      execute: f.create_refund,
    }),
    find_refund: tool({ description: 'The refund with this reference', inputSchema: z.object({ reference: z.string() }), execute: f.find_refund }),
  };
}

/** @param {{ job: any, functions: any, call: any, options: any }} w */
export async function run({ job, functions, call, options }) {
  const defs = aiTools(functions);
  /** @type {any} */
  let tools = defs;
  let recovered = [];
  if (job.mode === 'with') {
    tools = await protectTools(defs, job.config, options);
    recovered = await tools.recover();
  }
  const r = await generateText({ model: scriptedModel(call), tools, prompt: 'Refund $20 on order 881.', stopWhen: stepCountIs(4) });
  const outputs = r.steps.flatMap((s) => s.toolResults).map((t) => summary(/** @type {any} */ (t).output));
  tools.close?.();
  return { recovered: recovered.map(summary), outputs, answer: r.text };
}

/** What a report keeps of a tool's output (a gated call's ToolOutput, or the service's answer). */
export function summary(/** @type {any} */ o) {
  if (o && typeof o === 'object' && 'message' in o) return { ok: o.ok, state: o.outcome?.state ?? o.state, reason: o.outcome?.reason ?? o.reason ?? null, message: o.message };
  return { result: o };
}
