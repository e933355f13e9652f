// The inbox page's world when the journal is in the page: the gate component (the Node
// package's browser build) over an in-memory journal, the simulated payments service
// (dist/payments_sim.wasm) at tier 3 (a legacy refunds API: no idempotency keys, no
// lookup), the approval rules below, and a scripted refund agent that submits through the
// gate. The person's side (the inbox and decisions) is the gate's `inbox` and `decide`,
// shown as they answer: nothing here decides who may approve what, or when.
//
// Time is a fake clock (as the conformance vectors' is), so a deadline can be reached by
// pressing a button; a target's timeout is real time (the effect function's).
import { Interlock, MemoryJournal, FakeClock, Payments } from '@interlock/gate/browser';

/** 2026-12-02 09:00 UTC: when the page's shop opens. */
export const T0_MS = Date.UTC(2026, 11, 2, 9, 0, 0);
export const AGENT = 'refund-agent';
export const PEOPLE = ['alice@shop', 'bob@shop', 'cfo@shop'];
const DAY_MS = 86_400_000;
/** How long the agent's call to the payments service waits before it gives up (real ms). */
export const TIMEOUT_MS = 400;

/** The approval rules the page records (ARCHITECTURE.md, "People in the loop"). */
export const RULES = {
  rules: [
    { name: 'large', target: 'payments', when: [{ field: '/effect/amount_cents', over: 50_000 }],
      then: 'person', route: 'finance', approvers_needed: 2 },
    { name: 'over-50', target: 'payments', when: [{ field: '/effect/amount_cents', over: 5_000 }],
      then: 'person', route: 'finance' },
    { name: 'small', target: 'payments', when: [{ field: '/effect/amount_cents', at_most: 2_000 }], then: 'approve' },
  ],
  routes: {
    finance: {
      primary_approvers: ['alice@shop', 'bob@shop'],
      duration_before_escalation_ms: 3_600_000,
      escalation_approvers: ['cfo@shop'],
      duration_before_expiry_ms: DAY_MS,
      justification_required: true,
    },
  },
};

/**
 * The agent's script: one refund per order (every order paid $200). `drop`: the network
 * drops the agent's first send of it (the service never sees it; the call times out).
 */
export const SCRIPT = [
  { task: 'r1', order: 'order_1001', amount_cents: 1_500, say: 'a $15 goodwill refund' },
  { task: 'r2', order: 'order_1002', amount_cents: 8_000, say: 'an $80 refund for a late delivery' },
  { task: 'r3', order: 'order_1003', amount_cents: 12_000, say: 'a $120 refund the customer asked for twice' },
  { task: 'r4', order: 'order_1004', amount_cents: 6_500, say: 'a $65 refund for a damaged item', drop: true },
  { task: 'r5', order: 'order_1005', amount_cents: 60_000, say: 'a $600 refund on a cancelled bulk order' },
];
const PAID_CENTS = 20_000;

export class Shop {
  /**
   * The shop as it opens: rules recorded, the agent's and the deciders' leases granted (30
   * days), every order paid. Nothing submitted yet.
   */
  static async open() {
    const clock = new FakeClock(T0_MS);
    const journal = new MemoryJournal();
    const gate = await Interlock.withJournal(journal, { agent: AGENT, clock, strict: true });
    const service = await Payments.inMemory('3');
    const shop = new Shop(gate, service, clock, journal);
    for (const t of SCRIPT) service.addOrder(t.order, PAID_CENTS);
    await gate.setApprovalRules(RULES);
    for (const who of [AGENT, ...PEOPLE]) await gate.lease(who, { ttlMs: 30 * DAY_MS });
    return shop;
  }

  constructor(gate, service, clock, journal) {
    this.gate = gate;
    this.service = service;
    this.clock = clock;
    this.journal = journal;
    /** task -> { task, order, amount_cents, key, say, drop, attempts: [outcome...] } */
    this.tasks = new Map();
    /** Orders whose next send the network drops. */
    this.dropping = new Set(SCRIPT.filter((t) => t.drop).map((t) => t.order));
    /** Sends the agent made that reached the service, and those the network dropped. */
    this.sends = [];
    this.refund = gate.effect({
      target: 'payments', params: ['order', 'amount_cents'], key: (e) => `refund:${e.order}`, lease: AGENT,
      premises: (e, { effectId }) => service.premises(e.order, effectId),
      dedupes: false, timeoutMs: TIMEOUT_MS,
    }, async (order, amountCents, idempotencyKey, { effectId, signal }) => {
      if (this.dropping.delete(order)) {
        this.sends.push({ order, effectId, dropped: true });
        // The request never reaches the service: the call waits out its timeout.
        await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
      }
      this.sends.push({ order, effectId, dropped: false });
      return service.refund(order, amountCents, idempotencyKey, effectId, clock.nowMs());
    });
  }

  // ------------------------------------------------------------ the agent

  /** The agent's first round: every request of its script, once. */
  async start() {
    const out = [];
    for (const t of SCRIPT) {
      this.tasks.set(t.task, { ...t, key: `refund:${t.order}`, attempts: [] });
      out.push(await this.submit(t.task));
    }
    return out;
  }

  /**
   * The agent (re)submits one request; the gate's outcome, remembered on the task. While
   * the gate answers DISPATCHED with a time to retry after (a send whose fate it does not
   * know yet), the agent waits that long (on the fake clock) and submits again, as told.
   */
  async submit(task) {
    const t = this.tasks.get(task);
    for (let i = 0; ; i += 1) {
      const outcome = await this.refund.with({ key: t.key })(t.order, t.amount_cents);
      t.effectId = outcome.effectId;
      t.attempts.push({ at_ms: this.clock.nowMs(), ...outcome });
      if (outcome.state !== 'DISPATCHED' || outcome.retryAfterMs === null || i >= 20) return outcome;
      await this.clock.sleep(outcome.retryAfterMs);
    }
  }

  /** The agent's next round: every request whose last answer was not final is submitted again. */
  async round() {
    const open = [...this.tasks.values()].filter((t) => ['PROPOSED', 'DISPATCHED'].includes(t.attempts.at(-1)?.state));
    const out = [];
    for (const t of open) out.push(await this.submit(t.task));
    return out;
  }

  /**
   * After a person said a send did not happen: the agent asks again as a new request (a
   * new key, so a new effect the rules meet afresh). `task` is the settled one.
   */
  async askAgain(task) {
    const old = this.tasks.get(task);
    let n = 2;
    while (this.tasks.has(`${old.task.replace(/#\d+$/, '')}#${n}`)) n += 1;
    const name = `${old.task.replace(/#\d+$/, '')}#${n}`;
    this.tasks.set(name, { ...old, task: name, key: `refund:${old.order}#${n}`, drop: false, attempts: [], again: old.task });
    return { task: name, outcome: await this.submit(name) };
  }

  // ------------------------------------------------------------ the people

  inbox() {
    return this.gate.inbox();
  }

  decide(decision) {
    return this.gate.decide(decision);
  }

  receipt(effectId) {
    return this.gate.receipt(effectId);
  }

  rules() {
    return this.gate.approvalRules();
  }

  scoreboard() {
    return this.gate.scoreboard();
  }

  /** Revokes (or grants again, 30 days) a person's lease: their authority to decide. */
  async setLease(who, live) {
    if (live) await this.gate.lease(who, { ttlMs: 30 * DAY_MS });
    else await this.gate.revokeLease(who);
  }

  /** Who holds a live lease, from the journal's lease streams as the gate recorded them. */
  leases() {
    const last = new Map();
    for (const line of this.gate.gate.entriesInOrder()) {
      const e = JSON.parse(line);
      if (e.stream.startsWith('lease:')) last.set(e.stream.slice(6), e.state);
    }
    return last;
  }

  /** The world changes under the agent: a person in support refunds part of an order by hand (in the service's dashboard). */
  handRefund(order, cents) {
    return this.service.refundByHand(order, cents, this.clock.nowMs());
  }

  /** The fake clock moves on (deadlines come due; the gate meets them when asked next). */
  advance(ms) {
    this.clock.advance(ms);
  }

  now() {
    return this.clock.nowMs();
  }

  /** What the payments service holds for an order (its dashboard): the refunds, as the service keeps them. */
  statement(order) {
    return this.service.refunds(order);
  }

  refundedCents() {
    return SCRIPT.reduce((n, t) => n + this.service.refundedCents(t.order), 0);
  }

  /** Every journal line, in append order. */
  lines() {
    return this.gate.gate.entriesInOrder();
  }
}
