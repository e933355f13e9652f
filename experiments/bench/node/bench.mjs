// Node (and browser) figures of issue 8, against wasmtime in the same invocation.
//
//   node experiments/bench/node/bench.mjs [--quick]
//
// Imports the Node host from hosts/node (built: `npm ci && npm run build` there). Writes
// results/bench-node.json, which `interlock-bench` folds into results/bench.md. The
// wasmtime baseline comes from running `interlock-bench --only overhead` (the release
// binary under $CARGO_TARGET_DIR) right after the Node rounds, so both are one run.
import { performance } from 'node:perf_hooks';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LEASE, LEASE_UNTIL_MS, T0_MS, median, nullTarget, proposal } from './common.mjs';

const quick = process.argv.includes('--quick');
const root = fileURLToPath(new URL('../../../', import.meta.url));
const nodeHost = join(root, 'hosts/node');
const out = quick ? join(os.tmpdir(), 'bench-node-quick.json') : join(root, 'results', 'bench-node.json');

let host;
try {
  host = await import(join(nodeHost, 'src/index.js'));
} catch (e) {
  console.error(`skip: the Node host is not there or not built (${e.message})`);
  process.exit(0);
}
const { Gate, gateComponent, MemoryJournal, FileJournal, FakeClock } = host;

const figures = [];
const fig = (id, what, value, unit, detail = '', goal, met) => {
  figures.push({ id, what, value, unit, detail, goal, met });
  console.error(`  ${id.padEnd(34)} ${value.toFixed(3)} ${unit}`);
};

const component = await gateComponent();
const newGate = (storage) => Gate.instantiate(component, { storage, clock: new FakeClock(T0_MS) });

// Submit over an in-memory journal.
const rounds = quick ? 2 : 15;
const perRound = quick ? 20 : 400;
const gate = await newGate(new MemoryJournal());
await gate.grantLease(LEASE, LEASE_UNTIL_MS);
let n = 0;
const perSubmit = [];
for (let r = 0; r <= rounds; r++) {
  const t = performance.now();
  for (let i = 0; i < perRound; i++) {
    const o = await gate.submit(proposal(n++), nullTarget);
    if (o.state !== 'COMMITTED') throw new Error(`unexpected outcome ${JSON.stringify(o)}`);
  }
  if (r > 0) perSubmit.push(((performance.now() - t) * 1000) / perRound);
}
const nodeUs = median(perSubmit);
const spread = `${Math.min(...perSubmit).toFixed(0)}-${Math.max(...perSubmit).toFixed(0)} µs`;
fig('node.submit_memory', 'Node (jco): submit with an in-memory journal', nodeUs, 'µs', `median of ${rounds} rounds x ${perRound} (rounds ${spread})`,
  '<= 128 µs (8c80d3d, before the thin hosts)', nodeUs <= 128);

// The wasmtime figure, measured now by the Rust benchmark.
const target = process.env.CARGO_TARGET_DIR ?? join(root, 'target');
const bin = join(target, 'release', 'interlock-bench');
if (fs.existsSync(bin)) {
  const tmp = fs.mkdtempSync(join(os.tmpdir(), 'bench-node-'));
  execFileSync(bin, ['--only', 'overhead', '--out', tmp, ...(quick ? ['--quick'] : [])], { stdio: 'inherit' });
  const rust = JSON.parse(fs.readFileSync(join(tmp, 'bench.json'), 'utf8'));
  const o = rust.figures.find((f) => f.id === 'overhead.component_vs_native');
  const wasmtimeUs = Number(/component ([\d.]+) µs/.exec(o.detail)[1]);
  fig('node.vs_wasmtime', 'Node submit / wasmtime submit (same component, in-memory journals)', nodeUs / wasmtimeUs, 'x',
    `Node ${nodeUs.toFixed(1)} µs, wasmtime ${wasmtimeUs.toFixed(1)} µs`, '<= 1.5x', nodeUs / wasmtimeUs <= 1.5);
  fs.rmSync(tmp, { recursive: true, force: true });
} else {
  console.error(`no ${bin}: build it with cargo build --release -p interlock-bench for the ratio`);
}

// A new instance (the compiled core modules are cached per process).
const inst = [];
for (let i = 0; i < (quick ? 5 : 200); i++) {
  const t = performance.now();
  await newGate(new MemoryJournal());
  inst.push(performance.now() - t);
}
fig('node.instantiate', 'Node: instantiate the gate (compiled modules cached)', median(inst), 'ms');

// Submit on the Node file journal against one raw write + fdatasync of the same bytes.
const dir = fs.mkdtempSync(join(os.homedir(), '.cache', 'bench-node-'));
try {
  const fj = FileJournal.open(join(dir, 'journal'));
  // The storage's fdatasyncs, counted where the gate asks for them.
  let fsyncs = 0;
  const sync = fj.fileSync.bind(fj);
  fj.fileSync = (name) => {
    fsyncs += 1;
    return sync(name);
  };
  const fg = await newGate(fj);
  await fg.grantLease(LEASE, LEASE_UNTIL_MS);
  const raw = fs.openSync(join(dir, 'raw.bin'), 'a');
  const size = () => fs.statSync(join(dir, 'journal', 'journal.jsonl')).size;
  const [g, w] = [[], []];
  const count = quick ? 5 : 300;
  const fs0 = fsyncs;
  for (let i = 0; i < count; i++) {
    const s0 = size();
    let t = performance.now();
    await fg.submit(proposal(1e9 + i), nullTarget);
    g.push(performance.now() - t);
    const buf = Buffer.alloc(size() - s0, 'x');
    t = performance.now();
    fs.writeSync(raw, buf);
    fs.fdatasyncSync(raw);
    w.push(performance.now() - t);
  }
  fs.closeSync(raw);
  const perEffect = (fsyncs - fs0) / count;
  fig('node.fsyncs_per_effect', 'Node: fdatasync per submitted effect (the storage\'s file-sync calls)', perEffect, '',
    `${fsyncs - fs0} for ${count}`, '= 1', perEffect === 1);
  const ratio = median(g) / median(w);
  fig('node.submit_vs_raw_fsync', 'Node: submit on the file journal / one raw write+fdatasync of the same bytes', ratio, 'x',
    `median submit ${(median(g) * 1000).toFixed(0)} µs, raw ${(median(w) * 1000).toFixed(0)} µs, ${count} interleaved`, '<= 1.5x', ratio <= 1.5);
  fj.close();
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}

// A browser page's load to ready, when Chromium and playwright-core are there.
try {
  const { browserLoad } = await import('./browser.mjs');
  const ms = await browserLoad({ nodeHost, runs: quick ? 1 : 5 });
  if (ms !== null) fig('browser.load_to_ready', 'Chromium: page load to a ready gate (in-memory journal)', ms, 'ms', 'median, fresh profile each run');
} catch (e) {
  console.error(`browser figure skipped: ${e.message}`);
}

fs.mkdirSync(join(root, 'results'), { recursive: true });
fs.writeFileSync(out, JSON.stringify({ command: `node experiments/bench/node/bench.mjs${quick ? ' --quick' : ''}`, figures }, null, 2) + '\n');
console.error(`wrote ${out}`);
