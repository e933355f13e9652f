#!/usr/bin/env node
// Check an Interlock journal, and optionally a signed receipt, from outside the component:
// RFC 8785 (JCS) from the npm package `canonicalize`, SHA-256 and HMAC from node:crypto.
// No Interlock code is involved.
//
// usage: node check_journal.mjs JOURNAL.jsonl [RECEIPT.json KEY_HEX]
//
// Every line must be the JCS text of its entry, its `hash` the SHA-256 (hex) of the JCS text
// of the entry without `hash`, its `seq` its place in its stream and its `prev` the hash of
// the entry before it (64 zeros first). A receipt's `signature.value` must be the hex
// HMAC-SHA256, under the key, of the JCS text of the receipt without `signature`, and its
// `head` must be an entry of its stream. Prints a summary; exits 1 on any mismatch.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';

const GENESIS = '0'.repeat(64);

// `canonicalize` as installed beside this script, else the copy hosts/node keeps as a
// devDependency (this folder has no package.json of its own).
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

const sha256 = (text) => createHash('sha256').update(text, 'utf8').digest('hex');
const without = (obj, field) => Object.fromEntries(Object.entries(obj).filter(([k]) => k !== field));

function checkJournal(path, problems) {
  const streams = new Map(); // name -> entries, in order
  const lines = readFileSync(path, 'utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  lines.forEach((line, i) => {
    let entry, text, body;
    try {
      entry = JSON.parse(line);
      if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) throw new Error('not an object');
      text = jcs(entry);
      body = jcs(without(entry, 'hash'));
    } catch (e) {
      problems.push(`line ${i + 1}: not an entry (${e.message})`);
      return;
    }
    const { stream, seq, prev, hash } = entry;
    if (!streams.has(stream)) streams.set(stream, []);
    const chain = streams.get(stream);
    const where = `line ${i + 1} (${stream} seq ${seq})`;
    if (text !== line) problems.push(`${where}: the line is not the JCS text of its entry`);
    if (sha256(body) !== hash) problems.push(`${where}: hash does not match the content`);
    if (seq !== chain.length) problems.push(`${where}: expected seq ${chain.length}`);
    if (prev !== (chain.length ? chain.at(-1).hash : GENESIS)) {
      problems.push(`${where}: prev is not the hash of the entry before it`);
    }
    chain.push(entry);
  });
  return streams;
}

function checkReceipt(path, key, streams, problems) {
  const receipt = JSON.parse(readFileSync(path, 'utf8'));
  const sig = receipt.signature ?? {};
  const want = createHmac('sha256', key).update(jcs(without(receipt, 'signature')), 'utf8').digest();
  const given = Buffer.from(String(sig.value), 'hex');
  if (sig.alg !== 'HMAC-SHA256' || given.length !== want.length || !timingSafeEqual(given, want)) {
    problems.push('receipt: the signature does not hold');
  }
  const chain = streams.get(receipt.stream) ?? [];
  const { length, hash } = receipt.head ?? {};
  if (!Number.isInteger(length) || length < 1 || length > chain.length) {
    problems.push(`receipt: head length ${length}, the stream holds ${chain.length} entries`);
  } else if (chain[length - 1].hash !== hash) {
    problems.push("receipt: head hash is not the stream's entry at that length");
  }
  for (const e of receipt.entries ?? []) {
    if (chain[e.seq]?.hash !== e.hash) problems.push(`receipt: entry seq ${e.seq} is not in the journal`);
  }
  return receipt;
}

const args = process.argv.slice(2);
if (args.length !== 1 && args.length !== 3) {
  console.error('usage: node check_journal.mjs JOURNAL.jsonl [RECEIPT.json KEY_HEX]');
  process.exit(2);
}
const problems = [];
const streams = checkJournal(args[0], problems);
const entries = [...streams.values()].reduce((n, c) => n + c.length, 0);
console.log(`${args[0]}: ${entries} entries in ${streams.size} streams, hashes recomputed (RFC 8785)`);
if (args.length === 3) {
  const r = checkReceipt(args[1], Buffer.from(args[2], 'hex'), streams, problems);
  console.log(`${args[1]}: receipt of ${r.stream}, head ${r.head?.length} entries, HMAC-SHA256 recomputed (RFC 8785)`);
}
for (const p of problems) console.log('MISMATCH', p);
console.log(problems.length ? `${problems.length} mismatch(es)` : 'ok');
process.exit(problems.length ? 1 : 0);
