// The OpenAI Agents SDK for JS (`@openai/agents` 0.20) worker of the framework scenarios:
// the SDK's real run loop (`run(agent, input)`) with a scripted model implementing the SDK's
// Model interface: it calls create_refund once, then answers "done" once a function call
// result is in its input. Tracing is off (it would export to the network).
import { Agent, run as runAgent, setTracingDisabled, Usage } from '@openai/agents';
import { protectTools } from '../../../src/frameworks/openai-agents.js';
import { summary } from './ai-sdk.js';

setTracingDisabled(true);

/** The scripted model: one call of `create_refund` with `args`, then "done". */
export function scriptedModel(/** @type {Record<string, unknown>} */ args) {
  /** @type {import('@openai/agents').Model} */
  const model = {
    async getResponse(request) {
      const input = Array.isArray(request.input) ? request.input : [];
      const answered = input.some((i) => /** @type {any} */ (i).type === 'function_call_result');
      const output = answered
        ? [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }]
        : [{ type: 'function_call', callId: 'call-1', name: 'create_refund', arguments: JSON.stringify(args), status: 'completed' }];
      return { usage: new Usage(), output: /** @type {any} */ (output) };
    },
    // eslint-disable-next-line require-yield
    async *getStreamedResponse() {
      throw new Error('the scripted model does not stream');
    },
  };
  return model;
}

/** The developer's tool definitions over their own functions (what `tool()` takes). */
export function agentTools(/** @type {Record<string, (a: any) => unknown>} */ f) {
  /** A JSON schema object: not strict, so an optional argument stays absent (not null). */
  const params = (/** @type {Record<string, string>} */ props, /** @type {string[]} */ required) => ({
    type: /** @type {const} */ ('object'),
    properties: Object.fromEntries(Object.entries(props).map(([k, type]) => [k, { type }])),
    required,
    additionalProperties: false,
  });
  return [
    { name: 'get_order', description: 'An order: what was paid and refunded', parameters: params({ order_id: 'string', excluding: 'string' }, ['order_id']), strict: false, execute: f.get_order },
    {
      name: 'create_refund',
      description: 'Refund part of an order',
      parameters: params({ order_id: 'string', amount_cents: 'integer', case_id: 'string', reference: 'string' }, ['order_id', 'amount_cents']),
      strict: false,
      execute: f.create_refund,
    },
    { name: 'find_refund', description: 'The refund with this reference', parameters: params({ reference: 'string' }, ['reference']), strict: false, execute: f.find_refund },
  ];
}

/** @param {{ job: any, functions: any, call: any, options: any }} w */
export async function run({ job, functions, call, options }) {
  const defs = agentTools(functions);
  /** @type {any[]} */
  const outputs = [];
  /** @type {any} */
  let tools;
  let recovered = [];
  if (job.mode === 'with') {
    tools = await protectTools(defs, job.config, { ...options, onOutput: (_name, out) => outputs.push(summary(out)) });
    recovered = await tools.recover();
  } else {
    const { tool } = await import('@openai/agents');
    tools = defs.map((d) => tool(/** @type {any} */ ({ ...d, execute: async (/** @type {any} */ a) => { const r = await d.execute(a); outputs.push(summary(r)); return JSON.stringify(r); } })));
  }
  const agent = new Agent({ name: 'refund-agent', instructions: 'Refund what the case approved.', model: scriptedModel(call), tools });
  const r = await runAgent(agent, 'Refund $20 on order 881.');
  tools.close?.();
  return { recovered: recovered.map(summary), outputs, answer: r.finalOutput };
}
