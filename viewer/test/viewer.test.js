// The viewer in headless Chromium (Debian's /usr/bin/chromium driven by hosts/node's
// playwright-core; never a downloaded browser). Through the page's own controls it plays
// every fault at every tier it has a vector for, and checks what the page shows:
//   - the Interlock column: the amount refunded and each task's final state, reason and
//     executed flag against the vector's `expect`; the conformance runner's failures (none)
//     and the journal's sha256 against journal-pins.json;
//   - the baseline column against results/fault-table.json (amount and the exact trace) for
//     every cell that has a vector, under each of the three baselines;
//   - that the intent is on screen before the refund goes out (the pause sits at the flush);
//   - the tamper flow: an edited amount makes `verify` point at the stream, seq and kind;
// and saves a screenshot of a played fault with its receipt to results/viewer.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { serve, ROOT } from '../serve.js';
import { FAULTS, VECTORS_NOT_SHOWN, allVectorIds, vectorId } from '../src/catalog.js';
import { launch } from './browser.js';

const VECTORS = join(ROOT, 'tests/conformance');
const SHOT = join(ROOT, 'results/viewer.png');

const vector = (id) => JSON.parse(readFileSync(join(VECTORS, `${id}.json`), 'utf8'));
const table = JSON.parse(readFileSync(join(ROOT, 'results/fault-table.json'), 'utf8'));
/** vector id -> approach -> cell (baselines only). */
const cells = new Map();
for (const c of table.cells) {
  if (c.approach === 'interlock' || !c.vector_id) continue;
  if (!cells.has(c.vector_id)) cells.set(c.vector_id, {});
  cells.get(c.vector_id)[c.approach] = c;
}

let server;
let chrome;
let page;
let pageErrors = [];

before(async () => {
  server = await serve({ port: 0 });
  chrome = await launch();
  ({ page, pageErrors } = chrome);
  await page.goto(`http://127.0.0.1:${server.address().port}/viewer/`);
  await page.waitForFunction(() => window.viewer?.ready === true, null, { timeout: 30_000 }).catch((e) => {
    throw new Error(`the viewer did not load: ${pageErrors.join('; ') || e.message}`);
  });
});

after(async () => {
  await chrome?.close();
  server?.close();
});

/** Where a vector id sits in the catalog. */
function locate(id) {
  for (const f of FAULTS) {
    for (const v of f.variants) {
      for (const t of v.tiers) if (vectorId(v, t) === id) return { fault: f, variant: v, tier: t };
    }
  }
  throw new Error(`${id} is not in the catalog`);
}

/** Picks a vector and a baseline with the page's controls, as a person would. */
async function pick(id, baseline, pace = '0') {
  const { fault, variant, tier } = locate(id);
  await page.click(`.chip[data-fault="${fault.id}"]`);
  if (fault.variants.length > 1) await page.click(`#variants button[data-variant="${variant.prefix}"]`);
  await page.click(`#tiers button[data-tier="${tier}"]`);
  await page.selectOption('#baseline', baseline);
  await page.selectOption('#pace', pace);
  assert.equal(await page.textContent('#vector-id'), id);
}

async function playToEnd(timeout = 20_000) {
  await page.click('#play');
  await page.waitForFunction(() => ['done', 'error'].includes(document.querySelector('#status').dataset.state), null, { timeout });
  const status = await page.$eval('#status', (s) => ({ state: s.dataset.state, text: s.textContent }));
  assert.equal(status.state, 'done', status.text);
}

/** What the page shows after a play. */
function shown() {
  return page.evaluate(() => ({
    refundedCents: Number(document.querySelector('#interlock-refunded').dataset.cents),
    tasks: Object.fromEntries([...document.querySelectorAll('#interlock-verdict .task')].map((t) => [t.dataset.task,
      { state: t.dataset.state, reason: t.dataset.reason || undefined, executed: t.dataset.executed }])),
    failures: Number(document.querySelector('#conformance').dataset.failures),
    failureText: [...document.querySelectorAll('#conformance .failure')].map((p) => p.textContent),
    pin: document.querySelector('#conformance').dataset.pin,
    baselineCents: document.querySelector('#baseline-refunded').dataset.cents,
    baselineTrace: [...document.querySelectorAll('#baseline-trace li.bt')].map((li) => li.dataset.raw),
    journalLines: document.querySelectorAll('#journal .jl').length,
    receipts: [...document.querySelectorAll('.receipt')].map((r) => r.dataset.final),
  }));
}

test('the catalog covers every vector, or says why not', () => {
  const ids = readdirSync(VECTORS).filter((f) => f.endsWith('.json') && f !== 'journal-pins.json').map((f) => f.replace(/\.json$/, ''));
  const playable = new Set(allVectorIds());
  const missing = ids.filter((id) => !playable.has(id) && !Object.keys(VECTORS_NOT_SHOWN).some((p) => id === p || id.startsWith(`${p}-`)));
  assert.deepEqual(missing, [], `vectors the viewer neither plays nor explains: ${missing.join(', ')}`);
  const absent = [...playable].filter((id) => !ids.includes(id));
  assert.deepEqual(absent, [], `the catalog names vectors that do not exist: ${absent.join(', ')}`);
  for (const f of ['F1', 'F2', 'F3', 'F4', 'F5', 'F6', 'F7', 'F8', 'F9', 'F10', 'F11', 'F12']) {
    assert.ok(FAULTS.some((x) => x.id === f), `${f} is missing from the viewer`);
  }
});

const pins = JSON.parse(readFileSync(join(VECTORS, 'journal-pins.json'), 'utf8'));
let baselineCellsChecked = 0;

for (const id of allVectorIds()) {
  const v = vector(id);
  const byApproach = cells.get(id) ?? {};
  const approaches = Object.keys(byApproach).length ? Object.keys(byApproach) : ['plain-retry'];
  test(`viewer plays ${id} (${v.fault}, tier ${v.tier})`, async () => {
    for (const approach of approaches) {
      await pick(id, approach);
      await playToEnd();
      const s = await shown();
      const where = `${id} with ${approach}`;
      assert.equal(s.failures, 0, `${where}: the runner reported ${s.failureText.join('; ')}`);
      assert.equal(s.pin, 'match', `${where}: the journal's sha256 differs from journal-pins.json`);
      assert.ok(pins[id], `${id} has no pin`);
      assert.equal(s.refundedCents, v.expect.refunded_cents, `${where}: refunded shown`);
      for (const [name, want] of Object.entries(v.expect.tasks ?? {})) {
        const got = s.tasks[name];
        assert.ok(got, `${where}: task ${name} is not shown`);
        for (const k of ['state', 'reason', 'executed']) {
          if (k in want) assert.equal(got[k], want[k], `${where}: task ${name} ${k}`);
        }
      }
      assert.ok(s.journalLines > 0 && s.receipts.length > 0, `${where}: no journal lines or receipt shown`);
      const cell = byApproach[approach];
      if (cell) {
        assert.equal(Number(s.baselineCents), cell.refunded_cents, `${where}: the baseline column's amount differs from results/fault-table.json`);
        assert.deepEqual(s.baselineTrace, cell.trace, `${where}: the baseline column's trace differs from results/fault-table.json`);
        baselineCellsChecked += 1;
      }
    }
  });
}

test('every baseline cell of the fault table with a vector was checked', () => {
  const expected = [...cells.values()].reduce((n, c) => n + Object.keys(c).length, 0);
  assert.ok(expected >= 87, `fault-table.json has only ${expected} baseline cells`);
  assert.equal(baselineCellsChecked, expected);
  const f1to10 = new Set([...cells.keys()].map((id) => vector(id).fault));
  assert.deepEqual([...f1to10].sort(), ['F1', 'F10', 'F2', 'F3', 'F4', 'F5', 'F6', 'F7', 'F8', 'F9']);
});

test('at a readable pace the intent is on screen before the refund goes out', async () => {
  await pick('F2-t2', 'plain-retry', '0.35');
  await page.click('#play');
  await page.waitForSelector('#journal .jl[data-state="DISPATCHED"]', { timeout: 20_000 });
  // The runner is paused in the journal's flush, before the gate's apply step: nothing sent.
  assert.equal(await page.$eval('#interlock-refunded', (e) => e.dataset.cents), '0');
  await page.waitForSelector('#timeline .ev.money', { timeout: 20_000 });
  assert.equal(await page.$eval('#interlock-refunded', (e) => e.dataset.cents), '2000');
  await page.click('#play'); // stop
  await page.waitForFunction(() => !document.querySelector('#play').classList.contains('playing'));
});

test('tamper: an edited amount makes verify point at the broken link', async () => {
  await pick('F2-t1', 'plain-retry');
  await playToEnd();
  const text = await page.inputValue('#tamper-text');
  const proposed = text.split('\n').find((l) => l.includes('"state":"PROPOSED"'));
  const { stream, seq } = JSON.parse(proposed);
  assert.ok(proposed.includes('"effect":{"amount_cents":2000,'));
  // A person edits $20 into $2,000 in the page and presses verify.
  await page.fill('#tamper-text', text.replace('"effect":{"amount_cents":2000,', '"effect":{"amount_cents":200000,'));
  await page.click('#verify');
  const problems = JSON.parse(await page.$eval('#verify-result', (e) => e.dataset.problems));
  assert.deepEqual(problems.map((p) => [p.stream, p.seq, p.kind]), [[stream, seq, 'hash-mismatch']]);
  const shownProblem = await page.$eval('#verify-result .problem', (e) => [e.dataset.stream, Number(e.dataset.seq), e.dataset.kind, e.textContent]);
  assert.deepEqual(shownProblem.slice(0, 3), [stream, seq, 'hash-mismatch']);
  assert.match(shownProblem[3], /hash-mismatch at effect:[0-9a-f]+, seq 0/);
  assert.equal(await page.$$eval('#journal .jl.broken', (l) => l.map((x) => [x.dataset.stream, Number(x.dataset.seq)]).join()), [stream, seq].join());
  // Put it back: clean again.
  await page.click('#tamper-reset');
  assert.equal(await page.$eval('#verify-result', (e) => e.dataset.problems), '[]');
  // A later line whose prev no longer matches: editing the hash of entry seq 1 breaks seq 1.
  const lines = text.split('\n');
  const i = lines.findIndex((l) => l.includes('"state":"AUTHORIZED"'));
  lines[i] = lines[i].replace(/"hash":"([0-9a-f])/, (_, c) => `"hash":"${c === '0' ? '1' : '0'}`);
  await page.fill('#tamper-text', lines.join('\n'));
  await page.click('#verify');
  const p2 = JSON.parse(await page.$eval('#verify-result', (e) => e.dataset.problems));
  assert.ok(p2.length >= 1 && p2.every((p) => p.stream === stream), JSON.stringify(p2));
  assert.ok(p2.some((p) => p.seq === 1), JSON.stringify(p2));
  // The page's own demo button does the $20 -> $2,000 edit.
  await page.click('#tamper-reset');
  await page.click('#tamper-demo');
  const p3 = JSON.parse(await page.$eval('#verify-result', (e) => e.dataset.problems));
  assert.deepEqual(p3.map((p) => [p.stream, p.seq, p.kind]), [[stream, seq, 'hash-mismatch']]);
});

test('screenshot: a played fault with its receipt (results/viewer.png)', async () => {
  await pick('F8-t1', 'request-ids');
  await playToEnd();
  const s = await shown();
  assert.deepEqual(s.receipts, ['REFUSED']);
  assert.equal(Number(s.baselineCents), 4000);
  await page.click('#tamper-demo');
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: SHOT, fullPage: true });
  assert.ok(existsSync(SHOT));
  console.log(`screenshot: ${SHOT}`);
});

test('no errors in the page', () => {
  assert.deepEqual(pageErrors, []);
});
