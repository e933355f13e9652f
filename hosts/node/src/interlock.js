// The friendly API: Interlock (a gate over a journal) and effects defined as plain async
// functions. Everything here is routing and value conversion; every decision is the
// component's. Runs in Node and in a browser (the entry points pick the journal).
import { Gate, jsonText, assertJson } from './gate.js';
import { Rejected, TargetTimeoutError, InterlockError, InvalidFieldError, invalidField } from './errors.js';
import { SystemClock } from './clock.js';

/**
 * @import { Outcome, Json, JsonObject, Reply, Receipt, VerifyReport, Recovered } from './types.js'
 * @import { OpenOptions, JournalBackend, Clock, Targets, EffectOverrides } from './types.js'
 * @import { CaptureRequest, AuthorizeRequest, ApplyRequest, QueryRequest, EffectContext } from './types.js'
 * @import { Effect, EffectDefinition } from './types.js'
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 * @import { GateComponent } from './gate.js'
 * @typedef {{ def: EffectDefinition<any>, fn: (...args: any[]) => unknown }} Definition
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
function withTimeout(ms, run) {
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

export class Interlock {
  /** @type {Map<string, Definition>} target name -> effect definition */
  #targets = new Map();
  /** @type {Targets} the steps, routed to the effects defined here */
  #router;

  /**
   * A gate over `journal` (any backend with the six sync journal methods; see
   * src/journal/). Options: `clock` (default the system clock), `agent` (the default agent
   * name of effects), `claimWait` ({ pollMs, maxPolls }; default the gate's), and
   * `strict` (default false). An effect that names no lease or approval runs under its
   * agent's standing lease, which the gate names and grants (recorded, once, at its first
   * use), announced once when the effect is defined (`console.warn`, the gate's words).
   * With `strict: true` such an effect is refused with InvalidFieldError at `/authority`,
   * nothing recorded (docs/host-api.md; `standingLease: false` is the older spelling of
   * `strict: true`). `clockSkewMs`: how far the clocks of the machines sharing the
   * journal may disagree; every proposal carries it (`target.clock_skew_ms`), so claims
   * last that much longer and expiries are judged by the latest clock (ARCHITECTURE.md,
   * "Clocks across machines"). Default: none (one machine).
   * @param {GateComponent<GateRoot> | Promise<GateComponent<GateRoot>>} component
   * @param {JournalBackend} journal
   * @param {OpenOptions} [options]
   * @returns {Promise<Interlock>}
   */
  static async create(component, journal, { clock = new SystemClock(), agent = 'agent', claimWait, strict, standingLease, clockSkewMs } = {}) {
    const gate = await Gate.instantiate(await component, { journal, clock, claimWait });
    return new Interlock(gate, { agent, strict: strict === true || standingLease === false, clockSkewMs });
  }

  /** Agents whose standing lease was announced (once each). */
  #announced = new Set();

  /** Strict authority: every effect must name its lease or approval. */
  #strict = false;

  /**
   * Use the entry's `Interlock.open` (or `create`).
   * @param {Gate} gate
   * @param {{ agent: string, strict?: boolean, clockSkewMs?: number }} options
   */
  constructor(gate, { agent, strict = false, clockSkewMs }) {
    /** The low-level gate (steps, receipts, verify). */
    this.gate = gate;
    this.journal = gate.journal;
    this.clock = gate.clock;
    /** The default agent name of effects. */
    this.agent = agent;
    this.#strict = strict === true;
    if (this.#strict) gate.setStrictAuthority(true);
    /** The clock skew every proposal allows (`target.clock_skew_ms`), if any. */
    this.clockSkewMs = clockSkewMs;
    // This gate reaches only the targets defined on it: an open effect of any other target
    // (from a shared journal, or one defined in another process) is left open for a gate
    // that can reach it, never answered with a made-up reply.
    gate.setRoutes([]);
    this.#router = {
      capture: (req) => this.#capture(req),
      authorize: (req) => this.#authorize(req),
      apply: (req) => this.#apply(req),
      query: (req) => this.#query(req),
    };
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
   *
   * The effect's arguments (`A`) are what `fn` takes before the key and the context; a
   * function that takes neither (or no context) is typed by the overloads below.
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
    if (typeof def?.target !== 'string' || !def.target) throw new TypeError('effect: `target` (a name) is required');
    if (typeof fn !== 'function') throw new TypeError('effect: the second argument must be the function that does the effect');
    if (this.#targets.has(def.target)) throw new TypeError(`effect: target ${JSON.stringify(def.target)} is already defined`);
    const entry = { def, fn };
    this.#targets.set(def.target, entry);
    this.gate.setRoutes([...this.#targets.keys()]);
    if (!def.lease && !def.approval) this.#announce(def.agent ?? this.agent);
    const arity = def.params ? def.params.length : 1;
    /** @param {unknown[]} args */
    const toEffect = (args) => {
      // An extra argument would be dropped from the effect without a word (a missing one is
      // undefined, which the JSON check refuses).
      if (args.length > arity) {
        throw invalidField('/effect', `effect ${def.target} takes ${arity} argument${arity === 1 ? '' : 's'}` +
          `${def.params ? ` (${def.params.join(', ')})` : ''}, got ${args.length}: the extra ones would be dropped`);
      }
      const effect = def.params ? Object.fromEntries(def.params.map((p, i) => [p, args[i]])) : args[0];
      assertJson(effect, '/effect'); // before `key` or `cap` functions see it
      return /** @type {JsonObject} */ (effect);
    };
    // The effect id comes from the key and the effect alone; the proposal it is asked on
    // leaves out the bounds, which name premises not read yet.
    /**
     * @param {JsonObject} effect
     * @param {EffectOverrides} overrides
     */
    const effectId = (effect, overrides) => this.gate.effectIdOf(this.#proposal(def, effect, overrides, { bounds: false }));
    /** @param {EffectOverrides} overrides */
    const call = (overrides) => async (/** @type {A} */ ...args) => {
      const effect = toEffect(args);
      let { premises } = overrides;
      if (premises === undefined && def.premises) {
        // The premises as the agent decides: read now, the effect's own result excluded.
        premises = await def.premises(effect, { effectId: effectId(effect, overrides) });
      }
      return this.gate.submit(this.#proposal(def, effect, { ...overrides, premises }), this.#router);
    };
    return Object.assign(call({}), {
      /** The same call with per-request settings: { approval, lease, premises, key }. */
      with: call,
      /** The effect id a call would get, recording nothing. */
      effectId: (/** @type {A} */ ...args) => effectId(toEffect(args), {}),
      target: def.target,
    });
  }

  /**
   * The proposal (ARCHITECTURE.md, "Proposal") of one call of the effect `def`.
   * @param {EffectDefinition} def
   * @param {JsonObject} effect
   * @param {EffectOverrides} o
   * @param {{ bounds?: boolean }} [options]
   */
  #proposal(def, effect, o, { bounds = true } = {}) {
    /** @type {Record<string, Json>} */
    const target = { name: def.target };
    if (def.dedupes !== undefined) target.dedupes = Boolean(def.dedupes);
    if (def.dedupeWindowMs !== undefined) target.dedupe_window_ms = def.dedupeWindowMs;
    target.lookup = Boolean(def.lookup);
    if (def.timeoutMs !== undefined) target.timeout_ms = def.timeoutMs;
    // The gate checks it (a whole number of ms, at most 2^53 - 1) like every field.
    if (this.clockSkewMs !== undefined) target.clock_skew_ms = this.clockSkewMs;
    const agent = def.agent ?? this.agent;
    const approval = o.approval ?? (o.lease ? undefined : def.approval);
    const lease = o.lease ?? def.lease;
    // No authority named: the gate runs the proposal under the agent's standing lease,
    // which it grants at first use (or refuses it, under strict authority).
    /** @type {{ approval?: string, lease?: string, host_check?: boolean }} */
    const authority = approval ? { approval } : lease ? { lease } : {};
    if (def.allowed) authority.host_check = true;
    /** @type {Record<string, unknown>} */
    const p = { agent, target };
    const key = o.key ?? (typeof def.key === 'function' ? def.key(effect) : def.key);
    if (key !== undefined) p.key = key;
    p.effect = effect;
    if (Object.keys(authority).length > 0) p.authority = authority;
    if (o.premises !== undefined) p.premises = o.premises;
    if (def.bounds && bounds) p.bounds = def.bounds;
    const cap = typeof def.cap === 'function' ? def.cap(effect) : def.cap;
    if (cap) p.cap = cap;
    return p;
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
   * The definition for a step's target. The gate asks only for the targets given to
   * setRoutes, so an unknown one is a broken contract: it throws, and is never answered
   * (a made-up "not allowed" or "rejected" would close an effect whose send may have landed).
   * @param {{ target: string, effect: string }} req
   * @returns {Definition & { effect: any }}
   */
  #route(req) {
    const entry = this.#targets.get(req.target);
    if (!entry) throw new InterlockError(`the gate asked for target ${JSON.stringify(req.target)}, which is not routed to this gate`);
    return { ...entry, effect: JSON.parse(req.effect) };
  }

  /**
   * @param {CaptureRequest} req
   * @returns {Promise<Reply>}
   */
  async #capture(req) {
    const { def, effect } = this.#route(req);
    try {
      if (!def.premises) return { tag: 'failed', val: `effect ${req.target} defines no premises` };
      const all = await def.premises(effect, { effectId: req.effectId });
      /** @type {JsonObject} */
      const asked = {};
      for (const name of req.names) {
        if (!Object.hasOwn(all ?? {}, name)) return { tag: 'failed', val: `premises() gave no ${JSON.stringify(name)}` };
        asked[name] = all[name];
      }
      // A value JSON cannot carry is a read that failed, not a premise that changed to null.
      return { tag: 'captured', val: jsonText(asked) };
    } catch (e) {
      return { tag: 'failed', val: message(e) };
    }
  }

  /**
   * @param {AuthorizeRequest} req
   * @returns {Promise<Reply>}
   */
  async #authorize(req) {
    const { def, effect } = this.#route(req);
    // A check that could not be made (none installed here for a recorded proposal that asks
    // for one, or one that threw) is not a "no": the gate leaves the effect open.
    if (!def.allowed) return { tag: 'failed', val: `effect ${req.target} defines no allowed() check` };
    try {
      return { tag: 'allowed', val: (await def.allowed(effect, { agent: req.agent, effectId: req.effectId })) === true };
    } catch (e) {
      return { tag: 'failed', val: `allowed() threw: ${message(e)}` };
    }
  }

  /**
   * @param {ApplyRequest} req
   * @returns {Promise<Reply>}
   */
  async #apply(req) {
    const { def, fn, effect } = this.#route(req);
    const args = def.params ? def.params.map((/** @type {string} */ p) => effect[p]) : [effect];
    // The recorded proposal's timeout (the gate's default when it gave none): the claim
    // recovery waits out, so the send must not outlive it. Asked before the send: a gate
    // error here is not a send whose fate is unknown.
    const timeoutMs = this.gate.sendTimeoutMs(req.effectId);
    try {
      const result = await withTimeout(timeoutMs, (signal) =>
        fn(...args, req.idempotencyKey, { effectId: req.effectId, attempt: req.attempt, signal }));
      return { tag: 'applied', val: JSON.stringify(result ?? null) };
    } catch (e) {
      if (e instanceof Rejected) return { tag: 'rejected', val: e.message };
      return { tag: 'unknown', val: message(e) };
    }
  }

  /**
   * @param {QueryRequest} req
   * @returns {Promise<Reply>}
   */
  async #query(req) {
    const { def, effect } = this.#route(req);
    try {
      if (!def.lookup) return { tag: 'failed', val: `effect ${req.target} defines no lookup` };
      const found = await def.lookup(effect, { effectId: req.effectId });
      return found === null || found === undefined ? { tag: 'not-found' } : { tag: 'found', val: jsonText(found) };
    } catch (e) {
      return { tag: 'failed', val: message(e) };
    }
  }

  /**
   * Recovers every open effect (call at startup, after defining the effects). Resolves to
   * `[{ effectId, outcome }]` (or `{ effectId, error }` for an effect the gate could not act on).
   * Effects of a target no effect here defines stay open (target_unroutable), untouched.
   * @returns {Promise<Recovered[]>}
   */
  async recover() {
    return this.gate.recoverAll(this.#router);
  }

  /**
   * Submits a raw proposal (ARCHITECTURE.md schema), routed to the defined effects.
   * @param {object | string} proposal
   * @returns {Promise<Outcome>}
   */
  async submit(proposal) {
    return this.gate.submit(proposal, this.#router);
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
   * Verifies every hash chain; receipts in `anchors` pin their streams.
   * @param {{ anchors?: (Receipt | string)[] }} [options]
   * @returns {VerifyReport}
   */
  verify({ anchors = [] } = {}) {
    return this.gate.verify(anchors);
  }
  /**
   * Releases the journal and its lock (a promise for the IndexedDB journal).
   * @returns {void | Promise<void>}
   */
  close() {
    return this.journal.close?.();
  }
}

export { InterlockError };
