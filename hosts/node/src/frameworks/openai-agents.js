// The gate inside the OpenAI Agents SDK for JS (`@openai/agents`): the definitions you would
// give `tool({...})` in, function tools out, each gated one sending through protect() (the
// tool-gating config of the MCP proxy). Definitions, not finished FunctionTools: a
// FunctionTool's invoke turns the tool's own exceptions into text for the model, and the gate
// must see a failed send as a failure (its fate unknown), never as an answer.
import { protect } from '../tools.js';

// Loaded by name, not typed from the SDK: its declarations do not check under this
// package's strict settings (node:stream's Readable used as a type, agents-core 0.20).
const AGENTS = '@openai/agents';

/**
 * @import { ProtectOptions, ToolOutput, RecoveredTool } from '../types.js'
 * @import { AgentToolDefinition, AgentsProtectOptions, ProtectedAgentTools } from '../types.js'
 */

/**
 * Gates the function tools `definitions` (each `{ name, description, parameters, execute }`,
 * as `tool()` takes them) by `config`. Returns the FunctionTools, in order, made by the SDK's
 * own `tool()`; a gated one's `execute` goes through the gate and answers the model with the
 * component's message (the whole `{ ok, message, outcome, result }` is in `outputs`, by call).
 * Premise and lookup functions the model should not see go in `options.functions`.
 * @param {AgentToolDefinition[]} definitions
 * @param {object | string} config
 * @param {AgentsProtectOptions} [options]
 * @returns {Promise<ProtectedAgentTools>}
 */
export async function protectTools(definitions, config, options = {}) {
  if (!Array.isArray(definitions)) throw new TypeError('protectTools: the first argument is an array of tool definitions ({ name, description, parameters, execute })');
  const { functions: extra = {}, onOutput, ...rest } = options;
  /** @type {Record<string, (args: any) => unknown>} */
  const functions = { ...extra };
  for (const d of definitions) {
    if (typeof d?.name !== 'string' || typeof d.execute !== 'function') throw new TypeError('protectTools: each definition needs a name and an execute function');
    if (Object.hasOwn(functions, d.name)) throw new TypeError(`protectTools: two tools are named ${JSON.stringify(d.name)}`);
    const execute = d.execute;
    // Called by the gate (a send, a premise read, a lookup), also at recovery, outside any run.
    functions[d.name] = (args) => execute(args, undefined, undefined);
  }
  /** @type {{ tool: (options: any) => any }} */
  const { tool } = await import(AGENTS);
  const gatedTools = await protect(functions, config, /** @type {ProtectOptions} */ (rest));
  const isGated = new Set(gatedTools.gated);
  const made = definitions.map((d) => {
    if (!isGated.has(d.name)) return tool(/** @type {any} */ (d));
    const call = /** @type {(args: unknown) => Promise<ToolOutput>} */ (gatedTools[d.name]);
    return tool(/** @type {any} */ ({
      ...d,
      execute: async (/** @type {unknown} */ args) => {
        const out = await call(args);
        onOutput?.(d.name, out);
        return out.message;
      },
    }));
  });
  return /** @type {ProtectedAgentTools} */ (/** @type {unknown} */ (Object.defineProperties(made, {
    recover: { value: () => /** @type {Promise<RecoveredTool[]>} */ (gatedTools.recover()) },
    gate: { value: gatedTools.gate },
    gated: { value: gatedTools.gated },
    close: { value: () => gatedTools.close() },
  })));
}
