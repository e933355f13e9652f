// Every vector in tests/conformance through the gate component with the Node file journal;
// each must end with the outcomes it expects and the journal bytes pinned in
// journal-pins.json (the same bytes the CLI host writes). Skip key: `node`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { truncateSync, statSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { runVector } from '../src/conformance.js';
import { FileJournal, JOURNAL_FILE } from '../src/journal/file.js';
import { gateComponent, paymentsComponent } from '../src/load-node.js';
import { loadVectors, loadPins, sha256, tempDir } from './helpers.js';

const vectors = loadVectors();
const pins = loadPins();
const ran = new Set();
const skipped = new Map();

for (const { file, vector: v } of vectors) {
  const reason = v.skip?.node;
  test(`vector ${v.id} (${file})`, { skip: reason ? `skip: ${reason}` : false }, async () => {
    const dir = tempDir();
    try {
      const env = {
        gate: await gateComponent(),
        payments: await paymentsComponent(),
        journal: FileJournal.open(dir),
        journalBytes: () => {
          try {
            return FileJournal.prototype.bytes.call({ dir });
          } catch {
            return new Uint8Array();
          }
        },
        tear: (bytes) => {
          const path = join(dir, JOURNAL_FILE);
          truncateSync(path, Math.max(0, statSync(path).size - bytes));
        },
        reopen: () => FileJournal.open(dir),
        repair: () => FileJournal.repair(dir),
        sha256,
      };
      const report = await runVector(v, env);
      const failures = [...report.failures];
      if (!(v.id in pins)) failures.push(`no pin for ${v.id} in journal-pins.json`);
      else if (pins[v.id] !== report.journalSha256) {
        failures.push(`journal sha256 ${report.journalSha256}, pinned ${pins[v.id]} (the CLI host's bytes)`);
      }
      assert.deepEqual(failures, [], `${v.id}: ${failures.join('\n')}`);
      ran.add(v.id);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  if (reason) skipped.set(v.id, reason);
}

test('every vector was run or skipped with a reason', { concurrency: false }, () => {
  assert.ok(vectors.length > 0, 'no vectors found');
  const missing = vectors.map((x) => x.vector.id).filter((id) => !ran.has(id) && !skipped.has(id));
  for (const [id, reason] of skipped) assert.ok(reason.trim().length > 0, `${id} skipped without a reason`);
  assert.deepEqual(missing, [], `vectors neither run nor skipped: ${missing.join(', ')}`);
  console.log(`conformance (node): ${ran.size} run, ${skipped.size} skipped, of ${vectors.length}`);
});
