// open-multi-agent, the framework the original measured: not in the npm registry here
// (`npm view open-multi-agent` and `npm view @jackchen_me/open-multi-agent`: 404, tried
// 2026-11-30), so every row is written as not run, saying why. If it becomes installable,
// add a driver in hosts/node/test/frameworks/drivers/ and run it like the others.
// node experiments/frameworks/open-multi-agent.mjs [--quick]
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const require = createRequire(path.join(root, 'hosts/node/package.json'));
const installed = ['open-multi-agent', '@jackchen_me/open-multi-agent'].find((p) => {
  try { require.resolve(p); return true; } catch { return false; }
});
if (installed) {
  console.error(`${installed} is installed: write its driver and run it (this script only records why it was not run)`);
  process.exit(1);
}
const why = 'not run: open-multi-agent cannot be installed here (npm view open-multi-agent and @jackchen_me/open-multi-agent: 404 Not Found in the npm registry this machine reaches)';
const rows = Object.fromEntries(['reply_lost', 'hand_refund', 'approval_revoked', 'cap_race'].map((r) => [r, { not_run: why }]));
const out = { framework: 'open-multi-agent', package: 'open-multi-agent', version: null, language: 'js', rows };
if (!process.argv.includes('--quick')) {
  const file = path.join(root, 'results/frameworks/open-multi-agent.json');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  console.error(`wrote ${path.relative(root, file)}`);
}
