// Proof for outsiders through the Node host: a key pair, an Ed25519 receipt checked with the
// public key alone, the transparency log (checkpoints, inclusion and consistency proofs), a
// bundle with its five answers; bad keys and documents are typed errors that write nothing;
// and tests/outside/check_proof.mjs (canonicalize, node:crypto: no Interlock code) accepts
// everything this host made and rejects every mutated copy, a forked log included.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createPrivateKey, sign } from 'node:crypto';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import canonicalize from 'canonicalize';
import {
  Interlock, Payments, FakeClock, readKey, writePrivateKey,
  BadKeyError, BadSignatureError, MalformedError, UnknownVersionError, ProofFailedError,
} from '../src/index.js';
import { REPO, tempDir } from './helpers.js';

const CHECK = join(REPO, 'tests/outside/check_proof.mjs');
const T0 = 1_800_000_000_000;

function outside(...args) {
  const run = spawnSync(process.execPath, [CHECK, ...args], { encoding: 'utf8' });
  assert.ok(run.status === 0 || run.status === 1, run.stderr);
  return { rc: run.status, out: run.stdout };
}

/** A journal with refunds of `amounts`, under a lease, in `dir`. */
async function shop(dir, amounts = [2000, 2000]) {
  mkdirSync(dir, { recursive: true });
  const clock = new FakeClock(T0);
  const payments = await Payments.inMemory('2');
  for (let i = 0; i < 4; i++) payments.addOrder(`order_${i}`, 10_000);
  const gate = await Interlock.open(join(dir, 'journal'), { clock, agent: 'refund-agent' });
  await gate.lease('case-4471', { ttlMs: 3_600_000 });
  const refund = gate.effect(
    {
      target: 'payments',
      params: ['order', 'amount_cents'],
      key: (e) => `refund:${e.order}`,
      lease: 'case-4471',
      premises: async (e, { effectId }) => payments.premises(e.order, effectId),
      lookup: async (_e, { effectId }) => payments.findByReference(effectId),
    },
    async (order, amount, idempotencyKey, { effectId }) => {
      const r = payments.refund(order, amount, idempotencyKey, effectId, clock.nowMs());
      return { refund_id: r.id };
    },
  );
  const ids = [];
  for (const [i, a] of amounts.entries()) {
    const o = await refund(`order_${i}`, a);
    assert.equal(o.state, 'COMMITTED');
    ids.push(o.effectId);
  }
  return { gate, refund, ids, journal: join(dir, 'journal', 'journal.jsonl') };
}

test('keys: written owner-only, read from a file or the environment; the wrong half is a typed error', async () => {
  const dir = tempDir();
  const { gate, ids } = await shop(dir);
  const { signer, verifier } = gate.generateKey('shop.example/interlock');
  writePrivateKey(join(dir, 'shop.key'), signer);
  assert.equal(statSync(join(dir, 'shop.key')).mode & 0o777, 0o600);
  assert.throws(() => writePrivateKey(join(dir, 'shop.key'), signer), /EEXIST/);
  assert.equal(readKey({ file: join(dir, 'shop.key') }), `${signer}\n`);
  process.env.SHOP_PUBLIC_KEY_TEST = verifier;
  assert.equal(readKey({ env: 'SHOP_PUBLIC_KEY_TEST' }), verifier);
  assert.throws(() => readKey({ env: 'NOT_SET_ANYWHERE', what: 'public key' }), BadKeyError);
  assert.throws(() => gate.checkReceiptSignature('{}', signer), (err) => err instanceof BadKeyError && /private signer key/.test(err.message));
  assert.throws(() => gate.signedReceipt(ids[0], verifier), BadKeyError);
  try {
    gate.checkpoint(signer.slice(0, -2));
    assert.fail('a mangled key');
  } catch (err) {
    assert.ok(err instanceof BadKeyError);
    assert.ok(!err.message.includes(signer.split('+').slice(4).join('+')), 'never the key');
  }
  await gate.close();
});

test('an Ed25519 receipt, the log and a bundle; bad documents are typed errors that write nothing', async () => {
  const dir = tempDir();
  const { gate, refund, ids, journal } = await shop(dir);
  const { signer, verifier } = gate.generateKey('shop.example/interlock');
  const r = gate.signedReceipt(ids[0], signer);
  assert.equal(r.signature.alg, 'Ed25519');
  assert.deepEqual(r.anchors.map((a) => a.stream), ['lease:case-4471']);
  assert.equal(gate.checkReceiptSignature(r, verifier), ids[0]);
  assert.deepEqual(gate.checkSignedReceipt(r, verifier).problems, []);
  const other = gate.generateKey('shop.example/interlock').verifier;
  assert.throws(() => gate.checkReceiptSignature(r, other), BadSignatureError);

  const c1 = gate.checkpoint(signer);
  assert.equal(c1.tree_size, 2);
  const inc = gate.proveInclusion(ids[1]);
  assert.equal(gate.checkInclusion(inc, verifier).leaf_index, 1);
  await refund('order_2', 300);
  const c2 = gate.checkpoint(signer);
  const cons = gate.proveConsistency(2);
  assert.equal(gate.checkConsistency(cons, c1.checkpoint, verifier).tree_size, 3);
  assert.deepEqual(gate.verify({ checkpoints: [c1.checkpoint] }).problems, []);

  const bundle = gate.bundle(signer);
  const answers = gate.checkBundle(bundle, verifier);
  assert.equal(answers.count, 3);
  for (const e of answers.effects) {
    for (const q of ['happened_once', 'authorized_when_fired', 'premises_held', 'service_confirmed']) assert.equal(e[q].answer, 'yes', `${q}: ${e[q].why}`);
  }
  const before = readFileSync(journal);
  assert.throws(() => gate.checkBundle(bundle.slice(0, -5), verifier), MalformedError);
  assert.throws(() => gate.checkBundle(bundle.replace('interlock-bundle/1', 'interlock-bundle/3'), verifier), UnknownVersionError);
  assert.throws(() => gate.checkBundle(bundle, other), BadSignatureError);
  assert.throws(() => gate.checkInclusion(inc, verifier, { checkpoint: c2.checkpoint }), ProofFailedError);
  assert.throws(() => gate.proveConsistency(9), ProofFailedError);
  assert.deepEqual(readFileSync(journal), before, 'nothing written');
  await gate.close();
});

test('the outside checker accepts what this host made and rejects every mutation and a forked log', async () => {
  const dir = tempDir();
  const { gate, refund, ids, journal } = await shop(dir);
  const { signer, verifier } = gate.generateKey('shop.example/interlock');
  writeFileSync(join(dir, 'shop.pub'), verifier);
  writeFileSync(join(dir, 'other.pub'), gate.generateKey('shop.example/interlock').verifier);
  const c1 = gate.checkpoint(signer).checkpoint;
  await refund('order_2', 300);
  const c2 = gate.checkpoint(signer).checkpoint;
  const docs = {
    receipt: JSON.stringify(gate.signedReceipt(ids[0], signer)),
    bundle: gate.bundle(signer),
    checkpoint: c2,
    inclusion: gate.proveInclusion(ids[1]),
    consistency: gate.proveConsistency(2),
  };
  writeFileSync(join(dir, 'c1.txt'), c1);
  const extra = { receipt: [journal], consistency: [join(dir, 'c1.txt')] };
  await gate.close();
  for (const [kind, text] of Object.entries(docs)) {
    const file = join(dir, `${kind}.doc`);
    writeFileSync(file, text);
    const ok = outside(join(dir, 'shop.pub'), kind, file, ...(extra[kind] ?? []));
    assert.equal(ok.rc, 0, `${kind}: ${ok.out}`);
    const swapped = outside(join(dir, 'other.pub'), kind, file, ...(extra[kind] ?? []));
    assert.equal(swapped.rc, 1, `${kind} under another key: ${swapped.out}`);
    // Byte flips across the document: every one caught.
    const spots = [...text].map((ch, i) => (/[0-9A-Za-z]/.test(ch) ? i : -1)).filter((i) => i >= 0);
    const step = Math.max(1, Math.floor(spots.length / 25));
    for (let s = 0; s < spots.length; s += step) {
      const at = spots[s];
      const mutated = text.slice(0, at) + (text[at] === '1' ? '2' : '1') + text.slice(at + 1);
      writeFileSync(join(dir, 'm'), mutated);
      const m = outside(join(dir, 'shop.pub'), kind, join(dir, 'm'), ...(extra[kind] ?? []));
      assert.equal(m.rc, 1, `${kind} byte ${at} (${text.slice(Math.max(0, at - 15), at + 15)}): ${m.out}`);
    }
  }
  // A forked log under the same key: its first two leaves differ from the checkpoint held.
  const fork = await shop(join(dir, 'fork'), [1999, 2000]);
  fork.gate.checkpoint(signer);
  await fork.refund('order_2', 1);
  fork.gate.checkpoint(signer);
  writeFileSync(join(dir, 'forked.json'), fork.gate.proveConsistency(2));
  await fork.gate.close();
  const forked = outside(join(dir, 'shop.pub'), 'consistency', join(dir, 'forked.json'), join(dir, 'c1.txt'));
  assert.equal(forked.rc, 1, forked.out);
  assert.match(forked.out, /forked/);
});

/** `doc` signed again with the signed-note private key `signer` (as a forger holding the key would). */
function resign(doc, signer, verifier) {
  // PRIVATE+KEY+name+keyid+base64 and name+keyid+base64: the base64 may itself hold a '+'.
  const seed = Buffer.from(signer.trim().split('+').slice(4).join('+'), 'base64').subarray(1);
  const x = Buffer.from(verifier.trim().split('+').slice(2).join('+'), 'base64').subarray(1);
  const key = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', d: seed.toString('base64url'), x: x.toString('base64url') }, format: 'jwk' });
  const body = Object.fromEntries(Object.entries(doc).filter(([k]) => k !== 'signature'));
  const value = sign(null, Buffer.from(canonicalize(body), 'utf8'), key).toString('base64');
  return JSON.stringify({ ...body, signature: { ...doc.signature, value } });
}

test('the outside checker recomputes a bundle\'s five answers: a changed answer, signed again, is caught', async () => {
  // Every kind of answer (tests/outside/fixture/bundle.json, made by the core's test).
  const fixture = join(REPO, 'tests/outside/fixture');
  const all = outside(join(fixture, 'bundle.pub'), 'bundle', join(fixture, 'bundle.json'));
  assert.equal(all.rc, 0, all.out);
  for (const kind of ['happened_once unknown', 'premises_held no', 'service_confirmed not_fired', 'authorized_when_fired not_fired', 'service_confirmed no']) {
    assert.ok(all.out.includes(kind), `${kind}: ${all.out}`);
  }
  const dir = tempDir();
  const { gate, ids } = await shop(dir);
  const { signer, verifier } = gate.generateKey('shop.example/interlock');
  writeFileSync(join(dir, 'shop.pub'), verifier);
  const doc = JSON.parse(gate.bundle(signer));
  doc.answers[1].happened_once.answer = 'unknown';
  const forged = resign(doc, signer, verifier);
  writeFileSync(join(dir, 'forged.json'), forged);
  const caught = outside(join(dir, 'shop.pub'), 'bundle', join(dir, 'forged.json'));
  assert.equal(caught.rc, 1, caught.out);
  assert.ok(caught.out.includes(`happened_once for ${ids[1]}`), caught.out);
  assert.throws(() => gate.checkBundle(forged, verifier), ProofFailedError);
  doc.answers[1].happened_once.answer = 'yes';
  doc.answers[0].who_decided.answer = ['refund-agent', 'mallory'];
  writeFileSync(join(dir, 'forged.json'), resign(doc, signer, verifier));
  const names = outside(join(dir, 'shop.pub'), 'bundle', join(dir, 'forged.json'));
  assert.equal(names.rc, 1, names.out);
  assert.match(names.out, /who_decided/);
  await gate.close();
});
