// The Vercel AI SDK (`ai`) alone and with Interlock inside: results/frameworks/ai-sdk.json.
// node experiments/frameworks/ai-sdk.mjs [--quick]
import { main } from './js-runner.mjs';

await main({ framework: 'Vercel AI SDK', package: 'ai', driver: 'ai-sdk', file: 'ai-sdk' });
