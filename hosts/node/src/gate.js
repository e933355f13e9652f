// Gate: one instance of the gate component, its imports (journal, clock) and the loop that
// drives its steps. The gate never calls a target: each call answers with a step (capture,
// authorize, apply, query or done); this loop performs it through `targets` (awaiting,
// since JS targets are async) and hands the reply back with `resume`. Nothing here decides
// anything: the loop only routes. This file runs unchanged in Node and in a browser.
import { JournalError, gateError, GateError } from './errors.js';

/** WIT `state` as the journal spells it (upper case). */
const STATE = (s) => s.toUpperCase();
/** WIT `reason` (kebab-case) as the journal spells it (underscores). */
const REASON = (r) => (r === undefined ? null : r.replaceAll('-', '_'));

const parse = (text) => (text === undefined ? null : JSON.parse(text));

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
    return this.#call('submit', typeof proposal === 'string' ? proposal : JSON.stringify(proposal));
  }

  resume(op, reply) {
    return this.#call('resume', op, reply);
  }

  cancel(op) {
    this.#call('cancel', op);
  }

  /**
   * Runs `step` and every step after it until the gate is done; returns the outcome.
   * `targets`: { capture(req), authorize(req), apply(req), query(req) }, each returning (or
   * resolving to) a WIT reply `{ tag, val }`.
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
    return this.drive(this.submitStep(proposal), targets);
  }

  /**
   * Recovers one effect by the gate's recovery table. While another worker's claim is live
   * the gate says so (DISPATCHED, claim_live, retryAfterMs); this waits that long (+1 ms,
   * the claim is live until strictly after its deadline) and asks again, at most
   * `claimWait.maxPolls` times.
   */
  async recover(effectId, targets) {
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
    return this.#call('effectIdOf', typeof proposal === 'string' ? proposal : JSON.stringify(proposal));
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
    this.#call('approve', typeof approval === 'string' ? approval : JSON.stringify(approval));
    await this.durable();
  }

  async revokeApproval(approval) {
    this.#call('revokeApproval', approval);
    await this.durable();
  }

  async confirm(effectId, evidence) {
    const o = this.#call('confirm', effectId, typeof evidence === 'string' ? evidence : JSON.stringify(evidence));
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
    const text = typeof receipt === 'string' ? receipt : JSON.stringify(receipt);
    return toReport(this.#call('checkReceipt', text, toBytes(key)));
  }

  /** Verifies every stream; each receipt in `anchors` pins its stream's length and head. */
  verify(anchors = []) {
    return toReport(this.#call('verify', anchors.map((a) => (typeof a === 'string' ? a : JSON.stringify(a)))));
  }
}

function toBytes(key) {
  return typeof key === 'string' ? new TextEncoder().encode(key) : key;
}
