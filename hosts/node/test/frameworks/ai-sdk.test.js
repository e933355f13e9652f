// The Vercel AI SDK with and without Interlock: the four rows of the original's table
// (scenarios.js), each cell by a test. Real kills (SIGKILL) of worker processes running
// generateText's tool loop with the SDK's MockLanguageModelV4.
import { test } from 'node:test';
import { rowTests } from './scenarios.js';

rowTests(test, 'ai-sdk');
