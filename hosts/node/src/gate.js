// Gate: one instance of the gate component, its imports (journal, clock) and the loop that
// drives its steps. The gate never calls a target: each call answers with a step (capture,
// authorize, apply, query or done); this loop performs it through `targets` (awaiting,
// since JS targets are async) and hands the reply back with `resume`. Nothing here decides
// anything: the loop only routes. This file runs unchanged in Node and in a browser.
import { JournalError, gateError, GateError, invalidField } from './errors.js';

/**
 * @import { Outcome, State, Reason, VerifyReport, ProblemKind, Receipt, Targets } from './types.js'
 * @import { Hooks, Clock, ClaimWait, JournalBackend, Recovered, Reply, Step } from './types.js'
 * @import { Outcome as WitOutcome } from '../gen/gate/interfaces/interlock-gate-types.js'
 * @import { VerifyReport as WitVerifyReport } from '../gen/gate/interfaces/interlock-gate-gate.js'
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 * @typedef {GateRoot['gate']} GateApi
 */

/**
 * WIT `state` as the journal spells it (upper case).
 * @param {WitOutcome['state']} s
 */
const STATE = (s) => /** @type {State} */ (s.toUpperCase());
/**
 * WIT `reason` (kebab-case) as the journal spells it (underscores).
 * @param {WitOutcome['reason']} r
 */
const REASON = (r) => (r === undefined ? null : /** @type {Reason} */ (r.replaceAll('-', '_')));

/** @param {string | undefined} text */
const parse = (text) => (text === undefined ? null : JSON.parse(text));

/**
 * `name` as one JSON pointer token (RFC 6901).
 * @param {string | number} name
 */
const token = (name) => String(name).replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * Why `v` cannot cross as JSON unchanged, or null. JSON.stringify would silently turn NaN and
 * Infinity into null, drop undefined, functions and symbols, turn a Date into a string and a
 * Map into {}, and throw an untyped TypeError on a BigInt or a cycle: the gate would decide
 * on a value the caller never gave. Integer magnitude is the core's rule, not checked here.
 * @param {unknown} v
 * @returns {string | null}
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
      const o = /** @type {Record<string | symbol, any>} */ (v);
      const proto = Object.getPrototypeOf(o);
      if (proto !== Object.prototype && proto !== null) {
        const kind = o.constructor?.name ?? 'object';
        return `is a ${kind}, not a plain object, array, string, number, boolean or null (JSON would change it)`;
      }
      if (typeof o.toJSON === 'function') return 'has a toJSON method (JSON would send what it returns instead)';
      if (Object.getOwnPropertySymbols(o).some((s) => Object.prototype.propertyIsEnumerable.call(o, s))) {
        return 'has symbol keys, which JSON cannot carry (they would be dropped)';
      }
      return null;
    }
  }
}

/**
 * Throws InvalidFieldError at the JSON pointer of the first value JSON would not carry as is.
 * @param {unknown} v
 * @param {string} path
 * @param {Set<object>} seen
 */
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
    const o = /** @type {Record<string, unknown>} */ (v);
    for (const k of Object.keys(o)) checkJson(o[k], `${path}/${token(k)}`, seen);
  }
  seen.delete(v);
}

/**
 * Throws InvalidFieldError (`field`: `root` + the pointer) unless JSON carries `value` as is.
 * @param {unknown} value
 * @param {string} [root]
 */
export function assertJson(value, root = '') {
  checkJson(value, root, new Set());
}

/**
 * An input as the JSON text a gate export takes: text as given, a value checked (nothing
 * recorded, nothing sent when it fails) and then serialized.
 * @param {unknown} value
 * @returns {string}
 */
export function jsonText(value) {
  if (typeof value === 'string') return value;
  assertJson(value);
  return JSON.stringify(value);
}

/**
 * jco's outcome record -> the typed outcome object of this package.
 * @param {WitOutcome} o
 * @returns {Outcome}
 */
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

/**
 * @param {WitVerifyReport} r
 * @returns {VerifyReport}
 */
function toReport(r) {
  return {
    streams: Number(r.streams),
    entries: Number(r.entries),
    problems: r.problems.map((p) => ({ stream: p.stream, seq: Number(p.seq), kind: p.kind, detail: p.detail })),
  };
}

/**
 * Is `e` jco's wrapper of an export's `err` (as opposed to a trap)?
 * @param {unknown} e
 * @returns {e is Error & { payload: { tag: string, val?: unknown } }}
 */
function isErrResult(e) {
  return e instanceof Error && Object.hasOwn(e, 'payload') && typeof (/** @type {any} */ (e).payload?.tag) === 'string';
}

/**
 * The journal import over a backend; backend failures cross as WIT `journal-error` values.
 * @param {JournalBackend} journal
 */
function journalImport(journal) {
  /**
   * @template {unknown[]} A
   * @template R
   * @param {(...args: A) => R} fn
   * @returns {(...args: A) => R}
   */
  const guard = (fn) => (...args) => {
    try {
      return fn(...args);
    } catch (e) {
      // A plain value thrown from an import is the `err` case; an Error would be a trap.
      if (e instanceof JournalError) {
        throw e.tag === 'conflict' ? { tag: 'conflict', val: BigInt(/** @type {number} */ (e.val)) } : { tag: e.tag, val: e.message };
      }
      throw e;
    }
  };
  return {
    append: guard(
      /** @type {(stream: string, expected: bigint, entries: string[], durable: boolean, open: boolean) => void} */
      (stream, expected, entries, durable, open) => {
        journal.append(stream, Number(expected), entries, durable, open);
      }),
    read: guard(/** @type {(stream: string, start: bigint) => string[]} */ (stream, start) => journal.read(stream, Number(start))),
    length: guard(/** @type {(stream: string) => bigint} */ (stream) => BigInt(journal.length(stream))),
    openStreams: guard(() => journal.openStreams()),
    streams: guard(() => journal.streams()),
    sync: guard(() => journal.sync()),
  };
}

/** @param {Clock} clock */
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
 * `Root` is what jco's `instantiate` resolves to (the component's exports).
 * @template Root
 */
export class GateComponent {
  /**
   * @param {(getCoreModule: (name: string) => Promise<WebAssembly.Module>, imports: any) => Root | Promise<Root>} instantiate
   *   jco's `instantiate` of gen/<component>
   * @param {(name: string) => Promise<WebAssembly.Module>} getCoreModule
   */
  constructor(instantiate, getCoreModule) {
    this.instantiate = instantiate;
    /** @type {Map<string, Promise<WebAssembly.Module>>} */
    const cache = new Map();
    /** @type {(name: string) => Promise<WebAssembly.Module>} */
    this.getCoreModule = (name) => {
      let module = cache.get(name);
      if (!module) cache.set(name, (module = getCoreModule(name)));
      return module;
    };
  }
}

/**
 * A bare instance of the gate component over `journal` and `clock`: its exports as jco
 * gives them (an `err` is thrown with a `payload`). `Gate` wraps one for the friendly API;
 * the conformance driver hands them to the runner as they are.
 * @param {GateComponent<GateRoot>} component
 * @param {{ journal: JournalBackend, clock: Clock }} options
 * @returns {Promise<GateRoot>}
 */
export async function gateRoot(component, { journal, clock }) {
  return component.instantiate(component.getCoreModule, {
    'interlock:gate/journal': journalImport(journal),
    'wasi:clocks/wall-clock': clockImport(clock),
  });
}

export class Gate {
  /** @type {GateApi} */
  #api;
  /** @type {Hooks} */
  #hooks;
  /** @type {ClaimWait} */
  #claimWait;
  /** @type {unknown} the trap that broke this instance; every later call rethrows it */
  #broken = null;
  /** @type {string | null} what setRoutes last said, as JSON; null: every target is routed */
  #routed = null;

  /**
   * A fresh instance of the gate over `journal` (a backend: FileJournal, MemoryJournal,
   * IndexedDbJournal or your own with the same six sync methods) and `clock`.
   * `hooks` (tests): { beforeApply, afterApply, afterQuery }, called with (request, reply, { recovering }).
   * `claimWait`: how recovery waits out a live claim; by default the gate's own (`defaults`).
   * @param {GateComponent<GateRoot>} component
   * @param {{ journal: JournalBackend, clock: Clock, hooks?: Hooks, claimWait?: ClaimWait }} options
   * @returns {Promise<Gate>}
   */
  static async instantiate(component, { journal, clock, hooks = {}, claimWait }) {
    const root = await gateRoot(component, { journal, clock });
    if (!claimWait) {
      const { claim_wait: w } = JSON.parse(root.gate.defaults());
      claimWait = { pollMs: w.poll_ms, maxPolls: w.max_polls };
    }
    return new Gate(root.gate, journal, clock, hooks, /** @type {ClaimWait} */ (claimWait));
  }

  /**
   * Use Gate.instantiate.
   * @param {GateApi} api
   * @param {JournalBackend} journal
   * @param {Clock} clock
   * @param {Hooks} hooks
   * @param {ClaimWait} claimWait
   */
  constructor(api, journal, clock, hooks, claimWait) {
    this.#api = api;
    this.journal = journal;
    this.clock = clock;
    this.#hooks = hooks;
    this.#claimWait = claimWait;
  }

  /**
   * Calls an export: its `err` becomes a typed GateError; anything else is a trap.
   * @template {keyof GateApi} K
   * @param {K} name
   * @param {Parameters<GateApi[K]>} args
   * @returns {ReturnType<GateApi[K]>}
   */
  #call(name, ...args) {
    if (this.#broken) throw this.#broken;
    try {
      return /** @type {(...a: Parameters<GateApi[K]>) => ReturnType<GateApi[K]>} */ (this.#api[name])(...args);
    } catch (e) {
      if (isErrResult(e)) throw gateError(e.payload);
      // A trap (or a host import that threw an Error) leaves the instance unusable: the
      // guest was unwound mid-call. It stays a trap; every later call rethrows it.
      this.#broken = e;
      throw e;
    }
  }

  /** Waits until every append so far is durable (backends that write behind, e.g. IndexedDB). */
  async durable() {
    if (this.journal.flush) await this.journal.flush();
  }

  /**
   * Starts gating a proposal (object or JSON text): the gate's first step.
   * @param {object | string} proposal
   * @returns {Step}
   */
  submitStep(proposal) {
    return this.#call('submit', jsonText(proposal));
  }

  /**
   * Answers the step of operation `op`: the gate's next step.
   * @param {bigint} op
   * @param {Reply} reply
   * @returns {Step}
   */
  resume(op, reply) {
    return this.#call('resume', op, reply);
  }

  /**
   * Abandons operation `op`; what the journal holds stays.
   * @param {bigint} op
   */
  cancel(op) {
    this.#call('cancel', op);
  }

  /**
   * The targets this host performs steps for. An effect of any other target is left open
   * (target_unroutable) without asking anything, for a host that can reach it. Until this is
   * called every target is routed.
   * @param {Iterable<string>} targets
   */
  setRoutes(targets) {
    const routes = [...targets];
    this.#call('setRoutes', routes);
    this.#routed = JSON.stringify(routes);
  }

  /**
   * Tells the gate the targets `targets.routes` names, when it names them and they changed.
   * @param {Targets} targets
   */
  #routeTo(targets) {
    if (targets?.routes === undefined) return;
    if (JSON.stringify([...targets.routes]) !== this.#routed) this.setRoutes(targets.routes);
  }

  /**
   * Runs `step` and every step after it until the gate is done; returns the outcome.
   * `targets`: { capture(req), authorize(req), apply(req), query(req) }, each returning (or
   * resolving to) a WIT reply `{ tag, val }`, and optionally `routes`: the target names they
   * reach (submit and recover pass it to setRoutes). A target that cannot answer a step
   * throws; it never makes a reply up.
   * @param {Step} step
   * @param {Targets} targets
   * @param {{ recovering?: boolean }} [options]
   * @returns {Promise<Outcome>}
   */
  async drive(step, targets, { recovering = false } = {}) {
    const ctx = { recovering };
    for (;;) {
      const { ask } = step;
      // Nothing leaves the gate before what it wrote is durable (write-behind backends).
      await this.durable();
      if (ask.tag === 'done') return toOutcome(ask.val);
      /** @type {Reply} */
      let reply;
      switch (ask.tag) {
        case 'capture':
          reply = await targets.capture(ask.val);
          break;
        case 'authorize':
          reply = await targets.authorize(ask.val);
          break;
        case 'apply':
          await this.#hooks.beforeApply?.(ask.val, undefined, ctx);
          reply = await targets.apply(ask.val);
          await this.#hooks.afterApply?.(ask.val, reply, ctx);
          break;
        case 'query':
          reply = await targets.query(ask.val);
          await this.#hooks.afterQuery?.(ask.val, reply, ctx);
          break;
        default:
          throw new Error(`the gate asked for an unknown step ${/** @type {{ tag: string }} */ (ask).tag}`);
      }
      step = this.resume(step.op, reply);
    }
  }

  /**
   * Gates a proposal (object or JSON text; schema in ARCHITECTURE.md) through to its outcome.
   * @param {object | string} proposal
   * @param {Targets} targets
   * @returns {Promise<Outcome>}
   */
  async submit(proposal, targets) {
    this.#routeTo(targets);
    return this.drive(this.submitStep(proposal), targets);
  }

  /**
   * Recovers one effect by the gate's recovery table. While another worker's claim is live
   * the gate says so (DISPATCHED, claim_live, retryAfterMs); this waits that long (+1 ms,
   * the claim is live until strictly after its deadline) and asks again, at most
   * `claimWait.maxPolls` times.
   * @param {string} effectId
   * @param {Targets} targets
   * @returns {Promise<Outcome>}
   */
  async recover(effectId, targets) {
    this.#routeTo(targets);
    for (let polls = 0; ; polls++) {
      const first = this.#call('recover', effectId);
      const o = await this.drive(first, targets, { recovering: true });
      if (!(o.state === 'DISPATCHED' && o.reason === 'claim_live') || polls >= this.#claimWait.maxPolls) return o;
      await this.clock.sleep(o.retryAfterMs === null ? this.#claimWait.pollMs : o.retryAfterMs + 1);
    }
  }

  /**
   * Recovers every open effect: a list of `{ effectId, outcome }` or `{ effectId, error }`.
   * One effect's gate error does not stop the others; a trap (or a hook's throw) does.
   * @param {Targets} targets
   * @returns {Promise<Recovered[]>}
   */
  async recoverAll(targets) {
    /** @type {Recovered[]} */
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

  /**
   * The ids of the effects not closed yet.
   * @returns {string[]}
   */
  openEffects() {
    return this.#call('openEffects');
  }

  /**
   * The effect id a proposal gets; nothing is recorded.
   * @param {object | string} proposal
   * @returns {string}
   */
  effectIdOf(proposal) {
    return this.#call('effectIdOf', jsonText(proposal));
  }

  /**
   * The gate's defaults (`timeout_ms`, `dedupe_window_ms`, `claim_wait: { poll_ms,
   * max_polls }`, `standing_lease_ms`): the one copy every host reads.
   * @returns {{ timeout_ms: number, dedupe_window_ms: number, claim_wait: { poll_ms: number, max_polls: number }, standing_lease_ms: number }}
   */
  defaults() {
    return JSON.parse(this.#call('defaults'));
  }

  /**
   * How long to wait on a send of `effectId` before answering `unknown`: its recorded
   * proposal's `target.timeout_ms`, the gate's default filled in.
   * @param {string} effectId
   * @returns {number}
   */
  sendTimeoutMs(effectId) {
    return Number(this.#call('sendTimeoutMs', effectId));
  }

  /**
   * The name of `agent`'s standing lease; grants nothing.
   * @param {string} agent
   * @returns {string}
   */
  standingLeaseName(agent) {
    return this.#call('standingLeaseName', agent);
  }

  /**
   * Strict authority: a proposal that names no lease or approval is refused
   * (InvalidFieldError at `/authority`) instead of running under its agent's standing lease.
   * @param {boolean} strict
   */
  setStrictAuthority(strict) {
    this.#call('setStrictAuthority', strict);
  }

  /**
   * The line to show once at start when effects of `agent` may run under its standing
   * lease (the gate's words).
   * @param {string} agent
   * @returns {string}
   */
  standingNotice(agent) {
    return this.#call('standingNotice', agent);
  }

  /**
   * Grants `agent`'s standing lease if it never was (a revoked one stays revoked); its
   * name. Recorded like any lease; durable on return.
   * @param {string} agent
   * @returns {Promise<string>}
   */
  async grantStandingLease(agent) {
    const name = this.#call('grantStandingLease', agent);
    await this.durable();
    return name;
  }

  /**
   * Grants (or extends) lease `lease` until `expiresAtMs` (Unix ms); durable on return.
   * @param {string} lease
   * @param {number} expiresAtMs
   */
  async grantLease(lease, expiresAtMs) {
    this.#call('grantLease', lease, BigInt(expiresAtMs));
    await this.durable();
  }

  /** @param {string} lease */
  async revokeLease(lease) {
    this.#call('revokeLease', lease);
    await this.durable();
  }

  /**
   * Records an approval (ARCHITECTURE.md, "Approval"); durable on return.
   * @param {object | string} approval
   */
  async approve(approval) {
    this.#call('approve', jsonText(approval));
    await this.durable();
  }

  /** @param {string} approval */
  async revokeApproval(approval) {
    this.#call('revokeApproval', approval);
    await this.durable();
  }

  /**
   * A person's confirmation of an AMBIGUOUS effect, with the evidence.
   * @param {string} effectId
   * @param {unknown} evidence
   * @returns {Promise<Outcome>}
   */
  async confirm(effectId, evidence) {
    const o = this.#call('confirm', effectId, jsonText(evidence));
    await this.durable();
    return toOutcome(o);
  }

  /**
   * The receipt as an object (signed with HMAC-SHA256 when `key` is given).
   * @param {string} effectId
   * @param {Uint8Array | string} [key]
   * @returns {Receipt}
   */
  receipt(effectId, key) {
    return JSON.parse(this.receiptText(effectId, key));
  }

  /**
   * The receipt's exact JSON text.
   * @param {string} effectId
   * @param {Uint8Array | string} [key]
   * @returns {string}
   */
  receiptText(effectId, key) {
    return this.#call('receipt', effectId, key === undefined ? undefined : toBytes(key));
  }

  /**
   * Checks a receipt's signature and that the journal still holds what it says.
   * @param {Receipt | string} receipt
   * @param {Uint8Array | string} key
   * @returns {VerifyReport}
   */
  checkReceipt(receipt, key) {
    return toReport(this.#call('checkReceipt', jsonText(receipt), toBytes(key)));
  }

  /**
   * Verifies every stream; each receipt in `anchors` pins its stream's length and head.
   * @param {(Receipt | string)[]} [anchors]
   * @returns {VerifyReport}
   */
  verify(anchors = []) {
    return toReport(this.#call('verify', anchors.map(jsonText)));
  }
}

/** @param {Uint8Array | string} key */
function toBytes(key) {
  return typeof key === 'string' ? new TextEncoder().encode(key) : key;
}
