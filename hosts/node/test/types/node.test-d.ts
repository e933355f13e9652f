// The Node entry's declarations (types/, generated from src/ by `npm run build`) as a
// TypeScript user meets them: the README's code, typed, plus what must not compile.
// Compiled, never run, by `npm run typecheck` (test/types/tsconfig.json).
import {
  Interlock, Rejected, Payments, FakeClock, SystemClock, MemoryJournal, FileJournal, Gate, GateError,
  InvalidFieldError, JournalFailedError, TornTailError, JournalError, UnsupportedJournalError, ServiceError,
  paymentsTarget, writeStateFile, gateComponent, toOutcome, SqliteJournal, PostgresJournal, openJournal,
} from '@interlock/gate';
import type {
  Outcome, Effect, EffectContext, Receipt, VerifyReport, Storage, Recovered, State, Reason, Json,
  Targets, Reply, Refund,
} from '@interlock/gate';
import * as entry from '@interlock/gate';
import { NODE_EXPORTS } from './exports.js';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** Every name the entry's declarations export is listed in exports.js, and only those. */
export const exportsListed: Same<keyof typeof entry, (typeof NODE_EXPORTS)[number]> = true;

declare const API: string;
const orders = { eligible: async (_order: string) => true };

const gate = await Interlock.open('./journal');
await gate.lease('case-4471', { ttlMs: 48 * 3600_000 });
const payments = await Payments.open('payments.json');

const refund = gate.effect(
  {
    target: 'payments',
    params: ['order', 'amount_cents'],
    key: (e) => `refund:${e.order}`,
    lease: 'case-4471',
    premises: async (e, { effectId }) => ({
      eligible: await orders.eligible(String(e.order)),
      refunded_by_others_cents: payments.premises(String(e.order), effectId).refunded_by_others_cents,
    }),
    lookup: async (_e, { effectId }) => payments.findByReference(effectId),
    allowed: async (_e, { agent }) => agent === 'refund-agent',
    bounds: { refunded_by_others_cents: { at_most: 1000 } },
    dedupes: true,
    timeoutMs: 30_000,
  },
  async (order: string, amountCents: number, idempotencyKey: string, { effectId, signal }: EffectContext) => {
    const res = await fetch(API, {
      method: 'POST', signal, headers: { 'Idempotency-Key': idempotencyKey },
      body: JSON.stringify({ order, amountCents, reference: effectId }),
    });
    if (res.status >= 400 && res.status < 500) throw new Rejected(await res.text());
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    return res.json();
  },
);
export const typed: Effect<[string, number]> = refund;

const recovered: Recovered[] = await gate.recover();
for (const r of recovered) {
  if (r.outcome) {
    const s: State = r.outcome.state;
    void s;
  } else {
    const c: string = r.error.case;
    void c;
  }
}

const outcome: Outcome = await refund('order_881', 2000);
if (outcome.state === 'AMBIGUOUS' && outcome.reason === 'target_unroutable') console.log(outcome.retryAfterMs);
// @ts-expect-error: states are spelled as in the journal
if (outcome.state === 'committed') console.log('never');
// @ts-expect-error: reasons too (underscores, not the WIT's dashes)
if (outcome.reason === 'premise-changed') console.log('never');
const reason: Reason | null = outcome.reason;
const result: Json | null = outcome.result;
for (const c of outcome.changed) console.log(c.name, c.was, c.now);
void reason, result;

// @ts-expect-error: two arguments
await refund('order_881');
// @ts-expect-error: the amount is a number
await refund('order_881', '2000');
await refund.with({ approval: 'appr-1', premises: { eligible: true } })('order_881', 2000);
const id: string = await refund.effectId('order_881', 2000);
const target: string = refund.target;
void id, target;

const receipt: Receipt = gate.receipt(outcome.effectId, { key: 'secret' });
const finalState: State = receipt.final;
const report: VerifyReport = gate.verify({ anchors: [receipt] });
const checked: VerifyReport = gate.checkReceipt(receipt, new Uint8Array(32));
console.log(finalState, report.problems.map((p) => `${p.stream}#${p.seq} ${p.kind}`), checked.entries);
await gate.revokeLease('case-4471');
await gate.approve({ approval: 'appr-1' });
await gate.revokeApproval('appr-1');
const confirmed: Outcome = await gate.confirm(outcome.effectId, { by: 'ops' });
const open: string[] = gate.openEffects();
const raw: Outcome = await gate.submit('{"agent": "a"}');
void confirmed, open, raw;
await gate.close();

try {
  await refund('order_881', 2000);
} catch (e) {
  if (e instanceof InvalidFieldError) {
    const field: string = e.payload.field;
    void field;
  } else if (e instanceof JournalFailedError && e.payload.tag === 'conflict') {
    const length: number = e.payload.val;
    void length;
  } else if (e instanceof GateError) {
    const c: string = e.case;
    void c;
  }
}

try {
  await Interlock.open('postgres://db/journal', { clock: new FakeClock(0), agent: 'refund-agent' });
} catch (e) {
  if (e instanceof UnsupportedJournalError) console.log(e.where);
  if (e instanceof TornTailError) console.log(e.tag, e.message, e instanceof JournalError);
  if (e instanceof ServiceError) console.log(e.case);
}
const repaired = await Interlock.repair('./journal');
const offset: number | null = repaired.tornOffset;
void offset;

// Storage: the file journal's folder is a storage of its own, not a MemoryJournal.
const file: Storage = FileJournal.open('./journal');
const memory: Storage = new MemoryJournal();
// @ts-expect-error: FileJournal does not extend MemoryJournal
export const notMemory: MemoryJournal = FileJournal.open('./journal');
await Interlock.withJournal(memory, { clock: new SystemClock(), claimWait: { pollMs: 10, maxPolls: 3 } });
await Interlock.open(':memory:');
void file;

// Shared journals: SQLite for the processes of one machine, PostgreSQL for many machines.
await Interlock.open('sqlite:///var/lib/interlock/journal.db');
await Interlock.open('postgres://app@db.internal:5432/interlock', { journalTimeoutMs: 10_000, agent: 'refund-agent' });
// @ts-expect-error: the timeout is a number of ms
await Interlock.open('postgres://app@db.internal/interlock', { journalTimeoutMs: '10s' });
const onOneMachine = SqliteJournal.open('/var/lib/interlock/journal.db');
const onManyMachines = PostgresJournal.open('postgres://app@db.internal/interlock', { timeoutMs: 5000 });
const commits: number = onOneMachine.durableCommits + onManyMachines.commits;
const inOrder: string[] = (await Interlock.withJournal(onManyMachines)).gate.entriesInOrder();
const anyOf: Storage = openJournal('sqlite:///var/lib/interlock/journal.db', { lockWaitMs: 0 });
await Interlock.withJournal(onOneMachine);
void commits, inOrder, anyOf;

// The low-level gate and a target of one's own.
const clock = new FakeClock(1_800_000_000_000);
const low: Gate = await Gate.instantiate(await gateComponent(), { storage: new MemoryJournal(), clock, crashAt: 'after-send' });
low.setRoutes(['payments']);
const service = await Payments.inMemory('2');
const refundRow: Refund = service.refund('order_881', 2000, null, 'ref', clock.nowMs());
void refundRow;
const viaTarget: Outcome = await low.submit({ agent: 'a' }, paymentsTarget(service, clock, { authorizer: () => true }));
const mine: Targets = {
  routes: ['mail'],
  capture: (req): Reply => ({ tag: 'captured', val: JSON.stringify(Object.fromEntries(req.names.map((n) => [n, 1]))) }),
  authorize: async (req) => ({ tag: 'allowed', val: req.agent === 'a' }),
  apply: (req) => ({ tag: 'applied', val: JSON.stringify({ key: req.idempotencyKey, attempt: req.attempt }) }),
  // @ts-expect-error: a reply the WIT does not have
  query: () => ({ tag: 'maybe' }),
};
const step = low.submitStep({ agent: 'a' });
if (step.ask.tag === 'done') console.log(toOutcome(step.ask.val).state);
else await low.drive(step, mine);
writeStateFile('payments.json', service.snapshot());
void viaTarget;
