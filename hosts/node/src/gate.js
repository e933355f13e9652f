// Gate: one instance of the gate component over a journal, and the loop that drives its
// steps. The gate never calls a target: each call answers with a step; this loop performs it
// (awaiting, since JS targets are async), sleeps when told, and hands the answer back. The
// loops of `effects` and `tools` (interlock.js, tools-core.js) run here too. Nothing here
// decides anything: the loop only routes. Runs unchanged in Node, a browser and workerd.
import { GateError, CrashedError, gateError, proofError } from './errors.js';
import { jsonText } from './json.js';
import { openedRoot } from './component.js';

/**
 * @import { Outcome, State, Reason, VerifyReport, Receipt, Targets, Storage } from './types.js'
 * @import { Clock, ClaimWait, Recovered, Reply, Step, CrashPoint } from './types.js'
 * @import { Outcome as WitOutcome } from '../gen/gate/interfaces/interlock-gate-types.js'
 * @import { VerifyReport as WitVerifyReport } from '../gen/gate/interfaces/interlock-gate-gate.js'
 * @import { CallAnswer } from '../gen/gate/interfaces/interlock-gate-target.js'
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 * @import { GateComponent } from './component.js'
 * @typedef {GateRoot['gate']} GateApi
 * @typedef {{ tag: 'call' | 'request', val: { id: bigint } } | { tag: 'sleep', val: [bigint, bigint] } | { tag: 'crash', val: CrashPoint } | { tag: 'ask', val: { id: bigint } } | { tag: 'done' | 'proposed', val: unknown }} LoopStep
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

export class Gate {
  /** @type {GateRoot} */
  #root;
  /** @type {ClaimWait | undefined} */
  #claimWait;
  /** @type {unknown} the trap (or crash) that broke this instance; every later call rethrows it */
  #broken = null;
  /** @type {string | null} what setRoutes last said, as JSON; null: every target is routed */
  #routed = null;

  /**
   * A fresh instance of the gate over `storage` (FileJournal, MemoryJournal, SqliteJournal,
   * PostgresJournal, IndexedDbJournal or your own Storage) and `clock`, its journal opened.
   * `claimWait`: how recovery waits out a live claim (default: the gate's). `crashAt`
   * (tests): where the gate asks this host to die (`before-send`, `after-send`,
   * `in-recovery`); the step then throws CrashedError and the instance is dropped.
   * @param {GateComponent<GateRoot>} component
   * @param {{ storage: Storage, clock: Clock, claimWait?: ClaimWait, crashAt?: CrashPoint }} options
   * @returns {Promise<Gate>}
   */
  static async instantiate(component, { storage, clock, claimWait, crashAt }) {
    const gate = new Gate(await openedRoot(component, { storage, clock }), storage, clock, claimWait);
    if (crashAt) gate.crashAt(crashAt);
    return gate;
  }

  /**
   * Use Gate.instantiate.
   * @param {GateRoot} root
   * @param {Storage} storage
   * @param {Clock} clock
   * @param {ClaimWait} [claimWait]
   */
  constructor(root, storage, clock, claimWait) {
    this.#root = root;
    this.storage = storage;
    this.clock = clock;
    this.#claimWait = claimWait;
  }

  /** The claim wait as the WIT `claim-wait` (undefined: the gate's). */
  get wait() {
    const w = this.#claimWait;
    return w && { pollMs: BigInt(w.pollMs), maxPolls: BigInt(w.maxPolls) };
  }

  /**
   * Calls an export of `iface`: its `err` becomes a typed GateError; anything else is a trap.
   * @template {'gate' | 'effects' | 'tools' | 'journalAdmin' | 'proof'} I
   * @template {keyof GateRoot[I]} K
   * @param {I} iface
   * @param {K} name
   * @param {GateRoot[I][K] extends (...a: infer P) => any ? P : never} args
   * @returns {GateRoot[I][K] extends (...a: any[]) => infer R ? R : never}
   */
  call(iface, name, ...args) {
    if (this.#broken) throw this.#broken;
    try {
      return /** @type {any} */ (this.#root[iface])[name](...args);
    } catch (e) {
      if (isErrResult(e)) throw iface === 'proof' ? proofError(e.payload) : gateError(e.payload);
      // A trap (or a host import that threw an Error) leaves the instance unusable: the
      // guest was unwound mid-call. It stays a trap; every later call rethrows it.
      this.#broken = e;
      throw e;
    }
  }

  /**
   * A gate export.
   * @template {keyof GateApi} K
   * @param {K} name
   * @param {Parameters<GateApi[K]>} args
   * @returns {ReturnType<GateApi[K]>}
   */
  #call(name, ...args) {
    return /** @type {any} */ (this.call)('gate', name, ...args);
  }

  /** Waits until every write so far is durable (storage that writes behind: IndexedDB). */
  async durable() {
    if (this.storage.flush) await this.storage.flush();
  }

  /**
   * The loop every machine's steps run in (`effects`, `tools`): `perform(call)` answers a
   * call; a sleep is slept; a crash drops the instance (CrashedError); `done` (or
   * `proposed`) ends it. A built-in target's `request` (wit/targets.wit) is performed too,
   * and what came back goes to `answer`. A `perform` that throws cancels the operation and rethrows. A
   * question for the person at an MCP client (`tools`' `ask`) is answered that no one can be
   * asked (no Node host carries an MCP client): the call answers pending.
   * @template {LoopStep} S
   * @param {'effects' | 'tools'} iface
   * @param {S} step
   * @param {(call: Extract<S, { tag: 'call' | 'request' }>['val']) => Promise<any>} perform
   * @returns {Promise<Extract<S, { tag: 'done' | 'proposed' }>>}
   */
  async loop(iface, step, perform) {
    for (;;) {
      // Nothing leaves the gate before what it wrote is durable (write-behind storage).
      await this.durable();
      /** @type {any} */
      let answer;
      /** @type {bigint} */
      let id;
      if (step.tag === 'done' || step.tag === 'proposed') return /** @type {any} */ (step);
      if (step.tag === 'crash') throw this.#crash(step.val);
      if (step.tag === 'sleep') {
        const [op, ms] = /** @type {[bigint, bigint]} */ (step.val);
        id = op;
        await this.clock.sleep(Number(ms));
        answer = { tag: 'slept' };
      } else if (step.tag === 'ask') {
        id = /** @type {{ id: bigint }} */ (step.val).id;
        answer = { tag: 'failed', val: 'no client here to ask a person' };
      } else {
        id = /** @type {{ id: bigint }} */ (step.val).id;
        try {
          answer = await perform(/** @type {any} */ (step.val));
        } catch (e) {
          this.call(iface, 'cancel', id);
          throw e;
        }
      }
      // `answer` is the `effects` loop's only (tools has no built-in targets).
      const next = step.tag === 'request' ? 'answer' : 'resume';
      step = /** @type {S} */ (/** @type {any} */ (this.call)(iface, next, id, answer));
    }
  }

  /** @param {CrashPoint} point */
  #crash(point) {
    this.#broken = new CrashedError(point);
    return this.#broken;
  }

  /**
   * Tests: the gate asks this host to die at `point` (none: never), as a killed process
   * would: the step throws CrashedError and this instance refuses every later call.
   * @param {CrashPoint | undefined} point
   */
  crashAt(point) {
    this.#call('crashAt', point);
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
   * throws; it never makes a reply up. A sleep is slept; a crash throws CrashedError.
   * @param {Step} step
   * @param {Targets} targets
   * @returns {Promise<Outcome>}
   */
  async drive(step, targets) {
    for (;;) {
      const { ask } = step;
      await this.durable();
      /** @type {Reply} */
      let reply;
      switch (ask.tag) {
        case 'done':
          return toOutcome(ask.val);
        case 'crash':
          throw this.#crash(ask.val);
        case 'sleep':
          await this.clock.sleep(Number(ask.val));
          reply = { tag: 'slept' };
          break;
        default:
          reply = await targets[ask.tag](/** @type {any} */ (ask.val));
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
   * Recovers one effect by the gate's recovery table, waiting out another worker's live
   * claim as the gate says (it asks this loop to sleep).
   * @param {string} effectId
   * @param {Targets} targets
   * @returns {Promise<Outcome>}
   */
  async recover(effectId, targets) {
    this.#routeTo(targets);
    return this.drive(this.#call('recoverWaiting', effectId, this.wait), targets);
  }

  /**
   * Runs `recover(effectId)` for every open effect: a list of `{ effectId, outcome }` or
   * `{ effectId, error }`. One effect's gate error does not stop the others; a trap does.
   * @template T
   * @param {(effectId: string) => Promise<T>} recover
   * @returns {Promise<({ effectId: string, error: GateError } | T)[]>}
   */
  async recoverEach(recover) {
    /** @type {({ effectId: string, error: GateError } | T)[]} */
    const results = [];
    for (const effectId of this.openEffects()) {
      try {
        results.push(await recover(effectId));
      } catch (e) {
        if (!(e instanceof GateError)) throw e;
        results.push({ effectId, error: e });
      }
    }
    return results;
  }

  /**
   * Recovers every open effect: a list of `{ effectId, outcome }` or `{ effectId, error }`.
   * @param {Targets} targets
   * @returns {Promise<Recovered[]>}
   */
  async recoverAll(targets) {
    return this.recoverEach(async (effectId) => ({ effectId, outcome: await this.recover(effectId, targets) }));
  }

  /**
   * Every entry of the journal in append order (each without its newline).
   * @returns {string[]}
   */
  entriesInOrder() {
    return this.call('journalAdmin', 'entriesInOrder');
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
   * @returns {{ timeout_ms: number, dedupe_window_ms: number, clock_skew_ms: number, claim_wait: { poll_ms: number, max_polls: number }, standing_lease_ms: number }}
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
   * Records the approval rules and routes in force from now on (ARCHITECTURE.md,
   * "People in the loop"); durable on return.
   * @param {object | string} rules
   */
  async setApprovalRules(rules) {
    this.#call('setApprovalRules', jsonText(rules));
    await this.durable();
  }

  /** The approval rules in force (`{}` when none were recorded). @returns {object} */
  approvalRules() {
    return JSON.parse(this.#call('approvalRules'));
  }

  /**
   * Every item a person may act on now, from the journal.
   * @returns {object[]}
   */
  inbox() {
    return JSON.parse(this.#call('inbox'));
  }

  /**
   * Items by route, time to decision, deadlines missed, the share approved by rule, from
   * the journal.
   * @returns {object}
   */
  scoreboard() {
    return JSON.parse(this.#call('scoreboard'));
  }

  /**
   * A person's decision on an inbox item, checked against the decider's own lease and the
   * item's route; the item after. Not allowed: InvalidFieldError saying why.
   * @param {{ item: string, decider: string, verdict: string, why?: string, evidence?: unknown }} decision
   * @returns {Promise<object>}
   */
  async decide(decision) {
    const after = this.#call('decide', jsonText(decision));
    await this.durable();
    return JSON.parse(after);
  }

  /**
   * A service's signed webhook, checked, then what it confirms recorded. A bad one records
   * nothing: InvalidFieldError saying why.
   * @param {'stripe' | 'standard-webhooks'} scheme
   * @param {Record<string, string> | [string, string][]} headers as received
   * @param {Uint8Array | string} body the raw body
   * @param {string} secret
   * @param {{ toleranceS?: number }} [options]
   * @returns {Promise<object>}
   */
  async webhook(scheme, headers, body, secret, { toleranceS } = {}) {
    const pairs = Array.isArray(headers) ? headers : Object.entries(headers);
    const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body;
    const out = this.#call('webhook', scheme, pairs, bytes, secret, toleranceS === undefined ? undefined : BigInt(toleranceS));
    await this.durable();
    return JSON.parse(out);
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

  // -- proof for outsiders (wit/proof.wit): keys cross as text; every check is the component's

  /**
   * A key pair `{ signer, verifier }` named `name`, from 32 random bytes.
   * @param {string} name
   * @param {Uint8Array} seed
   * @returns {{ signer: string, verifier: string }}
   */
  generateKey(name, seed) {
    return this.call('proof', 'generateKey', name, seed);
  }

  /** @param {string} signer @returns {string} */
  verifierKey(signer) {
    return this.call('proof', 'verifierKey', signer);
  }

  /** The effect's receipt signed with Ed25519 (JSON text). @param {string} effectId @param {string} signer @returns {string} */
  signedReceipt(effectId, signer) {
    return this.call('proof', 'receipt', effectId, signer);
  }

  /** @param {Receipt | string} receipt @param {string} verifier @returns {VerifyReport} */
  checkSignedReceipt(receipt, verifier) {
    return toReport(this.call('proof', 'checkReceipt', jsonText(receipt), verifier));
  }

  /** @param {Receipt | string} receipt @param {string} verifier @returns {string} the effect id */
  checkReceiptSignature(receipt, verifier) {
    return this.call('proof', 'checkReceiptSignature', jsonText(receipt), verifier);
  }

  /** @param {string} signer @returns {{ checkpoint: string, tree_size: number, appended: number }} */
  checkpoint(signer) {
    return JSON.parse(this.call('proof', 'checkpoint', signer));
  }

  /** @returns {string | undefined} */
  latestCheckpoint() {
    return this.call('proof', 'latestCheckpoint');
  }

  /** @param {string} effectId @param {number} [treeSize] @returns {string} */
  proveInclusion(effectId, treeSize) {
    return this.call('proof', 'proveInclusion', effectId, treeSize === undefined ? undefined : BigInt(treeSize));
  }

  /** @param {number} oldSize @param {number} [treeSize] @returns {string} */
  proveConsistency(oldSize, treeSize) {
    return this.call('proof', 'proveConsistency', BigInt(oldSize), treeSize === undefined ? undefined : BigInt(treeSize));
  }

  /** @param {object | string} proof @param {string | undefined} checkpoint @param {string} verifier @returns {any} */
  checkInclusion(proof, checkpoint, verifier) {
    return JSON.parse(this.call('proof', 'checkInclusion', jsonText(proof), checkpoint, verifier));
  }

  /** @param {object | string} proof @param {string} oldCheckpoint @param {string} verifier @returns {any} */
  checkConsistency(proof, oldCheckpoint, verifier) {
    return JSON.parse(this.call('proof', 'checkConsistency', jsonText(proof), oldCheckpoint, verifier));
  }

  /** @param {number} fromMs @param {number} toMs @param {string} signer @returns {string} */
  bundle(fromMs, toMs, signer) {
    return this.call('proof', 'bundle', BigInt(fromMs), BigInt(toMs), signer);
  }

  /** @param {object | string} bundle @param {string} verifier @returns {any} */
  checkBundle(bundle, verifier) {
    return JSON.parse(this.call('proof', 'checkBundle', jsonText(bundle), verifier));
  }
}

/** @param {Uint8Array | string} key */
function toBytes(key) {
  return typeof key === 'string' ? new TextEncoder().encode(key) : key;
}
