// Issue 12: the file journal corpus of the fuzzer (fuzz/seeds/file_journal and
// fuzz/regressions/file_journal) replayed through this host's FileJournal. Each input is
// opened as a journal.jsonl, and the result must be exactly the Rust backend's, as the
// checked-in table fuzz/file_journal_expected.json records it (the fuzz crate's
// `file_journal_table` test keeps that table current): the same streams, or the same
// refusal with the same text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileJournal } from '../src/index.js';
import { tempDir } from './helpers.js';

const fuzz = fileURLToPath(new URL('../../../fuzz/', import.meta.url));
const expected = JSON.parse(readFileSync(join(fuzz, 'file_journal_expected.json'), 'utf8'));

test('every file journal fuzz input opens or is refused exactly as in the Rust backend', () => {
  const names = Object.keys(expected);
  assert.ok(names.length > 30, 'the corpus is there');
  const root = tempDir();
  names.forEach((name, i) => {
    const dir = join(root, String(i));
    mkdirSync(dir);
    copyFileSync(join(fuzz, name), join(dir, 'journal.jsonl'));
    const want = expected[name];
    let got;
    try {
      const j = FileJournal.open(dir);
      const open = new Set(j.openStreams());
      got = { streams: j.streams().map((s) => [s, j.length(s), open.has(s)]) };
      j.close();
    } catch (e) {
      const err = /** @type {import('../src/errors.js').JournalError} */ (e);
      // `val` is the text; `message` prefixes it with the case, as the gate shows it.
      got = { error: err.tag, message: err.val };
    }
    assert.deepEqual(got, want, name);
  });
});
