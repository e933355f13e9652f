// The journal contract suite (dist/journal_contract.wasm, adapters/journal's one suite every
// host runs) over each Node storage: the file storage (a folder), memory, SQLite and
// PostgreSQL (a real server, scripts/postgres.sh; skipped, saying why, only when PostgreSQL
// is not installed). Every case runs over a fresh, empty storage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { contractCases, runContractCase } from '../conformance/contract.js';
import { FileJournal, MemoryJournal, openJournal } from '../src/index.js';
import { tempDir } from './helpers.js';
import { sqlite, postgres } from './sql-backends.js';

const pg = postgres();
/** @type {[string, 'file' | 'sqlite' | 'postgres', () => Promise<{ storage: any, done: () => void }>, string | undefined][]} */
const storages = [
  ['file', 'file', async () => {
    const dir = tempDir();
    const storage = FileJournal.open(dir);
    return { storage, done: () => (storage.close(), rmSync(dir, { recursive: true, force: true })) };
  }, undefined],
  ['memory', 'file', async () => ({ storage: new MemoryJournal(), done: () => {} }), undefined],
  ['sqlite', 'sqlite', async () => {
    const storage = openJournal(await sqlite.fresh());
    return { storage, done: () => storage.close() };
  }, undefined],
  ['postgres', 'postgres', async () => {
    const storage = openJournal(await /** @type {any} */ (pg.backend).fresh());
    return { storage, done: () => storage.close() };
  }, pg.skip],
];

for (const [name, kind, fresh, skip] of storages) {
  const cases = await contractCases(kind);
  test(`${name}: the suite has cases`, () => assert.ok(cases.length > 5, `${cases.length} cases`));
  for (const c of cases) {
    test(`${name}: ${c}`, { skip }, async () => {
      const { storage, done } = await fresh();
      try {
        assert.equal(await runContractCase(c, kind, storage), null);
      } finally {
        done();
      }
    });
  }
}
