// @interlock/gate/stripe: Stripe refunds through the official `stripe` SDK (npm), the
// built-in target `stripe.refund` (guest/core/src/targets/stripe.rs, docs/targets.md).
// Which SDK calls each step makes (the charge and its refunds for the premises,
// refunds.create with the effect id as Idempotency-Key and as metadata, the charge's
// refunds for the lookup) and what every answer or error means is the component's; this
// file makes the call it is told and hands back what came back.
import Stripe from 'stripe';
import { withTimeout } from './interlock.js';

/**
 * @import { Interlock } from './interlock.js'
 * @import { Effect, EffectDefinition } from './types.js'
 * @import { ServiceCall, ServiceAnswer } from '../gen/gate/interfaces/interlock-gate-targets.js'
 * @typedef {Omit<EffectDefinition<StripeRefund>, 'target' | 'params' | 'premises' | 'lookup'> & { target?: string }} StripeRefundsOptions
 * @typedef {{ charge: string, amount_cents: number, reason?: 'duplicate' | 'fraudulent' | 'requested_by_customer', metadata?: Record<string, string> }} StripeRefund
 */

/**
 * stripe-node's HTTP client, except that a connection closed mid-request (ECONNRESET, EPIPE)
 * is reported, never sent again: stripe-node 23 resends such a request once even with
 * `maxNetworkRetries: 0` (RequestSender._shouldRetry: "these codes can also surface after
 * the API processed the request"), which at a service that does not dedupe is a second
 * refund. Every send is the gate's, one attempt in the journal each.
 */
class SendOnce extends Stripe.HttpClient {
  /** @param {any} inner */
  constructor(inner) {
    super();
    this.inner = inner;
  }
  getClientName() {
    return this.inner.getClientName();
  }
  /** @param {any[]} args */
  makeRequest(...args) {
    return this.inner.makeRequest(...args).catch((/** @type {any} */ e) => {
      if (!Stripe.HttpClient.CONNECTION_CLOSED_ERROR_CODES.includes(e?.code)) throw e;
      throw Object.assign(new Error(`the connection closed before an answer (${e.code}): ${e.message}`), { code: 'ERR_CLOSED_NOT_RESENT', cause: e });
    });
  }
}

/**
 * A Stripe client for `stripeRefunds`: `config` as `new Stripe(apiKey, config)` takes it
 * (`host`, `port`, `protocol` for another base URL), with the SDK's own retries off and a
 * closed connection never resent (see SendOnce).
 * @param {string} apiKey
 * @param {Record<string, any>} [config]
 */
export function stripeClient(apiKey, config = {}) {
  const { httpAgent, httpClient, ...rest } = config;
  return new Stripe(apiKey, { ...rest, maxNetworkRetries: 0, httpClient: new SendOnce(httpClient ?? Stripe.createNodeHttpClient(httpAgent)) });
}

/** @param {string} k */
const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/**
 * One `service-call` through the SDK: `stripe[resource][method](id?, params, options)`,
 * its options spelled as stripe-node spells them, giving up after the call's timeout.
 * @param {any} stripe a `Stripe` client
 * @param {ServiceCall} call
 * @returns {Promise<ServiceAnswer>}
 */
export async function perform(stripe, call) {
  const [resource, method] = call.operation.split('.');
  const { id, ...params } = JSON.parse(call.params);
  /** @type {Record<string, unknown>} */
  const options = Object.fromEntries(Object.entries(JSON.parse(call.options)).map(([k, v]) => [camel(k), v]));
  const ms = call.timeoutMs === undefined ? undefined : Number(call.timeoutMs);
  if (ms !== undefined) options.timeout = ms;
  const args = id === undefined ? [params, options] : [id, params, options];
  const made = () => stripe[resource][method](...args);
  try {
    const value = ms === undefined ? await made() : await withTimeout(ms, made);
    return { tag: 'returned', val: JSON.stringify(value) };
  } catch (e) {
    if (!(e instanceof stripe.errors.StripeError)) throw e;
    const err = /** @type {any} */ (e);
    return {
      tag: 'raised',
      val: { errorType: err.rawType ?? err.type, status: err.statusCode ?? undefined, code: err.code ?? undefined, message: err.message },
    };
  }
}

/**
 * Stripe refunds as an effect of `gate`: call it with `{ charge, amount_cents }` (and
 * `reason`, `metadata`). `stripe` is a client made by `stripeClient` (a plain `new Stripe`
 * would resend a request whose connection closed); each request gives up after the
 * effect's timeout. `dedupes: false` declares a stand-in server that ignores
 * idempotency keys (localstripe): the target is then recovered by lookup alone (tier 2).
 * `key`, `lease`, `bounds`, `cap`: a value, or a function of the effect object; `allowed`:
 * your own authority check.
 * @param {Interlock} gate
 * @param {any} stripe
 * @param {StripeRefundsOptions} [options]
 * @returns {Effect<[StripeRefund]>}
 */
export function stripeRefunds(gate, stripe, { target = 'stripe.refund', ...def } = {}) {
  if (!(stripe?.getApiField?.('httpClient') instanceof SendOnce)) {
    throw new TypeError('stripeRefunds: make the client with stripeClient(apiKey, config): stripe-node resends a request whose connection closed, even with maxNetworkRetries 0, and a resend the gate does not know of can be a second refund');
  }
  const definition = /** @type {EffectDefinition<any> & { builtin: string }} */ ({ ...def, target, builtin: 'stripe.refund' });
  return /** @type {any} */ (gate.builtin(definition, (call) => perform(stripe, call)));
}
