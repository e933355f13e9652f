// An agent loop in the browser: the official openai SDK asks a (scripted) model, and the
// one tool with a real effect, `refund`, goes through the gate, journaled in IndexedDB.
// The send waits until its intent is on disk, so a reload (or a closed tab) mid-send is
// recovered when the page opens again: by lookup, paid once.
import OpenAI from 'openai';
import { protect } from '@interlock/gate/browser';

/** @param {Response} res */
async function json(res) {
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  return res.json();
}

// The developer's own functions: plain fetches to the payments API.
const get_order = async ({ order_id, excluding }) => ({ refunded_total: (await json(await fetch(`/api/orders/${order_id}?excluding=${excluding}`))).refunded_by_others_cents });
const create_refund = async ({ order_id, amount_cents, reference }) => json(await fetch('/api/refunds', {
  method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ order_id, amount_cents, reference }),
}));
const find_refund = async ({ reference }) => json(await fetch(`/api/refunds?reference=${reference}`));

/**
 * Opens the journal (IndexedDB), gates create_refund and recovers what a reload left open.
 * @param {{ timeoutMs?: number }} [options]
 */
export async function start({ timeoutMs = 2000 } = {}) {
  const tools = await protect({ get_order, create_refund, find_refund }, {
    journal_dir: 'browser-agent-journal', // the IndexedDB database
    tools: { create_refund: {
      key: ['order_id'],
      premises: { tool: 'get_order', arguments: { order_id: 'order_id', excluding: '$effect_id' }, fields: ['refunded_total'] },
      lookup: { tool: 'find_refund', arguments: { reference: '$effect_id' }, found: 'found' },
      idempotency_argument: 'reference',
      authority: { lease: 'case-4471' },
      timeout_ms: timeoutMs,
    } },
  });
  await tools.gate.grantLease('case-4471', Date.now() + 3_600_000); // a person grants the case's lease
  const recovered = await tools.recover(); // once, at startup: settles what a reload left open
  const refund = async (order_id, amount_cents) => {
    const out = await tools.create_refund({ order_id, amount_cents });
    return { ...out.outcome, effectId: out.outcome.effect_id, message: out.message };
  };
  return { gate: tools.gate, refund, recovered };
}

const TOOLS = [{
  type: 'function',
  function: {
    name: 'create_refund',
    description: 'Refund part of an order',
    parameters: { type: 'object', properties: { order_id: { type: 'string' }, amount_cents: { type: 'integer' } }, required: ['order_id', 'amount_cents'] },
  },
}];

/**
 * The agent loop: the model asks, the gated tool answers with the gate's outcome. Returns
 * the model's last words and the outcome of every tool call.
 * @param {(order_id: string, amount_cents: number) => Promise<any>} refund
 * @param {(line: string) => void} log
 */
export async function runAgent(refund, log) {
  const client = new OpenAI({ baseURL: `${location.origin}/v1`, apiKey: 'scripted', dangerouslyAllowBrowser: true, maxRetries: 0 });
  /** @type {any[]} */
  const messages = [{ role: 'user', content: 'Case #4471: the customer was approved a $20 partial refund on order 881.' }];
  const outcomes = [];
  for (let turn = 0; turn < 8; turn++) {
    const completion = await client.chat.completions.create({ model: 'scripted', messages, tools: /** @type {any} */ (TOOLS) });
    const msg = completion.choices[0].message;
    messages.push(msg);
    if (!msg.tool_calls?.length) {
      log(`model: ${msg.content}`);
      return { text: msg.content, outcomes };
    }
    for (const call of msg.tool_calls) {
      const args = JSON.parse(call.function.arguments);
      log(`model calls ${call.function.name}(${call.function.arguments})`);
      const out = await refund(args.order_id, args.amount_cents);
      outcomes.push(out);
      const { effectId, state, reason, executed, replayed, result } = out;
      log(`gate: ${state}${reason ? ` (${reason})` : ''}${replayed ? ', replayed' : ''}`);
      messages.push({ role: 'tool', tool_call_id: call.id, content: out.message });
    }
  }
  throw new Error('the model did not finish in 8 turns');
}
