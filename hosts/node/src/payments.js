// The simulated payments service (dist/payments_sim.wasm, adapters/payments-sim): the same
// Rust tier rules every host runs, never re-implemented here. This wrapper only converts
// values and keeps the state: after every successful mutation it hands `snapshot()` to
// `persist` before returning (Node: payments.json written durably, the Rust crate's format).
import { InterlockError } from './errors.js';

/**
 * @import { Clock, Refund, PaymentsPremises, Targets, AuthorizeRequest } from './types.js'
 * @import { Root as PaymentsRoot } from '../gen/payments/payments_sim.js'
 * @import { GateComponent } from './gate.js'
 * @typedef {PaymentsRoot['service']} ServiceApi
 */

/** The service refused a call (WIT `service-error`); `case` and `payload` as in the WIT. */
export class ServiceError extends InterlockError {
  /**
   * @param {string} kase
   * @param {any} payload
   */
  constructor(kase, payload) {
    super(describe(kase, payload));
    this.case = kase;
    this.payload = payload;
  }
}

// The Rust crate's Display texts, so a rejected send records the same words in any host.
/**
 * @param {string} kase
 * @param {any} v
 */
function describe(kase, v) {
  switch (kase) {
    case 'unknown-order': return `unknown order ${v}`;
    case 'exceeds-balance':
      return `refund of ${v.requestedCents} cents on order ${v.order} exceeds the remaining ${v.remainingCents} cents`;
    case 'idempotency-mismatch': return `idempotency key ${v} was already used with other parameters`;
    case 'lookup-unsupported': return 'this payments service offers no lookup by reference';
    case 'bad-tier': return `bad tier ${JSON.stringify(v)} (expected 1, 2, 3 or 1+lookup)`;
    case 'corrupt': return `corrupt payments state: ${v}`;
    case 'invalid-json': return `payments state is not JSON: ${v}`;
    default: return `${kase}: ${JSON.stringify(v)}`;
  }
}

/**
 * @template T
 * @param {() => T} fn
 * @returns {T}
 */
function call(fn) {
  try {
    return fn();
  } catch (e) {
    const { payload } = /** @type {any} */ (e) ?? {};
    if (e instanceof Error && Object.hasOwn(e, 'payload') && typeof payload?.tag === 'string') {
      throw new ServiceError(payload.tag, payload.val);
    }
    throw e;
  }
}

/**
 * @param {string} text
 * @returns {Refund}
 */
function parseRefund(text) {
  return JSON.parse(text);
}

export class PaymentsService {
  /**
   * `component`: a GateComponent-like loader of gen/payments ({ instantiate, getCoreModule }).
   * `persist(snapshotText)`: called after every successful mutation, before it returns.
   * @param {GateComponent<PaymentsRoot>} component
   */
  static async #instance(component) {
    const root = await component.instantiate(component.getCoreModule, {});
    return root.service;
  }

  /**
   * A new, empty service of `tier` ("1", "2", "3" or "1+lookup").
   * @param {GateComponent<PaymentsRoot>} component
   * @param {string} tier
   * @param {{ persist?: (snapshot: string) => void }} [options]
   */
  static async create(component, tier, { persist } = {}) {
    const s = new PaymentsService(await PaymentsService.#instance(component), persist);
    s.#mutate(() => s.api.create(tier));
    return s;
  }

  /**
   * The service a snapshot describes (text of payments.json, from any host).
   * @param {GateComponent<PaymentsRoot>} component
   * @param {string} state
   * @param {{ persist?: (snapshot: string) => void }} [options]
   */
  static async restore(component, state, { persist } = {}) {
    const s = new PaymentsService(await PaymentsService.#instance(component), persist);
    call(() => s.api.restore(state));
    return s;
  }

  /**
   * Use PaymentsService.create or restore.
   * @param {ServiceApi} api
   * @param {((snapshot: string) => void) | undefined} persist
   */
  constructor(api, persist) {
    /** The component's exports (jco). */
    this.api = api;
    this.persist = persist ?? (() => {});
  }

  /**
   * @template T
   * @param {() => T} fn
   * @returns {T}
   */
  #mutate(fn) {
    const r = call(fn);
    this.persist(this.api.snapshot());
    return r;
  }

  snapshot() {
    return this.api.snapshot();
  }
  tier() {
    return this.api.tier();
  }
  /**
   * @param {string} order
   * @param {number} paidCents
   */
  addOrder(order, paidCents) {
    this.#mutate(() => this.api.addOrder(order, BigInt(paidCents)));
  }
  /**
   * @param {string} order
   * @param {boolean} eligible
   */
  setEligible(order, eligible) {
    this.#mutate(() => this.api.setEligible(order, eligible));
  }
  /**
   * Refunds through the API; returns the refund object.
   * @param {string} order
   * @param {number} amountCents
   * @param {string | null | undefined} idempotencyKey
   * @param {string | null | undefined} reference
   * @param {number} nowMs
   */
  refund(order, amountCents, idempotencyKey, reference, nowMs) {
    return parseRefund(this.#mutate(() => this.api.refund(order, BigInt(amountCents), idempotencyKey ?? undefined, reference ?? undefined, BigInt(nowMs))));
  }
  /**
   * A refund made by a person in the dashboard, not through the API.
   * @param {string} order
   * @param {number} amountCents
   * @param {number} nowMs
   */
  refundByHand(order, amountCents, nowMs) {
    return parseRefund(this.#mutate(() => this.api.refundByHand(order, BigInt(amountCents), BigInt(nowMs))));
  }
  /**
   * The refund carrying `reference`, or null. ServiceError lookup-unsupported on tiers 1 and 3.
   * @param {string} reference
   * @returns {Refund | null}
   */
  findByReference(reference) {
    const r = call(() => this.api.findByReference(reference));
    return r === undefined ? null : parseRefund(r);
  }
  /**
   * @param {string} order
   * @param {string | null} [excludingReference]
   * @returns {PaymentsPremises}
   */
  premises(order, excludingReference) {
    return JSON.parse(call(() => this.api.premises(order, excludingReference ?? undefined)));
  }
  /** @param {string} order */
  refundedCents(order) {
    return Number(this.api.refundedCents(order));
  }
  refundCount() {
    return Number(this.api.refundCount());
  }
  /**
   * The refunds of `order` (from the snapshot).
   * @param {string} order
   * @returns {Refund[]}
   */
  refunds(order) {
    return JSON.parse(this.snapshot()).refunds.filter((/** @type {Refund} */ r) => r.order === order);
  }
}

/** The target name of paymentsTarget in proposals. */
export const PAYMENTS = 'payments';

/**
 * The payments service as a low-level target (the port of hosts/cli/src/targets.rs): it
 * translates steps to service calls and never decides. The effect JSON is
 * `{"order": "order_881", "amount_cents": 2000}`. Without `authorizer` a host check
 * cannot be made (answered failed: the effect stays open).
 * @param {PaymentsService} service
 * @param {Clock} clock
 * @param {{ authorizer?: (req: AuthorizeRequest) => unknown }} [options]
 * @returns {Targets & { routes: string[] }}
 */
export function paymentsTarget(service, clock, { authorizer } = {}) {
  // The gate asks only for the targets in `routes`: another one is a host bug, never
  // answered with a made-up reply (it would close an effect whose send may have landed).
  /** @param {string} target */
  const reach = (target) => {
    if (target !== PAYMENTS) throw new Error(`the gate asked for target ${JSON.stringify(target)}; this target routes only "payments"`);
  };
  /**
   * @param {string} effect
   * @returns {{ order: string, amount_cents: number }}
   */
  const parseEffect = (effect) => {
    let v;
    try {
      v = JSON.parse(effect);
    } catch (e) {
      throw `effect is not JSON: ${/** @type {Error} */ (e).message}`;
    }
    if (typeof v?.order !== 'string' || !Number.isSafeInteger(v?.amount_cents) || v.amount_cents < 0) {
      throw `effect must be {"order": string, "amount_cents": integer}, got ${effect}`;
    }
    return v;
  };
  // Sorted keys, as serde_json writes them in the Rust host.
  /** @param {Refund} r */
  const refundJson = (r) => JSON.stringify({ amount_cents: r.amount_cents, refund_id: r.id });
  return {
    routes: [PAYMENTS],
    capture(req) {
      reach(req.target);
      let effect;
      try {
        effect = parseEffect(req.effect);
      } catch (m) {
        return { tag: 'failed', val: String(m) };
      }
      let all;
      try {
        // The effect's own refund (reference = effect id) never counts against it.
        all = service.premises(effect.order, req.effectId);
      } catch (e) {
        if (e instanceof ServiceError) return { tag: 'failed', val: e.message };
        throw e;
      }
      /** @type {Record<string, unknown>} */
      const asked = {};
      for (const name of req.names) {
        if (!Object.hasOwn(all, name)) return { tag: 'failed', val: `the payments service has no premise ${JSON.stringify(name)}` };
        asked[name] = all[name];
      }
      return { tag: 'captured', val: JSON.stringify(asked) };
    },
    authorize(req) {
      reach(req.target);
      // Without an authorizer the check cannot be made: the effect stays open. It must not
      // pass because the host forgot to install one, nor be closed: its send may have landed.
      if (!authorizer) return { tag: 'failed', val: 'this host has no authority check installed' };
      return { tag: 'allowed', val: Boolean(authorizer(req)) };
    },
    apply(req) {
      reach(req.target);
      let effect;
      try {
        effect = parseEffect(req.effect);
      } catch (m) {
        return { tag: 'rejected', val: String(m) }; // nothing was sent: definitive
      }
      try {
        const r = service.refund(effect.order, effect.amount_cents, req.idempotencyKey, req.effectId, clock.nowMs());
        return { tag: 'applied', val: refundJson(r) };
      } catch (e) {
        if (!(e instanceof ServiceError)) return { tag: 'unknown', val: String(/** @type {any} */ (e)?.message ?? e) };
        if (['unknown-order', 'exceeds-balance', 'idempotency-mismatch'].includes(e.case)) {
          return { tag: 'rejected', val: e.message };
        }
        return { tag: 'unknown', val: e.message };
      }
    },
    query(req) {
      reach(req.target);
      try {
        parseEffect(req.effect);
      } catch (m) {
        return { tag: 'failed', val: String(m) };
      }
      try {
        const r = service.findByReference(req.effectId);
        return r ? { tag: 'found', val: refundJson(r) } : { tag: 'not-found' };
      } catch (e) {
        if (e instanceof ServiceError) return { tag: 'failed', val: e.message };
        throw e;
      }
    },
  };
}
