// The journal contract suite and every vector in tests/conformance through the Worker in
// workerd, inside Durable Objects over each object's SQLite, with the storage the production
// Worker gives the gate (test/conformance-worker.js):
// - the contract suite (dist/journal_contract.wasm, the cases every host's storage passes):
//   each SQLite case in its own object, on empty storage;
// - the vectors: the runner, one object per vector, checks each vector's expectations and its
//   journal pin (every entry + "\n" in append order: the bytes every host writes). The
//   torn-tail vectors need a file journal and are skipped by the runner, saying so. Skip
//   key: `edge`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { startWorkerd, api, tempDir, cleanup, ROOT } from './helpers.js';

const VECTORS = join(ROOT, '../../tests/conformance');
const PINS = 'journal-pins.json';
const vectors = readdirSync(VECTORS).filter((f) => f.endsWith('.json') && f !== PINS).sort()
  .map((f) => ({ file: f, vector: JSON.parse(readFileSync(join(VECTORS, f), 'utf8')) }));
const pins = readFileSync(join(VECTORS, PINS), 'utf8');
const ran = new Set();
const skipped = new Map();
let disk, w;

before(async () => {
  disk = tempDir();
  w = await startWorkerd({ worker: 'conformance', disk });
});
after(async () => {
  await w?.stop();
  cleanup(disk);
});

test('workerd: every SQLite case of the journal contract suite, on Durable Object storage', async () => {
  const cases = await api(w.url, 'cases', 'GET', '/contract');
  assert.equal(cases.status, 200, cases.text);
  assert.ok(cases.json.length > 10, cases.text);
  const failures = [];
  for (const name of cases.json) {
    const r = await api(w.url, `case-${name}`, 'POST', `/contract/${encodeURIComponent(name)}`);
    assert.equal(r.status, 200, `${name}: ${r.text}\n${w.log().slice(-2000)}`);
    if (r.json.failure !== null) failures.push(`${name}: ${r.json.failure}`);
  }
  assert.deepEqual(failures, []);
  console.log(`journal contract (workerd, Durable Object storage): ${cases.json.length} cases passed`);
});

vectors.forEach(({ file, vector: v }, i) => {
  test(`workerd: vector ${v.id} (${file})`, async (t) => {
    const r = await api(w.url, `vector-${i}`, 'POST', '/conformance', { vector: v, pins });
    assert.equal(r.status, 200, `${r.text}\n${w.log().slice(-2000)}`);
    if (r.json.skipped !== undefined && r.json.skipped !== null) {
      assert.match(r.json.skipped, /needs a file journal/, `${v.id}: only file-journal vectors may be skipped`);
      skipped.set(v.id, r.json.skipped);
      t.skip(r.json.skipped);
      return;
    }
    assert.deepEqual(r.json.failures, [], `${v.id}: ${r.json.failures.join('\n')}`);
    ran.add(v.id);
  });
});

test('every vector was run or skipped with a reason', () => {
  const missing = vectors.map((x) => x.vector.id).filter((id) => !ran.has(id) && !skipped.has(id));
  assert.deepEqual(missing, []);
  console.log(`conformance (workerd, Durable Object journal): ${ran.size} run, ${skipped.size} skipped, of ${vectors.length}`);
});
