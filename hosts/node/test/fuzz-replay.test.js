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
import { FileJournal, MemoryJournal } from '../src/index.js';
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

// The in-memory journal (and the IndexedDB one, which loads through it) checks entries with
// the same component: every corpus input made of whole lines loads into it exactly as the
// file journal opens it, a refusal naming the entry where the file's names the line.
test('every fuzz input of whole UTF-8 lines loads into a MemoryJournal as into the Rust backend', () => {
  let compared = 0;
  for (const [name, want] of Object.entries(expected)) {
    if (want.error === 'torn-tail') continue; // a file's fault: memory holds whole entries
    let text;
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(readFileSync(join(fuzz, name)));
    } catch {
      continue; // not text: a memory journal holds JS strings
    }
    const lines = text.split('\n').slice(0, -1);
    let got;
    try {
      const j = MemoryJournal.fromLines(lines);
      const open = new Set(j.openStreams());
      got = { streams: j.streams().map((s) => [s, j.length(s), open.has(s)]) };
    } catch (e) {
      got = { error: e.tag, message: e.val };
    }
    const fileWords = (m) => m.replace(/^corrupt journal: journal\.jsonl line (\d+)/, 'entry $1');
    assert.deepEqual(got, want.error ? { error: want.error, message: fileWords(want.message) } : want, name);
    compared += 1;
  }
  assert.ok(compared > 20, `only ${compared} inputs compared`);
});
