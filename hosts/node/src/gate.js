// Gate: one instance of the gate component, its imports (journal, clock) and the loop that
// drives its steps. The gate never calls a target: each call answers with a step (capture,
// authorize, apply, query or done); this loop performs it through `targets` (awaiting,
// since JS targets are async) and hands the reply back with `resume`. Nothing here decides
// anything: the loop only routes. This file runs unchanged in Node and in a browser.
import { JournalError, gateError, GateError, invalidField } from './errors.js';

/** WIT `state` as the journal spells it (upper case). */
const STATE = (s) => s.toUpperCase();
/** WIT `reason` (kebab-case) as the journal spells it (underscores). */
const REASON = (r) => (r === undefined ? null : r.replaceAll('-', '_'));

const parse = (text) => (text === undefined ? null : JSON.parse(text));

/** `name` as one JSON pointer token (RFC 6901). */
const token = (name) => String(name).replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * Why `v` cannot cross as JSON unchanged, or null. JSON.stringify would silently turn NaN and
 * Infinity into null, drop undefined, functions and symbols, turn a Date into a string and a
 * Map into {}, and throw an untyped TypeError on a BigInt or a cycle: the gate would decide
 * on a value the caller never gave. Integer magnitude is the core's rule, not checked here.
 */
function unfaithful(v) {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return null;
    case 'number':
      return Number.isFinite(v) ? null : `is ${v}, which JSON cannot carry`;
    case 'bigint':
      return `is a BigInt (${v}n), which JSON cannot carry; pass a number (at most 2^53-1) or a string`;
    case 'undefined':
      return 'is undefined, which JSON cannot carry (it would be dropped)';
    case 'function':
      return 'is a function, which JSON cannot carry (it would be dropped)';
    case 'symbol':
      return 'is a symbol, which JSON cannot carry (it would be dropped)';
    default: {
      if (v === null || Array.isArray(v)) return null;
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) {
        const kind = v.constructor?.name ?? 'object';
        return `is a ${kind}, not a plain object, array, string, number, boolean or null (JSON would change it)`;
      }
      if (typeof v.toJSON === 'function') return 'has a toJSON method (JSON would send what it returns instead)';
      if (Object.getOwnPropertySymbols(v).some((s) => Object.prototype.propertyIsEnumerable.call(v, s))) {
        return 'has symbol keys, which JSON cannot carry (they would be dropped)';
      }
      return null;
    }
  }
}

/** Throws InvalidFieldError at the JSON pointer of the first value JSON would not carry as is. */
function checkJson(v, path, seen) {
  const problem = unfaithful(v);
  if (problem) throw invalidField(path, problem);
  if (typeof v !== 'object' || v === null) return;
  if (seen.has(v)) throw invalidField(path, 'refers back to itself (a cycle), which JSON cannot carry');
  seen.add(v);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      if (!(i in v)) throw invalidField(`${path}/${i}`, 'is a hole in the array, which JSON would turn into null');
      checkJson(v[i], `${path}/${i}`, seen);
    }
  } else {
    for (const k of Object.keys(v)) checkJson(v[k], `${path}/${token(k)}`, seen);
  }
  seen.delete(v);
}

/** Throws InvalidFieldError (`field`: `root` + the pointer) unless JSON carries `value` as is. */
export function assertJson(value, root = '') {
  checkJson(value, root, new Set());
}

/**
 * An input as the JSON text a gate export takes: text as given, a value checked (nothing
 * recorded, nothing sent when it fails) and then serialized.
 */
export function jsonText(value) {
  if (typeof value === 'string') return value;
  assertJson(value);
  return JSON.stringify(value);
}

/** jco's outcome record -> the typed outcome object of this package. */
export function toOutcome(o) {
  return {
    effectId: o.effectId,
    state: STATE(o.state),
    reason: REASON(o.reason),
    executed: o.executed,
    result: parse(o.result),
    changed: o.changed.map((c) => ({ name: c.name, was: parse(c.was), now: parse(c.now) })),
    returnTo: o.returnTo ?? null,
    replayed: o.replayed,
    retryAfterMs: o.retryAfterMs === undefined ? null : Number(o.retryAfterMs),
  };
}

function toReport(r) {
  return {
    streams: Number(r.streams),
    entries: Number(r.entries),
    problems: r.problems.map((p) => ({ stream: p.stream, seq: Number(p.seq), kind: p.kind, detail: p.detail })),
  };
}

/** Is `e` jco's wrapper of an export's `err` (as opposed to a trap)? */
function isErrResult(e) {
  return e instanceof Error && Object.hasOwn(e, 'payload') && typeof e.payload?.tag === 'string';
}

/** The journal import over a backend; backend failures cross as WIT `journal-error` values. */
function journalImport(journal) {
  const guard = (fn) => (...args) => {
    try {
      return fn(...args);
    } catch (e) {
      // A plain value thrown from an import is the `err` case; an Error would be a trap.
      if (e instanceof JournalError) {
        throw e.tag === 'conflict' ? { tag: 'conflict', val: BigInt(e.val) } : { tag: e.tag, val: e.message };
      }
      throw e;
    }
  };
  return {
    append: guard((stream, expected, entries, durable, open) => {
      journal.append(stream, Number(expected), entries, durable, open);
    }),
    read: guard((stream, start) => journal.read(stream, Number(start))),
    length: guard((stream) => BigInt(journal.length(stream))),
    openStreams: guard(() => journal.openStreams()),
    streams: guard(() => journal.streams()),
    sync: guard(() => journal.sync()),
  };
}

function clockImport(clock) {
  return {
    now() {
      const ms = clock.nowMs();
      return { seconds: BigInt(Math.floor(ms / 1000)), nanoseconds: (ms % 1000) * 1_000_000 };
    },
    resolution() {
      return { seconds: 0n, nanoseconds: 1_000_000 };
    },
  };
}

/**
 * The compiled component, ready to instantiate many times (one instance per Gate).
 * `getCoreModule(name)` resolves to a compiled WebAssembly.Module of gen/gate/<name>.
 */
export class GateComponent {
  constructor(instantiate, getCoreModule) {
    this.instantiate = instantiate;
    const cache = new Map();
    this.getCoreModule = (name) => {
      if (!cache.has(name)) cache.set(name, getCoreModule(name));
      return cache.get(name);
    };
  }
}

/** How recovery waits out another worker's live claim (see Gate.recover). */
export const DEFAULT_CLAIM_WAIT = { pollMs: 200, maxPolls: 150 };

export class Gate {
  /**
   * A fresh instance of the gate over `journal` (a backend: FileJournal, MemoryJournal,
   * IndexedDbJournal or your own with the same six sync methods) and `clock`.
   * `hooks` (tests): { beforeApply, afterApply, afterQuery }, called with (request, reply, { recovering }).
   */
  static async instantiate(component, { journal, clock, hooks = {}, claimWait = DEFAULT_CLAIM_WAIT }) {
    const root = await component.instantiate(component.getCoreModule, {
      'interlock:gate/journal': journalImport(journal),
      'wasi:clocks/wall-clock': clockImport(clock),
    });
    return new Gate(root.gate, journal, clock, hooks, claimWait);
  }

  constructor(api, journal, clock, hooks, claimWait) {
    this.api = api;
    this.journal = journal;
    this.clock = clock;
    this.hooks = hooks;
    this.claimWait = claimWait;
    this.broken = null;
    this.routed = null; // what setRoutes last said, as JSON; null: every target is routed
  }

  /** Calls an export: its `err` becomes a typed GateError; anything else is a trap. */
  #call(name, ...args) {
    if (this.broken) throw this.broken;
    try {
      return this.api[name](...args);
    } catch (e) {
      if (isErrResult(e)) throw gateError(e.payload);
      // A trap (or a host import that threw an Error) leaves the instance unusable: the
      // guest was unwound mid-call. It stays a trap; every later call rethrows it.
      this.broken = e;
      throw e;
    }
  }

  /** Waits until every append so far is durable (backends that write behind, e.g. IndexedDB). */
  async durable() {
    if (this.journal.flush) await this.journal.flush();
  }

  submitStep(proposal) {
    return this.#call('submit', jsonText(proposal));
  }

  resume(op, reply) {
    return this.#call('resume', op, reply);
  }

  cancel(op) {
    this.#call('cancel', op);
  }

  /**
   * The targets this host performs steps for. An effect of any other target is left open
   * (target_unroutable) without asking anything, for a host that can reach it. Until this is
   * called every target is routed.
   */
  setRoutes(targets) {
    const routes = [...targets];
    this.#call('setRoutes', routes);
    this.routed = JSON.stringify(routes);
  }

  /** Tells the gate the targets `targets.routes` names, when it names them and they changed. */
  #routeTo(targets) {
    if (targets?.routes === undefined) return;
    if (JSON.stringify([...targets.routes]) !== this.routed) this.setRoutes(targets.routes);
  }

  /**
   * Runs `step` and every step after it until the gate is done; returns the outcome.
   * `targets`: { capture(req), authorize(req), apply(req), query(req) }, each returning (or
   * resolving to) a WIT reply `{ tag, val }`, and optionally `routes`: the target names they
   * reach (submit and recover pass it to setRoutes). A target that cannot answer a step
   * throws; it never makes a reply up.
   */
  async drive(step, targets, { recovering = false } = {}) {
    const ctx = { recovering };
    for (;;) {
      const { ask } = step;
      // Nothing leaves the gate before what it wrote is durable (write-behind backends).
      await this.durable();
      if (ask.tag === 'done') return toOutcome(ask.val);
      let reply;
      switch (ask.tag) {
        case 'capture':
          reply = await targets.capture(ask.val);
          break;
        case 'authorize':
          reply = await targets.authorize(ask.val);
          break;
        case 'apply':
          await this.hooks.beforeApply?.(ask.val, undefined, ctx);
          reply = await targets.apply(ask.val);
          await this.hooks.afterApply?.(ask.val, reply, ctx);
          break;
        case 'query':
          reply = await targets.query(ask.val);
          await this.hooks.afterQuery?.(ask.val, reply, ctx);
          break;
        default:
          throw new Error(`the gate asked for an unknown step ${ask.tag}`);
      }
      step = this.resume(step.op, reply);
    }
  }

  /** Gates a proposal (object or JSON text; schema in ARCHITECTURE.md) through to its outcome. */
  async submit(proposal, targets) {
    this.#routeTo(targets);
    return this.drive(this.submitStep(proposal), targets);
  }

  /**
   * Recovers one effect by the gate's recovery table. While another worker's claim is live
   * the gate says so (DISPATCHED, claim_live, retryAfterMs); this waits that long (+1 ms,
   * the claim is live until strictly after its deadline) and asks again, at most
   * `claimWait.maxPolls` times.
   */
  async recover(effectId, targets) {
    this.#routeTo(targets);
    for (let polls = 0; ; polls++) {
      const first = this.#call('recover', effectId);
      const o = await this.drive(first, targets, { recovering: true });
      if (!(o.state === 'DISPATCHED' && o.reason === 'claim_live') || polls >= this.claimWait.maxPolls) return o;
      await this.clock.sleep(o.retryAfterMs === null ? this.claimWait.pollMs : o.retryAfterMs + 1);
    }
  }

  /**
   * Recovers every open effect: a list of `{ effectId, outcome }` or `{ effectId, error }`.
   * One effect's gate error does not stop the others; a trap (or a hook's throw) does.
   */
  async recoverAll(targets) {
    const results = [];
    for (const effectId of this.openEffects()) {
      try {
        results.push({ effectId, outcome: await this.recover(effectId, targets) });
      } catch (e) {
        if (!(e instanceof GateError)) throw e;
        results.push({ effectId, error: e });
      }
    }
    return results;
  }

  openEffects() {
    return this.#call('openEffects');
  }

  effectIdOf(proposal) {
    return this.#call('effectIdOf', jsonText(proposal));
  }

  async grantLease(lease, expiresAtMs) {
    this.#call('grantLease', lease, BigInt(expiresAtMs));
    await this.durable();
  }

  async revokeLease(lease) {
    this.#call('revokeLease', lease);
    await this.durable();
  }

  async approve(approval) {
    this.#call('approve', jsonText(approval));
    await this.durable();
  }

  async revokeApproval(approval) {
    this.#call('revokeApproval', approval);
    await this.durable();
  }

  async confirm(effectId, evidence) {
    const o = this.#call('confirm', effectId, jsonText(evidence));
    await this.durable();
    return toOutcome(o);
  }

  /** The receipt as an object (signed with HMAC-SHA256 when `key`, a Uint8Array, is given). */
  receipt(effectId, key) {
    return JSON.parse(this.receiptText(effectId, key));
  }

  receiptText(effectId, key) {
    return this.#call('receipt', effectId, key === undefined ? undefined : toBytes(key));
  }

  checkReceipt(receipt, key) {
    return toReport(this.#call('checkReceipt', jsonText(receipt), toBytes(key)));
  }

  /** Verifies every stream; each receipt in `anchors` pins its stream's length and head. */
  verify(anchors = []) {
    return toReport(this.#call('verify', anchors.map(jsonText)));
  }
}

function toBytes(key) {
  return typeof key === 'string' ? new TextEncoder().encode(key) : key;
}
