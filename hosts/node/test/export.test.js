// The Node host's exporters (ARCHITECTURE.md, "Export") by a receiver's account: the local
// OTLP/HTTP receiver of the Python host's tests (hosts/python/tests/otlp_receiver.py, run
// with INTERLOCK_PYTHON), which decodes every request with the official OpenTelemetry proto
// package (opentelemetry-proto) and is driven over HTTP. Span names, attributes, events and
// the duration metric; interlock-export SIGKILLed after the receiver kept a batch and before
// it answered, after it answered, and at random, then run to the end: every closed effect's
// span and no other, a repeat only from the batch in doubt and byte for byte the same; a
// receiver that answers 500 or is down: the position does not move.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Interlock, FakeClock, Rejected, ExportFailedError } from '../src/index.js';
import { PKG, REPO, tempDir } from './helpers.js';

const T0 = 1_800_000_000_000;
const COMMITTED = 24;
const REFUSED = 3;
const EXPECTED = COMMITTED + REFUSED;
const RECEIVER = path.join(REPO, 'hosts/python/tests/otlp_receiver.py');
const EXPORT_CLI = path.join(PKG, 'src/export-cli.js');
const python = process.env.INTERLOCK_PYTHON ?? path.join(REPO, 'hosts/python/.venv/bin/python');
const skip = !fs.existsSync(python) ? 'the Python venv is missing (its receiver decodes with opentelemetry-proto): bash hosts/python/test.sh, or set INTERLOCK_PYTHON'
  : !fs.existsSync(path.join(PKG, 'node_modules/@opentelemetry/exporter-trace-otlp-proto')) ? 'the OpenTelemetry SDK is not installed (npm ci)' : false;

/** A journal of COMMITTED refunds (37 ms each), REFUSED voids, a lease granted and revoked. */
async function makeJournal() {
  const dir = path.join(tempDir('interlock-export-'), 'journal');
  const clock = new FakeClock(T0);
  const gate = await Interlock.open(dir, { clock, agent: 'refund-agent' });
  /** @type {Map<string, object>} */
  const refunds = new Map();
  const refund = gate.effect(
    { target: 'refund', params: ['order', 'amount'], key: (e) => `refund:${e.order}`, lookup: (_e, { effectId }) => refunds.get(effectId) ?? null },
    async (order, amount, key) => {
      clock.advance(37);
      const r = { refund_id: `re_${refunds.size}`, order, amount };
      refunds.set(/** @type {string} */ (key), r);
      return r;
    },
  );
  const voidOrder = gate.effect({ target: 'void', params: ['order'], key: (e) => `void:${e.order}` }, async () => {
    throw new Rejected('the order is settled');
  });
  const warn = console.warn;
  console.warn = () => {}; // the standing lease's announcement
  try {
    for (let i = 0; i < COMMITTED; i++) assert.equal((await refund(`o${i}`, 100 + i)).state, 'COMMITTED');
    for (let i = 0; i < REFUSED; i++) assert.equal((await voidOrder(`v${i}`)).state, 'REFUSED');
  } finally {
    console.warn = warn;
  }
  await gate.lease('case-1', { untilMs: T0 + 3_600_000 });
  await gate.revokeLease('case-1');
  gate.close();
  return dir;
}

/** The journal's entries. */
const entries = (/** @type {string} */ dir) => fs.readFileSync(path.join(dir, 'journal.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));

/** The effect ids the journal holds. */
const effectIds = (/** @type {string} */ dir) => new Set(entries(dir).filter((e) => e.stream.startsWith('effect:')).map((e) => e.stream.slice('effect:'.length)));

/** The states of an export position's stream, in order. */
const marks = (/** @type {string} */ dir, /** @type {string} */ name) => entries(dir).filter((e) => e.stream === `export:${name}`).map((e) => e.state);

/** The receiver, its own process; stopped by closing its stdin. */
async function startReceiver() {
  const child = spawn(python, [RECEIVER], { stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = await once(createInterface({ input: /** @type {any} */ (child.stdout) }), 'line');
  const { url } = JSON.parse(line);
  return {
    /** @type {string} */ url,
    /** @param {object} settings `status`, `kill_pid`, `kill_at` */
    control: async (settings) => assert.equal((await fetch(`${url}/control`, { method: 'POST', body: JSON.stringify(settings) })).status, 200),
    /** @returns {Promise<any>} what it holds */
    state: async () => (await fetch(`${url}/state`)).json(),
    close: async () => {
      child.stdin.end();
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

test('OTLP: a span per effect, its events, attributes and the duration metric, through the SDK', { skip }, async () => {
  const dir = await makeJournal();
  const r = await startReceiver();
  try {
    const gate = await Interlock.open(dir);
    const report = await gate.export(`otlp=${r.url}`, { maxRecords: 10, content: true });
    gate.close();
    assert.equal(report.records, EXPECTED + 3); // one metric record per batch of spans
    const s = await r.state();
    assert.equal(s.spans.length, EXPECTED);
    assert.equal(s.deliveries.length, EXPECTED, 'no span sent twice');
    assert.equal(s.resource['service.name'], 'interlock');
    assert.deepEqual(new Set(s.spans.map((/** @type {any} */ x) => x.name)), new Set(['execute_tool refund', 'execute_tool void']));
    const span = s.spans.find((/** @type {any} */ x) => x.name === 'execute_tool refund');
    const a = span.attributes;
    assert.equal(a['gen_ai.operation.name'], 'execute_tool');
    assert.equal(a['gen_ai.tool.name'], 'refund');
    assert.equal(span.trace_id, a['gen_ai.tool.call.id'], 'the trace id is the effect id');
    assert.equal(a['interlock.state'], 'COMMITTED');
    assert.ok(JSON.parse(a['gen_ai.tool.call.arguments']).amount >= 100);
    assert.ok('refund_id' in JSON.parse(a['gen_ai.tool.call.result']));
    assert.equal(span.kind, 1); // SPAN_KIND_INTERNAL
    assert.equal(BigInt(span.end) - BigInt(span.start), 37_000_000n);
    assert.deepEqual(span.events.map((/** @type {any} */ e) => e.name), ['PROPOSED', 'AUTHORIZED', 'DISPATCHED', 'COMMITTED']);
    const v = s.spans.find((/** @type {any} */ x) => x.name === 'execute_tool void');
    assert.deepEqual([v.attributes['interlock.state'], v.attributes['interlock.reason'], v.attributes['error.type']], ['REFUSED', 'target_rejected', 'target_rejected']);
    assert.equal(v.status.code, 2); // STATUS_CODE_ERROR
    assert.deepEqual(s.histogram, { COMMITTED, REFUSED });
    // Caught up: a second run sends nothing. Content is opt-in: a position without it.
    const again = await Interlock.open(dir);
    assert.equal((await again.export(`otlp=${r.url}`)).records, 0);
    again.close();
    assert.equal((await r.state()).deliveries.length, EXPECTED);
  } finally {
    await r.close();
  }
});

test('OTLP: content (arguments, result) is opt-in', { skip }, async () => {
  const dir = await makeJournal();
  const r = await startReceiver();
  try {
    const gate = await Interlock.open(dir);
    await gate.export(`otlp=${r.url}`);
    gate.close();
    for (const s of (await r.state()).spans) {
      assert.ok(!('gen_ai.tool.call.arguments' in s.attributes) && !('gen_ai.tool.call.result' in s.attributes), s.name);
    }
  } finally {
    await r.close();
  }
});

/** interlock-export as a process: its exit code, signal and output, once it ends. */
function runExporter(/** @type {string} */ dir, /** @type {string} */ url) {
  const p = spawn(process.execPath, [EXPORT_CLI, dir, '--to', `otlp=${url}`, '--batch', '4'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { err += d; });
  const done = once(p, 'exit').then(([code, signal]) => ({ code, signal, out, err }));
  return { p, done };
}

const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

for (const kill of ['received-before-ack', 'after-ack', 'timer']) {
  test(`OTLP: an exporter SIGKILLed (${kill}) and restarted resends only the batch in doubt and skips nothing`, { skip, timeout: 600_000 }, async () => {
    const dir = await makeJournal();
    const r = await startReceiver();
    try {
      let kills = 0;
      let finished = false;
      for (let attempt = 0; attempt < 40; attempt++) {
        const { p, done } = runExporter(dir, r.url);
        let exited = false;
        done.then(() => { exited = true; });
        if (kill === 'received-before-ack') {
          // The receiver keeps the batch of its next request and SIGKILLs the exporter
          // before answering: the batch arrived, SENT was never written.
          await r.control({ kill_pid: p.pid, kill_at: (await r.state()).trace_requests + 2 });
        } else if (kill === 'after-ack') {
          await r.control({ kill_pid: null, kill_at: null });
          const n = (await r.state()).trace_requests + 2;
          const deadline = Date.now() + 30_000;
          while (!exited && Date.now() < deadline && (await r.state()).trace_requests < n) await sleep(1);
          if (!exited) p.kill('SIGKILL');
        } else {
          await sleep(250 + 100 * attempt);
          if (!exited) p.kill('SIGKILL');
        }
        const run = await done;
        if (run.code === 0) {
          finished = true;
          break;
        }
        assert.equal(run.signal, 'SIGKILL', run.err);
        kills += 1;
      }
      assert.ok(kills >= 1, 'the exporter was never killed: the test tested nothing');
      if (!finished) {
        // Every try was killed (a slow machine): one more, left to finish.
        await r.control({ kill_pid: null, kill_at: null });
        const run = await runExporter(dir, r.url).done;
        assert.equal(run.code, 0, run.err);
      }
      const s = await r.state();
      // Nothing skipped, nothing else: every closed effect's span, by its id.
      assert.equal(s.spans.length, EXPECTED);
      assert.deepEqual(new Set(s.spans.map((/** @type {any} */ x) => x.trace_id)), effectIds(dir));
      // A span that arrived twice arrived the same bytes, and only from a batch in doubt.
      /** @type {Map<string, string>} */
      const first = new Map();
      for (const [t, id, sha] of s.deliveries) {
        const k = `${t}/${id}`;
        if (!first.has(k)) first.set(k, sha);
        assert.equal(sha, first.get(k), `span ${k} arrived twice with other content`);
      }
      const resent = s.deliveries.length - EXPECTED;
      assert.ok(resent <= 4 * kills, `${resent} spans resent over ${kills} kills`);
      if (kill === 'received-before-ack') assert.ok(resent >= 1, 'the batch the receiver kept was sent again');
      assert.deepEqual(s.histogram, { COMMITTED, REFUSED });
      assert.equal(marks(dir, 'otlp').at(-1), 'SENT');
    } finally {
      await r.close();
    }
  });
}

test('OTLP: a receiver that answers 500, or is down, does not move the position', { skip }, async () => {
  const dir = await makeJournal();
  const r = await startReceiver();
  try {
    const gate = await Interlock.open(dir);
    await r.control({ status: 500 });
    await assert.rejects(gate.export(`otlp=${r.url}`, { timeoutMs: 2000 }), ExportFailedError);
    assert.deepEqual(marks(dir, 'otlp'), ['SENDING'], 'the batch is in doubt, never SENT');
    assert.equal((await r.state()).spans.length, 0);
    await r.control({ status: null });
    const report = await gate.export(`otlp=${r.url}`);
    assert.ok(report.resent > 0, 'the refused batch came again first');
    assert.equal((await r.state()).spans.length, EXPECTED);

    const down = await startReceiver();
    await down.close();
    await assert.rejects(gate.export(`otlp=${down.url}`, { name: 'down', timeoutMs: 1000 }), ExportFailedError);
    assert.deepEqual(marks(dir, 'down'), ['SENDING']);
    gate.close();
  } finally {
    await r.close();
  }
});
