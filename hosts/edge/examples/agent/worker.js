// A refund agent on Cloudflare's Agents SDK whose tools are gated: the example a Workers
// developer copies. The agent is a Durable Object (the SDK's Agent); its model calls tools;
// create_refund goes through the gate (protect()'s loop, @interlock/gate/core), whose journal
// is the agent's own SQLite storage (DurableObjectSql over ctx.storage.sql, from
// @interlock/gate/workerd), beside the SDK's tables.
// So a refund is proposed, checked against fresh premises, recorded durably before it is
// sent, sent once under an idempotency key, and recovered after a crash by looking it up.
//
//   POST /agents/refund-agent/<case>   {"message": "..."}  ->  {"reply", "tools": [...]}
//
// The model is any OpenAI-compatible chat-completions endpoint (MODEL_URL); the payments
// API is PAYMENTS_URL. The tool mapping (key, premises, lookup, idempotency argument) is
// the gate's rule, given here as configuration only.
import { Agent, routeAgentRequest } from 'agents';
import { gateComponent, DurableObjectSql } from '@interlock/gate/workerd';
import { protectWith, Rejected } from '@interlock/gate/core';
import { front, toResponse } from '../../src/api.js';

/** Which tools are effects, and how a call becomes one (ARCHITECTURE.md, "Tool gating"). */
const GATING = {
  tools: {
    create_refund: {
      key: ['order_id'],
      premises: { tool: 'get_order', arguments: { order_id: 'order_id', excluding: '$effect_id' }, fields: ['eligible', 'refunded_by_others_cents'] },
      lookup: { tool: 'find_refund', arguments: { reference: '$effect_id' }, found: 'found' },
      idempotency_argument: 'reference',
      dedupes: false,
      timeout_ms: 5000,
    },
  },
};

/** What the model is told it can call. */
const TOOL_SPECS = [
  {
    type: 'function',
    function: {
      name: 'create_refund',
      description: 'Refund part of an order.',
      parameters: { type: 'object', properties: { order_id: { type: 'string' }, amount_cents: { type: 'integer' } }, required: ['order_id', 'amount_cents'] },
    },
  },
  {
    type: 'function',
    function: { name: 'get_order', description: 'Read an order.', parameters: { type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'] } },
  },
];

/**
 * The agent's tool functions: plain calls of the payments API.
 * @param {string} base the payments API
 */
function paymentsTools(base) {
  return {
    async get_order({ order_id, excluding }) {
      const q = excluding ? `?excluding=${encodeURIComponent(excluding)}` : '';
      const r = await fetch(`${base}/orders/${encodeURIComponent(order_id)}/premises${q}`);
      if (!r.ok) throw new Error(`get_order: HTTP ${r.status}`);
      return r.json();
    },
    async create_refund({ order_id, amount_cents, reference }) {
      const r = await fetch(`${base}/refunds`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': reference },
        body: JSON.stringify({ order: order_id, amount_cents }),
      });
      // The API's own refusal: nothing was refunded. Anything else may have landed.
      if (r.status >= 400 && r.status < 500) throw new Rejected(`create_refund: HTTP ${r.status}: ${await r.text()}`);
      if (!r.ok) throw new Error(`create_refund: HTTP ${r.status}`);
      return r.json();
    },
    async find_refund({ reference }) {
      const r = await fetch(`${base}/refunds?reference=${encodeURIComponent(reference)}`);
      if (r.status === 404) return { found: false };
      if (!r.ok) throw new Error(`find_refund: HTTP ${r.status}`);
      return { found: true, refund: await r.json() };
    },
  };
}

export class RefundAgent extends Agent {
  /** @type {Promise<any> | undefined} the gated tools, once per object */
  #tools;

  tools() {
    this.#tools ??= (async () => {
      const journal = new DurableObjectSql(this.ctx.storage, `agent ${this.name}`);
      // protect()'s loop with this Worker's parts: the gate from the Worker's modules, the
      // journal the Durable Object's storage (passed as it is).
      const host = { gateComponent: async () => gateComponent(), openJournal: (/** @type {any} */ j) => j };
      const tools = await protectWith(host, paymentsTools(this.env.PAYMENTS_URL), GATING, {
        journal,
        agent: 'refund-agent',
        authority: { lease: this.name }, // the case this agent works on
      });
      // A send cut off by a crash is settled before anything new: looked up, never resent blind.
      await tools.recover();
      return tools;
    })();
    return this.#tools;
  }

  /** @param {Request} request */
  async onRequest(request) {
    const tools = await this.tools();
    const url = new URL(request.url);
    if (request.method === 'PUT' && url.pathname.endsWith('/lease')) {
      // A person grants this case's lease: the authority the agent acts under.
      const { expires_at_ms } = await request.json();
      await tools.gate.grantLease(this.name, expires_at_ms);
      return new Response(null, { status: 204 });
    }
    const { message } = await request.json();
    const messages = [
      { role: 'system', content: `You handle refund case ${this.name}.` },
      { role: 'user', content: message },
    ];
    const log = [];
    for (let turn = 0; turn < 8; turn++) {
      const r = await fetch(`${this.env.MODEL_URL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'scripted', messages, tools: TOOL_SPECS }),
      });
      const choice = (await r.json()).choices[0].message;
      messages.push(choice);
      if (!choice.tool_calls?.length) return Response.json({ reply: choice.content, tools: log });
      for (const call of choice.tool_calls) {
        const fn = tools[call.function.name];
        const args = JSON.parse(call.function.arguments);
        // A gated tool answers { ok, message, outcome, result }: the message is the model's.
        const out = fn ? await fn(args) : { ok: false, message: `no tool ${call.function.name}` };
        const content = tools.gated.includes(call.function.name) ? out.message : JSON.stringify(out);
        log.push({ tool: call.function.name, args, ok: out.ok ?? true, outcome: out.outcome ?? null, content });
        messages.push({ role: 'tool', tool_call_id: call.id, content });
      }
    }
    return Response.json({ reply: null, tools: log, error: 'too many turns' }, { status: 500 });
  }
}

/** @type {Promise<import('../../src/api.js').HttpApi> | undefined} the component's http-api, for its token rule only */
let tokenRule;

export default {
  async fetch(request, env) {
    // The same front as the gate's Worker: nothing reaches an agent without the token, by the
    // component's rule (`http-api.refusal`: the Bearer scheme in any case, one or more spaces,
    // the token compared by the gate), never a second copy of it here.
    // The component's http-api configured with this Worker's token alone (none set: it
    // refuses every request; a token it cannot take: it answers 500, saying why).
    tokenRule ??= front(env, ['INTERLOCK_TOKEN']);
    const refused = (await tokenRule).refusal(new URL(request.url).pathname, request.headers.get('authorization') ?? undefined);
    if (refused) return toResponse(refused);
    return (await routeAgentRequest(request, env)) ?? Response.json({ error: { kind: 'not-found', message: 'no agent here' } }, { status: 404 });
  },
};
