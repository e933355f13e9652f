// The friendly API: Interlock (a gate over a journal) and effects defined as plain async
// functions. Everything here is routing and value conversion; every decision is the
// component's. Runs in Node and in a browser (the entry points pick the journal).
import { Gate, DEFAULT_CLAIM_WAIT } from './gate.js';
import { Rejected, TargetTimeoutError, InterlockError } from './errors.js';
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
    const toEffect = (args) => (def.params ? Object.fromEntries(def.params.map((p, i) => [p, args[i]])) : args[0]);
    const call = (overrides) => async (...args) => {
      const effect = toEffect(args);
      const proposal = this.#proposal(def, effect, overrides);
      if (overrides.premises === undefined && def.premises) {
        // The premises as the agent decides: read now, the effect's own result excluded.
        const effectId = this.gate.effectIdOf(proposal);
        proposal.premises = await def.premises(effect, { effectId });
      }
      return this.gate.submit(proposal, this.router);
    };
    const run = call({});
    /** The same call with per-request settings: { approval, lease, premises, key }. */
    run.with = (overrides) => call(overrides);
    /** The effect id a call would get, recording nothing. */
    run.effectId = (...args) => this.gate.effectIdOf(this.#proposal(def, toEffect(args), {}));
    run.target = def.target;
    return run;
  }

  #proposal(def, effect, o) {
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
    if (def.bounds) p.bounds = def.bounds;
    const cap = typeof def.cap === 'function' ? def.cap(effect) : def.cap;
    if (cap) p.cap = cap;
    return p;
  }

  #route(req) {
    const entry = this.targets.get(req.target);
    if (!entry) throw `no effect is defined for target ${JSON.stringify(req.target)} in this process`;
    return { ...entry, effect: JSON.parse(req.effect) };
  }

  async #capture(req) {
    try {
      const { def, effect } = this.#route(req);
      if (!def.premises) return { tag: 'failed', val: `effect ${req.target} defines no premises` };
      const all = await def.premises(effect, { effectId: req.effectId });
      const asked = {};
      for (const name of req.names) {
        if (!Object.hasOwn(all ?? {}, name)) return { tag: 'failed', val: `premises() gave no ${JSON.stringify(name)}` };
        asked[name] = all[name];
      }
      return { tag: 'captured', val: JSON.stringify(asked) };
    } catch (e) {
      return { tag: 'failed', val: message(e) };
    }
  }

  async #authorize(req) {
    try {
      const { def, effect } = this.#route(req);
      // No check installed, or a check that throws, answers no: fail closed.
      return { tag: 'allowed', val: def.allowed ? (await def.allowed(effect, { agent: req.agent, effectId: req.effectId })) === true : false };
    } catch {
      return { tag: 'allowed', val: false };
    }
  }

  async #apply(req) {
    let route;
    try {
      route = this.#route(req);
    } catch (e) {
      return { tag: 'rejected', val: message(e) }; // nothing was sent: definitive
    }
    const { def, fn, effect } = route;
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
    try {
      const { def, effect } = this.#route(req);
      if (!def.lookup) return { tag: 'failed', val: `effect ${req.target} defines no lookup` };
      const found = await def.lookup(effect, { effectId: req.effectId });
      return found === null || found === undefined ? { tag: 'not-found' } : { tag: 'found', val: JSON.stringify(found) };
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
