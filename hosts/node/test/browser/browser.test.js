// The conformance vectors in real headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core; never a downloaded browser), on the in-memory journal and on the
// IndexedDB journal, with the journal pins checked on the bytes each journal holds (and,
// for IndexedDB, on the bytes read back after a reload). Skip key: `browser`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { chromium } from 'playwright-core';
import { serve } from './server.js';
import { PKG, VECTORS, PINS, loadVectors } from '../helpers.js';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

let server;
let browser;
let page;
let home;

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium (hosts/node/test.sh does)`);
  home = mkdtempSync(join(tmpdir(), 'interlock-chromium-'));
  server = await serve(PKG);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    env: { ...process.env, XDG_CONFIG_HOME: join(home, 'config'), XDG_CACHE_HOME: join(home, 'cache'), HOME: home },
  });
  page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`http://127.0.0.1:${server.address().port}/test/browser/page.html`);
  await page.waitForFunction(() => window.ready === true, null, { timeout: 30_000 }).catch((e) => {
    throw new Error(`the test page did not load: ${errors.join('; ') || e.message}`);
  });
});

after(async () => {
  await browser?.close();
  server?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

const vectors = loadVectors();
const pinsText = readFileSync(join(VECTORS, PINS), 'utf8');
const pins = JSON.parse(pinsText);
const ran = new Set();
const skipped = new Map();

for (const { vector: v } of vectors) {
  for (const kind of ['memory', 'indexeddb']) {
    test(`browser vector ${v.id} (${kind} journal)`, async (t) => {
      const res = await page.evaluate(([vv, k, p]) => window.suite.vector(vv, k, p), [v, kind, pinsText]);
      assert.ok(res.ok, res.error);
      if (res.report.skipped !== undefined) {
        // The runner's reason (the vector's `skip`, or a step that needs a file journal).
        assert.ok(res.report.skipped.trim().length > 0, `${v.id} is skipped without a reason`);
        skipped.set(v.id, res.report.skipped);
        t.skip(res.report.skipped);
        return;
      }
      const failures = [...res.report.failures];
      if (kind === 'indexeddb' && pins[v.id] !== res.report.reloadedSha256) {
        failures.push(`journal reloaded from IndexedDB: sha256 ${res.report.reloadedSha256}, pinned ${pins[v.id]}`);
      }
      assert.deepEqual(failures, [], failures.join('\n'));
      ran.add(v.id);
    });
  }
}

test('browser: every vector was run or skipped with a reason', () => {
  const missing = vectors.map((x) => x.vector.id).filter((id) => !ran.has(id) && !skipped.has(id));
  assert.deepEqual(missing, [], `vectors neither run nor skipped: ${missing.join(', ')}`);
  console.log(`conformance (chromium): ${ran.size} run, ${skipped.size} skipped (${[...skipped.keys()].join(', ')}), of ${vectors.length}`);
});

test('browser: the IndexedDB journal survives a reload, has one writer, and async effects recover', async () => {
  const out = await page.evaluate(() => window.suite.durableJournal());
  assert.equal(out.lockedSecond, 'locked');
  assert.deepEqual(out.first, ['DISPATCHED', 'target_unavailable']);
  assert.deepEqual(out.recovered, [['COMMITTED', 'recovery-query']]);
  assert.deepEqual(out.again, ['COMMITTED', true]);
  assert.equal(out.refunds, 1);
  assert.equal(out.problems, 0);
  assert.deepEqual(out.rejected, ['REFUSED', 'target_rejected']);
});

for (const kind of ['memory', 'indexeddb']) {
  test(`browser: the journal contract suite passes on the ${kind} storage`, async () => {
    const { cases, failed } = await page.evaluate((k) => window.suite.contract(k), kind);
    assert.ok(cases > 5, `${cases} cases`);
    assert.deepEqual(failed, []);
  });
}
