// Every conformance vector under Deno: Node's driver (hosts/node/conformance/driver.js) as
// it is, the gate from deno/mod.js, over the Deno SQLite journal (node:sqlite) and the
// memory journal. Prints one JSON line per journal kind, then "N passed, N failed".
//   deno run --allow-read --allow-write --allow-env deno/conformance.js
import { runVector } from '../../node/conformance/driver.js';
import { gateComponent, DenoSqlite, MemoryJournal } from './mod.js';

const dir = new URL('../../../tests/conformance/', import.meta.url);
const pins = Deno.readTextFileSync(new URL('journal-pins.json', dir));
const files = [...Deno.readDirSync(dir)].map((e) => e.name).filter((n) => n.endsWith('.json') && n !== 'journal-pins.json').sort();
const tmp = Deno.makeTempDirSync({ prefix: 'interlock-deno-' });
let passed = 0;
let failed = 0;
let skipped = 0;
try {
  for (const kind of ['sqlite', 'memory']) {
    const summary = { kind, ran: 0, skipped: 0, failures: /** @type {string[]} */ ([]) };
    for (const [i, f] of files.entries()) {
      const vector = JSON.parse(Deno.readTextFileSync(new URL(f, dir)));
      const storage = kind === 'sqlite' ? new DenoSqlite(`${tmp}/${i}.db`) : new MemoryJournal();
      // The memory storage is a file journal's: opened again, its files are as they were.
      const reopen = kind === 'memory' ? () => storage : undefined;
      try {
        const report = await runVector(vector, { gate: await gateComponent(), storage, reopen, host: 'deno', pins });
        if (report.skipped !== undefined && report.skipped !== null) {
          if (!/needs a file journal/.test(report.skipped)) summary.failures.push(`${vector.id}: skipped: ${report.skipped}`);
          summary.skipped += 1;
        } else if (report.failures.length) {
          summary.failures.push(`${vector.id}: ${report.failures.join('; ')}`);
        } else {
          summary.ran += 1;
        }
      } catch (e) {
        summary.failures.push(`${vector.id}: ${e?.stack ?? e}`);
      } finally {
        storage.close?.();
      }
    }
    console.log(JSON.stringify(summary));
    passed += summary.ran;
    skipped += summary.skipped;
    failed += summary.failures.length;
  }
} finally {
  Deno.removeSync(tmp, { recursive: true });
}
console.log(`deno: ${passed} passed, ${failed} failed, ${skipped} skipped`);
if (failed) Deno.exit(1);
