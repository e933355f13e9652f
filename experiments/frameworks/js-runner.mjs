// Runs the four rows of the original's framework table for one JS framework, alone and with
// Interlock inside (the scenarios of hosts/node/test/frameworks/scenarios.js, the same ones
// the tests run), and writes results/frameworks/<name>.json. `--quick` checks every cell
// against what the tests hold and writes nothing.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const node = path.join(root, 'hosts/node');
const { ROWS, runRow, check } = await import(path.join(node, 'test/frameworks/scenarios.js'));

/** The installed version of `pkg` (from hosts/node's node_modules). */
export function versionOf(/** @type {string} */ pkg) {
  const require = createRequire(path.join(node, 'package.json'));
  let dir = path.dirname(require.resolve(pkg));
  while (!fs.existsSync(path.join(dir, 'package.json')) || JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).name !== pkg) dir = path.dirname(dir);
  return JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
}

/**
 * @param {{ framework: string, package: string, driver: string, file: string, notRun?: Record<string, string> }} meta
 */
export async function main(meta) {
  const quick = process.argv.includes('--quick');
  /** @type {Record<string, unknown>} */
  const rows = {};
  const problems = [];
  for (const row of ROWS) {
    if (meta.notRun?.[row]) { rows[row] = { not_run: meta.notRun[row] }; continue; }
    /** @type {Record<string, unknown>} */
    const cells = {};
    for (const mode of ['alone', 'with']) {
      const t0 = Date.now();
      const { cell } = await runRow(meta.driver, row, mode);
      problems.push(...check(meta.driver, row, mode, cell));
      cells[mode] = cell;
      console.error(`${meta.framework} ${row} ${mode}: ${cell.refunded_cents} cents${cell.state ? ` (${cell.state})` : ''} in ${Date.now() - t0} ms`);
    }
    rows[row] = cells;
  }
  const out = { framework: meta.framework, package: meta.package, version: versionOf(meta.package), language: 'js', rows };
  if (problems.length) {
    console.error(problems.join('\n'));
    process.exitCode = 1;
  }
  if (quick) return;
  const file = path.join(root, 'results/frameworks', `${meta.file}.json`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  console.error(`wrote ${path.relative(root, file)}`);
}
