// Headless Chromium for the viewer's tests: Debian's /usr/bin/chromium driven by hosts/node's
// playwright-core (never a downloaded browser), a fresh profile and XDG dirs in a temporary
// folder (TOOLCHAIN.md's flags).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { ROOT } from '../serve.js';

// playwright-core is hosts/node's dev dependency: the viewer installs nothing of its own.
const { chromium } = createRequire(join(ROOT, 'hosts/node/package.json'))('playwright-core');
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** Launches Chromium; resolves to { context, page, pageErrors, close }. */
export async function launch() {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium (viewer/test.sh does)`);
  const home = mkdtempSync(join(tmpdir(), 'interlock-viewer-'));
  const context = await chromium.launchPersistentContext(join(home, 'profile'), {
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    env: { ...process.env, XDG_CONFIG_HOME: join(home, 'config'), XDG_CACHE_HOME: join(home, 'cache'), HOME: home },
    viewport: { width: 1366, height: 768 },
  });
  const page = context.pages()[0] ?? await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  return {
    context, page, pageErrors,
    close: async () => {
      await context.close();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/**
 * Presses `verdict` on the inbox card `sel` (of item `item`) and waits for its result: one
 * decision more on the item in "Decided here" (it may be decided already: an approval, then
 * "did not happen"), or the card's error. Resolves to { ok, item } or { ok: false, item,
 * error, text }.
 */
export async function act(page, sel, item, verdict) {
  const before = await page.$$eval(`#decided .item[data-item="${item}"] .decisions li`, (l) => l.length);
  await page.click(`${sel} .act[data-verdict="${verdict}"]`);
  await page.waitForFunction(([s, id, n]) => document.querySelector(`${s} .result.bad`)
    || document.querySelectorAll(`#decided .item[data-item="${id}"] .decisions li`).length > n, [sel, item, before], { timeout: 10_000 });
  const bad = await page.$(`${sel} .result.bad`);
  if (bad) return { ok: false, item, error: await bad.getAttribute('data-error'), text: await bad.textContent() };
  return { ok: true, item };
}
