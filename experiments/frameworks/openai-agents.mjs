// The OpenAI Agents SDK for JS alone and with Interlock inside:
// results/frameworks/openai-agents-js.json. node experiments/frameworks/openai-agents.mjs [--quick]
import { main } from './js-runner.mjs';

await main({ framework: 'OpenAI Agents SDK (JS)', package: '@openai/agents', driver: 'openai-agents', file: 'openai-agents-js' });
