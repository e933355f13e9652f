// The file journal's own files (issue 11, items 8 and 9): a journal holds customers'
// orders and amounts, so it is private to its owner whatever the umask; and a URL is never
// taken as a folder's name (Interlock.open opens sqlite:/// and postgres:// journals,
// test/sql-journal.test.js; any other URL is refused).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Interlock, FileJournal, FakeClock, UnsupportedJournalError, InterlockError, JournalLockedError } from '../src/index.js';
import { spawn } from 'node:child_process';
import { tempDir } from './helpers.js';

const mode = (path) => statSync(path).mode & 0o777;

for (const umask of [0o000, 0o022, 0o277]) {
  test(`file journal: its folder is 0700 and every file it creates 0600 (umask ${umask.toString(8).padStart(3, '0')})`, async () => {
    const root = tempDir();
    const old = process.umask(umask);
    try {
      const dir = join(root, 'journal');
      const gate = await Interlock.open(dir, { clock: new FakeClock(1_800_000_000_000) });
      await gate.lease('l', { ttlMs: 1000 });
      gate.close();
      assert.equal(mode(dir), 0o700, 'the journal folder');
      assert.equal(mode(join(dir, 'journal.jsonl')), 0o600);
      assert.equal(mode(join(dir, 'journal.lock')), 0o600);
      assert.equal(mode(join(dir, 'journal.format')), 0o600);
      // A torn tail's side file holds journal bytes too.
      appendFileSync(join(dir, 'journal.jsonl'), '{"stream":"x"');
      const { savedTo } = FileJournal.repair(dir);
      assert.ok(savedTo?.startsWith(join(dir, 'journal.torn-')), savedTo);
      assert.equal(mode(savedTo), 0o600, 'the torn tail side file');
      const again = await Interlock.open(dir); // still opens and verifies
      assert.deepEqual(again.verify().problems, []);
      again.close();
    } finally {
      process.umask(old);
      rmSync(root, { recursive: true, force: true });
    }
  });
}

test('a URL that names no journal is refused, nothing created; the file journal refuses every URL', async () => {
  const cwd = process.cwd();
  const here = tempDir();
  process.chdir(here);
  try {
    // sqlite:// needs an absolute path (sqlite:///abs/path.db); the other schemes name no journal.
    for (const url of ['sqlite://journal.db', 'file:///tmp/journal', 'http://journal.example/x', 'S3://bucket/key']) {
      await assert.rejects(Interlock.open(url), (e) => {
        assert.ok(e instanceof UnsupportedJournalError && e instanceof InterlockError, `${url}: ${e?.name}: ${e?.message}`);
        assert.match(e.message, /sqlite:\/\/\/abs\/path\.db/);
        assert.equal(e.where, url);
        return true;
      });
    }
    // A shared journal's URL is Interlock.open's to open, never a folder's name.
    for (const url of ['postgres://user@host/db', 'sqlite:///tmp/j.db', 'file:///tmp/journal', 'http://journal.example/x']) {
      assert.throws(() => FileJournal.open(url), UnsupportedJournalError);
      assert.throws(() => Interlock.repair(url), UnsupportedJournalError);
    }
    assert.deepEqual(readdirSync(here), [], 'nothing was created');
    // A folder whose name merely contains a colon is still a folder.
    const gate = await Interlock.open('./a:b');
    gate.close();
    assert.deepEqual(readdirSync(here), ['a:b']);
  } finally {
    process.chdir(cwd);
    rmSync(here, { recursive: true, force: true });
  }
});

// Issue 12: the journal format has a version; a newer one is refused, never guessed at.
test('file journal: a new journal records its format version, an old one is version 1', () => {
  const root = tempDir();
  const dir = join(root, 'new');
  FileJournal.open(dir).close();
  assert.equal(readFileSync(join(dir, 'journal.format'), 'utf8'), 'interlock-journal 1\n');
  const old = join(root, 'old');
  mkdirSync(old);
  writeFileSync(join(old, 'journal.jsonl'), '{"open":true,"seq":0,"stream":"s"}\n');
  const j = FileJournal.open(old);
  assert.equal(j.length('s'), 1);
  j.close();
  assert.equal(existsSync(join(old, 'journal.format')), false);
});

for (const [text, want] of [
  ['interlock-journal 2\n', 'journal format version 2 is newer than this reader understands (1); upgrade Interlock'],
  ['interlock-journal one\n', 'journal format file journal.format is not valid'],
]) {
  test(`file journal: a format file saying ${JSON.stringify(text)} is refused and nothing changes`, () => {
    const dir = join(tempDir(), 'j');
    mkdirSync(dir);
    writeFileSync(join(dir, 'journal.format'), text);
    assert.throws(() => FileJournal.open(dir), (e) => e instanceof InterlockError && String(e.val).startsWith(want));
    assert.equal(existsSync(join(dir, 'journal.jsonl')), false);
    assert.equal(readFileSync(join(dir, 'journal.format'), 'utf8'), text);
    // Nor does repair cut a newer journal by this version's rules.
    writeFileSync(join(dir, 'journal.jsonl'), 'not lines');
    assert.throws(() => FileJournal.repair(dir), (e) => e instanceof InterlockError && String(e.val).startsWith(want));
    assert.equal(readFileSync(join(dir, 'journal.jsonl'), 'utf8'), 'not lines');
  });
}

test('a second writer waits for the lock and gets it when the first lets go; else it is told how to share', async () => {
  const dir = tempDir();
  try {
    FileJournal.open(dir).close();
    // Another process holds the folder for 400 ms.
    const holder = spawn(process.execPath, ['--input-type=module', '-e', `
      import { FileJournal } from ${JSON.stringify(new URL('../src/index.js', import.meta.url).href)};
      const j = FileJournal.open(${JSON.stringify(dir)});
      console.log('held');
      setTimeout(() => { j.close(); console.log('released'); }, 400);
    `], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise((resolve) => holder.stdout.once('data', resolve));
    assert.throws(() => FileJournal.open(dir, { lockWaitMs: 50 }), (e) => e instanceof JournalLockedError
      && /still after waiting 50 ms; a file journal has one writer per directory: .*sqlite:\/\/\/.*postgres:\/\//.test(e.message));
    const start = Date.now();
    const j = FileJournal.open(dir, { lockWaitMs: 10_000 });
    assert.ok(Date.now() - start >= 100, 'it waited for the holder');
    j.close();
    await new Promise((resolve) => holder.on('exit', resolve));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
