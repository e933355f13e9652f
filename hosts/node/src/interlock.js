// The friendly API: Interlock (a gate over a journal) and effects defined as plain async
// functions. Everything here is routing and value conversion; every decision is the
// component's. Runs in Node and in a browser (the entry points pick the journal).
import { Gate, DEFAULT_CLAIM_WAIT, jsonText, assertJson } from './gate.js';
import { Rejected, TargetTimeoutError, InterlockError, invalidField } from './errors.js';
import { SystemClock } from './clock.js';

const message = (e) => String(e?.message ?? e);

function withTimeout(ms, run) {
  const controller = new AbortController();
  let timer;
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
  /**
   * A gate over `journal` (any backend with the six sync journal methods; see
   * src/journal/). Options: `clock` (default the system clock), `agent` (the default agent
   * name of effects), `claimWait` ({ pollMs, maxPolls }).
   */
  static async create(component, journal, { clock = new SystemClock(), agent = 'agent', claimWait = DEFAULT_CLAIM_WAIT } = {}) {
    const gate = await Gate.instantiate(await component, { journal, clock, claimWait });
    return new Interlock(gate, { agent });
  }

  constructor(gate, { agent }) {
    /** The low-level gate (steps, receipts, verify). */
    this.gate = gate;
    this.journal = gate.journal;
    this.clock = gate.clock;
    this.agent = agent;
    this.targets = new Map(); // target name -> effect definition
    // This gate reaches only the targets defined on it: an open effect of any other target
    // (from a shared journal, or one defined in another process) is left open for a gate
    // that can reach it, never answered with a made-up reply.
    gate.setRoutes([]);
    this.router = {
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
   */
  effect(def, fn) {
    if (typeof def?.target !== 'string' || !def.target) throw new TypeError('effect: `target` (a name) is required');
    if (typeof fn !== 'function') throw new TypeError('effect: the second argument must be the function that does the effect');
    if (this.targets.has(def.target)) throw new TypeError(`effect: target ${JSON.stringify(def.target)} is already defined`);
    const entry = { def, fn };
    this.targets.set(def.target, entry);
    this.gate.setRoutes([...this.targets.keys()]);
    const arity = def.params ? def.params.length : 1;
    const toEffect = (args) => {
      // An extra argument would be dropped from the effect without a word (a missing one is
      // undefined, which the JSON check refuses).
      if (args.length > arity) {
        throw invalidField('/effect', `effect ${def.target} takes ${arity} argument${arity === 1 ? '' : 's'}` +
          `${def.params ? ` (${def.params.join(', ')})` : ''}, got ${args.length}: the extra ones would be dropped`);
      }
      const effect = def.params ? Object.fromEntries(def.params.map((p, i) => [p, args[i]])) : args[0];
      assertJson(effect, '/effect'); // before `key` or `cap` functions see it
      return effect;
    };
    // The effect id comes from the key and the effect alone; the proposal it is asked on
    // leaves out the bounds, which name premises not read yet.
    const effectId = (effect, overrides) => this.gate.effectIdOf(this.#proposal(def, effect, overrides, { bounds: false }));
    const call = (overrides) => async (...args) => {
      const effect = toEffect(args);
      let { premises } = overrides;
      if (premises === undefined && def.premises) {
        // The premises as the agent decides: read now, the effect's own result excluded.
        premises = await def.premises(effect, { effectId: effectId(effect, overrides) });
      }
      return this.gate.submit(this.#proposal(def, effect, { ...overrides, premises }), this.router);
    };
    const run = call({});
    /** The same call with per-request settings: { approval, lease, premises, key }. */
    run.with = (overrides) => call(overrides);
    /** The effect id a call would get, recording nothing. */
    run.effectId = (...args) => effectId(toEffect(args), {});
    run.target = def.target;
    return run;
  }

  #proposal(def, effect, o, { bounds = true } = {}) {
    const target = { name: def.target };
    if (def.dedupes !== undefined) target.dedupes = Boolean(def.dedupes);
    if (def.dedupeWindowMs !== undefined) target.dedupe_window_ms = def.dedupeWindowMs;
    target.lookup = Boolean(def.lookup);
    if (def.timeoutMs !== undefined) target.timeout_ms = def.timeoutMs;
    const approval = o.approval ?? (o.lease ? undefined : def.approval);
    const authority = approval ? { approval } : { lease: o.lease ?? def.lease };
    if (!authority.approval && !authority.lease) throw new TypeError(`effect ${def.target}: no authority (set \`lease\` or \`approval\`)`);
    if (def.allowed) authority.host_check = true;
    const p = { agent: def.agent ?? this.agent, target };
    const key = o.key ?? (typeof def.key === 'function' ? def.key(effect) : def.key);
    if (key !== undefined) p.key = key;
    p.effect = effect;
    p.authority = authority;
    if (o.premises !== undefined) p.premises = o.premises;
    if (def.bounds && bounds) p.bounds = def.bounds;
    const cap = typeof def.cap === 'function' ? def.cap(effect) : def.cap;
    if (cap) p.cap = cap;
    return p;
  }

  /**
   * The definition for a step's target. The gate asks only for the targets given to
   * setRoutes, so an unknown one is a broken contract: it throws, and is never answered
   * (a made-up "not allowed" or "rejected" would close an effect whose send may have landed).
   */
  #route(req) {
    const entry = this.targets.get(req.target);
    if (!entry) throw new InterlockError(`the gate asked for target ${JSON.stringify(req.target)}, which is not routed to this gate`);
    return { ...entry, effect: JSON.parse(req.effect) };
  }

  async #capture(req) {
    const { def, effect } = this.#route(req);
    try {
      if (!def.premises) return { tag: 'failed', val: `effect ${req.target} defines no premises` };
      const all = await def.premises(effect, { effectId: req.effectId });
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

  async #apply(req) {
    const { def, fn, effect } = this.#route(req);
    const args = def.params ? def.params.map((p) => effect[p]) : [effect];
    try {
      const result = await withTimeout(def.timeoutMs ?? 30_000, (signal) =>
        fn(...args, req.idempotencyKey, { effectId: req.effectId, attempt: req.attempt, signal }));
      return { tag: 'applied', val: JSON.stringify(result ?? null) };
    } catch (e) {
      if (e instanceof Rejected) return { tag: 'rejected', val: e.message };
      return { tag: 'unknown', val: message(e) };
    }
  }

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
   */
  async recover() {
    return this.gate.recoverAll(this.router);
  }

  /** Submits a raw proposal (ARCHITECTURE.md schema), routed to the defined effects. */
  async submit(proposal) {
    return this.gate.submit(proposal, this.router);
  }

  /** Grants (or extends) a lease: `{ ttlMs }` from now, or `{ untilMs }`. */
  async lease(name, { ttlMs, untilMs } = {}) {
    const until = untilMs ?? (ttlMs === undefined ? undefined : this.clock.nowMs() + ttlMs);
    if (until === undefined) throw new TypeError('lease: give ttlMs or untilMs');
    await this.gate.grantLease(name, until);
  }
  revokeLease(name) {
    return this.gate.revokeLease(name);
  }
  /** Records an approval (ARCHITECTURE.md, "Approval"). */
  approve(approval) {
    return this.gate.approve(approval);
  }
  revokeApproval(id) {
    return this.gate.revokeApproval(id);
  }
  confirm(effectId, evidence) {
    return this.gate.confirm(effectId, evidence);
  }
  openEffects() {
    return this.gate.openEffects();
  }
  /** The effect's receipt (object); signed with HMAC-SHA256 when `key` is given. */
  receipt(effectId, { key } = {}) {
    return this.gate.receipt(effectId, key);
  }
  checkReceipt(receipt, key) {
    return this.gate.checkReceipt(receipt, key);
  }
  /** Verifies every hash chain; receipts in `anchors` pin their streams. */
  verify({ anchors = [] } = {}) {
    return this.gate.verify(anchors);
  }
  /** Releases the journal and its lock (a promise for the IndexedDB journal). */
  close() {
    return this.journal.close?.();
  }
}

export { InterlockError };
