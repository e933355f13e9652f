// The gate inside LangChain.js / LangGraph.js: `protectTools(tools, config)`, StructuredTools
// in, StructuredTools out (the same names, descriptions and schemas), each gated one sending
// through protect() (the tool-gating config of the MCP proxy). A gated tool answers with
// content and artifact: the component's message for the model, the whole
// `{ ok, message, outcome, result }` as the ToolMessage's artifact.
import { DynamicStructuredTool } from '@langchain/core/tools';
import { protect } from '../tools.js';

/**
 * @import { ProtectOptions, ToolOutput, RecoveredTool } from '../types.js'
 * @import { LangChainTool, LangChainProtectOptions, ProtectedLangChainTools } from '../types.js'
 */

/**
 * Gates the LangChain tools `tools` (anything with `name`, `description`, `schema` and
 * `invoke(args)`: `tool(...)`, DynamicStructuredTool, a StructuredTool subclass) by `config`.
 * Returns the tools in order; a gated one is a new DynamicStructuredTool over the gate, every
 * other one the tool given. Premise and lookup functions the model should not see go in
 * `options.functions`. Call `recover()` once at startup; a LangGraph run resumed from its
 * checkpointer re-runs its tool node, which the gate answers from the journal.
 * @param {LangChainTool[]} tools
 * @param {object | string} config
 * @param {LangChainProtectOptions} [options]
 * @returns {Promise<ProtectedLangChainTools>}
 */
export async function protectTools(tools, config, options = {}) {
  if (!Array.isArray(tools)) throw new TypeError('protectTools: the first argument is an array of LangChain tools');
  const { functions: extra = {}, ...rest } = options;
  /** @type {Record<string, (args: any) => unknown>} */
  const functions = { ...extra };
  for (const t of tools) {
    if (typeof t?.name !== 'string' || typeof t.invoke !== 'function') throw new TypeError('protectTools: each tool needs a name and invoke()');
    if (Object.hasOwn(functions, t.name)) throw new TypeError(`protectTools: two tools are named ${JSON.stringify(t.name)}`);
    // invoke with the arguments (not a ToolCall) answers the tool's own value and lets its
    // exceptions through: a failed send must reach the gate as a failure.
    functions[t.name] = (args) => t.invoke(args);
  }
  const gatedTools = await protect(functions, config, /** @type {ProtectOptions} */ (rest));
  const isGated = new Set(gatedTools.gated);
  const made = tools.map((t) => {
    if (!isGated.has(t.name)) return t;
    const call = /** @type {(args: unknown) => Promise<ToolOutput>} */ (gatedTools[t.name]);
    return new DynamicStructuredTool({
      name: t.name,
      description: t.description,
      schema: /** @type {any} */ (t.schema),
      responseFormat: 'content_and_artifact',
      func: async (/** @type {unknown} */ args) => {
        const out = await call(args);
        return [out.message, out];
      },
    });
  });
  return /** @type {ProtectedLangChainTools} */ (Object.defineProperties(made, {
    recover: { value: () => /** @type {Promise<RecoveredTool[]>} */ (gatedTools.recover()) },
    gate: { value: gatedTools.gate },
    gated: { value: gatedTools.gated },
    close: { value: () => gatedTools.close() },
  }));
}
