// What each entry exports at run time is what test/types/exports.js lists, which the types
// tests check against the declarations: no export undeclared, no declaration without code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NODE_EXPORTS, BROWSER_EXPORTS, CORE_EXPORTS } from './types/exports.js';

test('the Node entry exports exactly the declared names', async () => {
  assert.deepEqual(Object.keys(await import('../src/index.js')).sort(), [...NODE_EXPORTS].sort());
});

test('the browser entry exports exactly the declared names', async () => {
  assert.deepEqual(Object.keys(await import('../src/browser.js')).sort(), [...BROWSER_EXPORTS].sort());
});

test('the runtime-agnostic core entry (@interlock/gate/core) exports exactly the declared names', async () => {
  assert.deepEqual(Object.keys(await import('@interlock/gate/core')).sort(), [...CORE_EXPORTS].sort());
});

test('each framework subpath exports protectTools, and only it', async () => {
  for (const sub of ['ai', 'openai-agents', 'langchain']) {
    const m = await import(`@interlock/gate/${sub}`);
    assert.deepEqual(Object.keys(m).sort(), ['protectTools'], sub);
  }
});

test('the Stripe subpath (@interlock/gate/stripe) exports the target, its client and its one SDK call', async () => {
  assert.deepEqual(Object.keys(await import('@interlock/gate/stripe')).sort(), ['perform', 'stripeClient', 'stripeRefunds']);
});
