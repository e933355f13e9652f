// The conformance vectors in real headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core; never a downloaded browser), on the in-memory journal and on the
// IndexedDB journal, with the journal pins checked on the bytes each journal holds (and,
// for IndexedDB, on the bytes read back after a reload). Skip key: `browser`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { chromium } from 'playwright-core';
import { serve } from './server.js';
import { PKG, loadVectors, loadPins } from '../helpers.js';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
// Ops that act on the journal *file* (truncate it, reopen it, repair it): a browser has
// no file journal, and IndexedDB commits whole transactions, so there is no torn tail.
const FILE_ONLY = { tear_journal: 1, reopen: 1, repair: 1 };
const FILE_ONLY_REASON = 'needs a file journal (tear_journal/reopen/repair act on journal.jsonl; IndexedDB transactions are atomic, no torn tail)';

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
const pins = loadPins();
const ran = new Set();
const skipped = new Map();

for (const { vector: v } of vectors) {
  const fileOnly = v.steps.some((s) => FILE_ONLY[s.op]);
  const reason = v.skip?.browser ?? (fileOnly ? FILE_ONLY_REASON : null);
  if (reason) skipped.set(v.id, reason);
  for (const kind of ['memory', 'indexeddb']) {
    test(`browser vector ${v.id} (${kind} journal)`, { skip: reason ? `skip: ${reason}` : false }, async () => {
      const res = await page.evaluate(([vv, k]) => window.suite.vector(vv, k), [v, kind]);
      assert.ok(res.ok, res.error);
      const failures = [...res.report.failures];
      if (pins[v.id] !== res.report.journalSha256) failures.push(`journal sha256 ${res.report.journalSha256}, pinned ${pins[v.id]}`);
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
