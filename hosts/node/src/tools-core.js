// protect(): the gate in front of an agent's plain tool functions (OpenAI or Anthropic
// tool-calling loops), for any host: Node (src/tools.js) and the browser (src/browser.js)
// each give it their component loader and journal opener. Which calls are effects, and how a call becomes a premise read, a
// proposal, a send and a lookup, is the component's rule (interlock:gate/tools); this file
// only runs the loop every host runs (ARCHITECTURE.md, "Tool gating") and calls functions.
import { Gate, GateComponent, gateRoot, jsonText } from './gate.js';
import { MemoryJournal } from './journal/memory.js';
import { SystemClock } from './clock.js';
import { GateError, InterlockError, Rejected, TargetTimeoutError, gateError, invalidField } from './errors.js';

/** @param {unknown} e */
const message = (e) => String(/** @type {any} */ (e)?.message ?? e);

/** A gated call's premise tool failed (threw), so the call was not made; nothing recorded. */
export class PremiseReadError extends InterlockError {
  /**
   * @param {string} tool the premise tool
   * @param {unknown} cause what it threw
   */
  constructor(tool, cause) {
    super(`the premise tool ${tool} failed: ${message(cause)}`, { cause });
    this.tool = tool;
  }
}

/**
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 * @import { Outcome as WitOutcome } from '../gen/gate/interfaces/interlock-gate-types.js'
 * @import { ToolCall } from '../gen/gate/interfaces/interlock-gate-tools.js'
 * @import { Json, JsonObject, Reply, Step, Targets, Recovered, CaptureRequest, ApplyRequest, QueryRequest } from './types.js'
 * @import { ToolFunction, ProtectOptions, ToolOutput, ProtectedTools, RecoveredTool, JournalBackend } from './types.js'
 * @typedef {GateRoot['tools']} ToolsApi
 */

/**
 * What protect() needs from its host: the gate component, the journal a location names
 * (a folder or URL in Node; an IndexedDB database name in a browser), and a promise that
 * resolves once a journal can be made (the journal-format component is compiled).
 * @typedef {JournalBackend & { close: () => unknown }} Opened
 * @typedef {{ gateComponent: () => Promise<GateComponent<GateRoot>>, openJournal: (location: string, options: ProtectOptions) => Opened | Promise<Opened>, ready: () => Promise<void> }} ToolsHost
 */

/** Members of the returned object; a tool of one of these names would shadow them. */
const RESERVED = new Set(['recover', 'close', 'gate', 'gated', 'then']);


/**
 * A component export's `err` (jco throws it with a `payload`) as the package's typed GateError.
 * @template T
 * @param {() => T} fn
 * @returns {T}
 */
function typed(fn) {
  try {
    return fn();
  } catch (e) {
    const payload = /** @type {any} */ (e)?.payload;
    if (e instanceof Error && typeof payload?.tag === 'string') throw gateError(payload);
    throw e;
  }
}

/**
 * `run()`, or TargetTimeoutError after `ms`.
 * @template T
 * @param {number} ms
 * @param {() => T | Promise<T>} run
 * @returns {Promise<T>}
 */
function withTimeout(ms, run) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  /** @type {Promise<never>} */
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new TargetTimeoutError(`the tool did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([Promise.resolve().then(run), timeout]).finally(() => clearTimeout(timer));
}

/**
 * The gate component, its instance's exports kept: `tools` (the mapping) and every `done`
 * outcome as the component gave it, which `reply` takes (the typed Outcome Gate.drive
 * returns has its JSON parsed: the reply's wording quotes the recorded text).
 * @param {GateComponent<GateRoot>} real
 */
function keeping(real) {
  const kept = {
    /** @type {ToolsApi | undefined} */
    tools: undefined,
    /** @type {Map<bigint, WitOutcome>} a submitted operation's final outcome, by operation */
    byOp: new Map(),
    /** @type {Map<string, WitOutcome>} a recovery's final outcome, by effect */
    byEffect: new Map(),
  };
  /** @type {Set<bigint>} operations started by `recover` */
  const recovering = new Set();
  /** @param {Step} step */
  const note = (step) => {
    if (step.ask.tag !== 'done') return step;
    if (recovering.delete(step.op)) kept.byEffect.set(step.ask.val.effectId, step.ask.val);
    else kept.byOp.set(step.op, step.ask.val);
    return step;
  };
  const component = new GateComponent(async (getCoreModule, imports) => {
    const root = await real.instantiate(getCoreModule, imports);
    kept.tools = root.tools;
    const g = root.gate;
    return /** @type {GateRoot} */ ({
      ...root,
      gate: {
        ...g,
        submit: (/** @type {string} */ p) => note(g.submit(p)),
        resume: (/** @type {bigint} */ op, /** @type {Reply} */ r) => note(g.resume(op, r)),
        recover: (/** @type {string} */ id) => {
          const step = g.recover(id);
          recovering.add(step.op);
          return note(step);
        },
      },
    });
  }, real.getCoreModule);
  return { component, kept };
}

/**
 * Puts the gate in front of `functions` (name -> a plain, possibly async, function taking
 * the call's arguments object). `config` is the tool-gating configuration (object or JSON
 * text; ARCHITECTURE.md, "Tool gating"): the tools it lists are gated, every other one
 * passes through. The journal is `options.journal`, else `config.journal_dir` (a folder,
 * `sqlite:///abs/path.db` or `postgres://...`, as Interlock.open takes). A gated tool's
 * authority is its own (`authority` in the config), else `options.authority`; a tool with
 * neither is refused here with InvalidFieldError at `/tools/<name>/authority`.
 *
 * Each gated tool resolves to `{ ok, message, outcome, result }` (and `error`, typed, when the
 * call was refused before anything was recorded): `message` (hand it to the model) and
 * `outcome` come from the component's `reply`. An un-gated tool is the function given,
 * untouched. Call `recover()` once at startup, before serving calls.
 * @template {Record<string, ToolFunction>} F
 * @param {ToolsHost} host
 * @param {F} functions
 * @param {object | string} config
 * @param {ProtectOptions} [options]
 * @returns {Promise<ProtectedTools<F>>}
 */
export async function protectWith(host, functions, config, options = {}) {
  if (typeof functions !== 'object' || functions === null) throw new TypeError('protect: the first argument is an object of tool functions');
  for (const [name, fn] of Object.entries(functions)) {
    if (typeof fn !== 'function') throw new TypeError(`protect: tool ${JSON.stringify(name)} is not a function`);
    if (RESERVED.has(name)) throw new TypeError(`protect: a tool cannot be named ${JSON.stringify(name)} (the protected object has a member of that name)`);
  }
  const text = jsonText(config);
  await host.ready();
  const real = await host.gateComponent();
  const { component, kept } = keeping(real);
  const clock = options.clock ?? new SystemClock();
  // A throwaway instance checks the configuration before a journal is opened: a bad one
  // opens (and locks) nothing.
  const checker = (await gateRoot(real, { journal: new MemoryJournal(), clock })).tools;
  const gated = typed(() => checker.checkConfig(text));
  /** @type {any} the configuration's own words, read only for its journal_dir */
  const cfg = JSON.parse(text);
  const authority = options.authority === undefined ? undefined : jsonText(options.authority);
  // Every tool the configuration names (gated, premise, lookup) needs a function: one missing
  // would only be found at a re-check or a recovery (the component's rule, every host's).
  typed(() => checker.checkTools(text, Object.keys(functions)));
  // Every gated tool has authority: its own, else the host's, else (unless strict) the
  // agent's standing lease, announced here once, never silently.
  const standing = typed(() => checker.checkAuthority(text, authority, options.strict === true));
  const location = options.journal ?? cfg.journal_dir;
  if (location === undefined) throw invalidField('/journal_dir', 'is required: where the journal is (or give options.journal)');
  const journal = await host.openJournal(location, options);
  /** @type {Gate} */
  let gate;
  try {
    gate = await Gate.instantiate(component, { journal, clock, hooks: options.hooks, claimWait: options.claimWait });
    gate.setRoutes(gated);
    if (options.strict === true) gate.setStrictAuthority(true);
  } catch (e) {
    journal.close();
    throw e;
  }
  const api = /** @type {ToolsApi} */ (kept.tools);
  const agent = options.agent ?? 'agent';
  if (standing.length > 0) console.warn(gate.standingNotice(agent));
  const isGated = new Set(gated);

  /**
   * Calls the function a mapped call names; resolves to its answer as JSON text.
   * @param {ToolCall} call
   * @param {number} [timeoutMs]
   */
  const invoke = async (call, timeoutMs) => {
    const fn = functions[call.tool];
    const args = JSON.parse(call.arguments);
    const answer = timeoutMs === undefined ? await fn(args) : await withTimeout(timeoutMs, () => fn(args));
    return JSON.stringify(answer ?? null);
  };

  /** @type {Targets} */
  const targets = {
    routes: gated,
    async capture(/** @type {CaptureRequest} */ req) {
      try {
        const call = typed(() => api.premiseCall(text, req.target, req.effect));
        if (!call) return { tag: 'failed', val: `${req.target} has no premise tool` };
        const answer = await invoke(call);
        return { tag: 'captured', val: typed(() => api.premises(text, req.target, answer)) };
      } catch (e) {
        return { tag: 'failed', val: message(e) };
      }
    },
    // The configuration names a lease or an approval, never a host check: a recorded
    // proposal that asks for one cannot be answered here, so the effect stays open.
    authorize: () => ({ tag: 'failed', val: 'protect() has no authority check installed' }),
    async apply(/** @type {ApplyRequest} */ req) {
      // Asked before the send: a gate error here is not a send whose fate is unknown.
      const call = typed(() => api.sendCall(text, req.target, req.effect, req.idempotencyKey));
      const timeoutMs = gate.sendTimeoutMs(req.effectId);
      try {
        return { tag: 'applied', val: await invoke(call, timeoutMs) };
      } catch (e) {
        if (e instanceof Rejected) return { tag: 'rejected', val: e.message };
        return { tag: 'unknown', val: message(e) };
      }
    },
    async query(/** @type {QueryRequest} */ req) {
      try {
        const call = typed(() => api.lookupCall(text, req.target, req.effectId, req.effect));
        if (!call) return { tag: 'failed', val: `${req.target} has no lookup tool` };
        const answer = await invoke(call);
        return typed(() => api.found(text, req.target, answer)) ? { tag: 'found', val: answer } : { tag: 'not-found' };
      } catch (e) {
        return { tag: 'failed', val: message(e) };
      }
    },
  };

  /**
   * The model's answer for a gated call of `tool` that ended in `raw`.
   * @param {string} tool
   * @param {WitOutcome} raw
   * @returns {ToolOutput}
   */
  const answer = (tool, raw) => {
    const r = api.reply(tool, raw);
    const outcome = JSON.parse(r.outcome);
    return { ok: !r.isError, message: r.message, outcome, result: outcome.result ?? null };
  };

  /**
   * A call that could not become an effect (a bad call, a failed premise read): the model
   * gets the error; nothing was recorded or sent. The words are the other hosts' (the
   * proxies', Python's protect()).
   * @param {string} tool
   * @param {unknown} e
   * @returns {ToolOutput}
   */
  const notDone = (tool, e) => ({
    ok: false,
    message: e instanceof PremiseReadError
      ? `${tool} was NOT done and nothing was recorded: the facts it rests on could not be read (${message(e)}). Try again later.`
      : `${tool} was NOT done and nothing was recorded: ${message(e)}. Fix the call and try again.`,
    outcome: null,
    result: null,
    error: /** @type {Error} */ (e),
  });

  /**
   * @param {string} tool
   * @param {unknown} args
   * @returns {Promise<ToolOutput>}
   */
  const gatedCall = async (tool, args) => {
    /** @type {Step} */
    let step;
    try {
      const argText = jsonText(args);
      const read = typed(() => api.premiseCall(text, tool, argText));
      /** @type {string | undefined} */
      let premises;
      if (read) {
        try {
          premises = await invoke(read);
        } catch (e) {
          throw new PremiseReadError(read.tool, e);
        }
      }
      const proposal = typed(() => api.proposal(text, tool, argText, premises, agent, authority));
      step = gate.submitStep(proposal);
    } catch (e) {
      if (e instanceof GateError || e instanceof PremiseReadError) return notDone(tool, e);
      throw e;
    }
    /** @type {WitOutcome | undefined} */
    let raw;
    try {
      await gate.drive(step, targets);
    } finally {
      raw = kept.byOp.get(step.op);
      kept.byOp.delete(step.op);
    }
    if (!raw) throw new Error(`the gate finished operation ${step.op} without an outcome`);
    return answer(tool, raw);
  };

  /** @type {Record<string, (args: any) => unknown>} */
  const wrapped = {};
  for (const [name, fn] of Object.entries(functions)) {
    // An un-gated tool is not an effect: the function itself, untouched (as in Python).
    wrapped[name] = isGated.has(name) ? (args) => gatedCall(name, args) : fn;
  }
  Object.defineProperties(wrapped, {
    /** Recovers every open effect of the gated tools (once, at startup). */
    recover: {
      value: async () => {
        const all = await gate.recoverAll(targets);
        return all.map((r) => {
          const raw = kept.byEffect.get(r.effectId);
          kept.byEffect.delete(r.effectId);
          if (!raw || r.error) return r;
          const tool = /** @type {{ name: string }} */ (gate.receipt(r.effectId).target).name;
          return { ...r, ...answer(tool, raw) };
        });
      },
    },
    /** The low-level gate: leases, approvals, receipts, verify. */
    gate: { value: gate },
    /** The tools the configuration gates. */
    gated: { value: [...gated] },
    /** Releases the journal (and its lock). */
    close: { value: () => journal.close() },
  });
  return /** @type {ProtectedTools<F>} */ (/** @type {unknown} */ (wrapped));
}
