// The simulated payments service (dist/payments_sim.wasm, adapters/payments-sim): the same
// Rust tier rules every host runs, and the service's own answers to the gate's steps (its
// `target` export), never re-implemented here. This wrapper converts values, routes steps
// and keeps the state: after every successful mutation it hands `snapshot()` to `persist`
// before returning (Node: payments.json written durably, the Rust crate's format).
import { InterlockError } from './errors.js';

/**
 * @import { Clock, Refund, PaymentsPremises, Targets, AuthorizeRequest, CaptureRequest, ApplyRequest, QueryRequest, Reply } from './types.js'
 * @import { Root as PaymentsRoot } from '../gen/payments/payments_sim.js'
 * @import { GateComponent } from './component.js'
 * @typedef {PaymentsRoot['service']} ServiceApi
 */

/**
 * The service refused a call (WIT `service-error`); `case` and `payload` as in the WIT,
 * the message in the Rust crate's words (the component's `message`).
 */
export class ServiceError extends InterlockError {
  /**
   * @param {string} kase
   * @param {any} payload
   * @param {string} message
   */
  constructor(kase, payload, message) {
    super(message);
    this.case = kase;
    this.payload = payload;
  }
}

/**
 * Runs one call of `api`; the WIT error it throws becomes a ServiceError.
 * @template T
 * @param {ServiceApi} api
 * @param {() => T} fn
 * @returns {T}
 */
function call(api, fn) {
  try {
    return fn();
  } catch (e) {
    const { payload } = /** @type {any} */ (e) ?? {};
    if (e instanceof Error && Object.hasOwn(e, 'payload') && typeof payload?.tag === 'string') {
      throw new ServiceError(payload.tag, payload.val, api.message(payload));
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
    return component.instantiate(component.getCoreModule, {});
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
    call(s.api, () => s.api.restore(state));
    return s;
  }

  /**
   * Use PaymentsService.create or restore.
   * @param {PaymentsRoot} root
   * @param {((snapshot: string) => void) | undefined} persist
   */
  constructor(root, persist) {
    /** The component's service export (jco). */
    this.api = root.service;
    /** Its answers to the gate's steps (the `target` export). */
    this.steps = root.target;
    this.persist = persist ?? (() => {});
  }

  /**
   * @template T
   * @param {() => T} fn
   * @returns {T}
   */
  #mutate(fn) {
    const r = call(this.api, fn);
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
    const r = call(this.api, () => this.api.findByReference(reference));
    return r === undefined ? null : parseRefund(r);
  }
  /**
   * @param {string} order
   * @param {string | null} [excludingReference]
   * @returns {PaymentsPremises}
   */
  premises(order, excludingReference) {
    return JSON.parse(call(this.api, () => this.api.premises(order, excludingReference ?? undefined)));
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
  /**
   * The gate's capture step, answered by the service: `captured` or `failed`.
   * @param {CaptureRequest} req
   * @returns {Reply}
   */
  capture(req) {
    return this.steps.capture(req);
  }
  /**
   * The gate's apply step at `nowMs`, answered by the service: `applied` or `rejected`.
   * An applied refund is persisted before this returns; when that fails the refund may or
   * may not survive, so the answer is `unknown` (the WIT's rule for a host that cannot keep
   * the state).
   * @param {ApplyRequest} req
   * @param {number} nowMs
   * @returns {Reply}
   */
  apply(req, nowMs) {
    const reply = this.steps.apply(req, BigInt(nowMs));
    if (reply.tag !== 'applied') return reply;
    try {
      this.persist(this.api.snapshot());
    } catch (e) {
      return { tag: 'unknown', val: `state_io: message=${JSON.stringify(String(/** @type {any} */ (e)?.message ?? e))}` };
    }
    return reply;
  }
  /**
   * The gate's query step, answered by the service: `found`, `not-found` or `failed`.
   * @param {QueryRequest} req
   * @returns {Reply}
   */
  query(req) {
    return this.steps.query(req);
  }
}

/** The target name of paymentsTarget in proposals. */
export const PAYMENTS = 'payments';

/**
 * The payments service as a low-level target (as hosts/cli/src/targets.rs): it routes the
 * gate's steps to the service, which answers them itself, and judges nothing. The effect
 * JSON is `{"order": "order_881", "amount_cents": 2000}`. `authorize` is this host's own
 * check: without `authorizer` it cannot be made (answered failed: the effect stays open).
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
  return {
    routes: [PAYMENTS],
    capture(req) {
      reach(req.target);
      return service.capture(req);
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
      return service.apply(req, clock.nowMs());
    },
    query(req) {
      reach(req.target);
      return service.query(req);
    },
  };
}
