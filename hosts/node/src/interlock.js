// The friendly API: Interlock (a gate over a journal) and effects defined as plain async
// functions. It drives the gate's `effects` machine: the machine says which of a
// definition's functions to call (by role) with which values; this file calls it and hands
// back what came back. Every decision is the component's. Runs in Node, a browser and
// workerd (the entry points pick the storage).
import { Gate, toOutcome } from './gate.js';
import { assertJson, jsonText } from './json.js';
import { Rejected, TargetTimeoutError, InterlockError, InvalidFieldError } from './errors.js';
import { SystemClock } from './clock.js';

/**
 * @import { Outcome, Json, Receipt, VerifyReport, Recovered, OpenOptions, Storage, EffectOverrides, Effect, EffectDefinition, EffectContext } from './types.js'
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 * @import { EffectCall, EffectStep, Role } from '../gen/gate/interfaces/interlock-gate-effects.js'
 * @import { CallAnswer } from '../gen/gate/interfaces/interlock-gate-target.js'
 * @import { ServiceCall, ServiceAnswer } from '../gen/gate/interfaces/interlock-gate-targets.js'
 * @import { Outcome as WitOutcome } from '../gen/gate/interfaces/interlock-gate-types.js'
 * @import { GateComponent } from './component.js'
 * @typedef {{ def: EffectDefinition<any>, fn: (...args: any[]) => unknown, serve?: (call: ServiceCall) => Promise<ServiceAnswer> }} Definition
 */

/** @param {unknown} e */
const message = (e) => String(/** @type {any} */ (e)?.message ?? e);

/**
 * `run(signal)`, or TargetTimeoutError after `ms` (and `signal` aborted).
 * @template T
 * @param {number} ms
 * @param {(signal: AbortSignal) => T | Promise<T>} run
 * @returns {Promise<T>}
 */
export function withTimeout(ms, run) {
  const controller = new AbortController();
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  /** @type {Promise<never>} */
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const e = new TargetTimeoutError(`the target did not answer within ${ms} ms`);
      controller.abort(e);
      reject(e);
    }, ms);
  });
  return Promise.race([Promise.resolve().then(() => run(controller.signal)), timeout]).finally(() => clearTimeout(timer));
}

/**
 * What a function the gate asked for did, as a WIT `call-answer`: its value (JSON), the
 * target's refusal (Rejected), or no answer (it threw, or its value is not JSON).
 * @param {() => unknown} run
 * @returns {Promise<CallAnswer>}
 */
export async function answerOf(run) {
  try {
    const value = (await run()) ?? null;
    assertJson(value);
    return { tag: 'returned', val: JSON.stringify(value) };
  } catch (e) {
    if (e instanceof Rejected) return { tag: 'refused', val: e.message };
    return { tag: 'failed', val: message(e) };
  }
}

/**
 * The outcome an `effects` run ended with.
 * @param {{ val: unknown }} done
 */
const outcome = (done) => toOutcome(/** @type {WitOutcome} */ (done.val));

/** The definition's members that may be functions, by the machine's role. */
const ROLES = /** @type {const} */ (['key', 'lease', 'bounds', 'cap', 'premises', 'allowed', 'lookup']);

export class Interlock {
  /** @type {Map<string, Definition>} target name -> effect definition */
  #targets = new Map();
  /** Agents whose standing lease was announced (once each). */
  #announced = new Set();
  #strict = false;

  /**
   * A gate over `storage`. Options: `clock` (default the system clock), `agent` (the
   * default agent name of effects), `claimWait` ({ pollMs, maxPolls }; default the gate's),
   * `strict` (default false), `clockSkewMs`, `crashAt` (tests). An effect that names no
   * lease or approval runs under its agent's standing lease, which the gate names and grants
   * (recorded, once, at its first use), announced once when the effect is defined
   * (`console.warn`, the gate's words). With `strict: true` such an effect is refused with
   * InvalidFieldError at `/authority`, nothing recorded (`standingLease: false` is the older
   * spelling of `strict: true`).
   * @template {typeof Interlock} T
   * @this {T}
   * @param {GateComponent<GateRoot> | Promise<GateComponent<GateRoot>>} component
   * @param {Storage} storage
   * @param {OpenOptions} [options]
   * @returns {Promise<InstanceType<T>>} an instance of the class it is called on (an
   *   entry's subclass keeps its own methods: Node's `export`)
   */
  static async create(component, storage, options = {}) {
    const { clock = new SystemClock(), agent = 'agent', claimWait, strict, standingLease, clockSkewMs, crashAt } = options;
    const gate = await Gate.instantiate(await component, { storage, clock, claimWait, crashAt });
    return /** @type {InstanceType<T>} */ (new this(gate, { agent, strict: strict === true || standingLease === false, clockSkewMs }));
  }

  /**
   * Use the entry's `Interlock.open` (or `create`).
   * @param {Gate} gate
   * @param {{ agent: string, strict?: boolean, clockSkewMs?: number }} options
   */
  constructor(gate, { agent, strict = false, clockSkewMs }) {
    /** The low-level gate (steps, receipts, verify). */
    this.gate = gate;
    this.storage = gate.storage;
    this.clock = gate.clock;
    /** The default agent name of effects. */
    this.agent = agent;
    this.#strict = strict;
    if (strict) gate.setStrictAuthority(true);
    gate.call('effects', 'configure', agent, clockSkewMs === undefined ? undefined : BigInt(clockSkewMs), gate.wait);
    // This gate reaches only the targets defined on it: an open effect of any other target
    // is left open for a gate that can reach it, never answered with a made-up reply.
    gate.setRoutes([]);
  }

  /**
   * Defines an effect: `fn(...params, idempotencyKey, { effectId, attempt, signal })` does
   * it at the target. Returns an async function taking the params and resolving to the
   * gate's outcome (COMMITTED, REFUSED, AMBIGUOUS, or DISPATCHED while still open).
   *
   * `def`: { target (name, required: recovery routes by it), params (names of the
   * arguments, which become the effect object; without it the one argument is the effect),
   * key (string or effect => string: the approved request's key), lease | approval,
   * premises (async (effect, { effectId }) => object, read fresh from the system of record),
   * bounds, cap (object or effect => object), allowed (async (effect, { agent, effectId })
   * => boolean: your own authority check), lookup (async (effect, { effectId }) => result or
   * null), dedupes, dedupeWindowMs, timeoutMs, agent }.
   * @template {unknown[]} A
   * @overload
   * @param {EffectDefinition} def
   * @param {(...args: [...A, string, EffectContext]) => unknown} fn
   * @returns {Effect<A>}
   */
  /**
   * @template {unknown[]} A
   * @overload
   * @param {EffectDefinition} def
   * @param {(...args: [...A, string]) => unknown} fn
   * @returns {Effect<A>}
   */
  /**
   * @template {unknown[]} A
   * @overload
   * @param {EffectDefinition} def
   * @param {(...args: A) => unknown} fn
   * @returns {Effect<A>}
   */
  /**
   * @template {unknown[]} A
   * @param {EffectDefinition} def
   * @param {(...args: any[]) => unknown} fn
   * @returns {Effect<A>}
   */
  effect(def, fn) {
    if (typeof fn !== 'function') throw new TypeError('effect: the second argument must be the function that does the effect');
    return this.#define(def, fn);
  }

  /**
   * Defines an effect of a built-in target (wit/targets.wit; `@interlock/gate/stripe`):
   * `def.builtin` names it (`stripe.refund`), `def.target` its name here; its premise read,
   * send and lookup are the component's, made as SDK calls by `serve(call)`, which resolves
   * to what came back (a WIT `service-answer`). `def`'s functions (key, lease, bounds, cap,
   * allowed) take the effect object. Returns an async function of the effect object.
   * @param {EffectDefinition<any> & { builtin: string }} def
   * @param {(call: ServiceCall) => Promise<ServiceAnswer>} serve
   * @returns {Effect<[Record<string, Json>]>}
   */
  builtin(def, serve) {
    if (typeof def?.builtin !== 'string') throw new TypeError("builtin: `builtin` (a built-in target's name) is required");
    return this.#define(def, undefined, serve);
  }

  /**
   * @template {unknown[]} A
   * @param {EffectDefinition & { builtin?: string }} def
   * @param {((...args: any[]) => unknown) | undefined} fn
   * @param {(call: ServiceCall) => Promise<ServiceAnswer>} [serve]
   * @returns {Effect<A>}
   */
  #define(def, fn, serve) {
    if (typeof def?.target !== 'string' || !def.target) throw new TypeError('effect: `target` (a name) is required');
    if (this.#targets.has(def.target)) throw new TypeError(`effect: target ${JSON.stringify(def.target)} is already defined`);
    const functions = ROLES.filter((r) => typeof def[r] === 'function');
    /** @type {Record<string, Json>} */
    const definition = { target: def.target, functions: fn ? ['apply', ...functions] : functions };
    if (def.builtin) definition.builtin = def.builtin;
    if (def.params) definition.params = def.params;
    for (const [name, value] of /** @type {const} */ ([['key', def.key], ['lease', def.lease], ['approval', def.approval], ['bounds', def.bounds],
      ['cap', def.cap], ['dedupes', def.dedupes], ['dedupe_window_ms', def.dedupeWindowMs], ['timeout_ms', def.timeoutMs], ['agent', def.agent]])) {
      if (value !== undefined && typeof value !== 'function') definition[name] = /** @type {Json} */ (value);
    }
    const standing = this.gate.call('effects', 'define', jsonText(definition));
    this.#targets.set(def.target, { def, fn: fn ?? (() => undefined), serve });
    if (standing !== undefined) this.#announce(standing);
    /**
     * @param {'call' | 'propose'} how
     * @param {EffectOverrides} overrides
     * @param {unknown[]} args
     */
    const start = async (how, overrides, args) => {
      // What JSON would drop or change is refused at its pointer (a missing argument is undefined).
      if (def.params) def.params.forEach((p, i) => assertJson(args[i], `/effect/${p}`));
      else assertJson(args[0], '/effect');
      const o = Object.keys(overrides).length ? jsonText(overrides) : undefined;
      const first = this.gate.call('effects', how, def.target, JSON.stringify(args), o);
      return this.#run(first);
    };
    /** @param {EffectOverrides} overrides */
    const call = (overrides) => async (/** @type {A} */ ...args) => outcome(await start('call', overrides, args));
    /** @param {unknown[]} args */
    const proposal = async (...args) => /** @type {string} */ ((await start('propose', {}, args)).val);
    return Object.assign(call({}), {
      /** The same call with per-request settings: { approval, lease, premises, key }. */
      with: call,
      /** The proposal a call would submit (JSON text), recording nothing. */
      proposal,
      /** The effect id a call would get, recording nothing. */
      effectId: async (/** @type {A} */ ...args) => this.gate.effectIdOf(await proposal(...args)),
      target: def.target,
    });
  }

  /**
   * Runs an `effects` step through to its end, calling the definitions' functions.
   * @param {EffectStep} step
   */
  #run(step) {
    return this.gate.loop('effects', step, (c) => this.#perform(c));
  }

  /**
   * Calls the function the machine asked for.
   * @param {EffectCall | ServiceCall} c
   * @returns {Promise<CallAnswer | ServiceAnswer>}
   */
  async #perform(c) {
    const entry = this.#targets.get(c.target);
    // The gate asks only for the targets defined here: anything else is a broken contract.
    if (!entry) throw new InterlockError(`the gate asked for target ${JSON.stringify(c.target)}, which is not defined here`);
    const { def, fn, serve } = entry;
    if ('operation' in c) {
      // A built-in target's SDK call: what came back (a throw that is not the SDK's own error is no answer).
      try {
        return await /** @type {NonNullable<typeof serve>} */ (serve)(c);
      } catch (e) {
        return { tag: 'no-answer', val: message(e) };
      }
    }
    const effect = JSON.parse(c.effect);
    const effectId = /** @type {string} */ (c.effectId);
    if (c.role === 'apply') {
      const args = def.params ? def.params.map((p) => effect[p]) : [effect];
      const ms = Number(c.timeoutMs);
      return answerOf(() => withTimeout(ms, (signal) => fn(...args, c.idempotencyKey, { effectId, attempt: c.attempt, signal })));
    }
    const f = /** @type {Function} */ (def[c.role]);
    if (c.role === 'allowed') return answerOf(() => f(effect, { agent: c.agent, effectId }));
    if (c.role === 'premises' || c.role === 'lookup') return answerOf(() => f(effect, { effectId }));
    return answerOf(() => f(effect));
  }

  /**
   * Says once, when the first effect of `agent` that names no authority is defined, that
   * such effects run under its standing lease (the gate's words): visible, never silent.
   * @param {string} agent
   */
  #announce(agent) {
    if (this.#strict || this.#announced.has(agent)) return;
    this.#announced.add(agent);
    let notice;
    try {
      notice = this.gate.standingNotice(agent);
    } catch (e) {
      if (e instanceof InvalidFieldError) return; // no standing lease for such an agent: its proposals are refused, saying why
      throw e;
    }
    console.warn(notice);
  }

  /**
   * Recovers every open effect (call at startup, after defining the effects). Resolves to
   * `[{ effectId, outcome }]` (or `{ effectId, error }` for an effect the gate could not act on).
   * Effects of a target no effect here defines stay open (target_unroutable), untouched.
   * @returns {Promise<Recovered[]>}
   */
  async recover() {
    return /** @type {Promise<Recovered[]>} */ (this.gate.recoverEach(async (effectId) =>
      ({ effectId, outcome: outcome(await this.#run(this.gate.call('effects', 'recover', effectId))) })));
  }

  /**
   * Submits a raw proposal (ARCHITECTURE.md schema), routed to the defined effects.
   * @param {object | string} proposal
   * @returns {Promise<Outcome>}
   */
  async submit(proposal) {
    return outcome(await this.#run(this.gate.call('effects', 'submit', jsonText(proposal))));
  }
  /**
   * Grants (or extends) a lease: `{ ttlMs }` from now, or `{ untilMs }`.
   * @param {string} name
   * @param {{ ttlMs?: number, untilMs?: number }} when
   * @returns {Promise<void>}
   */
  async lease(name, { ttlMs, untilMs } = {}) {
    const until = untilMs ?? (ttlMs === undefined ? undefined : this.clock.nowMs() + ttlMs);
    if (until === undefined) throw new TypeError('lease: give ttlMs or untilMs');
    await this.gate.grantLease(name, until);
  }
  /**
   * @param {string} name
   * @returns {Promise<void>}
   */
  revokeLease(name) {
    return this.gate.revokeLease(name);
  }
  /**
   * Records an approval (ARCHITECTURE.md, "Approval").
   * @param {object | string} approval
   * @returns {Promise<void>}
   */
  approve(approval) {
    return this.gate.approve(approval);
  }
  /**
   * @param {string} id
   * @returns {Promise<void>}
   */
  revokeApproval(id) {
    return this.gate.revokeApproval(id);
  }
  /**
   * A person's confirmation of an AMBIGUOUS effect, with the evidence.
   * @param {string} effectId
   * @param {Json} evidence
   * @returns {Promise<Outcome>}
   */
  confirm(effectId, evidence) {
    return this.gate.confirm(effectId, evidence);
  }
  /**
   * Records the approval rules and routes in force from now on.
   * @param {object} rules
   * @returns {Promise<void>}
   */
  setApprovalRules(rules) {
    return this.gate.setApprovalRules(rules);
  }
  /** @returns {object} */
  approvalRules() {
    return this.gate.approvalRules();
  }
  /**
   * Every item a person may act on now, from the journal.
   * @returns {object[]}
   */
  inbox() {
    return this.gate.inbox();
  }

  /**
   * The scoreboard: approval items by route (pending, escalated, approved, rejected,
   * expired), time to decision, deadlines missed, the share approved by rule.
   * @returns {object}
   */
  scoreboard() {
    return this.gate.scoreboard();
  }
  /**
   * A person's decision on an inbox item: approve, reject, happened, did_not_happen, dismiss.
   * @param {{ item: string, decider: string, verdict: string, why?: string, evidence?: unknown }} decision
   * @returns {Promise<object>}
   */
  decide(decision) {
    return this.gate.decide(decision);
  }
  /**
   * A service's signed webhook (Stripe or Standard Webhooks), checked and recorded.
   * @param {'stripe' | 'standard-webhooks'} scheme
   * @param {Record<string, string> | [string, string][]} headers
   * @param {Uint8Array | string} body
   * @param {string} secret
   * @param {{ toleranceS?: number }} [options]
   * @returns {Promise<object>}
   */
  webhook(scheme, headers, body, secret, options) {
    return this.gate.webhook(scheme, headers, body, secret, options);
  }
  /** @returns {string[]} */
  openEffects() {
    return this.gate.openEffects();
  }
  /**
   * The effect's receipt (object); signed with HMAC-SHA256 when `key` is given.
   * @param {string} effectId
   * @param {{ key?: Uint8Array | string }} [options]
   * @returns {Receipt}
   */
  receipt(effectId, { key } = {}) {
    return this.gate.receipt(effectId, key);
  }
  /**
   * @param {Receipt | string} receipt
   * @param {Uint8Array | string} key
   * @returns {VerifyReport}
   */
  checkReceipt(receipt, key) {
    return this.gate.checkReceipt(receipt, key);
  }
  /**
   * Verifies every hash chain; receipts in `anchors` pin their streams (and the authority
   * streams they relied on); each checkpoint note in `checkpoints` must still be a prefix
   * of the journal's log.
   * @param {{ anchors?: (Receipt | string)[], checkpoints?: string[] }} [options]
   * @returns {VerifyReport}
   */
  verify({ anchors = [], checkpoints = [] } = {}) {
    const held = checkpoints.map((c) => JSON.stringify({ checkpoint: c }));
    return this.gate.verify([...anchors, ...held]);
  }

  // -- proof for outsiders (ARCHITECTURE.md, "Proof for outsiders"): keys are the text of a
  // file or an environment variable (readKey in Node); the component checks every one.

  /**
   * A new Ed25519 key pair named `name` (the log's origin): `{ signer, verifier }`. Store
   * the signer key owner-only; never log it.
   * @param {string} name
   */
  generateKey(name) {
    const seed = crypto.getRandomValues(new Uint8Array(32));
    try {
      return this.gate.generateKey(name, seed);
    } finally {
      seed.fill(0);
    }
  }
  /** The effect's receipt signed with Ed25519. @param {string} effectId @param {string} signingKey @returns {Receipt} */
  signedReceipt(effectId, signingKey) {
    return JSON.parse(this.gate.signedReceipt(effectId, signingKey));
  }
  /** An Ed25519 receipt checked with the public key and against this journal. @param {Receipt | string} receipt @param {string} publicKey */
  checkSignedReceipt(receipt, publicKey) {
    return this.gate.checkSignedReceipt(receipt, publicKey);
  }
  /** An Ed25519 receipt's signature alone: its effect id, or BadSignatureError. @param {Receipt | string} receipt @param {string} publicKey */
  checkReceiptSignature(receipt, publicKey) {
    return this.gate.checkReceiptSignature(receipt, publicKey);
  }
  /** Logs the receipts of what closed since and signs a checkpoint. Durable. @param {string} signingKey */
  checkpoint(signingKey) {
    return this.gate.checkpoint(signingKey);
  }
  latestCheckpoint() {
    return this.gate.latestCheckpoint();
  }
  /** @param {string} effectId @param {{ treeSize?: number }} [options] */
  proveInclusion(effectId, { treeSize } = {}) {
    return this.gate.proveInclusion(effectId, treeSize);
  }
  /** @param {number} oldSize @param {{ treeSize?: number }} [options] */
  proveConsistency(oldSize, { treeSize } = {}) {
    return this.gate.proveConsistency(oldSize, treeSize);
  }
  /** @param {object | string} proof @param {string} publicKey @param {{ checkpoint?: string }} [options] */
  checkInclusion(proof, publicKey, { checkpoint } = {}) {
    return this.gate.checkInclusion(proof, checkpoint, publicKey);
  }
  /** @param {object | string} proof @param {string} oldCheckpoint @param {string} publicKey */
  checkConsistency(proof, oldCheckpoint, publicKey) {
    return this.gate.checkConsistency(proof, oldCheckpoint, publicKey);
  }
  /** A signed bundle of the receipts of the effects proposed in [fromMs, toMs). @param {string} signingKey @param {{ fromMs?: number, toMs?: number }} [options] */
  bundle(signingKey, { fromMs = 0, toMs } = {}) {
    return this.gate.bundle(fromMs, toMs ?? this.gate.clock.nowMs() + 1, signingKey);
  }
  /** A bundle checked with the public key, with the five answers per effect. @param {object | string} bundle @param {string} publicKey */
  checkBundle(bundle, publicKey) {
    return this.gate.checkBundle(bundle, publicKey);
  }
  /**
   * Releases the journal and its lock (a promise for the IndexedDB journal).
   * @returns {void | Promise<void>}
   */
  close() {
    return this.storage.close?.();
  }
}

export { InterlockError };
