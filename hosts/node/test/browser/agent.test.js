// The browser agent example (examples/browser-agent/) in headless Chromium: the official
// openai SDK in the page against the example server's scripted model, the refund tool gated
// with the IndexedDB journal, the payments service over HTTP (its state file counted). The
// page is reloaded while the send hangs after the service made the refund: the reopened
// page recovers it by lookup and the agent, run again, gets the recorded outcome: one refund.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { chromium } from 'playwright-core';
import { startServer, ORDER, AMOUNT_CENTS } from '../../examples/browser-agent/server.js';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

let browser;
let home;

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium (hosts/node/test.sh does)`);
  home = mkdtempSync(join(tmpdir(), 'interlock-agent-chromium-'));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    env: { ...process.env, XDG_CONFIG_HOME: join(home, 'config'), XDG_CACHE_HOME: join(home, 'cache'), HOME: home },
  });
});

after(async () => {
  await browser?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

/** Opens the example page in a fresh profile; resolves once the gate is open and recovered. */
async function open(server) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const ready = async () => {
    await page.waitForFunction(() => window.agent?.ready === true || window.agent?.error, null, { timeout: 30_000 })
      .catch((e) => { throw new Error(`the example page did not load: ${errors.join('; ') || e.message}`); });
    const error = await page.evaluate(() => window.agent.error);
    assert.equal(error, undefined, error);
  };
  await page.goto(server.url);
  await ready();
  return { context, page, ready };
}

/** The refunds of the order, read from the service's state file (what was really paid). */
function paid(server) {
  const refunds = JSON.parse(readFileSync(server.stateFile, 'utf8')).refunds.filter((r) => r.order === ORDER);
  return { refunds: refunds.length, cents: refunds.reduce((s, r) => s + r.amount_cents, 0) };
}

test('browser agent: a refund through the gate, then a replay', async () => {
  const server = await startServer();
  const { context, page } = await open(server);
  try {
    assert.deepEqual(await page.evaluate(() => window.agent.recovered), []);
    const first = await page.evaluate(() => window.agent.run());
    assert.match(first.text, /^The refund tool answered: /); // the model got the tool's answer
    assert.equal(first.outcomes.length, 1);
    const [told] = first.outcomes;
    assert.deepEqual([told.state, told.replayed, told.result.amount_cents], ['COMMITTED', false, AMOUNT_CENTS]);
    const [again] = (await page.evaluate(() => window.agent.run())).outcomes;
    assert.deepEqual([again.state, again.replayed, again.effectId], ['COMMITTED', true, told.effectId]);
    assert.deepEqual(paid(server), { refunds: 1, cents: AMOUNT_CENTS });
    assert.equal(await page.evaluate(() => window.agent.verify()), 0);
  } finally {
    await context.close();
    await server.close();
  }
});

test('browser agent: a reload mid-send (the service made the refund, no answer) recovers by lookup: one refund', async () => {
  const server = await startServer();
  const { context, page, ready } = await open(server);
  try {
    const hung = server.hang();
    // The agent's run never finishes: its send hangs until the page goes away.
    await page.evaluate(() => { window.agent.run(); });
    const made = await hung;
    assert.equal(made.amount_cents, AMOUNT_CENTS);
    assert.deepEqual(paid(server), { refunds: 1, cents: AMOUNT_CENTS });

    await page.reload();
    await ready();
    const recovered = await page.evaluate(() => window.agent.recovered);
    assert.equal(recovered.length, 1, JSON.stringify(recovered));
    assert.deepEqual([recovered[0].state, recovered[0].via, recovered[0].effectId], ['COMMITTED', 'recovery-query', made.reference]);

    // The agent starts over (the conversation was lost with the page): the gate replays.
    const { outcomes: [told] } = await page.evaluate(() => window.agent.run());
    assert.deepEqual([told.state, told.replayed, told.effectId], ['COMMITTED', true, made.reference]);
    assert.deepEqual(paid(server), { refunds: 1, cents: AMOUNT_CENTS });
    assert.equal(await page.evaluate(() => window.agent.verify()), 0);
  } finally {
    await context.close();
    await server.close();
  }
});
