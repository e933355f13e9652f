// tests/api/*.json, the friendly API's cases as data (tests/api/README.md), played through
// Interlock.open and effect(). Python plays the same files (hosts/python/tests/test_api_vectors.py).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Interlock, InterlockError } from '../src/index.js';
import { tempDir } from './helpers.js';

const VECTORS = new URL('../../../tests/api/', import.meta.url);
const FILES = readdirSync(VECTORS).filter((f) => f.endsWith('.json')).sort();

/** Vectors this runner does not play, each with why. Every other vector is played. */
const SKIP = /** @type {Record<string, string>} */ ({});

const KNOWN = new Set(['id', 'about', 'open', 'world', 'define', 'call', 'expect', 'restart']);
const EXPECT = new Set(['error', 'field', 'state', 'reason', 'open', 'sent', 'journal_unchanged', 'lease_granted', 'lease_not_granted']);
const FINAL = new Set(['COMMITTED', 'REFUSED', 'AMBIGUOUS', 'CONFIRMED']);

/** @param {object} o @param {Set<string> | string[]} known */
function onlyKnown(o, known) {
  const k = new Set(known);
  const unknown = Object.keys(o).filter((x) => !k.has(x));
  assert.deepEqual(unknown, [], `keys this runner does not know: ${unknown}`);
}

/** @param {any} v */
function value(v) {
  if (v && typeof v === 'object' && Object.keys(v).length === 1 && '$number' in v) {
    // JS numbers cannot hold 2^64+1 exactly; the nearest double is as far past 2^53-1.
    return v.$number === 'NaN' ? NaN : Number(v.$number);
  }
  return v;
}

test('there are vectors, and every skip is explained', () => {
  assert.ok(FILES.length >= 8);
  for (const [id, why] of Object.entries(SKIP)) assert.ok(FILES.includes(`${id}.json`) && why.trim(), id);
});

class World {
  /** @param {any} v @param {string} folder */
  constructor(v, folder) {
    this.v = v;
    this.folder = folder;
    this.sent = 0;
    this.premises = { ...(v.world?.premises ?? {}) };
  }

  journal() {
    const f = join(this.folder, 'journal.jsonl');
    return existsSync(f) ? readFileSync(f) : Buffer.alloc(0);
  }

  /** @param {string} name */
  leaseGranted(name) {
    return this.journal().toString().split('\n').filter(Boolean).map((l) => JSON.parse(l))
      .some((e) => e.stream === `lease:${name}` && e.state === 'GRANTED');
  }

  open() {
    const o = this.v.open ?? {};
    onlyKnown(o, ['strict', 'journal']);
    return Interlock.open(o.journal ?? this.folder, { strict: o.strict ?? false });
  }

  /** @param {Interlock} gate @param {any} d */
  define(gate, d) {
    onlyKnown(d, ['target', 'params', 'key', 'lease', 'premises', 'bounds', 'allowed', 'send', 'timeout_ms']);
    /** @type {any} */
    const def = {
      target: d.target,
      params: d.params,
      key: (/** @type {any} */ e) => d.key.replace(/\{(\w+)\}/g, (/** @type {string} */ _, /** @type {string} */ p) => e[p]),
    };
    if (d.lease) def.lease = d.lease;
    if (d.bounds) def.bounds = d.bounds;
    if (d.timeout_ms) def.timeoutMs = d.timeout_ms;
    if (d.premises) def.premises = async () => Object.fromEntries(d.premises.map((/** @type {string} */ n) => [n, this.premises[n]]));
    if (d.allowed) {
      def.allowed = async () => {
        if (d.allowed === 'throws') throw new Error("the check's service is down");
        return d.allowed === 'yes';
      };
    }
    return gate.effect(def, async () => {
      this.sent += 1;
      if ((d.send ?? 'ok') === 'unavailable') throw new Error('the target did not answer');
      return { ok: true };
    });
  }

  /** @param {Interlock} gate @param {any} effect */
  async call(gate, effect) {
    const args = this.v.call.map(value);
    const a = this.v.world?.approval;
    if (a) {
      const d = this.v.define;
      const e = Object.fromEntries(d.params.map((/** @type {string} */ p, /** @type {number} */ i) => [p, args[i]]));
      const key = d.key.replace(/\{(\w+)\}/g, (/** @type {string} */ _, /** @type {string} */ p) => e[p]);
      await gate.approve({ approval: a.approval, approver: a.approver, request: { key, effect: e }, premises_seen: a.premises_seen });
      // The call names the approval it runs under (it overrides the definition's lease).
      return effect.with({ approval: a.approval })(...args);
    }
    return effect(...args);
  }

  /** @param {any} expect @param {() => Promise<any>} run @param {Buffer} before */
  async check(expect, run, before) {
    onlyKnown(expect, EXPECT);
    const sent = this.sent;
    if ('error' in expect) {
      await assert.rejects(run(), (/** @type {any} */ e) => {
        assert.ok(e instanceof InterlockError, String(e));
        assert.equal(e.constructor.name, `${expect.error}Error`, String(e));
        if ('field' in expect) assert.equal(e.payload.field, expect.field, String(e));
        return true;
      });
    } else {
      const out = await run();
      if ('state' in expect) assert.equal(out.state, expect.state, JSON.stringify(out));
      if ('reason' in expect) assert.equal(out.reason, expect.reason, JSON.stringify(out));
      if ('open' in expect) assert.equal(!FINAL.has(out.state), expect.open, JSON.stringify(out));
    }
    if ('sent' in expect) assert.equal(this.sent - sent, expect.sent);
    if (expect.journal_unchanged) assert.deepEqual(this.journal(), before);
    if ('lease_granted' in expect) assert.ok(this.leaseGranted(expect.lease_granted));
    if ('lease_not_granted' in expect) assert.ok(!this.leaseGranted(expect.lease_not_granted));
  }
}

for (const file of FILES) {
  const v = JSON.parse(readFileSync(new URL(file, VECTORS), 'utf8'));
  test(`api vector ${v.id}`, { skip: SKIP[v.id] }, async () => {
    assert.equal(`${v.id}.json`, file);
    onlyKnown(v, KNOWN);
    const w = new World(v, join(tempDir(), '.interlock'));
    if (!v.define) {
      await w.check(v.expect, () => w.open(), w.journal());
      return;
    }
    const gate = await w.open();
    try {
      for (const name of v.world?.leases ?? []) await gate.lease(name, { ttlMs: 3_600_000 });
      const effect = w.define(gate, v.define);
      await w.check(v.expect, () => w.call(gate, effect), w.journal());
    } finally {
      await gate.close();
    }
    if (v.restart) {
      onlyKnown(v.restart, ['define', 'expect']);
      const again = await w.open();
      try {
        const d = v.restart.define ?? true;
        if (d !== false) w.define(again, d === true ? v.define : d);
        await w.check(v.restart.expect, async () => {
          const report = await again.recover();
          assert.equal(report.length, 1, JSON.stringify(report));
          assert.ok(report[0].outcome, String(report[0].error));
          return report[0].outcome;
        }, w.journal());
      } finally {
        await again.close();
      }
    }
  });
}
