// Proof for outsiders over HTTP (docs/http-api.yaml), against both servers: a server with
// INTERLOCK_SIGNING_KEY hands out its public key, Ed25519 receipts, the log's checkpoints
// and proofs, and bundles; tests/outside/check_proof.mjs (canonicalize, node:crypto: no
// Interlock code) accepts each; bad keys and documents are typed 4xx that write nothing; a
// server with no signing key says so (409); a bad key or two keys stop the start.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Interlock } from '@interlock/gate';
import { SERVERS, paymentsServer, api, refund, tempDir, cleanup, ROOT } from './helpers.js';

const CHECK = join(ROOT, '../../tests/outside/check_proof.mjs');
const FAR = 4_102_444_800_000;

async function keyPair() {
  const g = await Interlock.open(':memory:');
  return g.generateKey('shop.example/edge');
}

/** Runs the outside checker over `docs` (name -> text) written to `dir`. */
function outside(dir, publicKey, kind, ...docs) {
  writeFileSync(join(dir, 'key.pub'), publicKey);
  const files = docs.map((text, i) => {
    const f = join(dir, `doc${i}`);
    writeFileSync(f, text);
    return f;
  });
  const run = spawnSync(process.execPath, [CHECK, join(dir, 'key.pub'), kind, ...files], { encoding: 'utf8' });
  return { rc: run.status, out: run.stdout + run.stderr };
}

for (const server of SERVERS) describe(server.name, { skip: server.skip }, () => {
  let disk, pay, w, keys;
  before(async () => {
    disk = tempDir();
    pay = await paymentsServer({ orders: { order_881: 10000, order_882: 10000, order_883: 10000 } });
    keys = await keyPair();
    w = await server.start({ disk, env: { INTERLOCK_TARGETS: pay.targets, INTERLOCK_SIGNING_KEY: keys.signer } });
  });
  after(async () => {
    await w?.stop();
    await pay?.close();
    cleanup(disk);
  });

  test('receipts, checkpoints, proofs and bundles: served, signed, checked outside', async () => {
    const j = 'proof';
    assert.equal((await api(w.url, j, 'PUT', '/leases/case-4471', { expires_at_ms: FAR })).status, 204);
    const ids = [];
    for (const order of ['order_881', 'order_882']) {
      const r = await api(w.url, j, 'POST', '/effects', refund(2000, { key: `refund:${order}`, order }));
      assert.equal(r.json.state, 'COMMITTED', r.text);
      ids.push(r.json.effect_id);
    }
    const key = await api(w.url, j, 'GET', '/key');
    assert.deepEqual(key.json, { public_key: keys.verifier });
    assert.ok(!key.text.includes(keys.signer.split('+').slice(4).join('+')), 'the private key is never served');

    const receipt = await api(w.url, j, 'GET', `/effects/${ids[0]}/receipt`);
    assert.equal(receipt.json.signature.alg, 'Ed25519');
    assert.deepEqual(receipt.json.anchors.map((a) => a.stream), ['lease:case-4471']);
    const checked = await api(w.url, j, 'POST', '/check-receipt', { receipt: receipt.text, public_key: keys.verifier });
    assert.equal(checked.json.ok, true, checked.text);
    const edited = receipt.text.replace('"amount_cents":2000', '"amount_cents":2001');
    const bad = await api(w.url, j, 'POST', '/check-receipt', { receipt: edited });
    assert.equal(bad.json.ok, false, bad.text);

    assert.equal((await api(w.url, j, 'GET', '/checkpoint')).status, 404);
    const c1 = await api(w.url, j, 'POST', '/checkpoint');
    assert.equal(c1.json.tree_size, 2, c1.text);
    assert.equal((await api(w.url, j, 'GET', '/checkpoint')).text, c1.json.checkpoint);
    const inclusion = await api(w.url, j, 'GET', `/proofs/inclusion/${ids[1]}`);
    assert.equal(inclusion.json.leaf_index, 1, inclusion.text);
    const r3 = await api(w.url, j, 'POST', '/effects', refund(700, { key: 'refund:order_883', order: 'order_883' }));
    assert.equal(r3.json.state, 'COMMITTED', r3.text);
    assert.equal((await api(w.url, j, 'POST', '/checkpoint')).json.tree_size, 3);
    const consistency = await api(w.url, j, 'GET', '/proofs/consistency/2');
    assert.equal(consistency.json.new_size, 3, consistency.text);
    const bundle = await api(w.url, j, 'POST', '/bundle', {});
    assert.equal(bundle.json.count, 3, bundle.text);
    const answers = await api(w.url, j, 'POST', '/check-bundle', { bundle: bundle.text });
    assert.deepEqual(answers.json.effects.map((e) => e.happened_once.answer), ['yes', 'yes', 'yes'], answers.text);
    const verified = await api(w.url, j, 'POST', '/verify', { anchors: [{ checkpoint: c1.json.checkpoint }, receipt.json] });
    assert.deepEqual(verified.json.problems, [], verified.text);

    const dir = tempDir();
    try {
      for (const [kind, docs] of [['receipt', [receipt.text]], ['checkpoint', [c1.json.checkpoint]],
        ['inclusion', [inclusion.text]], ['consistency', [consistency.text, c1.json.checkpoint]], ['bundle', [bundle.text]]]) {
        const ok = outside(dir, keys.verifier, kind, ...docs);
        assert.equal(ok.rc, 0, `${kind}: ${ok.out}`);
        const other = outside(dir, (await keyPair()).verifier, kind, ...docs);
        assert.equal(other.rc, 1, `${kind} under another key: ${other.out}`);
      }
    } finally {
      cleanup(dir);
    }
  });

  test('bad keys and documents: typed 4xx, nothing written', async () => {
    const j = 'bad';
    assert.equal((await api(w.url, j, 'PUT', '/leases/case-4471', { expires_at_ms: FAR })).status, 204);
    const before = (await api(w.url, j, 'GET', '/entries')).text;
    for (const [body, status, kind] of [
      [{ receipt: '{"effect_id":', public_key: keys.verifier }, 400, 'malformed'],
      [{ receipt: {}, public_key: keys.signer }, 400, 'bad-key'],
      [{ receipt: {}, public_key: 'shop+00000000+AAAA' }, 400, 'bad-key'],
      [{ public_key: keys.verifier }, 400, 'invalid-field'],
    ]) {
      const r = await api(w.url, j, 'POST', '/check-receipt', body);
      assert.equal(r.status, status, r.text);
      assert.equal(r.json.error.kind, kind, r.text);
      assert.ok(!r.text.includes(keys.signer.split('+').slice(4).join('+')), 'no key echoed');
    }
    for (const [bundle, kind] of [['{"bundle":"interlock-bundle/1","count":', 'malformed'], ['{"bundle":"interlock-bundle/9"}', 'unknown-version']]) {
      const r = await api(w.url, j, 'POST', '/check-bundle', { bundle });
      assert.equal(r.json.error.kind, kind, r.text);
    }
    const none = await api(w.url, j, 'GET', '/proofs/inclusion/0123456789abcdef0123456789abcdef');
    assert.equal(none.status, 422, none.text);
    assert.equal((await api(w.url, j, 'GET', '/proofs/consistency/x')).status, 400);
    assert.equal((await api(w.url, j, 'GET', '/entries')).text, before, 'nothing written');
  });
});

for (const server of SERVERS) describe(`${server.name} without a signing key`, { skip: server.skip }, () => {
  test('signing routes say what is missing; a bad key or two keys refuse to serve', async () => {
    const disk = tempDir();
    const w = await server.start({ disk });
    try {
      for (const [method, path] of [['GET', '/key'], ['POST', '/checkpoint'], ['POST', '/bundle']]) {
        const r = await api(w.url, 'n', method, path);
        assert.equal(r.status, 409, `${method} ${path}: ${r.text}`);
        assert.equal(r.json.error.kind, 'signing-key-missing');
      }
    } finally {
      await w.stop();
      cleanup(disk);
    }
    const keys = await keyPair();
    for (const env of [{ INTERLOCK_SIGNING_KEY: keys.verifier }, { INTERLOCK_SIGNING_KEY: keys.signer, INTERLOCK_RECEIPT_KEY: 'k' }]) {
      const d = tempDir();
      try {
        let refused;
        try {
          const w2 = await server.start({ disk: d, env });
          const r = await api(w2.url, 'n', 'GET', '/entries');
          refused = r.status === 500 ? r.text : undefined;
          await w2.stop();
        } catch (e) {
          refused = String(e);
        }
        assert.ok(refused !== undefined, `${JSON.stringify(Object.keys(env))} must not serve`);
      } finally {
        cleanup(d);
      }
    }
  });
});
