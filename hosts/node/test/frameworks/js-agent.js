// A JS agent for the cross-host test: generateText (the AI SDK) with protectTools over the
// payments tools of the MCP tests (state in payments.json, the file the proxies' upstream
// server reads), killed (SIGKILL) once the service has taken the refund, before the reply.
//   node js-agent.js CONFIG_FILE STATE_FILE
import fs from 'node:fs';
import { generateText, stepCountIs } from 'ai';
import { protectTools } from '../../src/frameworks/ai-sdk.js';
import { paymentsTools } from '../fixtures/mcp/payments-tools.js';
import { aiTools, scriptedModel } from './drivers/ai-sdk.js';

const [config, state] = process.argv.slice(2);
const { functions } = await paymentsTools(state);
const create = functions.create_refund;
const f = {
  ...functions,
  create_refund: (/** @type {any} */ a) => {
    const r = create(a);
    process.kill(process.pid, 'SIGKILL'); // after the service took it, before the reply
    return r;
  },
};
const tools = await protectTools(aiTools(f), JSON.parse(fs.readFileSync(config, 'utf8')), { agent: 'refund-agent' });
await tools.recover();
await generateText({ model: scriptedModel({ order_id: '881', amount_cents: 2000 }), tools, prompt: 'Refund $20 on order 881.', stopWhen: stepCountIs(4) });
console.error('the agent was not killed');
process.exit(3);
