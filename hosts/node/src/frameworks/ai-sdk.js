// The gate inside the Vercel AI SDK (`ai`): tool({...}) definitions in, the same tools out,
// each gated one sending through protect() (the tool-gating config of the MCP proxy). The
// mapping from a call to an effect is the component's (src/tools.js); this file only hands
// protect() each tool's execute and gives the model the component's message.
import { protect } from '../tools.js';

/**
 * @import { ProtectOptions, ToolOutput, RecoveredTool } from '../types.js'
 * @import { AiTool, AiProtectOptions, ProtectedAiTools } from '../types.js'
 */

/** Members of the returned tool set; a tool of one of these names would shadow them. */
const RESERVED = new Set(['recover', 'close', 'gate', 'gated', 'then']);

/**
 * Gates the AI SDK tools `tools` (name -> a `tool({...})` with `execute`) by `config` (the
 * tool-gating configuration, ARCHITECTURE.md "Tool gating"). A gated tool's `execute`
 * resolves to protect()'s `{ ok, message, outcome, result }` and its `toModelOutput` hands
 * the model `message` (what happened, worded by the component); every other tool is
 * returned as given. Premise and lookup tools the model should not see go in
 * `options.functions` (plain functions taking the arguments object). Call `recover()` once
 * at startup, before the first generateText/streamText.
 * @template {Record<string, AiTool>} T
 * @param {T} tools
 * @param {object | string} config
 * @param {AiProtectOptions} [options]
 * @returns {Promise<ProtectedAiTools<T>>}
 */
export async function protectTools(tools, config, options = {}) {
  if (typeof tools !== 'object' || tools === null) throw new TypeError('protectTools: the first argument is an object of AI SDK tools');
  const { functions: extra = {}, ...rest } = options;
  /** @type {Record<string, (args: any) => unknown>} */
  const functions = { ...extra };
  for (const [name, t] of Object.entries(tools)) {
    if (RESERVED.has(name)) throw new TypeError(`protectTools: a tool cannot be named ${JSON.stringify(name)} (the returned set has a member of that name)`);
    const execute = t?.execute;
    if (typeof execute !== 'function') continue; // a tool without execute is the client's: never gated
    // Called by the gate (a send, a premise read, a lookup), also at recovery, where no
    // model call is in flight: the call options name the gate as the caller.
    functions[name] = (args) => execute(args, { toolCallId: `interlock:${name}`, messages: [] });
  }
  const gatedTools = await protect(functions, config, /** @type {ProtectOptions} */ (rest));
  const isGated = new Set(gatedTools.gated);
  /** @type {Record<string, AiTool>} */
  const out = {};
  for (const [name, t] of Object.entries(tools)) {
    if (!isGated.has(name)) {
      out[name] = t;
      continue;
    }
    const call = /** @type {(args: unknown) => Promise<ToolOutput>} */ (gatedTools[name]);
    out[name] = {
      ...t,
      execute: (/** @type {unknown} */ args) => call(args),
      toModelOutput: ({ output }) => ({ type: 'text', value: /** @type {ToolOutput} */ (output).message }),
    };
  }
  Object.defineProperties(out, {
    recover: { value: () => /** @type {Promise<RecoveredTool[]>} */ (gatedTools.recover()) },
    gate: { value: gatedTools.gate },
    gated: { value: gatedTools.gated },
    close: { value: () => gatedTools.close() },
  });
  return /** @type {ProtectedAiTools<T>} */ (/** @type {unknown} */ (out));
}
