// The gate's HTTP API (docs/http-api.yaml) over one Gate and its journal, for any runtime
// with fetch: the Worker's Durable Object runs it, and a test can run it anywhere. Nothing
// here decides: it parses, calls the gate, and for a configured HTTP target performs the
// step the gate asks for (the table in docs/http-api.yaml), never making a reply up.
import { toOutcome } from '../../node/src/gate.js';
import { GateError, invalidField } from '../../node/src/errors.js';

/**
 * @import { Gate } from '../../node/src/gate.js'
 * @import { Outcome, Reply, Step, Targets } from '../../node/src/types.js'
 * @typedef {{ url: string, method?: string }} Endpoint
 * @typedef {{ apply: Endpoint, lookup?: Endpoint, premises?: Endpoint, check?: Endpoint }} HttpTarget
 * @typedef {{ status: number, body?: unknown, text?: string, headers?: Record<string, string> }} ApiResponse
 */

/** @param {unknown} e */
const message = (e) => String(/** @type {any} */ (e)?.message ?? e);

/** HTTP status of each gate error case (the rest are the server's own). */
const STATUS = {
  'invalid-json': 400,
  'invalid-field': 400,
  'too-large': 413,
  'unknown-effect': 404,
  'unknown-operation': 404,
  'unexpected-reply': 409,
  journal: 503,
  'corrupt-journal': 503,
  contention: 503,
};

/**
 * An error body: `{ error: { kind, message, value } }`.
 * @param {number} status
 * @param {string} kind
 * @param {string} text
 * @param {unknown} [value]
 * @returns {ApiResponse}
 */
export const failure = (status, kind, text, value) => ({ status, body: { error: { kind, message: text, ...(value === undefined ? {} : { value }) } } });

/**
 * The typed gate error as the API's error body; anything else is rethrown (a trap, a bug).
 * @param {unknown} e
 * @returns {ApiResponse}
 */
function gateFailure(e) {
  if (!(e instanceof GateError)) throw e;
  const status = /** @type {Record<string, number>} */ (STATUS)[e.case] ?? 400;
  return failure(status, e.case, e.message, e.payload);
}

/**
 * The outcome as JSON (the journal's spelling: snake_case).
 * @param {Outcome} o
 */
export const outcomeJson = (o) => ({
  effect_id: o.effectId,
  state: o.state,
  reason: o.reason,
  executed: o.executed,
  result: o.result,
  changed: o.changed,
  return_to: o.returnTo,
  replayed: o.replayed,
  retry_after_ms: o.retryAfterMs,
});

/**
 * A step as JSON: the request's members in snake_case, its effect parsed.
 * @param {Step} step
 */
export function stepJson(step) {
  const { ask } = step;
  if (ask.tag === 'done') return { op: Number(step.op), ask: 'done', outcome: outcomeJson(toOutcome(ask.val)) };
  /** @type {any} */
  const v = ask.val;
  /** @type {Record<string, unknown>} */
  const request = { effect_id: v.effectId, target: v.target, effect: JSON.parse(v.effect) };
  if (ask.tag === 'capture') request.names = v.names;
  if (ask.tag === 'authorize') request.agent = v.agent;
  if (ask.tag === 'apply') Object.assign(request, { idempotency_key: v.idempotencyKey, attempt: v.attempt });
  return { op: Number(step.op), ask: ask.tag, request };
}

/**
 * The WIT reply a JSON reply names; InvalidFieldError when it names none.
 * @param {any} body
 * @returns {Reply}
 */
export function replyOf(body) {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalidField('', 'is not an object {"reply": ..., "value": ...}');
  const { reply, value } = body;
  const extra = Object.keys(body).find((k) => k !== 'reply' && k !== 'value');
  if (extra !== undefined) throw invalidField(`/${extra}`, 'is not a member of a reply');
  switch (reply) {
    case 'captured':
    case 'applied':
    case 'found':
      if (value === undefined) throw invalidField('/value', `is required with ${reply} (JSON)`);
      return /** @type {Reply} */ ({ tag: reply, val: JSON.stringify(value) });
    case 'allowed':
      if (typeof value !== 'boolean') throw invalidField('/value', 'is not a boolean');
      return { tag: 'allowed', val: value };
    case 'rejected':
    case 'unknown':
    case 'failed':
      if (typeof value !== 'string') throw invalidField('/value', 'is not a string (the message)');
      return /** @type {Reply} */ ({ tag: reply, val: value });
    case 'not-found':
      if (value !== undefined) throw invalidField('/value', 'is not taken by not-found');
      return { tag: 'not-found' };
    default:
      throw invalidField('/reply', 'is not one of captured, allowed, applied, rejected, unknown, found, not-found, failed');
  }
}

/**
 * `template` with `{effect_id}` and `{member}` (a member of the effect) filled in, URL-encoded.
 * @param {string} template
 * @param {string} effectId
 * @param {Record<string, unknown>} effect
 */
function fill(template, effectId, effect) {
  return template.replace(/\{([A-Za-z0-9_]+)\}/g, (_, name) => {
    const v = name === 'effect_id' ? effectId : effect[name];
    return encodeURIComponent(v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v));
  });
}

/** @param {Response} r */
async function bodyJson(r) {
  const text = await r.text();
  if (text.trim() === '') return 'null';
  JSON.parse(text); // not JSON: the caller's catch answers it
  return text;
}

/**
 * The steps of configured HTTP targets, as docs/http-api.yaml tabulates them.
 * @param {Record<string, HttpTarget>} config
 * @param {Gate} gate
 * @param {typeof fetch} [doFetch]
 * @returns {Targets & { routes: string[] }}
 */
export function httpTargets(config, gate, doFetch = (...a) => fetch(...a)) {
  /** @param {string} name */
  const target = (name) => {
    const t = config[name];
    // The gate asks only for routed targets: anything else is a bug, never a made-up reply.
    if (!t) throw new Error(`the gate asked for target ${JSON.stringify(name)}, which is not configured`);
    return t;
  };
  return {
    routes: Object.keys(config),
    async capture(req) {
      const t = target(req.target);
      if (!t.premises) return { tag: 'failed', val: `target ${req.target} has no premises endpoint configured` };
      try {
        const r = await doFetch(fill(t.premises.url, req.effectId, JSON.parse(req.effect)));
        if (r.status !== 200) return { tag: 'failed', val: `premises: HTTP ${r.status}` };
        return { tag: 'captured', val: await bodyJson(r) };
      } catch (e) {
        return { tag: 'failed', val: `premises: ${message(e)}` };
      }
    },
    async authorize(req) {
      const t = target(req.target);
      if (!t.check) return { tag: 'failed', val: `target ${req.target} has no check endpoint configured` };
      try {
        const r = await doFetch(fill(t.check.url, req.effectId, JSON.parse(req.effect)), {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ effect_id: req.effectId, agent: req.agent, effect: JSON.parse(req.effect) }),
        });
        const answer = r.status === 200 ? await r.json() : undefined;
        if (typeof answer?.allowed !== 'boolean') return { tag: 'failed', val: `check: HTTP ${r.status}, no {"allowed": bool}` };
        return { tag: 'allowed', val: answer.allowed };
      } catch (e) {
        return { tag: 'failed', val: `check: ${message(e)}` };
      }
    },
    async apply(req) {
      const t = target(req.target);
      const effect = JSON.parse(req.effect);
      const timeoutMs = gate.sendTimeoutMs(req.effectId);
      try {
        const r = await doFetch(fill(t.apply.url, req.effectId, effect), {
          method: t.apply.method ?? 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': req.idempotencyKey },
          body: req.effect,
          signal: AbortSignal.timeout(timeoutMs),
        });
        if (r.status >= 200 && r.status < 300) {
          const text = await r.text();
          let val = 'null';
          if (text.trim() !== '') {
            try {
              val = JSON.stringify(JSON.parse(text));
            } catch {
              val = JSON.stringify(text); // the target answered, not in JSON: keep its words
            }
          }
          return { tag: 'applied', val };
        }
        if (r.status >= 400 && r.status < 500) return { tag: 'rejected', val: `HTTP ${r.status}: ${(await r.text()).slice(0, 500)}` };
        return { tag: 'unknown', val: `HTTP ${r.status}` };
      } catch (e) {
        return { tag: 'unknown', val: message(e) };
      }
    },
    async query(req) {
      const t = target(req.target);
      if (!t.lookup) return { tag: 'failed', val: `target ${req.target} has no lookup endpoint configured` };
      try {
        const r = await doFetch(fill(t.lookup.url, req.effectId, JSON.parse(req.effect)));
        if (r.status === 404) return { tag: 'not-found' };
        if (r.status !== 200) return { tag: 'failed', val: `lookup: HTTP ${r.status}` };
        return { tag: 'found', val: await bodyJson(r) };
      } catch (e) {
        return { tag: 'failed', val: `lookup: ${message(e)}` };
      }
    },
  };
}

/**
 * The API over one journal's gate. `route(method, path, body)`: `path` is what follows
 * `/v1/journals/{journal}` (e.g. `/submit`), `body` the request's text.
 */
export class GateApi {
  /**
   * Two instances of the gate over one journal: `gate` performs the configured targets
   * (routes: only those), `stepper` hands steps of any target to the caller (every target
   * routed). Compare-and-append keeps them honest, as for any two workers.
   * @param {Gate} gate
   * @param {Gate} stepper
   * @param {{ bytes(): Uint8Array }} journal
   * @param {{ targets?: Record<string, HttpTarget>, receiptKey?: string, fetch?: typeof fetch }} [options]
   */
  constructor(gate, stepper, journal, { targets = {}, receiptKey, fetch: doFetch } = {}) {
    this.gate = gate;
    this.stepper = stepper;
    this.journal = journal;
    this.config = targets;
    this.receiptKey = receiptKey || undefined;
    this.targets = httpTargets(targets, gate, doFetch);
    // This server performs only the targets it is configured with; another target's open
    // effect stays open for a host that reaches it (the caller, through submit/ops).
    gate.setRoutes(this.targets.routes);
  }

  /**
   * @param {string} method
   * @param {string} path
   * @param {string} text
   * @returns {Promise<ApiResponse>}
   */
  async route(method, path, text) {
    try {
      return await this.#route(method, path, text);
    } catch (e) {
      return gateFailure(e);
    }
  }

  /**
   * @param {string} method
   * @param {string} path
   * @param {string} text
   * @returns {Promise<ApiResponse>}
   */
  async #route(method, path, text) {
    const gate = this.gate;
    const parts = path.split('/').filter((p) => p !== '').map(decodeURIComponent);
    const is = (/** @type {string} */ m, /** @type {(string | null)[]} */ shape) =>
      parts.length === shape.length && shape.every((s, i) => s === null || s === parts[i]) && m === method;
    const json = () => {
      try {
        return JSON.parse(text);
      } catch (e) {
        throw new GateError('invalid-json', message(e), `invalid JSON: ${message(e)}`);
      }
    };
    if (is('POST', ['submit'])) {
      // The caller performs the target: submitStep never asks before it returns.
      const step = this.stepper.submitStep(text);
      await this.stepper.durable();
      return { status: 200, body: stepJson(step) };
    }
    if (parts[0] === 'ops' && parts.length === 2) {
      const op = /^\d{1,15}$/.test(parts[1]) ? BigInt(parts[1]) : undefined;
      if (op === undefined) return failure(404, 'not-found', `no operation ${parts[1]}`);
      if (method === 'DELETE') {
        this.stepper.cancel(op);
        return { status: 204 };
      }
      if (method === 'POST') {
        const step = this.stepper.resume(op, replyOf(json()));
        await this.stepper.durable();
        return { status: 200, body: stepJson(step) };
      }
    }
    if (is('POST', ['effects'])) {
      // Only a readable proposal's target is checked here; the gate judges everything else.
      let name;
      try {
        name = JSON.parse(text)?.target?.name;
      } catch {
        name = undefined;
      }
      if (typeof name === 'string' && !Object.hasOwn(this.config, name)) {
        // Refused before the gate sees it: nothing is recorded for a target nobody here reaches.
        return failure(422, 'unknown-target', `this server performs no target ${JSON.stringify(name)}; configured: ${JSON.stringify(this.targets.routes)}; use POST .../submit to perform it yourself`);
      }
      const outcome = await gate.submit(text, this.targets);
      return { status: 200, body: outcomeJson(outcome) };
    }
    if (parts[0] === 'effects' && parts.length >= 2) {
      const id = parts[1];
      if (is('GET', ['effects', null])) {
        const r = gate.receipt(id);
        return { status: 200, body: { effect_id: id, state: r.final, executed: r.executed, reason: r.reason ?? null, result: r.result ?? null } };
      }
      if (is('GET', ['effects', null, 'receipt'])) {
        return { status: 200, text: gate.receiptText(id, this.receiptKey), headers: { 'content-type': 'application/json' } };
      }
      if (is('POST', ['effects', null, 'recover'])) {
        return { status: 200, body: outcomeJson(await gate.recover(id, this.targets)) };
      }
    }
    if (is('POST', ['recover'])) {
      const all = await gate.recoverAll(this.targets);
      return {
        status: 200,
        body: all.map((r) => r.error
          ? { effect_id: r.effectId, error: gateFailure(r.error).body }
          : { effect_id: r.effectId, outcome: outcomeJson(/** @type {Outcome} */ (r.outcome)) }),
      };
    }
    if (is('POST', ['verify'])) {
      const anchors = text.trim() === '' ? [] : json()?.anchors ?? [];
      if (!Array.isArray(anchors)) throw invalidField('/anchors', 'is not an array of receipts');
      return { status: 200, body: gate.verify(anchors) };
    }
    if (parts[0] === 'leases' && parts.length === 2) {
      if (method === 'PUT') {
        const at = json()?.expires_at_ms;
        if (!Number.isSafeInteger(at) || at < 0) throw invalidField('/expires_at_ms', 'is not a Unix time in ms');
        await gate.grantLease(parts[1], at);
        return { status: 204 };
      }
      if (method === 'DELETE') {
        await gate.revokeLease(parts[1]);
        return { status: 204 };
      }
    }
    if (is('POST', ['approvals'])) {
      await gate.approve(text);
      return { status: 204 };
    }
    if (is('GET', ['entries'])) {
      return { status: 200, text: new TextDecoder().decode(this.journal.bytes()), headers: { 'content-type': 'application/jsonl' } };
    }
    return failure(404, 'not-found', `no route ${method} ${path}`);
  }
}
