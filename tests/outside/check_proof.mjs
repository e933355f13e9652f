#!/usr/bin/env node
// Check Interlock's proofs from outside the component, with the public key only: RFC 8785
// (JCS) from the npm package `canonicalize`, Ed25519 and SHA-256 from node:crypto. No
// Interlock code is involved. The same checks as check_proof.py (its docstring has the
// formats): a receipt (and the journal streams it pins), a bundle, a checkpoint, an
// inclusion proof (RFC 9162, 2.1.3.2), a consistency proof (RFC 9162, 2.1.4.2).
//
// usage: node check_proof.mjs PUBLIC_KEY_FILE receipt RECEIPT.json [JOURNAL.jsonl]
//        node check_proof.mjs PUBLIC_KEY_FILE bundle BUNDLE.json
//        node check_proof.mjs PUBLIC_KEY_FILE checkpoint CHECKPOINT.txt
//        node check_proof.mjs PUBLIC_KEY_FILE inclusion PROOF.json [CHECKPOINT.txt]
//        node check_proof.mjs PUBLIC_KEY_FILE consistency PROOF.json OLD_CHECKPOINT.txt
import { createHash, createPublicKey, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';

async function loadCanonicalize() {
  try {
    return (await import('canonicalize')).default;
  } catch {
    const dir = new URL('../../hosts/node/node_modules/canonicalize/', import.meta.url);
    const { main } = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8'));
    return (await import(new URL(main, dir))).default;
  }
}
const jcs = await loadCanonicalize();

class Mismatch extends Error {}
const fail = (m) => { throw new Mismatch(m); };
const sha256 = (...parts) => { const h = createHash('sha256'); for (const p of parts) h.update(p); return h.digest(); };
const b64 = (s) => { const b = Buffer.from(s, 'base64'); if (b.toString('base64') !== s) fail('not standard base64'); return b; };
const load = (p) => readFileSync(p, 'utf8');
const signedBody = (doc) => Buffer.from(jcs(Object.fromEntries(Object.entries(doc).filter(([k]) => k !== 'signature'))), 'utf8');

function parseKey(text) {
  const [name, keyId, ...rest] = text.trim().split('+');
  const raw = b64(rest.join('+'));
  if (raw.length !== 33 || raw[0] !== 1) fail('the public key is not an Ed25519 signed-note key');
  if (sha256(Buffer.from(`${name}\n`), raw).toString('hex').slice(0, 8) !== keyId) fail("the public key's id does not match its name and key");
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.subarray(1).toString('base64url') }, format: 'jwk' });
  return { name, keyId, key };
}

function checkSignature(doc, { name, keyId, key }, what) {
  const sig = doc.signature ?? {};
  if (sig.alg !== 'Ed25519' || sig.key !== `${name}+${keyId}`) fail(`${what} is not signed with Ed25519 by ${name}+${keyId}`);
  if (!verify(null, signedBody(doc), key, b64(String(sig.value)))) fail(`${what}: the signature does not match its content`);
}

function openNote(note, { name, keyId, key }) {
  const at = note.lastIndexOf('\n\n');
  if (at < 0 || !note.endsWith('\n')) fail('the checkpoint is not a signed note');
  const text = note.slice(0, at + 1);
  let verified = false;
  for (const line of note.slice(at + 2, -1).split('\n')) {
    if (!line.startsWith('\u2014 ')) fail('a signature line of the checkpoint is malformed');
    const [signer, sigText] = line.slice(2).split(' ');
    const sig = b64(sigText);
    if (signer !== name || sig.subarray(0, 4).toString('hex') !== keyId) continue; // a witness's
    if (!verify(null, Buffer.from(text, 'utf8'), key, sig.subarray(4))) fail("the checkpoint's signature does not verify");
    verified = true;
  }
  if (!verified) fail(`the checkpoint is not signed by ${name}+${keyId}`);
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3 || lines[0] !== name || !/^(0|[1-9][0-9]*)$/.test(lines[1])) fail("the checkpoint's text is not origin, tree size, root hash (of this log)");
  const root = b64(lines[2]);
  if (root.length !== 32) fail("the checkpoint's root hash is not 32 bytes");
  return { origin: lines[0], size: Number(lines[1]), root };
}

const node = (l, r) => sha256(Buffer.from([1]), l, r);

function rootFromInclusion(leaf, index, size, path) { // RFC 9162, 2.1.3.2
  if (index >= size) fail(`leaf ${index} is not in a tree of ${size}`);
  let [fn, sn, r] = [index, size - 1, sha256(Buffer.from([0]), leaf)];
  for (const p of path) {
    if (sn === 0) fail('the inclusion proof is too long');
    if (fn % 2 === 1 || fn === sn) {
      r = node(p, r);
      while (fn % 2 === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
    } else {
      r = node(r, p);
    }
    fn = Math.floor(fn / 2); sn = Math.floor(sn / 2);
  }
  if (sn !== 0) fail('the inclusion proof is too short');
  return r;
}

function checkConsistency(first, firstHash, second, secondHash, path) { // RFC 9162, 2.1.4.2
  if (first > second) fail('the old tree is larger than the new');
  if (first === second) {
    if (path.length || !firstHash.equals(secondHash)) fail('equal sizes with other roots: a forked log');
    return;
  }
  if (first === 0) { if (path.length) fail('a proof from the empty tree is empty'); return; }
  if (!path.length) fail('the consistency proof is empty');
  if ((first & (first - 1)) === 0) path = [firstHash, ...path];
  let [fn, sn] = [first - 1, second - 1];
  while (fn % 2 === 1) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0) fail('the consistency proof is too long');
    if (fn % 2 === 1 || fn === sn) {
      fr = node(c, fr); sr = node(c, sr);
      while (fn % 2 === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
    } else {
      sr = node(sr, c);
    }
    fn = Math.floor(fn / 2); sn = Math.floor(sn / 2);
  }
  if (!fr.equals(firstHash) || !sr.equals(secondHash) || sn !== 0) fail('the old tree is not a prefix of the new: a forked or rewritten log');
}

function journalStreams(path) {
  const streams = new Map();
  for (const line of load(path).split('\n').filter(Boolean)) {
    const e = JSON.parse(line);
    const chain = streams.get(e.stream) ?? [];
    const body = jcs(Object.fromEntries(Object.entries(e).filter(([k]) => k !== 'hash')));
    if (jcs(e) !== line || sha256(Buffer.from(body, 'utf8')).toString('hex') !== e.hash || e.seq !== chain.length
        || e.prev !== (chain.length ? chain.at(-1).hash : '0'.repeat(64))) fail(`the journal's chain breaks at ${e.stream} seq ${e.seq}`);
    chain.push(e);
    streams.set(e.stream, chain);
  }
  return streams;
}

// The five answers a receipt gives (ARCHITECTURE.md, "Proof for outsiders"), recomputed
// here: each yes, no, unknown or not_fired; who_decided the names.
const QUESTIONS = ['happened_once', 'authorized_when_fired', 'premises_held', 'who_decided', 'service_confirmed'];
const at = (v, ...path) => path.reduce((o, k) => (o !== null && typeof o === 'object' && !Array.isArray(o) ? o[k] : undefined), v);
const text = (v) => (typeof v === 'string' ? v : '');
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function five(r) {
  const states = (Array.isArray(r.entries) ? r.entries : []).map((e) => text(at(e, 'state')));
  const sends = states.filter((s) => s === 'DISPATCHED').length;
  const [executed, final, reason] = [text(r.executed), text(r.final), text(r.reason)];
  const authorized = Array.isArray(r.authorized) ? r.authorized : [];
  const once = executed === 'yes' || executed === 'no' ? executed : 'unknown';
  // Every send after an AUTHORIZED, and each AUTHORIZED names the lease or approval checked.
  const first = states.indexOf('AUTHORIZED');
  const before = first < 0 ? states : states.slice(0, first);
  const named = authorized.filter((a) => typeof at(a, 'checks', 'lease', 'name') === 'string' || typeof at(a, 'checks', 'approval', 'id') === 'string');
  const fired = sends === 0 ? 'not_fired'
    : !before.includes('DISPATCHED') && named.length > 0 && named.length === authorized.length ? 'yes' : 'no';
  const declared = isObject(at(r, 'proposed', 'premises')) && Object.keys(at(r, 'proposed', 'premises')).length > 0;
  const premises = reason === 'premise_changed' ? 'no'
    : sends === 0 ? 'not_fired'
      : !declared ? 'yes'
        : authorized.every((a) => isObject(at(a, 'checks', 'premises_held'))) ? 'yes' : 'no';
  const names = text(r.agent) ? [r.agent] : [];
  const decisions = 'people' in r ? at(r, 'people', 'decisions') : undefined;
  const deciders = [...authorized.map((a) => at(a, 'checks', 'approval', 'approver')),
    ...(Array.isArray(decisions) ? decisions : []).map((d) => (typeof at(d, 'decider') === 'string' ? at(d, 'decider') : '?'))];
  for (const who of deciders) if (typeof who === 'string' && !names.includes(who)) names.push(who);
  const confirmed = 'confirmed' in r ? 'yes'
    : final === 'COMMITTED' && ['send', 'recovery-retry', 'recovery-query'].includes(text(r.via)) ? 'yes'
      : reason === 'target_rejected' ? 'no'
        : sends === 0 ? 'not_fired' : 'unknown';
  return { effect_id: text(r.effect_id), final, executed, happened_once: once, authorized_when_fired: fired,
    premises_held: premises, who_decided: names, service_confirmed: confirmed };
}

const checks = {
  receipt(key, file, journal) {
    const r = JSON.parse(load(file));
    checkSignature(r, key, 'the receipt');
    let said = `receipt of ${r.effect_id}: Ed25519 signature holds`;
    if (journal) {
      const streams = journalStreams(journal);
      const pins = [r, ...(r.people ? [r.people] : []), ...(r.anchors ?? [])];
      for (const pin of pins) {
        const chain = streams.get(pin.stream) ?? [];
        const { length, hash } = pin.head;
        if (!(length > 0 && length <= chain.length) || chain[length - 1].hash !== hash) fail(`the journal does not hold ${pin.stream} as the receipt pins it`);
      }
      said += `; the journal holds the ${pins.length} stream(s) it pins`;
    }
    return said;
  },
  bundle(key, file) {
    let b;
    try { b = JSON.parse(load(file)); } catch { fail('the bundle is not JSON (cut short?)'); }
    if (b.bundle !== 'interlock-bundle/1') fail(`unknown bundle format ${JSON.stringify(b.bundle)}`);
    checkSignature(b, key, 'the bundle');
    if (b.count !== b.receipts?.length) fail("the bundle's count does not match its receipts");
    if (!Array.isArray(b.answers) || b.answers.length !== b.receipts.length) fail('the bundle has no answers, one per receipt');
    // The bundle's answers must be the ones its receipts give (their `why` is prose, not compared).
    b.receipts.forEach((r, i) => {
      const mine = five(r);
      for (const [q, want] of Object.entries(mine)) {
        const said = b.answers[i]?.[q];
        const got = QUESTIONS.includes(q) && isObject(said) ? said.answer : said;
        if (JSON.stringify(got) !== JSON.stringify(want)) fail(`the bundle answers ${q} for ${mine.effect_id} with ${JSON.stringify(got)}; its receipt gives ${JSON.stringify(want)}`);
      }
      console.log(`  ${mine.effect_id} ${mine.final}: ${QUESTIONS.map((q) => `${q} ${mine[q]}`).join(', ')}`);
    });
    return `bundle of ${b.count} receipt(s), period ${JSON.stringify(b.period)}: Ed25519 signature holds, its answers follow from its receipts`;
  },
  checkpoint(key, file) {
    const c = openNote(load(file), key);
    return `checkpoint of ${c.origin}: ${c.size} leaves, root ${c.root.toString('hex')}`;
  },
  inclusion(key, file, checkpoint) {
    const p = JSON.parse(load(file));
    if (p.proof !== 'interlock-inclusion-proof/1') fail(`unknown proof format ${JSON.stringify(p.proof)}`);
    const c = openNote(checkpoint ? load(checkpoint) : p.checkpoint, key);
    if (p.tree_size !== c.size) fail(`the proof is for a tree of ${p.tree_size}, the checkpoint is of ${c.size}`);
    const root = rootFromInclusion(sha256(signedBody(p.receipt)), p.leaf_index, c.size, p.hashes.map(b64));
    if (!root.equals(c.root)) fail('the receipt is not in the tree the checkpoint signs');
    return `receipt of ${p.receipt.effect_id} is leaf ${p.leaf_index} of ${c.origin} at size ${c.size}`;
  },
  consistency(key, file, oldCheckpoint) {
    const p = JSON.parse(load(file));
    if (p.proof !== 'interlock-consistency-proof/1') fail(`unknown proof format ${JSON.stringify(p.proof)}`);
    const old = openNote(load(oldCheckpoint), key);
    const now = openNote(p.checkpoint, key);
    if (p.old_size !== old.size || p.new_size !== now.size) fail("the proof is for other tree sizes than the checkpoints'");
    checkConsistency(old.size, old.root, now.size, now.root, p.hashes.map(b64));
    return `${now.origin} at size ${now.size} extends the checkpoint held (size ${old.size})`;
  },
};

const [keyFile, what, ...files] = process.argv.slice(2);
const arity = { receipt: [1, 2], bundle: [1, 1], checkpoint: [1, 1], inclusion: [1, 2], consistency: [2, 2] }[what];
if (!keyFile || !arity || files.length < arity[0] || files.length > arity[1]) {
  console.error('usage: node check_proof.mjs PUBLIC_KEY_FILE receipt|bundle|checkpoint|inclusion|consistency FILE [FILE]');
  process.exit(2);
}
try {
  console.log(`ok: ${checks[what](parseKey(load(keyFile)), ...files)}`);
} catch (e) {
  console.log('MISMATCH', e instanceof Mismatch ? e.message : `malformed: ${e}`);
  process.exit(1);
}
