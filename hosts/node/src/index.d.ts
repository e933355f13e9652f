// Types of @interlock/gate (hand-written; Node entry and browser entry share them).

/** Where an effect is in its life, spelled as in the journal. */
export type State = 'PROPOSED' | 'AUTHORIZED' | 'DISPATCHED' | 'COMMITTED' | 'REFUSED' | 'AMBIGUOUS' | 'CONFIRMED';
export type Executed = 'yes' | 'no' | 'unknown';
/** Why an outcome is not a plain success, spelled as in the journal. */
export type Reason =
  | 'conflicting_payload' | 'lease_missing' | 'lease_expired' | 'lease_revoked' | 'not_allowed'
  | 'premise_changed' | 'approval_missing' | 'approval_expired' | 'approval_revoked' | 'approval_stale'
  | 'cap_exceeded' | 'target_rejected' | 'no_dedupe_no_lookup' | 'dedupe_window_passed' | 'claim_live'
  | 'read_failed' | 'target_unavailable' | 'target_unroutable';

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export interface PremiseChange { name: string; was: Json; now: Json }

/** What the gate decided for one effect. REFUSED and AMBIGUOUS are outcomes, not errors. */
export interface Outcome {
  effectId: string;
  state: State;
  reason: Reason | null;
  executed: Executed;
  /** The target's result, when known. */
  result: Json | null;
  changed: PremiseChange[];
  /** The approver the effect goes back to (approval_stale). */
  returnTo: string | null;
  /** An earlier decision returned again (the same request submitted twice). */
  replayed: boolean;
  /** For an open effect: ms until recovery can act. */
  retryAfterMs: number | null;
}

/** The receipt (ARCHITECTURE.md, "Receipt"). */
export interface Receipt {
  effect_id: string;
  agent: string;
  effect: Json;
  final: State;
  executed: Executed;
  attempts: number;
  reason?: Reason;
  via?: 'send' | 'recovery-retry' | 'recovery-query';
  result?: Json;
  head: { length: number; hash: string };
  signature?: { alg: 'HMAC-SHA256'; value: string };
  [field: string]: unknown;
}

export interface VerifyReport {
  streams: number;
  entries: number;
  problems: { stream: string; seq: number; kind: 'hash-mismatch' | 'broken-link' | 'bad-seq' | 'unparsable' | 'truncated'; detail: string }[];
}

export interface EffectContext { effectId: string; attempt: number; signal: AbortSignal }

export interface EffectDefinition<E = Record<string, Json>> {
  /** The target's name; recovery routes open effects to the definition by it. */
  target: string;
  /** Names of the function's arguments; they become the effect object. Without it the one argument is the effect. */
  params?: string[];
  /** The approved request's key (never model output): the effect's identity. */
  key?: string | ((effect: E) => string);
  lease?: string;
  approval?: string;
  /** Read the premises fresh from the system of record; exclude the effect's own result. */
  premises?: (effect: E, ctx: { effectId: string }) => Record<string, Json> | Promise<Record<string, Json>>;
  bounds?: Record<string, { at_most?: number; at_least?: number }>;
  cap?: { name: string; limit_cents: number; amount_cents: number } | ((effect: E) => { name: string; limit_cents: number; amount_cents: number });
  /**
   * Your own authority check, asked right before every send (and at recovery). `true`
   * allows; anything else refuses (REFUSED not_allowed). A throw is a check that could not
   * be made: the effect stays open (read_failed), never refused.
   */
  allowed?: (effect: E, ctx: { agent: string; effectId: string }) => boolean | Promise<boolean>;
  /** Look the effect up at the target by its reference (the effect id); null if it did not happen. */
  lookup?: (effect: E, ctx: { effectId: string }) => Json | undefined | Promise<Json | undefined>;
  dedupes?: boolean;
  dedupeWindowMs?: number;
  /** Give up on the target after this long (the claim's length). Default 30000. */
  timeoutMs?: number;
  agent?: string;
}

export interface Effect<A extends unknown[]> {
  /**
   * Gates one call. Rejects with InvalidFieldError (nothing recorded, nothing sent) when an
   * argument is not what JSON carries as given: NaN, Infinity, undefined, a function, a
   * symbol, a BigInt, a Date/Map/Set or other non-plain object, a cycle, an extra argument;
   * or (the gate's rule) an integer past 2^53-1.
   */
  (...args: A): Promise<Outcome>;
  with(overrides: { approval?: string; lease?: string; premises?: Record<string, Json>; key?: string }): (...args: A) => Promise<Outcome>;
  effectId(...args: A): string;
  readonly target: string;
}

export interface JournalBackend {
  append(stream: string, expectedLength: number, entries: string[], durable: boolean, open: boolean): void;
  read(stream: string, start: number): string[];
  length(stream: string): number;
  openStreams(): string[];
  streams(): string[];
  sync(): void;
  flush?(): Promise<void>;
  close?(): void | Promise<void>;
}

export interface Clock { nowMs(): number; sleep(ms: number): Promise<void> }
export class SystemClock implements Clock { nowMs(): number; sleep(ms: number): Promise<void> }
export class FakeClock implements Clock {
  constructor(nowMs: number);
  nowMs(): number; sleep(ms: number): Promise<void>; advance(ms: number): void; set(ms: number): void;
}

export interface OpenOptions { clock?: Clock; agent?: string; claimWait?: { pollMs: number; maxPolls: number } }

export interface Recovered { effectId: string; outcome?: Outcome; error?: GateError }

/** What a gate asks of a low-level target (jco's WIT records, camelCase). */
export interface StepRequest { effectId: string; target: string; effect: string; [field: string]: unknown }
export type Reply =
  | { tag: 'captured'; val: string } | { tag: 'allowed'; val: boolean } | { tag: 'applied'; val: string }
  | { tag: 'rejected'; val: string } | { tag: 'unknown'; val: string } | { tag: 'found'; val: string }
  | { tag: 'not-found' } | { tag: 'failed'; val: string };
/**
 * The steps of the low-level Gate. `routes`: the target names these reach (passed to
 * `setRoutes` by `submit` and `recover`). A step for any other target is never asked; a
 * target that cannot answer throws rather than make a reply up.
 */
export interface Targets {
  routes?: Iterable<string>;
  capture(req: StepRequest & { names: string[] }): Reply | Promise<Reply>;
  authorize(req: StepRequest & { agent: string }): Reply | Promise<Reply>;
  apply(req: StepRequest & { idempotencyKey: string; attempt: number }): Reply | Promise<Reply>;
  query(req: StepRequest): Reply | Promise<Reply>;
}

export class Interlock {
  /**
   * Node: a file journal folder (or ':memory:'), created 0700 with files 0600. Browser: an
   * IndexedDB database name. A URL (`postgres://...`) rejects with UnsupportedJournalError.
   */
  static open(where?: string, options?: OpenOptions): Promise<Interlock>;
  static withJournal(journal: JournalBackend, options?: OpenOptions): Promise<Interlock>;
  /** Browser only: an in-memory journal. */
  static memory(options?: OpenOptions): Promise<Interlock>;
  /** Node only: repair a torn journal tail. */
  static repair(dir: string): { tornOffset: number | null; tornBytes: number; savedTo: string | null };
  readonly gate: Gate;
  readonly journal: JournalBackend;
  /** Also routes `def.target` to this gate (see Gate.setRoutes). */
  effect<A extends unknown[]>(def: EffectDefinition, fn: (...args: [...A, string, EffectContext]) => unknown): Effect<A>;
  /** Effects of a target no effect here defines stay open (target_unroutable), untouched. */
  recover(): Promise<Recovered[]>;
  submit(proposal: object | string): Promise<Outcome>;
  lease(name: string, when: { ttlMs?: number; untilMs?: number }): Promise<void>;
  revokeLease(name: string): Promise<void>;
  approve(approval: object | string): Promise<void>;
  revokeApproval(id: string): Promise<void>;
  confirm(effectId: string, evidence: Json): Promise<Outcome>;
  openEffects(): string[];
  receipt(effectId: string, options?: { key?: Uint8Array | string }): Receipt;
  checkReceipt(receipt: Receipt | string, key: Uint8Array | string): VerifyReport;
  verify(options?: { anchors?: (Receipt | string)[] }): VerifyReport;
  close(): void | Promise<void>;
}

/** The low-level gate: steps, for hosts that drive targets themselves. */
export class Gate {
  submitStep(proposal: object | string): unknown;
  resume(op: bigint, reply: { tag: string; val?: unknown }): unknown;
  cancel(op: bigint): void;
  /**
   * The targets this host performs steps for; an effect of any other target is left open
   * (target_unroutable), nothing asked or written. Until called, every target is routed.
   */
  setRoutes(targets: Iterable<string>): void;
  drive(step: unknown, targets: Targets, options?: { recovering?: boolean }): Promise<Outcome>;
  submit(proposal: object | string, targets: Targets): Promise<Outcome>;
  recover(effectId: string, targets: Targets): Promise<Outcome>;
  recoverAll(targets: Targets): Promise<Recovered[]>;
  openEffects(): string[];
  effectIdOf(proposal: object | string): string;
  receipt(effectId: string, key?: Uint8Array | string): Receipt;
  verify(anchors?: (Receipt | string)[]): VerifyReport;
}

export class MemoryJournal implements JournalBackend {
  append(stream: string, expectedLength: number, entries: string[], durable: boolean, open: boolean): void;
  read(stream: string, start: number): string[];
  length(stream: string): number;
  openStreams(): string[];
  streams(): string[];
  sync(): void;
  /** The journal as journal.jsonl bytes. */
  bytes(): Uint8Array;
  close(): void;
}
export class FileJournal extends MemoryJournal {
  static open(dir: string): FileJournal;
  static repair(dir: string): { tornOffset: number | null; tornBytes: number; savedTo: string | null };
}
export class IndexedDbJournal extends MemoryJournal {
  static open(name?: string): Promise<IndexedDbJournal>;
  static destroy(name: string): Promise<void>;
  flush(): Promise<void>;
}

export interface PaymentsService {
  tier(): string;
  snapshot(): string;
  addOrder(order: string, paidCents: number): void;
  setEligible(order: string, eligible: boolean): void;
  refund(order: string, amountCents: number, idempotencyKey?: string | null, reference?: string | null, nowMs?: number): { id: string; order: string; amount_cents: number };
  refundByHand(order: string, amountCents: number, nowMs: number): { id: string };
  findByReference(reference: string): { id: string; amount_cents: number } | null;
  premises(order: string, excludingReference: string | null): { eligible: boolean; refunded_by_others_cents: number };
  refundedCents(order: string): number;
  refundCount(): number;
  refunds(order: string): { id: string; amount_cents: number; by_hand: boolean }[];
}
/** The payments service as a low-level target (routes "payments"); without `authorizer` a host check fails (the effect stays open). */
export function paymentsTarget(service: PaymentsService, clock: Clock, options?: { authorizer?: (req: StepRequest & { agent: string }) => boolean }): Targets & { routes: string[] };
/** The simulated payments service (Node: state in payments.json, the CLI's format). */
export const Payments: {
  create(file: string, tier: string): Promise<PaymentsService>;
  open(file: string): Promise<PaymentsService>;
  inMemory(tier: string): Promise<PaymentsService>;
};

export class InterlockError extends Error {}
export class GateError extends InterlockError { readonly case: string; readonly payload: unknown }
export class InvalidJsonError extends GateError { readonly payload: string }
/** Also thrown by the host itself for a value JSON cannot carry as given (`field`: its JSON pointer). */
export class InvalidFieldError extends GateError { readonly payload: { field: string; problem: string } }
export class TooLargeError extends GateError { readonly payload: number }
export class UnknownEffectError extends GateError { readonly payload: string }
export class UnknownOperationError extends GateError { readonly payload: number }
export class UnexpectedReplyError extends GateError { readonly payload: string }
export class JournalFailedError extends GateError { readonly payload: { tag: 'conflict' | 'io' | 'corrupt' | 'torn-tail' | 'other'; val: number | string } }
export class CorruptJournalError extends GateError { readonly payload: string }
export class ContentionError extends GateError { readonly payload: string }
export class JournalError extends InterlockError { constructor(tag: string, val: unknown, message?: string); readonly tag: string; readonly val: unknown }
export class JournalLockedError extends JournalError {}
export class TornTailError extends JournalError { readonly offset: number; readonly bytes: number }
export class CorruptJournalFileError extends JournalError { readonly line: number; readonly detail: string }
/** The journal location is a URL (`scheme://...`): shared journals are not supported yet. */
export class UnsupportedJournalError extends InterlockError { readonly where: string }
/** Throw from an effect function: the target refused and applied nothing. */
export class Rejected extends InterlockError {}
export class TargetTimeoutError extends InterlockError {}
export class ServiceError extends InterlockError { readonly case: string; readonly payload: unknown }
