// The package under Deno (the `deno` binary of its npm package): the conformance vectors
// over Deno's SQLite journal (node:sqlite) and the memory journal, and an app's refund over
// a sqlite journal file that Node's SQLite storage then opens and verifies (the same schema
// and rows in every host).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT, tempDir, cleanup } from './helpers.js';
import { Interlock } from '@interlock/gate';

const DENO = join(ROOT, 'node_modules/.bin/deno');
const deno = (args, dir) => execFileSync(DENO, ['run', '--allow-read', `--allow-write=${dir}`, '--allow-env', ...args], {
  cwd: ROOT,
  encoding: 'utf8',
  env: { PATH: process.env.PATH, DENO_DIR: join(dir, 'deno-cache'), NO_COLOR: '1', TMPDIR: dir },
  stdio: ['ignore', 'pipe', 'pipe'],
});

test('deno: every conformance vector, on the node:sqlite and the memory journal', () => {
  const dir = tempDir();
  try {
    const out = deno(['deno/conformance.js'], dir);
    const lines = out.trim().split('\n');
    for (const l of lines.slice(0, -1)) {
      const s = JSON.parse(l);
      assert.deepEqual(s.failures, [], `${s.kind}: ${s.failures.join('\n')}`);
      assert.ok(s.ran > 60, `${s.kind}: ran ${s.ran}`);
    }
    console.log(lines.at(-1));
  } finally {
    cleanup(dir);
  }
});

test('deno: an app refunds once over a SQLite journal that Node then reads and verifies', async () => {
  const dir = tempDir();
  try {
    const db = join(dir, 'journal.db');
    const r = JSON.parse(deno(['deno/example.js', db], dir));
    assert.equal(r.first.state, 'COMMITTED');
    assert.equal(r.again.replayed, true);
    assert.equal(r.refunds, 1);
    const node = await Interlock.open(`sqlite://${db}`);
    try {
      const report = node.gate.verify();
      assert.deepEqual(report.problems, []);
      assert.equal(report.entries, 5);
      assert.equal(node.gate.receipt(r.first.effectId).final, 'COMMITTED');
    } finally {
      node.storage.close();
    }
  } finally {
    cleanup(dir);
  }
});
