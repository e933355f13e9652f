// The journal contract (wit/journal.wit, ARCHITECTURE.md "The journal contract") on this
// host's SQLite and PostgreSQL journals: the cases of the Rust crate's contract tests
// (adapters/sql-journal/tests/contract.rs), each on both backends, with MemoryJournal and
// the file journal as references where there is one answer to compare. PostgreSQL is a real
// server, started by scripts/postgres.sh for this file and stopped at its end; its cases are
// skipped, saying why, only when PostgreSQL is not installed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import {
  Interlock, FileJournal, MemoryJournal, SqliteJournal, PostgresJournal, JournalError, UnsupportedJournalError, openJournal,
} from '../src/index.js';
import { OPEN_STREAMS } from '../src/journal/sqlite.js';
import { sqlite, postgres, entry, entries } from './sql-backends.js';
import { PKG, REPO, tempDir } from './helpers.js';

const require = createRequire(import.meta.url);
const pg = postgres();
const backends = [{ backend: sqlite, skip: undefined }, { backend: pg.backend, skip: pg.skip }];
const AGENT = join(PKG, 'test/fixtures/sql-agent.js');
const sqlitePath = (url) => url.slice('sqlite://'.length);

/** The JournalError an append throws, as `{ tag, val }`; `{ ok: true }` when it succeeds. */
function result(f) {
  try {
    f();
    return { ok: true };
  } catch (e) {
    if (!(e instanceof JournalError)) throw e;
    return { tag: e.tag, val: e.val };
  }
}

/** Streams, open streams, and each stream's length and entries. */
const snapshot = (j) => {
  const streams = j.streams();
  return { streams, open: j.openStreams(), contents: streams.map((s) => [j.length(s), j.read(s, 0)]) };
};

/** Runs `node sql-agent.js ...args`; resolves to its stdout. */
function agent(...args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [AGENT, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`sql-agent ${args[0]} exited ${code}: ${err}`))));
  });
}

const CASES = {
  async append_read_length_round_trip(b) {
    const j = openJournal(await b.fresh());
    j.append('a', 0, entries('a', 0, 2, true), false, true);
    j.append('b', 0, entries('b', 0, 1, true), true, true);
    j.append('a', 2, entries('a', 2, 1, false), false, false);
    assert.equal(j.length('a'), 3);
    assert.equal(j.length('b'), 1);
    assert.equal(j.length('nope'), 0);
    const allA = [...entries('a', 0, 2, true), entry('a', 2, false)];
    assert.deepEqual(j.read('a', 0), allA);
    assert.deepEqual(j.read('a', 1), allA.slice(1));
    assert.deepEqual(j.read('a', 3), []);
    assert.deepEqual(j.read('a', 99), []);
    assert.deepEqual(j.read('a', Number.MAX_SAFE_INTEGER), []);
    assert.deepEqual(j.read('b', 0), entries('b', 0, 1, true));
    assert.deepEqual(j.read('nope', 0), []);
    j.sync();
    j.close();
  },

  async first_append_order(b) {
    const j = openJournal(await b.fresh());
    assert.deepEqual(j.streams(), []);
    assert.deepEqual(j.openStreams(), []);
    for (const s of ['zeta', 'alpha', 'mid']) j.append(s, 0, entries(s, 0, 1, true), false, true);
    assert.deepEqual(j.streams(), ['zeta', 'alpha', 'mid']);
    assert.deepEqual(j.openStreams(), ['zeta', 'alpha', 'mid']);
    j.append('alpha', 1, entries('alpha', 1, 1, false), false, false);
    assert.deepEqual(j.openStreams(), ['zeta', 'mid']);
    j.append('zeta', 1, entries('zeta', 1, 2, false), true, false);
    assert.deepEqual(j.openStreams(), ['mid']);
    // Closed, then open again: back at its first-append place.
    j.append('alpha', 2, entries('alpha', 2, 1, true), false, true);
    assert.deepEqual(j.openStreams(), ['alpha', 'mid']);
    // Created closed: listed in streams only.
    j.append('closed', 0, entries('closed', 0, 1, false), false, false);
    assert.deepEqual(j.streams(), ['zeta', 'alpha', 'mid', 'closed']);
    assert.deepEqual(j.openStreams(), ['alpha', 'mid']);
    j.close();
  },

  async conflict_writes_nothing(b) {
    const url = await b.fresh();
    const j = openJournal(url);
    assert.deepEqual(result(() => j.append('a', 1, entries('a', 1, 1, true), true, true)), { tag: 'conflict', val: 0 });
    assert.deepEqual(j.streams(), [], 'a lost append creates no stream');
    j.append('a', 0, entries('a', 0, 2, true), true, true);
    for (const expected of [0, 1, 3, Number.MAX_SAFE_INTEGER]) {
      const batch = expected === Number.MAX_SAFE_INTEGER ? [entry('a', 0, true)] : entries('a', expected, 1, false);
      assert.deepEqual(result(() => j.append('a', expected, batch, true, false)), { tag: 'conflict', val: 2 }, `expected ${expected}`);
    }
    assert.deepEqual(j.read('a', 0), entries('a', 0, 2, true));
    assert.deepEqual(j.openStreams(), ['a'], 'a lost append changes no open flag');
    j.close();
    assert.deepEqual(await b.query(url, 'SELECT count(*) FROM interlock_entries'), ['2']);
  },

  async empty_batch_is_a_no_op_or_a_sync(b) {
    const j = openJournal(await b.fresh());
    j.append('a', 0, [], true, true);
    assert.deepEqual(j.streams(), [], 'an empty append creates no stream');
    j.append('a', 0, entries('a', 0, 1, true), false, true);
    j.append('a', 1, [], false, false);
    assert.deepEqual(j.openStreams(), ['a'], 'an empty append does not change open');
    j.append('a', 1, [], true, false);
    assert.deepEqual(result(() => j.append('a', 0, [], true, true)), { tag: 'conflict', val: 1 });
    assert.equal(j.length('a'), 1);
    j.close();
  },

  /** Every bad batch is refused with the file journal's own error, word for word, nothing left behind. */
  async bad_appends_are_refused_like_the_file_journal(b) {
    const dir = tempDir();
    const file = FileJournal.open(join(dir, 'j'));
    const j = openJournal(await b.fresh());
    try {
      for (const journal of [file, j]) journal.append('a', 0, entries('a', 0, 1, true), true, true);
      const withNewline = `${entry('a', 1, true)}\n{"open":true,"seq":2,"stream":"a"}`;
      const bad = [
        ['newline', [withNewline]],
        ['stream', [entry('b', 1, true)]],
        ['seq', [entry('a', 1, true), entry('a', 3, true)]],
        ['open', [entry('a', 1, true), entry('a', 2, false)]],
        ['JSON object', ['[1,2]']],
        ['not a journal entry', ['{"open":true}']],
        ['JSON object', ['']],
        ['not a journal entry', ['{"open":true,"seq":"1","stream":"a"}']],
        ['not a string', [42]],
      ];
      for (const [why, batch] of bad) {
        const want = result(() => file.append('a', 1, batch, true, true));
        const got = result(() => j.append('a', 1, batch, true, true));
        assert.equal(got.tag, 'other', `${why}: ${JSON.stringify(got)}`);
        assert.ok(String(got.val).includes(why), `${got.val} should mention ${why}`);
        assert.deepEqual(got, want, `${why}: refused as the file journal refuses it`);
        assert.equal(j.length('a'), 1, `${why}: nothing written`);
        assert.deepEqual(j.read('a', 0), entries('a', 0, 1, true));
        assert.deepEqual(j.streams(), ['a']);
      }
      // The journal is still usable.
      j.append('a', 1, entries('a', 1, 1, true), true, true);
      assert.equal(j.length('a'), 2);
    } finally {
      j.close();
      file.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },

  /** A mixed run gives MemoryJournal's answers, and the same journal in append order. */
  async same_answers_as_memory_journal(b) {
    const mem = new MemoryJournal();
    const j = openJournal(await b.fresh());
    const streams = ['effect:x', 'lease:l', 'cap:c', 'effect:y', 'approval:a'];
    let step = 0;
    for (let round = 0; round < 6; round++) {
      streams.forEach((s, i) => {
        step += 1;
        if ((round + i) % 3 === 2) return;
        const len = mem.length(s);
        const open = step % 4 !== 0;
        const batch = entries(s, len, 1 + (step % 3), open);
        const durable = step % 2 === 0;
        assert.deepEqual(result(() => j.append(s, len, batch, durable, open)), result(() => mem.append(s, len, batch, durable, open)));
        // A stale writer loses the same way.
        if (len > 0) {
          const stale = entries(s, len - 1, 1, open);
          assert.deepEqual(result(() => j.append(s, len - 1, stale, true, open)), result(() => mem.append(s, len - 1, stale, true, open)));
        }
      });
      assert.deepEqual(snapshot(j), snapshot(mem), `round ${round}`);
    }
    assert.deepEqual(j.entriesInOrder(), mem.lines);
    assert.deepEqual(j.bytes(), Buffer.from(mem.bytes()));
    j.close();
  },

  async reopen_and_other_handles_see_everything(b) {
    const url = await b.fresh();
    const j = openJournal(url);
    const other = openJournal(url);
    j.append('s2', 0, entries('s2', 0, 3, true), false, true);
    // A second handle (another worker) sees it at once and appends after it.
    assert.equal(other.length('s2'), 3);
    other.append('s1', 0, entries('s1', 0, 1, true), false, true);
    j.append('s2', 3, entries('s2', 3, 1, false), false, false);
    other.append('s3', 0, entries('s3', 0, 2, true), true, true);
    // Closed with a non-durable append pending.
    j.append('s1', 1, entries('s1', 1, 1, true), false, true);
    const before = snapshot(j);
    assert.deepEqual(snapshot(other), before);
    j.close();
    other.close();
    const again = openJournal(url);
    assert.deepEqual(snapshot(again), before);
    assert.deepEqual(again.streams(), ['s2', 's1', 's3']);
    assert.deepEqual(again.openStreams(), ['s1', 's3']);
    again.close();
  },

  async entries_are_stored_byte_for_byte(b) {
    const url = await b.fresh();
    const j = openJournal(url);
    const odd = 'b "q" é ☃ 𝄞 \\ \u2028 {x,y} NULL';
    const s = JSON.stringify(odd);
    const batch = [
      `{"nested":{"k":[1,2.5e-7,"é\\u00e9\\t"]},"open":false,"seq":0,"stream":${s}}`,
      `{"big":"${'x'.repeat(300_000)}","open":false,"seq":1,"stream":${s}}`,
      // Not canonical (spaces, key order): a backend stores what it is given.
      `{ "stream" : ${s}, "seq" : 2, "open" : false }`,
    ];
    j.append(odd, 0, batch, true, false);
    assert.deepEqual(j.read(odd, 0), batch);
    assert.deepEqual(j.streams(), [odd]);
    j.close();
    assert.deepEqual(await b.query(url, 'SELECT entry FROM interlock_entries ORDER BY seq'), batch, 'the rows hold the bytes given');
    if (b.name === 'sqlite') assert.deepEqual(await b.query(url, 'SELECT DISTINCT typeof(entry) FROM interlock_entries'), ['text']);
    const again = openJournal(url);
    assert.deepEqual(again.read(odd, 1), batch.slice(1));
    again.close();
  },

  async format_version_recorded_and_newer_refused(b) {
    const url = await b.fresh();
    openJournal(url).close();
    assert.deepEqual(await b.query(url, "SELECT value FROM interlock_meta WHERE key = 'format'"), ['interlock-journal 1\n']);
    openJournal(url).close(); // and an existing one opens as it is
    for (const [text, want] of [
      ['interlock-journal 2\n', 'journal format version 2 is newer than this reader understands (1); upgrade Interlock'],
      ['interlock-journal one\n', 'its interlock_meta row "format" is not a format version: its version is not a decimal number'],
    ]) {
      const url = await b.fresh();
      if (b.name === 'sqlite') mkdirSync(dirname(sqlitePath(url)), { recursive: true });
      const literal = text.replace('\n', `' || ${b.name === 'sqlite' ? 'char' : 'chr'}(10) || '`);
      await b.execute(url, `CREATE TABLE interlock_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO interlock_meta VALUES ('format', '${literal}');`);
      assert.throws(() => openJournal(url), (e) => {
        assert.ok(e instanceof JournalError && e.tag === 'other', String(e));
        assert.ok(e.message.includes(want) && e.message.startsWith(b.name === 'sqlite' ? 'SQLite journal ' : 'PostgreSQL journal '), e.message);
        return true;
      });
      // Nothing was created beside the meta table, nor changed in it.
      const tables = b.name === 'sqlite'
        ? "SELECT name FROM sqlite_master WHERE name LIKE 'interlock%'"
        : "SELECT tablename FROM pg_tables WHERE tablename LIKE 'interlock%' AND schemaname = current_schema()";
      assert.deepEqual(await b.query(url, tables), ['interlock_meta']);
      assert.deepEqual(await b.query(url, 'SELECT value FROM interlock_meta'), [text]);
    }
  },

  /** `open-streams` is answered from the partial index of open streams, not by a scan. */
  async open_streams_is_an_index_query(b) {
    const url = await b.fresh();
    const j = openJournal(url);
    for (let i = 0; i < 1500; i++) {
      const s = `effect:${i}`;
      const open = i % 500 === 7;
      j.append(s, 0, entries(s, 0, 1, open), false, open);
    }
    assert.deepEqual(j.openStreams(), ['effect:7', 'effect:507', 'effect:1007']);
    j.close();
    await b.execute(url, 'ANALYZE');
    let plan;
    if (b.name === 'sqlite') {
      const Database = require('better-sqlite3');
      const db = new Database(sqlitePath(url));
      plan = db.prepare(`EXPLAIN QUERY PLAN ${OPEN_STREAMS}`).all().map((r) => r.detail);
      db.close();
    } else {
      plan = await b.query(url, `EXPLAIN ${OPEN_STREAMS}`);
    }
    // SQLite: "SCAN interlock_streams USING INDEX interlock_open_streams" walks the index (of
    // open streams only); a scan of the table would name no index.
    assert.equal(plan.length, 1, JSON.stringify(plan));
    assert.ok(plan[0].includes('interlock_open_streams'), JSON.stringify(plan));
    assert.ok(!plan[0].includes('Seq Scan'), JSON.stringify(plan));
  },

  /** A durable append is one commit that waits for the disk; a non-durable one does not wait. */
  async commits_are_counted(b) {
    const url = await b.fresh();
    const j = openJournal(url);
    const counts = () => [j.commits, j.durableCommits];
    j.append('a', 0, entries('a', 0, 3, true), true, true);
    assert.deepEqual(counts(), [1, 1]);
    j.append('a', 3, entries('a', 3, 1, true), false, true);
    j.append('b', 0, entries('b', 0, 1, true), false, true);
    assert.equal(j.durableCommits, 1, 'non-durable appends do not wait');
    assert.equal(j.commits, 3);
    assert.equal(result(() => j.append('a', 0, entries('a', 0, 1, true), true, true)).tag, 'conflict');
    assert.deepEqual(counts(), [3, 1], 'a conflict commits nothing');
    j.sync();
    if (b.name === 'sqlite') {
      // One fsync of the log, whatever is pending (another process's appends may be).
      assert.equal(j.durableCommits, 2);
    } else {
      // A flush only when the WAL is not flushed already (another worker may have).
      assert.ok(j.durableCommits >= 1 && j.durableCommits <= 2, String(j.durableCommits));
      // The sync's promise, read off the server: everything so far is flushed.
      j.append('b', 1, entries('b', 1, 1, true), false, true);
      const [insert] = await b.query(url, 'SELECT pg_current_wal_insert_lsn()::text');
      j.sync();
      assert.deepEqual(await b.query(url, `SELECT (pg_current_wal_flush_lsn() >= '${insert}'::pg_lsn)::text`), ['true']);
    }
    j.close();
  },

  async many_processes_open_a_new_journal_at_once(b) {
    const url = await b.fresh();
    await Promise.all(Array.from({ length: 6 }, (_, i) => agent('open', url, `t${i}`)));
    const j = openJournal(url);
    assert.equal(j.streams().length, 6);
    j.close();
    assert.deepEqual(await b.query(url, 'SELECT value FROM interlock_meta'), ['interlock-journal 1\n']);
  },

  /** Four processes of this host race compare-and-append on one stream: one winner a round. */
  async processes_race_one_stream(b) {
    const url = await b.fresh();
    openJournal(url).close();
    const rounds = 60;
    const dir = tempDir();
    const go = join(dir, 'go');
    try {
      const racers = Array.from({ length: 4 }, (_, p) => agent('append', url, go, `process ${p}`, String(rounds)));
      await new Promise((r) => setTimeout(r, 300)); // every racer has opened the journal
      writeFileSync(go, '');
      const wins = (await Promise.all(racers)).map(Number);
      assert.equal(wins.reduce((a, n) => a + n, 0), rounds, `exactly one winner per round: ${wins}`);
      const j = openJournal(url);
      const stored = j.read('effect:race', 0);
      j.close();
      assert.equal(stored.length, rounds);
      stored.forEach((e, i) => assert.ok(e.includes(`"seq":${i},`), e));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

for (const { backend, skip } of backends) {
  for (const [name, run] of Object.entries(CASES)) {
    test(`${backend?.name ?? 'postgres'}: ${name}`, { skip }, () => run(backend));
  }
}

for (const umask of [0o022, 0o277]) {
  test(`sqlite: the database file is 0600 (and its -wal, -shm), new folders 0700 (umask ${umask.toString(8).padStart(3, '0')})`, () => {
    const mode = (p) => statSync(p).mode & 0o777;
    const root = tempDir();
    const old = process.umask(umask);
    try {
      const db = join(root, 'a/b/journal.db');
      const j = SqliteJournal.open(db);
      j.append('a', 0, entries('a', 0, 1, true), true, true);
      assert.equal(mode(join(root, 'a')), 0o700);
      assert.equal(mode(join(root, 'a/b')), 0o700);
      for (const f of ['journal.db', 'journal.db-wal', 'journal.db-shm']) assert.equal(mode(join(root, 'a/b', f)), 0o600, f);
      j.close();
    } finally {
      process.umask(old);
      rmSync(root, { recursive: true, force: true });
    }
  });
}

test('postgres: a database that is not UTF8 is refused', { skip: pg.skip }, async () => {
  const b = pg.backend;
  await b.execute(b.url, "CREATE DATABASE latin ENCODING 'LATIN1' TEMPLATE template0");
  assert.throws(() => PostgresJournal.open(b.url.replace(/\/postgres$/, '/latin')), (e) =>
    e instanceof JournalError && /must be UTF8/.test(e.message) && /LATIN1/.test(e.message));
});

test('postgres: a call that gets no answer in time is an io error, never a hang; nothing of it is recorded', { skip: pg.skip }, async () => {
  const b = pg.backend;
  const url = await b.fresh();
  const j = PostgresJournal.open(url, { timeoutMs: 500 });
  j.append('s', 0, entries('s', 0, 1, true), true, true);
  // Another session holds the stream's row lock: the append waits for it.
  const { Client } = require('pg');
  const holder = new Client({ connectionString: url });
  await holder.connect();
  await holder.query("BEGIN; SELECT length FROM interlock_streams WHERE name = 's' FOR UPDATE");
  const start = Date.now();
  assert.throws(() => j.append('s', 1, entries('s', 1, 1, true), true, true), (e) =>
    e instanceof JournalError && e.tag === 'io' && /no answer to append within 500 ms.*may or may not be recorded/.test(e.message));
  assert.ok(Date.now() - start < 5000);
  await holder.query('COMMIT');
  await holder.end();
  // The next call connects again; the abandoned append was never committed.
  assert.equal(j.length('s'), 1);
  j.append('s', 1, entries('s', 1, 1, false), true, false);
  assert.deepEqual(j.read('s', 0), [entry('s', 0, true), entry('s', 1, false)]);
  j.close();
});

test('postgres: the server restarted under a journal: acknowledged appends kept, the journal connects again', { skip: pg.skip }, async () => {
  const b = pg.backend;
  const url = await b.fresh();
  const j = PostgresJournal.open(url);
  j.append('s', 0, entries('s', 0, 2, true), true, true);
  b.restart();
  // The first call after the restart may find the connection lost (io) or already know it
  // (the client saw the server end it) and connect again; the one after it works.
  const first = result(() => j.append('s', 2, entries('s', 2, 1, true), true, true));
  if (!first.ok) {
    assert.equal(first.tag, 'io', JSON.stringify(first));
    assert.match(String(first.val), /^PostgreSQL journal journals on .*\.s\.PGSQL\.\d+ as postgres: /);
  }
  const len = j.length('s');
  assert.equal(len, first.ok ? 3 : 2, 'an append reported failed left nothing; one reported done is kept');
  j.append('s', len, [entry('s', len, false)], true, false);
  assert.deepEqual(j.read('s', 0), [...entries('s', 0, len, true), entry('s', len, false)]);
  j.close();
});

test('postgres: a commit whose acknowledgement is lost is an io error, never a success; the entries are found on reading again', { skip: pg.skip }, async () => {
  const b = pg.backend;
  const url = await b.fresh();
  const j = PostgresJournal.open(url, { timeoutMs: 20_000 });
  j.append('s', 0, entries('s', 0, 1, true), true, true);
  const restore = await b.loseCommitAcknowledgements();
  try {
    assert.throws(() => j.append('s', 1, entries('s', 1, 2, true), true, true), (e) =>
      e instanceof JournalError && e.tag === 'io' &&
      /the commit of 2 entries to stream "s" was not acknowledged .*they may or may not be recorded: read the stream again/.test(e.message));
  } finally {
    await restore();
  }
  // It was committed before the session ended: the next call connects again and finds it.
  assert.deepEqual(j.read('s', 0), entries('s', 0, 3, true));
  j.append('s', 3, entries('s', 3, 1, false), true, false);
  assert.equal(j.length('s'), 4);
  j.close();
});

test('Interlock.open chooses the journal by its one argument: a folder, sqlite:///, postgres://', async () => {
  const root = tempDir();
  try {
    const urls = [`sqlite://${root}/j.db`];
    if (pg.backend) urls.push(await pg.backend.fresh());
    for (const url of urls) {
      const gate = await Interlock.open(url, { standingLease: true });
      assert.ok(gate.journal instanceof (url.startsWith('sqlite') ? SqliteJournal : PostgresJournal));
      await gate.lease('l', { ttlMs: 1000 });
      await gate.close();
      const again = await Interlock.open(url);
      assert.deepEqual(again.verify().problems, []);
      assert.deepEqual(again.journal.streams(), ['lease:l']);
      await again.close();
    }
    assert.ok(existsSync(join(root, 'j.db')));
    const folder = await Interlock.open(join(root, 'folder'));
    assert.ok(folder.journal instanceof FileJournal);
    folder.close();
    // A SQLite URL needs an absolute path; any other scheme names no journal: nothing made.
    for (const url of ['sqlite://relative.db', 'sqlite:///', 'file:///tmp/j', 'http://j.example/x']) {
      await assert.rejects(Interlock.open(url), (e) => e instanceof UnsupportedJournalError && e.where === url);
    }
    assert.throws(() => Interlock.repair(`sqlite://${root}/j.db`), /no torn tail to repair/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the package carries the schema the Rust crate runs, byte for byte', () => {
  assert.deepEqual(readFileSync(join(PKG, 'gen/schema.sql')), readFileSync(join(REPO, 'adapters/sql-journal/src/schema.sql')),
    'gen/schema.sql is stale: run npm run build');
  const pkg = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8'));
  assert.ok(pkg.files.includes('gen'));
});
