// The OpenAI Agents SDK for JS with and without Interlock: the four rows of the original's
// table (scenarios.js), each cell by a test. Real kills (SIGKILL) of worker processes running
// the SDK's run loop with a scripted Model; the cap race held by the cap journal.
import { test } from 'node:test';
import { rowTests } from './scenarios.js';

rowTests(test, 'openai-agents');
