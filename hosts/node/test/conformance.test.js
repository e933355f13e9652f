// Every vector in tests/conformance through the conformance runner (the one interpreter
// every host runs; conformance/driver.js is this host's side of it) over the Node file
// storage, and again over SQLite and PostgreSQL. The runner checks each
// vector's expectations and its journal pin (the bytes every host writes; for a SQL journal
// every entry followed by "\n" in global append order, the schema's `ordinal`). The torn
// tail vectors need a file (they tear, reopen and repair journal.jsonl): the runner skips
// them on the SQL journals, saying so. Skip key: `node`. PostgreSQL is a real server
// (scripts/postgres.sh), skipped, saying why, only when it is not installed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { runVector } from '../conformance/driver.js';
import { FileJournal } from '../src/journal/file.js';
import { gateComponent } from '../src/load-node.js';
import { openJournal } from '../src/journal/open.js';
import { loadVectors, tempDir, VECTORS, PINS } from './helpers.js';
import { sqlite, postgres } from './sql-backends.js';

const vectors = loadVectors();
const pins = readFileSync(join(VECTORS, PINS), 'utf8');
const pg = postgres();
/** Per journal: the vectors run, and those skipped with the runner's reason. */
const ran = { file: new Set(), sqlite: new Set(), postgres: new Set() };
const skipped = { file: new Map(), sqlite: new Map(), postgres: new Map() };

/** Plays `v` over `storage`; records it as run or skipped under `kind`. */
async function play(t, kind, v, storage, reopen) {
  const report = await runVector(v, { gate: await gateComponent(), storage, reopen, host: 'node', pins });
  if (report.skipped !== undefined) {
    assert.ok(report.skipped.trim().length > 0, `${v.id} is skipped without a reason`);
    skipped[kind].set(v.id, report.skipped);
    t.skip(report.skipped);
    return;
  }
  assert.deepEqual(report.failures, [], `${v.id}: ${report.failures.join('\n')}`);
  ran[kind].add(v.id);
}

for (const { file, vector: v } of vectors) {
  test(`vector ${v.id} (${file})`, async (t) => {
    const dir = tempDir();
    const storage = FileJournal.open(dir);
    try {
      await play(t, 'file', v, storage, () => FileJournal.open(dir));
    } finally {
      storage.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

for (const [kind, backend, skip] of [['sqlite', sqlite, undefined], ['postgres', pg.backend, pg.skip]]) {
  for (const { file, vector: v } of vectors) {
    test(`${kind}: vector ${v.id} (${file})`, { skip }, async (t) => {
      const storage = openJournal(await backend.fresh());
      try {
        // Not a file: bytes are the entries in append order, each + "\n"; no tear, reopen, repair.
        await play(t, kind, v, storage);
      } finally {
        storage.close();
      }
    });
  }
}

test('every vector was run or skipped with a reason, on every journal', (t) => {
  assert.ok(vectors.length > 0, 'no vectors found');
  for (const kind of /** @type {const} */ (['file', 'sqlite', 'postgres'])) {
    if (kind === 'postgres' && pg.skip) {
      t.diagnostic(`postgres: not run: ${pg.skip}`);
      continue;
    }
    const missing = vectors.map((x) => x.vector.id).filter((id) => !ran[kind].has(id) && !skipped[kind].has(id));
    assert.deepEqual(missing, [], `${kind}: vectors neither run nor skipped: ${missing.join(', ')}`);
    if (kind !== 'file') {
      // Only the vectors that need a file journal may be skipped on a SQL journal.
      for (const [id, why] of skipped[kind]) assert.match(why, /needs a file journal/, `${kind}: ${id}`);
    }
    console.log(`conformance (node, ${kind} journal): ${ran[kind].size} run, ${skipped[kind].size} skipped, of ${vectors.length}`);
  }
});
