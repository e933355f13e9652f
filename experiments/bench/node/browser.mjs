// Load-to-ready of a page running the gate in headless Chromium (TOOLCHAIN.md's flags; a
// fresh profile per run; never downloads a browser). Returns null when Chromium or
// playwright-core is missing.
import { createServer } from 'node:http';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, normalize, extname } from 'node:path';
import os from 'node:os';

const TYPES = { '.js': 'text/javascript', '.html': 'text/html', '.wasm': 'application/wasm', '.json': 'application/json' };
const PAGE = `<!doctype html><meta charset="utf-8"><script type="module">
  import { Interlock } from '/src/browser.js';
  const gate = await Interlock.memory();
  window.readyMs = performance.now();
</script>`;

export async function browserLoad({ nodeHost, runs }) {
  const chromium = '/usr/bin/chromium';
  let playwright;
  try {
    playwright = createRequire(join(nodeHost, 'package.json'))('playwright-core');
  } catch {
    return null;
  }
  if (!existsSync(chromium)) return null;
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^\/+/, '');
    if (path === '' || path === 'index.html') return res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
    if (!(path.startsWith('src/') || path.startsWith('gen/')) || path.includes('..')) return res.writeHead(404).end();
    try {
      const body = await readFile(join(nodeHost, path));
      res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream', 'cache-control': 'no-store' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/`;
  const times = [];
  try {
    for (let i = 0; i < runs; i++) {
      const profile = await mkdtemp(join(os.tmpdir(), 'bench-chromium-'));
      const browser = await playwright.chromium.launchPersistentContext(profile, {
        executablePath: chromium,
        headless: true,
        env: { ...process.env, XDG_CONFIG_HOME: profile, XDG_CACHE_HOME: profile },
        args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
          '--disable-component-update', '--disable-sync'],
      });
      try {
        const page = await browser.newPage();
        await page.goto(url);
        await page.waitForFunction(() => window.readyMs !== undefined, null, { timeout: 30_000 });
        times.push(await page.evaluate(() => window.readyMs));
      } finally {
        await browser.close();
        await rm(profile, { recursive: true, force: true });
      }
    }
  } finally {
    server.close();
  }
  return [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)];
}
