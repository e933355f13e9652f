// Issue 12: the file journal corpus of the fuzzer (fuzz/seeds/file_journal and
// fuzz/regressions/file_journal) replayed through this host's file storage and the gate. Each
// input is opened as a journal.jsonl, and the result must be the Rust backend's, as the
// checked-in table fuzz/file_journal_expected.json records it (the fuzz crate's
// `file_journal_table` test keeps that table current): as many streams and entries, or the
// same refusal with the same text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Interlock, FakeClock, JournalError } from '../src/index.js';
import { tempDir } from './helpers.js';

const fuzz = fileURLToPath(new URL('../../../fuzz/', import.meta.url));
const expected = JSON.parse(readFileSync(join(fuzz, 'file_journal_expected.json'), 'utf8'));

test('every file journal fuzz input opens or is refused through this host\'s storage exactly as in the Rust backend', async () => {
  const names = Object.keys(expected);
  assert.ok(names.length > 30, 'the corpus is there');
  const root = tempDir();
  for (const [i, name] of names.entries()) {
    const dir = join(root, String(i));
    mkdirSync(dir);
    copyFileSync(join(fuzz, name), join(dir, 'journal.jsonl'));
    const want = expected[name];
    let got;
    try {
      const gate = await Interlock.open(dir, { clock: new FakeClock(0) });
      const { streams, entries } = gate.verify();
      got = { streams, entries };
      gate.close();
    } catch (e) {
      if (!(e instanceof JournalError)) throw e;
      got = { error: e.tag, message: e.message };
    }
    const expect = want.error ? want : {
      streams: want.streams.length,
      entries: want.streams.reduce((/** @type {number} */ n, /** @type {[string, number]} */ s) => n + s[1], 0),
    };
    assert.deepEqual(got, expect, name);
  }
});
