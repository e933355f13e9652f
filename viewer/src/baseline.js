// The fault table's baselines, for the viewer's side-by-side column. EXPERIMENT CODE, not
// product: a small JS interpreter of a vector's steps that mirrors
// experiments/fault-table/src/baseline.rs line for line (same steps, same trace texts), so
// the column can be checked against results/fault-table.json. It talks to the same
// simulated payments service as the gate (dist/payments_sim.wasm through jco, via
// hosts/node's PaymentsService): the tier rules are the Rust crate's, never written here.
//
// The world starts as the conformance runner's does (the clock at T0, order_881 paid 10000
// cents or the vector's paid_cents, eligible, no refunds). The agent keeps a durable list of
// unfinished tasks. Leases, approvals, premises and caps mean nothing to a baseline, so
// `lease`, `revoke_lease`, `approve` and `verify` are no-ops.
import { PaymentsService, ServiceError } from '../../hosts/node/src/payments.js';

export const T0_MS = 1_800_000_000_000;
const ORDER = 'order_881';
const PAID_CENTS = 10_000;
const DEFAULT_KEY = 'refund:order_881';

export const BASELINES = {
  'plain-retry': { name: 'Plain retry', blurb: 'Re-run the step on restart' },
  'request-ids': { name: 'Request IDs', blurb: 'The standard fix: one idempotency key per request' },
  'durable-workflows': { name: 'Durable workflows', blurb: 'Temporal-style, used as documented' },
};

/** An op a baseline does not model (baseline.rs bails on these too). */
export class NotModelled extends Error {}

const field = (step, name) => {
  if (!(name in step)) throw new Error(`step ${JSON.stringify(step)} lacks ${JSON.stringify(name)}`);
  return step[name];
};

export class BaselineRun {
  /** `approach`: 'plain-retry' | 'request-ids' | 'durable-workflows'. */
  static async create(approach, vector, paymentsComponent) {
    if (!BASELINES[approach]) throw new Error(`unknown baseline ${approach}`);
    const payments = await PaymentsService.create(paymentsComponent, vector.tier);
    payments.addOrder(ORDER, vector.paid_cents ?? PAID_CENTS);
    return new BaselineRun(approach, payments);
  }

  constructor(approach, payments) {
    this.approach = approach;
    this.payments = payments;
    this.clockMs = T0_MS;
    this.tasks = new Map(); // name -> { amountCents, key, finished }; Map keeps decision order
    this.workflows = new Map(); // key -> { amountCents, result }
    this.trace = [];
  }

  get refundedCents() {
    return this.payments.refundedCents(ORDER);
  }

  get refundRecords() {
    return this.payments.refunds(ORDER).length;
  }

  /** One call to the refund API; the service's errors refund nothing. */
  #call(what, amountCents, key) {
    let answer;
    try {
      answer = this.payments.refund(ORDER, amountCents, key, null, this.clockMs).id;
    } catch (e) {
      if (!(e instanceof ServiceError)) throw e;
      answer = `error: ${e.message}`;
    }
    this.trace.push(`${what}: refund ${amountCents} key ${key ?? 'none'} -> ${answer}`);
    return answer;
  }

  /** Runs task `name` once as the approach does; `crash`: null, 'before-send', 'after-commit'. */
  #runTask(name, crash, again) {
    const t = { ...this.tasks.get(name) };
    const what = again ? `restart ${name}` : `send ${name}`;
    let call = null;
    if (this.approach === 'plain-retry') call = [t.amountCents, null];
    else if (this.approach === 'request-ids') call = [t.amountCents, t.key];
    else {
      const w = this.workflows.get(t.key);
      if (w && !again) {
        // Starting a workflow whose id exists: the existing result, nothing sent.
        this.trace.push(`${what}: workflow ${t.key} already exists (${w.result ?? 'still running'}), nothing sent`);
      } else if (w) {
        // The workflow's activity, retried with its recorded arguments and key.
        if (w.result !== null) this.trace.push(`${what}: workflow ${t.key} already completed (${w.result}), nothing sent`);
        else call = [w.amountCents, t.key];
      } else {
        // First send of this key: the workflow starts and records the decision.
        this.workflows.set(t.key, { amountCents: t.amountCents, result: null });
        this.trace.push(`${what}: workflow ${t.key} started, recorded ${t.amountCents} cents`);
        call = [t.amountCents, t.key];
      }
    }
    if (!call) {
      this.tasks.get(name).finished = true;
      return;
    }
    if (crash === 'before-send') {
      this.trace.push(`${what}: the worker dies before the send`);
      return;
    }
    const answer = this.#call(what, call[0], call[1]);
    if (crash === 'after-commit') {
      this.trace.push(`${what}: the reply is lost, the worker dies`);
      return;
    }
    if (this.approach === 'durable-workflows') {
      const w = this.workflows.get(t.key);
      if (w) w.result = answer;
    }
    this.tasks.get(name).finished = true;
  }

  #taskName(step) {
    const name = field(step, 'task');
    if (!this.tasks.has(name)) throw new Error(`task ${JSON.stringify(name)} was never decided`);
    return name;
  }

  /** Plays one step; returns the trace lines it added. Throws NotModelled for ops it lacks. */
  step(step) {
    const from = this.trace.length;
    switch (field(step, 'op')) {
      case 'decide': {
        const name = field(step, 'task');
        if (this.tasks.has(name)) throw new Error(`task ${JSON.stringify(name)} decided twice`);
        this.tasks.set(name, { amountCents: field(step, 'amount_cents'), key: step.key ?? DEFAULT_KEY, finished: false });
        break;
      }
      case 'redecide':
        this.tasks.get(this.#taskName(step)).amountCents = field(step, 'amount_cents');
        break;
      case 'send': {
        const name = this.#taskName(step);
        const crash = step.crash ?? null;
        const mapped = { before_intent: 'before-send', after_intent: 'before-send', after_commit: 'after-commit' };
        if (crash !== null && !mapped[crash]) throw new Error(`unknown crash point ${crash}`);
        // A send of a finished task is a new request under the same task.
        this.tasks.get(name).finished = false;
        this.#runTask(name, crash === null ? null : mapped[crash], false);
        break;
      }
      case 'restart':
        if ('crash' in step) throw new NotModelled('the baselines do not model a crash during recovery');
        for (const [name, t] of this.tasks) if (!t.finished) this.#runTask(name, null, true);
        break;
      case 'hand_refund': {
        const amount = field(step, 'amount_cents');
        const r = this.payments.refundByHand(ORDER, amount, this.clockMs);
        this.trace.push(`a person refunds ${amount} by hand -> ${r.id}`);
        break;
      }
      case 'set_eligible': {
        const eligible = field(step, 'eligible');
        this.payments.setEligible(ORDER, eligible);
        this.trace.push(`the order is marked eligible=${eligible}`);
        break;
      }
      case 'advance': {
        const ms = field(step, 'ms');
        this.clockMs += ms;
        this.trace.push(`the clock moves ${ms} ms`);
        break;
      }
      // Authority and the gate's journal mean nothing to a baseline.
      case 'lease':
      case 'revoke_lease':
      case 'approve':
      case 'verify':
        break;
      default:
        throw new NotModelled(`the baselines do not model op ${JSON.stringify(step.op)}`);
    }
    return this.trace.slice(from);
  }
}

/** Can a baseline play this vector at all? (null, or why not) */
export function whyNotModelled(vector) {
  const ops = new Set(['decide', 'redecide', 'send', 'restart', 'hand_refund', 'set_eligible', 'advance', 'lease', 'revoke_lease', 'approve', 'verify']);
  for (const s of vector.steps) {
    if (!ops.has(s.op)) return s.op === 'race'
      ? 'the fault table’s baselines do not model two workers racing'
      : `the fault table’s baselines do not model ${s.op}`;
    if (s.op === 'restart' && 'crash' in s) return 'the fault table’s baselines do not model a crash during recovery';
  }
  return null;
}
