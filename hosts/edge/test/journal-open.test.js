// A Durable Object whose journal the gate cannot open (its format row names a newer version,
// as a newer Interlock would stamp it): the component answers every journal call with the
// open's typed error, 503, as `interlock serve` does; nothing is changed, and the same
// journal opens again once it is readable.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startWorkerd, api, journalFiles, tempDir, cleanup } from './helpers.js';

const FAR = 4_102_444_800_000;
let disk;

before(() => {
  disk = tempDir();
});
after(() => cleanup(disk));

/** The format row of the one journal under `disk`, read from outside (workerd stopped). */
const format = () => execFileSync('sqlite3', ['-readonly', journalFiles(disk)[0], "SELECT value FROM interlock_meta WHERE key = 'format'"], { encoding: 'utf8' });

/** Sets it, from outside. */
const stamp = (/** @type {string} */ text) => execFileSync('sqlite3', [journalFiles(disk)[0], `UPDATE interlock_meta SET value = '${text}' || char(10) WHERE key = 'format'`]);

test('workerd: a journal of a newer format is refused with the open\'s error (503), nothing changed', async () => {
  let w = await startWorkerd({ disk });
  try {
    assert.equal((await api(w.url, 'j', 'PUT', '/leases/case-4471', { expires_at_ms: FAR })).status, 204);
  } finally {
    await w.stop();
  }
  assert.equal(journalFiles(disk).length, 1);
  assert.equal(format(), 'interlock-journal 1\n\n');
  stamp('interlock-journal 2');

  w = await startWorkerd({ disk });
  try {
    for (const [method, path, body] of [['GET', '/entries'], ['PUT', '/leases/case-9', { expires_at_ms: FAR }]]) {
      const r = await api(w.url, 'j', method, path, body);
      assert.equal(r.status, 503, `${method} ${path}: ${r.text}\n${w.log().slice(-2000)}`);
      assert.equal(r.json.error.kind, 'journal', r.text);
      assert.match(r.json.error.message, /newer|version 2/, r.text);
    }
  } finally {
    await w.stop();
  }
  assert.equal(format(), 'interlock-journal 2\n\n', 'the format row is as it was found');
  stamp('interlock-journal 1');

  w = await startWorkerd({ disk });
  try {
    const entries = await api(w.url, 'j', 'GET', '/entries');
    assert.equal(entries.status, 200, entries.text);
    assert.equal(entries.text.trim().split('\n').length, 1, `the one lease grant, nothing more: ${entries.text}`);
  } finally {
    await w.stop();
  }
});
