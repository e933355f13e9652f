// protect() for Node: the journal is a folder, `sqlite:///abs/path.db` or `postgres://...`
// (as Interlock.open takes); the loop itself is src/tools-core.js, shared with the browser.
import { protectWith, PremiseReadError } from './tools-core.js';
import { gateComponent } from './load-node.js';
import { openJournal } from './journal/open.js';

/**
 * @import { ToolFunction, ProtectOptions, ProtectedTools } from './types.js'
 */

/**
 * Puts the gate in front of `functions` (see src/tools-core.js, protectWith).
 * @template {Record<string, ToolFunction>} F
 * @param {F} functions
 * @param {object | string} config
 * @param {ProtectOptions} [options]
 * @returns {Promise<ProtectedTools<F>>}
 */
export function protect(functions, config, options = {}) {
  return protectWith({ gateComponent, openJournal }, functions, config, options);
}

export { PremiseReadError };
