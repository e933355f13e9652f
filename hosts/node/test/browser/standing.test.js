// `Interlock.open('.interlock')` from `@interlock/gate/browser` (an IndexedDB journal) with no
// options, and an effect that names no lease, in headless Chromium (issue 23, item 2): the
// scenario of test/standing.test.js (test/browser/standing-scenario.js), run in the page.
// The notice is checked twice: as the page's console.warn saw it, and as Chromium's console
// reported it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { chromium } from 'playwright-core';
import { serve } from './server.js';
import { PKG } from '../helpers.js';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

let server;
let browser;
let home;

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium (hosts/node/test.sh does)`);
  home = mkdtempSync(join(tmpdir(), 'interlock-standing-chromium-'));
  server = await serve(PKG);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    env: { ...process.env, XDG_CONFIG_HOME: join(home, 'config'), XDG_CACHE_HOME: join(home, 'cache'), HOME: home },
  });
});

after(async () => {
  await browser?.close();
  server?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

/** A fresh profile's page with the scenario loaded; the warnings Chromium's console reports. */
async function page() {
  const context = await browser.newContext();
  const p = await context.newPage();
  const errors = [];
  /** @type {string[]} */
  const consoleWarnings = [];
  p.on('pageerror', (e) => errors.push(String(e)));
  p.on('console', (m) => { if (m.type() === 'warning') consoleWarnings.push(m.text()); });
  await p.goto(`http://127.0.0.1:${server.address().port}/test/browser/standing.html`);
  await p.waitForFunction(() => window.ready === true, null, { timeout: 30_000 }).catch((e) => {
    throw new Error(`the page did not load: ${errors.join('; ') || e.message}`);
  });
  return { context, page: p, consoleWarnings };
}

test('browser: Interlock.open(".interlock") with no options: an effect naming no lease commits under the standing lease, GRANTED once, said once', async () => {
  const { context, page: p, consoleWarnings } = await page();
  try {
    const r = await p.evaluate(() => window.standing.byDefault());
    assert.deepEqual(r.atOpen, []);
    assert.deepEqual(r.atDefine, [r.notice], 'the gate\'s notice, once, when the effect is defined');
    assert.match(r.notice, /standing lease agent-standing/);
    assert.deepEqual(r.atCall, []);
    assert.deepEqual(consoleWarnings, [r.notice], 'Chromium\'s console got it once');
    assert.deepEqual(r.first, ['COMMITTED', 'yes', false]);
    assert.deepEqual(r.again, ['COMMITTED', true, true]);
    assert.deepEqual(r.authority, { lease: 'agent-standing' });
    assert.equal(r.leaseChecked, 'agent-standing');
    assert.deepEqual(r.granted, [['lease:agent-standing', 'agent-standing']]);
    assert.equal(r.sent, 1);
    assert.equal(r.refunds, 1);
    assert.equal(r.problems, 0);
  } finally {
    await context.close();
  }
});

test('browser: Interlock.open(".interlock", { strict: true }): InvalidFieldError at /authority; nothing recorded (after a reopen too), nothing sent', async () => {
  const { context, page: p, consoleWarnings } = await page();
  try {
    const r = await p.evaluate(() => window.standing.strict());
    assert.equal(r.invalidField, true, r.error);
    assert.equal(r.field, '/authority');
    assert.deepEqual(r.streams, []);
    assert.deepEqual(r.streamsAfterReopen, []);
    assert.deepEqual(r.warned, []);
    assert.deepEqual(consoleWarnings, []);
    assert.equal(r.sent, 0);
    assert.equal(r.read, 0, 'the premises were not read');
    assert.equal(r.refunds, 0);
  } finally {
    await context.close();
  }
});
