// The conformance runner: plays one vector of tests/conformance (format in its README.md)
// through the gate component, a journal and the simulated payments service, and reports
// every difference from what the vector expects. The port of hosts/cli/src/conformance.rs;
// it runs unchanged in Node (file journal) and in Chromium (in-memory journal).
//
// The runner interprets the world's script (who crashes when, what changes during the
// outage); every decision about the effect is the component's.
import { Gate } from './gate.js';
import { GateError, JournalError } from './errors.js';
import { FakeClock } from './clock.js';
import { PaymentsService, paymentsTarget } from './payments.js';

/**
 * @import { Outcome, Targets, JournalBackend, Step } from './types.js'
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 * @import { Root as PaymentsRoot } from '../gen/payments/payments_sim.js'
 * @import { GateComponent } from './gate.js'
 */
/**
 * A vector and its steps are JSON as tests/conformance/README.md describes them; the
 * runner checks each field it reads (`field`), so they are typed loosely here.
 * @typedef {{ id: string, tier: string, paid_cents?: number, steps: VectorStep[], expect: Record<string, any> }} Vector
 * @typedef {Record<string, any> & { op: string }} VectorStep
 * @typedef {Gate & { crashState: { crashAt: string | null } }} Worker
 * @typedef {{ proposal: Record<string, any>, finished: boolean, last: Record<string, unknown> | null }} Task
 * @typedef {{
 *   gate: GateComponent<GateRoot>, payments: GateComponent<PaymentsRoot>, journal: JournalBackend & { close?(): unknown },
 *   journalBytes(): Uint8Array | Promise<Uint8Array>, sha256(bytes: Uint8Array): string | Promise<string>,
 *   tear?(bytes: number): unknown, reopen?(): JournalBackend | Promise<JournalBackend>, repair?(): unknown,
 * }} Env
 */

/** Every vector starts at this fake time (2027-01-15T08:00:00Z). */
export const T0_MS = 1_800_000_000_000;
const LEASE_MS = 48 * 3_600_000;
const ORDER = 'order_881';
const LEASE = 'case-4471';
const PAID_CENTS = 10_000;
const DEFAULT_KEY = 'refund:order_881';

/** @type {Record<string, { dedupes: boolean, lookup: boolean }>} */
const TIERS = {
  1: { dedupes: true, lookup: false },
  2: { dedupes: false, lookup: true },
  3: { dedupes: false, lookup: false },
  '1+lookup': { dedupes: true, lookup: true },
};

/** A worker's simulated death at a crash point. */
class Crashed extends Error {}

/** One journal behind every worker, which can be closed and reopened under them. */
/** @implements {JournalBackend} */
class SharedJournal {
  /** @param {JournalBackend & { close?(): unknown }} journal */
  constructor(journal) {
    /** @type {(JournalBackend & { close?(): unknown }) | null} */
    this.current = journal;
  }
  #j() {
    if (!this.current) throw new JournalError('other', 'journal is closed');
    return this.current;
  }
  /** @type {JournalBackend['append']} */
  append(...a) { return this.#j().append(...a); }
  /** @type {JournalBackend['read']} */
  read(...a) { return this.#j().read(...a); }
  /** @type {JournalBackend['length']} */
  length(...a) { return this.#j().length(...a); }
  openStreams() { return this.#j().openStreams(); }
  streams() { return this.#j().streams(); }
  sync() { return this.#j().sync(); }
  async flush() { await this.current?.flush?.(); }
}

/** @param {Outcome} o */
const isFinal = (o) => ['COMMITTED', 'REFUSED', 'AMBIGUOUS', 'CONFIRMED'].includes(o.state);
/**
 * @param {unknown} a
 * @param {unknown} b
 */
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Every field `want` names must be equal in `got`; the differences, for a person.
 * @param {string} what
 * @param {Record<string, unknown>} got
 * @param {unknown} want
 * @returns {string[]}
 */
function check(what, got, want) {
  if (typeof want !== 'object' || want === null || Array.isArray(want)) return [`${what}: expectation ${JSON.stringify(want)} is not an object`];
  return Object.entries(want)
    .filter(([k, w]) => !same(got[k] ?? null, w))
    .map(([k, w]) => `${what}: ${k} is ${JSON.stringify(got[k] ?? null)}, expected ${JSON.stringify(w)} (outcome ${JSON.stringify(got)})`);
}

/**
 * @param {VectorStep} step
 * @param {string} name
 */
const field = (step, name) => {
  if (!(name in step)) throw new Error(`step ${JSON.stringify(step)} lacks ${JSON.stringify(name)}`);
  return step[name];
};

/**
 * Plays vector `v`. `env`:
 *   gate, payments      the loaded components (GateComponent)
 *   journal             a fresh, empty journal backend
 *   journalBytes()      the journal file's bytes (for pins and submit_raw)
 *   tear(bytes), reopen(), repair()   file-journal operations (absent in the browser)
 *   sha256(bytes)       hex digest
 * Returns { refundedCents, refundRecords, tasks, journalSha256, failures }.
 * @param {Vector} v
 * @param {Env} env
 */
export async function runVector(v, env) {
  const tier = TIERS[v.tier];
  if (!tier) throw new Error(`${v.id}: unknown tier ${v.tier}`);
  const clock = new FakeClock(T0_MS);
  const payments = await PaymentsService.create(env.payments, v.tier);
  payments.addOrder(ORDER, v.paid_cents ?? PAID_CENTS);
  const journal = new SharedJournal(env.journal);
  // The runner's host check allows, unless `fail_checks` makes it fail.
  const target = paymentsTarget(payments, clock, { authorizer: () => true });
  /** @type {Targets & { failingReads: number, failingChecks: number, routing: string[] | null }} */
  const world = {
    failingReads: 0,
    failingChecks: 0,
    /** What the current process reaches (`restart.routes`); null: what the target reaches. */
    routing: null,
    get routes() {
      return world.routing ?? target.routes;
    },
    capture(req) {
      if (world.failingReads > 0) {
        world.failingReads -= 1;
        return { tag: 'failed', val: 'the order system did not answer' };
      }
      return target.capture(req);
    },
    authorize(req) {
      if (world.failingChecks > 0) {
        world.failingChecks -= 1;
        return { tag: 'failed', val: 'check unavailable' };
      }
      return target.authorize(req);
    },
    apply: (req) => target.apply(req),
    query: (req) => target.query(req),
  };
  /** @type {string[]} */
  const failures = [];
  /** @type {Map<string, Task>} */
  const tasks = new Map();
  /** @type {Worker | null} */
  let worker = null;

  /** @returns {Promise<Worker>} */
  async function freshHost() {
    /** @type {{ crashAt: string | null }} */
    const state = { crashAt: null };
    /** @param {string} here */
    const maybe = (here) => {
      if (state.crashAt === here) throw new Crashed(here);
    };
    const host = await Gate.instantiate(env.gate, {
      journal,
      clock,
      hooks: {
        beforeApply: (_r, _x, { recovering }) => { if (!recovering) maybe('after_intent'); },
        afterApply: (_r, _x, { recovering }) => maybe(recovering ? 'in_recovery' : 'after_commit'),
        afterQuery: (_r, _x, { recovering }) => { if (recovering) maybe('in_recovery'); },
      },
    });
    return Object.assign(host, { crashState: state });
  }
  const host = async () => (worker ??= await freshHost());
  const premisesNow = () => payments.premises(ORDER, null);
  const journalSha = async () => env.sha256(await env.journalBytes());

  /** @param {Outcome} o */
  async function outcomeJson(o) {
    /** @type {Record<string, unknown>} */
    const v = {
      state: o.state,
      executed: o.executed,
      replayed: o.replayed,
      changed: o.changed.map((c) => c.name),
    };
    if (o.reason) v.reason = o.reason;
    if (o.returnTo !== null) v.return_to = o.returnTo;
    if (o.state === 'COMMITTED' || o.state === 'CONFIRMED') {
      const r = (await host()).receipt(o.effectId);
      if ('via' in r) v.via = r.via;
    }
    return v;
  }

  /**
   * @param {string} name
   * @param {Outcome} o
   */
  async function record(name, o) {
    const v = await outcomeJson(o);
    const t = /** @type {Task} */ (tasks.get(name));
    t.finished = isFinal(o);
    t.last = v;
    return v;
  }

  /** @param {VectorStep} step */
  const task = (step) => {
    const name = field(step, 'task');
    if (!tasks.has(name)) throw new Error(`task ${JSON.stringify(name)} was never decided`);
    return name;
  };

  /** @type {Record<string, (step: VectorStep) => unknown>} */
  const ops = {
    decide(step) {
      const name = field(step, 'task');
      /** @type {Record<string, any>} */
      const p = {
        agent: 'refund-agent',
        target: { name: 'payments', dedupes: tier.dedupes, lookup: tier.lookup, dedupe_window_ms: 86_400_000, timeout_ms: 1000 },
        key: step.key ?? DEFAULT_KEY,
        effect: { order: ORDER, amount_cents: field(step, 'amount_cents') },
        authority: typeof step.approval === 'string' ? { approval: step.approval } : { lease: LEASE },
        premises: premisesNow(),
      };
      if (step.host_check === true) p.authority.host_check = true;
      for (const extra of ['bounds', 'cap']) if (extra in step) p[extra] = step[extra];
      if (tasks.has(name)) throw new Error(`task ${JSON.stringify(name)} decided twice`);
      tasks.set(name, { proposal: p, finished: false, last: null });
    },
    redecide(step) {
      /** @type {Task} */ (tasks.get(task(step))).proposal.effect.amount_cents = field(step, 'amount_cents');
    },
    async send(step) {
      const name = task(step);
      const crash = step.crash ?? null;
      if (crash === 'before_intent') {
        worker = null; // the worker dies before it writes anything: the task stays listed
        return;
      }
      if (crash !== null && !['after_intent', 'after_commit'].includes(crash)) throw new Error(`unknown crash point ${crash}`);
      const h = await host();
      h.crashState.crashAt = crash;
      let o;
      try {
        o = await h.submit(/** @type {Task} */ (tasks.get(name)).proposal, world);
      } catch (e) {
        if (e instanceof Crashed) {
          worker = null;
          return;
        }
        throw new Error(`send ${name}: ${/** @type {Error} */ (e).message}`, { cause: e });
      }
      if (crash !== null) failures.push(`send ${name}: the crash point was never reached`);
      const got = await record(name, o);
      if (step.expect) failures.push(...check(`send ${name}`, got, step.expect));
    },
    async restart(step) {
      // The new process reaches only `routes` (set-routes, by Gate.recover and submit) until
      // the next restart.
      if (step.routes !== undefined && !Array.isArray(step.routes)) throw new Error('restart.routes must be a list of target names');
      world.routing = step.routes ?? null;
      worker = await freshHost();
      const crash = step.crash ?? null;
      if (crash !== null && crash !== 'in_recovery') throw new Error(`unknown restart crash point ${crash}`);
      worker.crashState.crashAt = crash;
      let recovered;
      try {
        recovered = await worker.recoverAll(world);
      } catch (e) {
        if (e instanceof Crashed && crash) {
          worker = null; // recovery itself died: the next restart must finish its work
          return;
        }
        throw e;
      }
      if (crash) failures.push('restart: the recovery crash point was never reached');
      const got = [];
      for (const r of recovered) {
        if (r.error) throw new Error(`recover ${r.effectId}: ${r.error.message}`);
        if (!r.outcome) continue;
        got.push(await outcomeJson(r.outcome));
      }
      if (Array.isArray(step.expect)) {
        if (step.expect.length !== got.length) {
          failures.push(`restart: recovered ${got.length} effects, expected ${step.expect.length}: ${JSON.stringify(got)}`);
        }
        got.forEach((g, i) => {
          if (i < step.expect.length) failures.push(...check(`restart, effect ${i}`, g, step.expect[i]));
        });
      }
      // The agent's own restart: every unfinished task is sent again, in decision order.
      for (const [name, t] of tasks) {
        if (t.finished) continue;
        let o;
        try {
          o = await worker.submit(t.proposal, world);
        } catch (e) {
          throw new Error(`resend ${name}: ${/** @type {Error} */ (e).message}`, { cause: e });
        }
        await record(name, o);
      }
    },
    async race(step) {
      const names = field(step, 'tasks');
      /** @type {Worker[]} */
      const workers = [];
      /** @type {Step[]} */
      const steps = [];
      for (const name of names) {
        if (!tasks.has(name)) throw new Error(`task ${JSON.stringify(name)} was never decided`);
        const h = await freshHost();
        steps.push(h.submitStep(/** @type {Task} */ (tasks.get(name)).proposal));
        workers.push(h);
      }
      // Both read premises before either writes its intent.
      for (let i = 0; i < workers.length; i++) {
        const { ask, op } = steps[i];
        if (ask.tag === 'capture') steps[i] = workers[i].resume(op, await world.capture(ask.val));
      }
      const want = Array.isArray(step.expect) ? step.expect : [];
      for (let i = 0; i < workers.length; i++) {
        const o = await workers[i].drive(steps[i], world);
        worker = workers[i];
        const got = await record(names[i], o);
        if (want[i]) failures.push(...check(`race ${names[i]}`, got, want[i]));
      }
    },
    async approve(step) {
      const p = /** @type {Task} */ (tasks.get(task(step))).proposal;
      /** @type {Record<string, unknown>} */
      const a = {
        approval: field(step, 'approval'),
        approver: field(step, 'approver'),
        request: { key: p.key, effect: p.effect },
        premises_seen: premisesNow(),
      };
      if (typeof step.expires_in_ms === 'number') a.expires_at_ms = clock.nowMs() + step.expires_in_ms;
      await (await host()).approve(a);
    },
    async lease(step) {
      const until = clock.nowMs() + field(step, 'expires_in_ms');
      await (await host()).grantLease(field(step, 'lease'), until);
    },
    async revoke_lease(step) {
      await (await host()).revokeLease(field(step, 'lease'));
    },
    hand_refund(step) {
      payments.refundByHand(ORDER, field(step, 'amount_cents'), clock.nowMs());
    },
    set_eligible(step) {
      payments.setEligible(ORDER, field(step, 'eligible'));
    },
    advance(step) {
      clock.advance(field(step, 'ms'));
    },
    fail_reads(step) {
      world.failingReads = field(step, 'count');
    },
    fail_checks(step) {
      world.failingChecks = field(step, 'count');
    },
    async submit_raw(step) {
      const before = await journalSha();
      const want = field(step, 'expect_error');
      if (typeof step.text !== 'string') throw new Error('submit_raw needs a text');
      const text = step.repeat === undefined ? step.text : step.text.repeat(step.repeat);
      let got;
      try {
        (await host()).submitStep(text);
        got = 'no error';
      } catch (e) {
        if (!(e instanceof GateError)) throw e;
        got = e.case;
      }
      if (got !== want) failures.push(`submit_raw: expected ${want}, got ${got}`);
      if ((await journalSha()) !== before) failures.push('submit_raw: the journal changed');
    },
    async tear_journal(step) {
      if (!env.tear) throw new Error('tear_journal needs a file journal');
      await env.tear(field(step, 'bytes'));
    },
    async reopen(step) {
      worker = null;
      journal.current?.close?.();
      journal.current = null;
      const want = step.expect_error ?? null;
      try {
        if (!env.reopen) throw new Error('reopen needs a file journal');
        const j = await env.reopen();
        if (want !== null) failures.push(`reopen: expected ${want}, the journal opened`);
        journal.current = j;
      } catch (e) {
        const { tag, message } = /** @type {JournalError} */ (e);
        if (!(want === 'torn-tail' && tag === 'torn-tail')) failures.push(`reopen: got ${message}, expected ${want}`);
      }
    },
    async repair() {
      if (!env.repair) throw new Error('repair needs a file journal');
      await env.repair();
    },
    async verify(step) {
      const report = (await host()).verify([]);
      const want = step.expect_problems ?? 0;
      if (report.problems.length !== want) {
        failures.push(`verify: ${report.problems.length} problems, expected ${want}: ${JSON.stringify(report.problems)}`);
      }
    },
  };

  await (await host()).grantLease(LEASE, T0_MS + LEASE_MS);
  for (const [i, step] of v.steps.entries()) {
    const op = ops[step.op];
    if (!op) throw new Error(`${v.id} step ${i}: unknown op ${JSON.stringify(step.op)}`);
    try {
      await op(step);
    } catch (e) {
      throw new Error(`${v.id} step ${i} (${JSON.stringify(step)}): ${/** @type {Error} */ (e).message}`, { cause: e });
    }
  }

  /** @type {{ refundedCents: number, refundRecords: number, tasks: Record<string, Record<string, unknown>>, journalSha256: string, failures: string[] }} */
  const report = {
    refundedCents: payments.refundedCents(ORDER),
    refundRecords: payments.refunds(ORDER).length,
    tasks: Object.fromEntries([...tasks].flatMap(([k, t]) => (t.last ? [[k, t.last]] : []))),
    journalSha256: await journalSha(),
    failures,
  };
  const e = v.expect;
  for (const [k, got] of [['refunded_cents', report.refundedCents], ['refund_records', report.refundRecords]]) {
    if (!(k in e)) failures.push(`the vector does not say ${k}`);
    else if (e[k] !== got) failures.push(`${k} is ${got}, expected ${e[k]}`);
  }
  for (const [name, want] of Object.entries(e.tasks ?? {})) {
    if (report.tasks[name]) failures.push(...check(`task ${name}`, report.tasks[name], want));
    else failures.push(`task ${name} never got an outcome`);
  }
  return report;
}

/**
 * The ops a vector uses.
 * @param {Vector} v
 */
export const opsOf = (v) => new Set(v.steps.map((s) => s.op));
