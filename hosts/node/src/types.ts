// The shapes of the values @interlock/gate takes and gives (no runtime code). The JS in
// this folder names them in its JSDoc, so `npm run typecheck` checks the code against them,
// and the package's declarations (types/, made by `npm run build`) are generated from that
// JSDoc: nothing declared here can drift from what the code does. WIT records are jco's
// own declarations (gen/), re-exported.
import type {
  ApplyRequest,
  AuthorizeRequest,
  CaptureRequest,
  QueryRequest,
  Reply,
  Step,
  CrashPoint,
} from '../gen/gate/interfaces/interlock-gate-target.js';
import type { Statement, SqlValue } from '../gen/gate/interfaces/interlock-gate-storage.js';

export type { ApplyRequest, AuthorizeRequest, CaptureRequest, QueryRequest, Reply, Step, CrashPoint, Statement, SqlValue };

/** Where an effect is in its life, spelled as in the journal. */
export type State = 'PROPOSED' | 'AUTHORIZED' | 'DISPATCHED' | 'COMMITTED' | 'REFUSED' | 'AMBIGUOUS' | 'CONFIRMED';
export type Executed = 'yes' | 'no' | 'unknown';
/** Why an outcome is not a plain success, spelled as in the journal. */
export type Reason =
  | 'conflicting_payload' | 'lease_missing' | 'lease_expired' | 'lease_revoked' | 'not_allowed'
  | 'premise_changed' | 'approval_missing' | 'approval_expired' | 'approval_revoked' | 'approval_stale'
  | 'cap_exceeded' | 'target_rejected' | 'no_dedupe_no_lookup' | 'dedupe_window_passed' | 'claim_live'
  | 'read_failed' | 'target_unavailable' | 'target_unroutable' | 'approval_pending' | 'approval_rejected';

/** A value JSON carries as given. */
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
/** A JSON object. */
export type JsonObject = { [k: string]: Json };

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

export type ProblemKind = 'hash-mismatch' | 'broken-link' | 'bad-seq' | 'unparsable' | 'truncated';
export interface Problem { stream: string; seq: number; kind: ProblemKind; detail: string }
export interface VerifyReport { streams: number; entries: number; problems: Problem[] }

/** What an effect's function gets after its arguments and the idempotency key. */
export interface EffectContext { effectId: string; attempt: number; signal: AbortSignal }

export interface Cap { name: string; limit_cents: number; amount_cents: number }
export interface Bound { at_most?: number; at_least?: number }

export interface EffectDefinition<E = JsonObject> {
  /** The target's name; recovery routes open effects to the definition by it. */
  target: string;
  /** Names of the function's arguments; they become the effect object. Without it the one argument is the effect. */
  params?: string[];
  /** The approved request's key (never model output): the effect's identity. */
  key?: string | ((effect: E) => string);
  lease?: string;
  approval?: string;
  /** Read the premises fresh from the system of record; exclude the effect's own result. */
  premises?: (effect: E, ctx: { effectId: string }) => JsonObject | Promise<JsonObject>;
  bounds?: Record<string, Bound>;
  cap?: Cap | ((effect: E) => Cap);
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
  /** Give up on the target after this long (the claim's length). Default: the gate's (`gate.defaults().timeout_ms`). */
  timeoutMs?: number;
  agent?: string;
}

/** Per-request settings of an effect call (`refund.with({ ... })(...)`). */
export interface EffectOverrides { approval?: string; lease?: string; premises?: JsonObject; key?: string }

/** An effect's function: its arguments, then the idempotency key and the context. */
export type EffectFunction<A extends unknown[]> = (...args: [...A, string, EffectContext]) => unknown;

/**
 * A gated effect. A call rejects with InvalidFieldError (nothing recorded, nothing sent)
 * when an argument is not what JSON carries as given: NaN, Infinity, undefined, a
 * function, a symbol, a BigInt, a Date/Map/Set or other non-plain object, a cycle, an
 * extra argument; or (the gate's rule) an integer past 2^53-1.
 */
export interface Effect<A extends unknown[]> {
  (...args: A): Promise<Outcome>;
  /** The same call with per-request settings. */
  with(overrides: EffectOverrides): (...args: A) => Promise<Outcome>;
  /** The proposal a call would submit (JSON text), recording nothing; its functions are asked as for a call. */
  proposal(...args: A): Promise<string>;
  /** The effect id a call would get, recording nothing. */
  effectId(...args: A): Promise<string>;
  readonly target: string;
}

/**
 * A journal's storage (wit/storage.wit): the file calls (a file journal: FileJournal,
 * MemoryJournal, IndexedDbJournal) or the SQL call (SqliteJournal, PostgresJournal); the
 * calls of the other kind throw StorageError `unsupported`. I/O only: the journal's rules
 * run inside the gate. A failure throws StorageError.
 */
export interface Storage {
  /** Which journal it holds (journal-admin's `backend`). */
  readonly backend: 'file' | 'sqlite' | 'postgres';
  fileSize(name: string): number | undefined;
  fileRead(name: string, offset: number, len: number): Uint8Array;
  /** Appends only if the file is exactly `at` bytes long, else StorageError `conflict`. */
  fileAppend(name: string, at: number, bytes: Uint8Array): void;
  fileSync(name: string): void;
  fileTruncate(name: string, len: number): void;
  fileReplace(name: string, bytes: Uint8Array): void;
  fileCreate(name: string, bytes: Uint8Array): boolean;
  /** One transaction: each statement's rows (each row its columns). */
  sqlBatch(statements: Statement[], write: boolean, durable: boolean): SqlValue[][][];
  /** Write-behind storage: resolves once every write so far is durable. */
  flush?(): Promise<void>;
  close?(): void | Promise<void>;
}

export interface Clock { nowMs(): number; sleep(ms: number): Promise<void> }

/** How recovery waits out another worker's live claim. */
export interface ClaimWait { pollMs: number; maxPolls: number }

export interface OpenOptions {
  clock?: Clock;
  agent?: string;
  /** Default: the gate's (`gate.defaults().claim_wait`). */
  claimWait?: ClaimWait;
  /**
   * Strict authority. By default an effect that names no lease or approval runs under its
   * agent's standing lease, which the gate names and grants once, at first use (recorded),
   * announced once on `console.warn`. With `strict: true` such an effect is refused with
   * InvalidFieldError at `/authority`, nothing recorded.
   */
  strict?: boolean;
  /** The older spelling: `standingLease: false` is `strict: true`. */
  standingLease?: boolean;
  /**
   * Node, file journal: how long to wait for the lock another writer holds (ms). Default:
   * the journal format's (5000); 0: fail at once. A file journal has one writer per folder;
   * several writers share a SQLite (`sqlite:///abs/path.db`) or PostgreSQL
   * (`postgres://...`) journal.
   */
  lockWaitMs?: number;
  /**
   * How far the clocks of the machines sharing the journal may disagree (ms). Every
   * proposal carries it (`target.clock_skew_ms`): claims last that much longer and
   * expiries are judged by the latest clock. Default: none (one machine's clock).
   */
  clockSkewMs?: number;
  /** Tests: where the gate asks this host to die, as a killed process would (CrashedError). */
  crashAt?: CrashPoint;
  /**
   * Node, PostgreSQL journal: how long one journal call waits for the database before it
   * fails with an `io` JournalError (ms). Default 30000.
   */
  journalTimeoutMs?: number;
}

/** What `recover` says of one open effect: its outcome, or the gate error it met. */
export type Recovered =
  | { effectId: string; outcome: Outcome; error?: undefined }
  | { effectId: string; outcome?: undefined; error: import('./errors.js').GateError };

/**
 * The steps of the low-level Gate. `routes`: the target names these reach (passed to
 * `setRoutes` by `submit` and `recover`). A step for any other target is never asked; a
 * target that cannot answer throws rather than make a reply up.
 */
export interface Targets {
  routes?: Iterable<string>;
  capture(req: CaptureRequest): Reply | Promise<Reply>;
  authorize(req: AuthorizeRequest): Reply | Promise<Reply>;
  apply(req: ApplyRequest): Reply | Promise<Reply>;
  query(req: QueryRequest): Reply | Promise<Reply>;
}

/** What `repair` did to a torn journal tail (nulls and 0: nothing to repair). */
export interface RepairReport { tornOffset: number | null; tornBytes: number; savedTo: string | null }

/**
 * A refund of the simulated payments service (adapters/payments-sim, `Refund`). A type,
 * not an interface, so it is a Json value (a lookup may return it as is).
 */
export type Refund = {
  /** `re_0001`, `re_0002`, ... in creation order. */
  id: string;
  order: string;
  amount_cents: number;
  /** The reference the caller attached (the gate's effect id). */
  reference: string | null;
  /** The key the service deduped on; null on tiers that do not dedupe. */
  idempotency_key: string | null;
  created_ms: number;
  /** Made by a person in the dashboard, not through the API. */
  by_hand: boolean;
};

/** The premises the simulated payments service reports for an order. */
export interface PaymentsPremises { eligible: boolean; refunded_by_others_cents: number; [name: string]: Json }

// ---- protect(): tool gating (src/tools.js, issue 14) ----------------------------------

/** A plain tool function: takes the call's arguments object, returns (or resolves to) its answer. */
export type ToolFunction = (args: any) => unknown;

/** What a protected tool call resolves to. */
export interface ToolOutput {
  /** True only when the effect happened (committed or confirmed). */
  ok: boolean;
  /** What to hand the model: the component's wording (the same in every host). */
  message: string;
  /** The outcome as JSON, spelled as the journal spells it; null for a call that was not made. */
  outcome: JsonObject | null;
  /** The tool's answer: the recorded result of the send. */
  result: unknown;
  /** Why a gated call was not made at all (a bad call, a failed premise read): nothing recorded, nothing sent. */
  error?: Error;
}

/** What `recover()` says of one open effect: the Gate's Recovered, plus the model's wording when it settled. */
export type RecoveredTool = Recovered & Partial<Omit<ToolOutput, 'error' | 'outcome'>>;

/** The options of protect(). */
export interface ProtectOptions {
  /** The journal (a folder, `sqlite:///abs/path.db`, `postgres://...`, `':memory:'`); default: the config's `journal_dir`. */
  journal?: string;
  /** The authority of gated tools whose config names none: `{ lease }` or `{ approval }`; with neither, the agent's standing lease (announced once on `console.warn`). */
  authority?: { lease: string } | { approval: string };
  /** Strict authority: a gated tool with no authority at all is refused at start (InvalidFieldError at `/tools/<tool>/authority`). */
  strict?: boolean;
  /** The agent the proposals name. Default `"agent"`. */
  agent?: string;
  clock?: Clock;
  claimWait?: ClaimWait;
  /** Tests: where the gate asks this host to die (CrashedError). */
  crashAt?: CrashPoint;
  /** File journal: how long to wait for another writer's lock (ms). */
  lockWaitMs?: number;
  /** PostgreSQL journal: the bound on every call (ms). */
  journalTimeoutMs?: number;
}

/** What protect() resolves to: each tool, gated or passed through, plus the gate's own members. */
export type ProtectedTools<F extends Record<string, ToolFunction>> = {
  /** A gated tool resolves to a ToolOutput; an un-gated one is the function given, untouched. */
  [K in keyof F]: F[K] | ((args: Parameters<F[K]>[0]) => Promise<ToolOutput>);
} & {
  /** Recovers every open effect of the gated tools; call once at startup. */
  recover(): Promise<RecoveredTool[]>;
  /** The low-level gate: leases, approvals, receipts, verify. */
  readonly gate: import('./gate.js').Gate;
  /** The tools the configuration gates. */
  readonly gated: string[];
  /** Releases the journal and its lock. */
  close(): void;
};
// ---- end protect() --------------------------------------------------------------------

// ---- frameworks: @interlock/gate/ai, /openai-agents, /langchain (src/frameworks/, issue 16) ----

/** The options of the framework bindings: protect()'s, plus functions the model does not see. */
export interface FrameworkProtectOptions extends ProtectOptions {
  /** Premise and lookup tools that are not the agent's tools: name -> a plain function of the arguments object. */
  functions?: Record<string, ToolFunction>;
}

/** What a framework binding's result carries beside the tools. */
export interface GatedToolsMembers {
  /** Recovers every open effect of the gated tools; call once at startup, before the first run. */
  recover(): Promise<RecoveredTool[]>;
  /** The low-level gate: leases, approvals, receipts, verify. */
  readonly gate: import('./gate.js').Gate;
  /** The tools the configuration gates. */
  readonly gated: string[];
  /** Releases the journal and its lock. */
  close(): void;
}

/** A Vercel AI SDK tool as `tool({...})` makes it: a gated one needs `execute`. */
export interface AiTool {
  description?: string;
  inputSchema?: unknown;
  execute?: (input: any, options: any) => unknown;
  toModelOutput?: (options: { output: any; [name: string]: unknown }) => unknown;
  [member: string]: unknown;
}
/** The options of `@interlock/gate/ai`'s protectTools. */
export type AiProtectOptions = FrameworkProtectOptions;
/** The AI SDK tool set back: a gated tool's execute resolves to a ToolOutput (the model gets its message). */
export type ProtectedAiTools<T extends Record<string, AiTool>> = {
  [K in keyof T]: T[K] | (Omit<T[K], 'execute'> & { execute: (input: any) => Promise<ToolOutput> });
} & GatedToolsMembers;

/** A function tool's definition, as the OpenAI Agents SDK's `tool({...})` takes it. */
export interface AgentToolDefinition {
  name: string;
  description: string;
  /** A zod object (strict tools) or a JSON schema object. */
  parameters: unknown;
  strict?: boolean;
  execute: (input: any, context?: unknown, details?: unknown) => unknown;
  [member: string]: unknown;
}
/** The options of `@interlock/gate/openai-agents`'s protectTools. */
export interface AgentsProtectOptions extends FrameworkProtectOptions {
  /** Called with each gated call's whole output (the model gets only its message). */
  onOutput?: (tool: string, output: ToolOutput) => void;
}
/** A FunctionTool of the OpenAI Agents SDK, as its `tool()` makes it (the members used here). */
export interface AgentFunctionTool {
  type: 'function';
  name: string;
  description: string;
  parameters: unknown;
  strict: boolean;
  invoke(runContext: unknown, input: string, details?: unknown): Promise<unknown>;
  [member: string]: unknown;
}
/** The FunctionTools back, in order (made by the SDK's `tool()`). */
export type ProtectedAgentTools = AgentFunctionTool[] & GatedToolsMembers;

/** A LangChain tool: `tool(...)`, a DynamicStructuredTool or a StructuredTool subclass. */
export interface LangChainTool {
  name: string;
  description: string;
  schema: unknown;
  invoke(input: any, config?: unknown): Promise<unknown>;
}
/** The options of `@interlock/gate/langchain`'s protectTools. */
export type LangChainProtectOptions = FrameworkProtectOptions;
/** The tools back, in order; a gated one answers content and artifact (the ToolOutput). */
export type ProtectedLangChainTools = LangChainTool[] & GatedToolsMembers;
// ---- end frameworks -------------------------------------------------------------------
