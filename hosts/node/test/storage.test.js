// The Node storages' own I/O (the journal's rules are the gate's, test/journal-contract.test.js):
// a journal holds customers' orders and amounts, so its files are private to their owner
// whatever the umask; a URL is never taken as a folder's name; a file journal has one writer
// (flock); SQLite's files are private too; PostgreSQL: UTF8 only, a batch that gets no answer
// in time is an io error, a lost connection or acknowledgement never a success.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import {
  Interlock, FileJournal, SqliteJournal, PostgresJournal, FakeClock, UnsupportedJournalError, InterlockError,
  JournalLockedError, JournalError, JournalFailedError,
} from '../src/index.js';
import { tempDir } from './helpers.js';
import { postgres } from './sql-backends.js';

const require = createRequire(import.meta.url);
const pg = postgres();

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
      const { savedTo } = await Interlock.repair(dir);
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
      await assert.rejects(Interlock.repair(url), UnsupportedJournalError);
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

for (const umask of [0o022, 0o277]) {
  test(`sqlite: the database file is 0600 (and its -wal, -shm), new folders 0700 (umask ${umask.toString(8).padStart(3, '0')})`, async () => {
    const mode = (/** @type {string} */ p) => statSync(p).mode & 0o777;
    const root = tempDir();
    const old = process.umask(umask);
    try {
      const gate = await Interlock.open(`sqlite://${root}/a/b/journal.db`);
      await gate.lease('l', { ttlMs: 1000 });
      assert.equal(mode(join(root, 'a')), 0o700);
      assert.equal(mode(join(root, 'a/b')), 0o700);
      for (const f of ['journal.db', 'journal.db-wal', 'journal.db-shm']) assert.equal(mode(join(root, 'a/b', f)), 0o600, f);
      gate.close();
    } finally {
      process.umask(old);
      rmSync(root, { recursive: true, force: true });
    }
  });
}

test('postgres: a database that is not UTF8 is refused', { skip: pg.skip }, async () => {
  const b = pg.backend;
  await b.execute(b.url, "CREATE DATABASE latin ENCODING 'LATIN1' TEMPLATE template0");
  await assert.rejects(Interlock.open(b.url.replace(/\/postgres$/, '/latin')), (e) =>
    e instanceof JournalError && /must be UTF8/.test(e.message) && /LATIN1/.test(e.message));
});

test('postgres: a batch that gets no answer in time is an io error, never a hang; nothing of it is recorded', { skip: pg.skip }, async () => {
  const url = await pg.backend.fresh();
  const gate = await Interlock.open(url, { journalTimeoutMs: 500 });
  await gate.lease('a', { ttlMs: 1000 });
  // Another session holds the streams table: the next write waits for it.
  const { Client } = require('pg');
  const holder = new Client({ connectionString: url });
  await holder.connect();
  await holder.query('BEGIN; LOCK TABLE interlock_streams IN ACCESS EXCLUSIVE MODE');
  const start = Date.now();
  await assert.rejects(gate.lease('b', { ttlMs: 1000 }), (e) =>
    e instanceof JournalFailedError && /no answer within 500 ms.*may or may not have committed/.test(e.message));
  assert.ok(Date.now() - start < 5000);
  await holder.query('COMMIT');
  await holder.end();
  await gate.close();
  // The abandoned batch was never committed.
  const again = await Interlock.open(url);
  assert.deepEqual(again.gate.entriesInOrder().map((e) => JSON.parse(e).stream), ['lease:a']);
  await again.close();
});

test('postgres: the server restarted under a journal: acknowledged writes kept, the storage connects again', { skip: pg.skip }, async () => {
  const b = pg.backend;
  const url = await b.fresh();
  const gate = await Interlock.open(url);
  await gate.lease('a', { ttlMs: 1000 });
  b.restart();
  // The first write after the restart may find the connection lost (io) or connect again.
  const first = await gate.lease('b', { ttlMs: 1000 }).then(() => null, (e) => e);
  if (first) assert.ok(first instanceof JournalFailedError && /PostgreSQL journal .* as postgres: /.test(first.message), String(first));
  await gate.close();
  const again = await Interlock.open(url);
  await again.lease('c', { ttlMs: 1000 });
  assert.deepEqual(again.gate.entriesInOrder().map((e) => JSON.parse(e).stream), ['lease:a', ...(first ? [] : ['lease:b']), 'lease:c']);
  assert.deepEqual(again.verify().problems, []);
  await again.close();
});

test('postgres: a commit whose acknowledgement is lost is an io error, never a success; the write is found on reading again', { skip: pg.skip }, async () => {
  const b = pg.backend;
  const url = await b.fresh();
  const gate = await Interlock.open(url, { journalTimeoutMs: 20_000 });
  await gate.lease('a', { ttlMs: 1000 });
  const restore = await b.loseCommitAcknowledgements();
  try {
    await assert.rejects(gate.lease('b', { ttlMs: 1000 }), (e) =>
      e instanceof JournalFailedError && /was not acknowledged .*it may or may not have committed/.test(e.message));
  } finally {
    await restore();
  }
  await gate.close();
  // It was committed before the session ended: found on reading again.
  const again = await Interlock.open(url);
  assert.deepEqual(again.gate.entriesInOrder().map((e) => JSON.parse(e).stream), ['lease:a', 'lease:b']);
  await again.close();
});

test('Interlock.open chooses the storage by its one argument: a folder, sqlite:///, postgres://', async () => {
  const root = tempDir();
  try {
    const urls = [`sqlite://${root}/j.db`];
    if (pg.backend) urls.push(await pg.backend.fresh());
    for (const url of urls) {
      const gate = await Interlock.open(url);
      assert.ok(gate.storage instanceof (url.startsWith('sqlite') ? SqliteJournal : PostgresJournal));
      await gate.lease('l', { ttlMs: 1000 });
      await gate.close();
      const again = await Interlock.open(url);
      assert.deepEqual(again.verify().problems, []);
      assert.deepEqual(again.gate.entriesInOrder().map((e) => JSON.parse(e).stream), ['lease:l']);
      await again.close();
    }
    assert.ok(existsSync(join(root, 'j.db')));
    const folder = await Interlock.open(join(root, 'folder'));
    assert.ok(folder.storage instanceof FileJournal);
    folder.close();
    // A SQLite URL needs an absolute path; any other scheme names no journal: nothing made.
    for (const url of ['sqlite://relative.db', 'sqlite:///', 'file:///tmp/j', 'http://j.example/x']) {
      await assert.rejects(Interlock.open(url), (e) => e instanceof UnsupportedJournalError && e.where === url);
    }
    await assert.rejects(Interlock.repair(`sqlite://${root}/j.db`), /no torn tail to repair/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
