// protect(): the gate in front of an agent's plain tool functions (OpenAI or Anthropic
// tool-calling loops), for any host: Node (src/tools.js) and the browser (src/browser.js)
// each give it their component loader and journal opener. Which calls are effects, and how a
// call becomes a premise read, a proposal, a send and a lookup, is the component's `tools`
// session (ARCHITECTURE.md, "Tool gating"); this file calls the functions it is told to.
import { Gate, toOutcome } from './gate.js';
import { gateRoot, unwrap } from './component.js';
import { answerOf, withTimeout } from './interlock.js';
import { jsonText, assertJson } from './json.js';
import { MemoryJournal } from './journal/memory.js';
import { SystemClock } from './clock.js';
import { GateError, InterlockError, gateError, invalidField } from './errors.js';

/**
 * @import { Root as GateRoot } from '../gen/gate/interlock_gate.js'
 * @import { ToolStep, ToolDone, ToolRequest, ToolOptions } from '../gen/gate/interfaces/interlock-gate-tools.js'
 * @import { GateComponent } from './component.js'
 * @import { ToolFunction, ProtectOptions, ToolOutput, ProtectedTools, RecoveredTool, Storage } from './types.js'
 */

/** A gated call's premise tool failed, so the call was not made; nothing recorded. */
export class PremiseReadError extends InterlockError {}

/**
 * What protect() needs from its host: the gate component, and the journal's storage a
 * location names (a folder or URL in Node; an IndexedDB database name in a browser).
 * @typedef {Storage & { close: () => unknown }} Opened
 * @typedef {{ gateComponent: () => Promise<GateComponent<GateRoot>>, openJournal: (location: string, options: ProtectOptions) => Opened | Promise<Opened> }} ToolsHost
 */

/** Members of the returned object; a tool of one of these names would shadow them. */
const RESERVED = new Set(['recover', 'close', 'gate', 'gated', 'then']);

/**
 * A component export's call, its `err` as the package's typed GateError.
 * @template T
 * @param {() => T} fn
 * @returns {T}
 */
const typed = (fn) => unwrap(fn, gateError);

/**
 * A finished call as protect() answers it.
 * @param {ToolDone} done
 * @returns {ToolOutput}
 */
function output(done) {
  const outcome = JSON.parse(done.reply.outcome);
  if (done.outcome) return { ok: !done.reply.isError, message: done.reply.message, outcome, result: outcome.result ?? null };
  // Refused before the gate was asked: nothing recorded, nothing sent.
  const why = outcome.error ?? {};
  const error = why.kind === 'invalid_field' ? invalidField(why.field, why.problem)
    : String(why.kind).startsWith('premise_') ? new PremiseReadError(done.reply.message)
      : new InterlockError(done.reply.message);
  return { ok: false, message: done.reply.message, outcome: null, result: null, error };
}

/**
 * Puts the gate in front of `functions` (name -> a plain, possibly async, function taking
 * the call's arguments object). `config` is the tool-gating configuration (object or JSON
 * text; ARCHITECTURE.md, "Tool gating"): the tools it lists are gated, every other one
 * passes through. The journal is `options.journal`, else the configuration's `journal_dir`
 * (default `.interlock/mcp`; a folder, `sqlite:///abs/path.db` or `postgres://...`, as
 * Interlock.open takes). A gated tool's authority is its own (`authority` in the config),
 * else `options.authority`, else (unless `strict`) its agent's standing lease, announced once.
 *
 * Each gated tool resolves to `{ ok, message, outcome, result }` (and `error`, typed, when the
 * call was refused before anything was recorded): `message` (hand it to the model) and
 * `outcome` are the component's (its `tools` session drives the call). An un-gated tool is the function given,
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
  const component = await host.gateComponent();
  const clock = options.clock ?? new SystemClock();
  const w = options.claimWait;
  /** @type {ToolOptions} */
  const toolOptions = {
    agent: options.agent ?? 'agent',
    authority: options.authority === undefined ? undefined : jsonText(options.authority),
    strict: options.strict === true,
    results: 'plain',
    wait: w && { pollMs: BigInt(w.pollMs), maxPolls: BigInt(w.maxPolls) },
  };
  // A throwaway instance checks the configuration (and that every tool it names has a
  // function) before a journal is opened: a bad one opens (and locks) nothing.
  const checker = (await gateRoot(component, { storage: new MemoryJournal(), clock })).tools;
  const started = typed(() => checker.start(text, toolOptions));
  typed(() => checker.checkTools(Object.keys(functions)));
  const storage = await host.openJournal(options.journal ?? started.journalDir, options);
  /** @type {Gate} */
  let gate;
  try {
    gate = await Gate.instantiate(component, { storage, clock, claimWait: options.claimWait, crashAt: options.crashAt });
    if (options.strict === true) gate.setStrictAuthority(true);
    gate.call('tools', 'start', text, toolOptions);
  } catch (e) {
    await storage.close();
    throw e;
  }
  if (started.standing.length > 0) console.warn(gate.standingNotice(toolOptions.agent));

  /**
   * Runs a `tools` step through to its end, calling the tools it names.
   * @param {ToolStep} step
   */
  const run = async (step) => /** @type {ToolDone} */ ((await gate.loop('tools', step, (/** @type {ToolRequest} */ req) => {
    const fn = functions[req.call.tool];
    const args = JSON.parse(req.call.arguments);
    return answerOf(() => (req.timeoutMs === undefined ? fn(args) : withTimeout(Number(req.timeoutMs), () => fn(args))));
  })).val);

  /** @type {Record<string, (args: any) => unknown>} */
  const wrapped = {};
  const isGated = new Set(started.gated);
  for (const [name, fn] of Object.entries(functions)) {
    // An un-gated tool is not an effect: the function itself, untouched (as in Python).
    wrapped[name] = isGated.has(name) ? async (args) => {
      /** @type {string} */
      let argText;
      try {
        assertJson(args); // a value, never JSON text
        argText = JSON.stringify(args);
      } catch (e) {
        if (!(e instanceof GateError)) throw e;
        return { ok: false, message: `${name} was NOT done and nothing was recorded: ${e.message}. Fix the call and try again.`, outcome: null, result: null, error: e };
      }
      return output(await run(gate.call('tools', 'call', name, argText)));
    } : fn;
  }
  Object.defineProperties(wrapped, {
    /** Recovers every open effect of the gated tools (once, at startup). */
    recover: {
      value: () => gate.recoverEach(async (effectId) => {
        const done = await run(gate.call('tools', 'recover', effectId));
        const { ok, message, result } = output(done);
        /** @type {RecoveredTool} */
        const r = { effectId, outcome: toOutcome(/** @type {NonNullable<ToolDone['outcome']>} */ (done.outcome)), ok, message, result };
        return r;
      }),
    },
    /** The low-level gate: leases, approvals, receipts, verify. */
    gate: { value: gate },
    /** The tools the configuration gates. */
    gated: { value: [...started.gated] },
    /** Releases the journal (and its lock). */
    close: { value: () => storage.close() },
  });
  return /** @type {ProtectedTools<F>} */ (/** @type {unknown} */ (wrapped));
}
