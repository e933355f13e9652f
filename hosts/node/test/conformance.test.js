// Every vector in tests/conformance through the conformance runner (the one interpreter
// every host runs; conformance/driver.js is this host's side of it) with the Node file
// journal. The runner checks each vector's expectations and its journal pin (the bytes
// every host writes). Skip key: `node`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, truncateSync, statSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { runVector } from '../conformance/driver.js';
import { FileJournal, JOURNAL_FILE } from '../src/journal/file.js';
import { gateComponent } from '../src/load-node.js';
import { loadVectors, tempDir, VECTORS, PINS } from './helpers.js';

const vectors = loadVectors();
const pins = readFileSync(join(VECTORS, PINS), 'utf8');
const ran = new Set();
const skipped = new Map();

/** The file journal's storage operations, on `dir`. */
const fileStorage = (dir) => ({
  bytes() {
    try {
      return readFileSync(join(dir, JOURNAL_FILE));
    } catch {
      return new Uint8Array();
    }
  },
  tear(bytes) {
    const path = join(dir, JOURNAL_FILE);
    truncateSync(path, Math.max(0, statSync(path).size - bytes));
  },
  reopen: () => FileJournal.open(dir),
  repair: () => FileJournal.repair(dir),
});

for (const { file, vector: v } of vectors) {
  test(`vector ${v.id} (${file})`, async (t) => {
    const dir = tempDir();
    try {
      const report = await runVector(v, {
        gate: await gateComponent(), journal: FileJournal.open(dir), storage: fileStorage(dir), host: 'node', pins,
      });
      if (report.skipped !== undefined) {
        assert.ok(report.skipped.trim().length > 0, `${v.id} is skipped without a reason`);
        skipped.set(v.id, report.skipped);
        t.skip(report.skipped);
        return;
      }
      assert.deepEqual(report.failures, [], `${v.id}: ${report.failures.join('\n')}`);
      ran.add(v.id);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('every vector was run or skipped with a reason', () => {
  assert.ok(vectors.length > 0, 'no vectors found');
  const missing = vectors.map((x) => x.vector.id).filter((id) => !ran.has(id) && !skipped.has(id));
  assert.deepEqual(missing, [], `vectors neither run nor skipped: ${missing.join(', ')}`);
  console.log(`conformance (node): ${ran.size} run, ${skipped.size} skipped, of ${vectors.length}`);
});
