// Measures the Worker in workerd and `interlock serve` beside the Node host and the CLI, in
// one run on this machine, and writes ../../results/edge.md: cold start to the first gated call, submit
// latency, and the bundle a Worker uploads.   node scripts/measure.js [--cli PATH]
import { spawn, execFileSync } from 'node:child_process';
import { writeFileSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { cpus } from 'node:os';
import { gzipSync } from 'node:zlib';
import { bundle } from './bundle.js';
import { startWorkerd, startServe, paymentsServer, api, refund, tempDir, cleanup, ROOT } from '../test/helpers.js';

const FAR = 4_102_444_800_000;
const N = Number(process.env.N ?? 200);
const COLD = Number(process.env.COLD ?? 5);
const cliArg = process.argv.indexOf('--cli');
const CLI = cliArg > 0 ? process.argv[cliArg + 1] : process.env.INTERLOCK_CLI;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p90 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)];
const ms = (x) => `${x.toFixed(1)} ms`;

const sizes = await bundle({ quiet: true });
const pay = await paymentsServer({ orders: Object.fromEntries(Array.from({ length: 3 * N + 50 }, (_, i) => [`o${i}`, 1_000_000])) });
let order = 0;
const proposal = () => ({ ...refund(100, { key: `k${order}`, order: `o${order++}` }) });

/**
 * One server of the HTTP API: cold start to the first gated call (fresh storage, spawn to
 * COMMITTED) and warm submits, the server performing the target (premises GET, apply POST
 * to the local payments service) and the caller performing it (submit + 2 answers).
 * @param {(o: { disk: string, env: Record<string, string> }) => Promise<any>} start
 */
async function measureServer(start) {
  const cold = [];
  const listening = [];
  for (let i = 0; i < COLD; i++) {
    const disk = tempDir();
    const t0 = performance.now();
    const w = await start({ disk, env: { INTERLOCK_TARGETS: pay.targets } });
    listening.push(performance.now() - t0);
    await api(w.url, 'cold', 'PUT', '/leases/case-4471', { expires_at_ms: FAR });
    const r = await api(w.url, 'cold', 'POST', '/effects', proposal());
    cold.push(performance.now() - t0);
    if (r.json.state !== 'COMMITTED') throw new Error(r.text);
    await w.stop();
    cleanup(disk);
  }
  const disk = tempDir();
  const w = await start({ disk, env: { INTERLOCK_TARGETS: pay.targets } });
  await api(w.url, 'warm', 'PUT', '/leases/case-4471', { expires_at_ms: FAR });
  for (let i = 0; i < 20; i++) await api(w.url, 'warm', 'POST', '/effects', proposal());
  const served = [];
  const stepped = [];
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    const r = await api(w.url, 'warm', 'POST', '/effects', proposal());
    served.push(performance.now() - t);
    if (r.json.state !== 'COMMITTED') throw new Error(r.text);
  }
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    let step = (await api(w.url, 'warm', 'POST', '/submit', { ...proposal(), target: { name: 'mail', dedupes: true } })).json;
    while (step.ask !== 'done') {
      const reply = step.ask === 'capture' ? { reply: 'captured', value: { eligible: true, refunded_by_others_cents: 0 } } : { reply: 'applied', value: { ok: true } };
      step = (await api(w.url, 'warm', 'POST', `/ops/${step.op}`, reply)).json;
    }
    stepped.push(performance.now() - t);
    if (step.outcome.state !== 'COMMITTED') throw new Error(JSON.stringify(step));
  }
  await w.stop();
  cleanup(disk);
  return { cold, listening, served, stepped };
}

const worker = await measureServer(startWorkerd);
const serve = CLI && existsSync(CLI) ? await measureServer((o) => {
  process.env.INTERLOCK_CLI = CLI;
  return startServe(o);
}) : undefined;
await pay.close();

// Node host, same run: a new process to its first gated call, and warm submits, in process
// (SQLite journal, the payments component in process: no HTTP at all).
const nodeScript = `
const t0 = performance.now();
const { Interlock, Payments, paymentsTarget } = await import('@interlock/gate');
const dir = process.argv[1];
const payments = await Payments.inMemory('2');
for (let i = 0; i < ${N + 1}; i++) payments.addOrder('o' + i, 1000000);
const il = await Interlock.open('sqlite://' + dir + '/j.db');
await il.gate.grantLease('case-4471', ${FAR});
const target = paymentsTarget(payments, il.clock);
const p = (i) => ({ agent: 'a', target: { name: 'payments', dedupes: false, lookup: true }, key: 'k' + i, effect: { order: 'o' + i, amount_cents: 100 }, authority: { lease: 'case-4471' }, premises: { eligible: true, refunded_by_others_cents: 0 } });
const first = await il.gate.submit(p(0), target);
const coldMs = performance.now() - t0 + Number(process.env.SPAWN_MS || 0);
const times = [];
for (let i = 1; i <= ${N}; i++) { const t = performance.now(); await il.gate.submit(p(i), target); times.push(performance.now() - t); }
console.log(JSON.stringify({ state: first.state, firstCallMs: performance.now() - t0, times }));
`;
const nodeCold = [];
let nodeWarm = [];
for (let i = 0; i < COLD; i++) {
  const dir = tempDir();
  const t0 = performance.now();
  const out = await new Promise((res, rej) => {
    const p = spawn(process.execPath, ['--input-type=module', '-e', nodeScript, dir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    let s = '';
    p.stdout.on('data', (d) => (s += d));
    p.on('exit', (c) => (c === 0 ? res(s) : rej(new Error(`node exited ${c}`))));
  });
  const r = JSON.parse(out);
  // Spawn to the first gated call: the process's own clock from its start, plus the spawn.
  nodeCold.push(performance.now() - t0 - r.times.reduce((a, b) => a + b, 0));
  nodeWarm = nodeWarm.concat(r.times);
  cleanup(dir);
}

// The CLI, when a binary is given: a new process to a durable lease grant (its one gated
// call that needs no target), on a file journal.
const cliCold = [];
if (CLI && existsSync(CLI)) {
  for (let i = 0; i < COLD; i++) {
    const dir = tempDir();
    const t0 = performance.now();
    execFileSync(CLI, ['--wasm', join(ROOT, '../../dist/interlock_gate.wasm'), 'lease', 'grant', dir, 'case-4471', '--for', '1h'], { stdio: 'ignore' });
    cliCold.push(performance.now() - t0);
    cleanup(dir);
  }
}
const workerdVersion = execFileSync(join(ROOT, 'node_modules/.bin/workerd'), ['--version'], { encoding: 'utf8' }).trim();
const s = sizes.interlock;
const build = CLI && CLI.includes('/debug/') ? 'debug build' : 'build';
const rows = [
  ['Worker (workerd): spawn to listening', ms(median(worker.listening)), `median of ${COLD}, fresh storage each`],
  ...(serve ? [[`\`interlock serve\` (${build} at hand): spawn to listening`, ms(median(serve.listening)), `median of ${COLD}: the wasi:http component loaded (compiled once, then from its cache file) and the socket bound`]] : []),
  ['Worker: spawn to the first gated call COMMITTED', ms(median(worker.cold)), `median of ${COLD}: spawn, PUT lease, POST /effects (the Durable Object starts, the gate is instantiated, the schema is created; the server does the premises GET and the refund POST to a local payments service)`],
  ...(serve ? [['`interlock serve`: spawn to the first gated call COMMITTED', ms(median(serve.cold)), `median of ${COLD}: the same requests; the journal's instance is made at its first request, a file journal in a new folder`]] : []),
  ['Node host: new process to the first gated call COMMITTED', ms(median(nodeCold)), `median of ${COLD}: node start, import, Interlock.open (SQLite), grant, submit with the payments component in process`],
  ...(cliCold.length ? [[`CLI (${build} at hand): new process to a durable lease grant`, ms(median(cliCold)), `median of ${COLD}; file journal. The CLI has no submit command; this is its first gate call from cold`]] : []),
  ['Worker: submit, the server performs the HTTP target', `${ms(median(worker.served))} (p90 ${ms(p90(worker.served))})`, `${N} POST /effects over HTTP to workerd, each: premises GET + refund POST to the payments service (Node, 127.0.0.1), DO SQLite commits`],
  ...(serve ? [['`interlock serve`: submit, the server performs the HTTP target', `${ms(median(serve.served))} (p90 ${ms(p90(serve.served))})`, `${N} POST /effects, the same two requests to the same payments service; file journal, fsync per durable append`]] : []),
  ['Worker: submit, the caller performs the target', `${ms(median(worker.stepped))} (p90 ${ms(p90(worker.stepped))})`, `${N} loops of 3 requests: POST /submit, POST /ops (captured), POST /ops (applied)`],
  ...(serve ? [['`interlock serve`: submit, the caller performs the target', `${ms(median(serve.stepped))} (p90 ${ms(p90(serve.stepped))})`, `${N} loops of the same 3 requests`]] : []),
  ['Node host: submit in process (SQLite journal, payments in process)', `${ms(median(nodeWarm))} (p90 ${ms(p90(nodeWarm))})`, `${nodeWarm.length} submits, no HTTP`],
  ['Bundle a Worker uploads (hosts/edge/dist/interlock.js + wasm modules)', `${(s.bytes / 1024).toFixed(0)} KiB, ${(s.gzipBytes / 1024).toFixed(0)} KiB gzipped`, `${s.files.length} modules: ${s.files.join(', ')}`],
  ...[['interlock_http.wasm', '`interlock serve`\'s component (dist/interlock_http.wasm, world http-gate)'], ['interlock_gate_api.wasm', 'the Worker\'s component (dist/interlock_gate_api.wasm, world gate-api: the gate and its HTTP API)'], ['interlock_gate.wasm', 'the gate component every host that does not serve HTTP runs (dist/interlock_gate.wasm)']].map(([file, what]) => {
    const bytes = readFileSync(join(ROOT, '../../dist', file));
    return [what, `${(bytes.length / 1024).toFixed(0)} KiB, ${(gzipSync(bytes).length / 1024).toFixed(0)} KiB gzipped`, 'the .wasm as built by scripts/build-wasm.sh (release, LTO)'];
  }),
  ['Agents SDK example bundle', `${(sizes.agent.bytes / 1024).toFixed(0)} KiB, ${(sizes.agent.gzipBytes / 1024).toFixed(0)} KiB gzipped`, 'the SDK itself is most of the difference'],
];
const md = `# The gate at the edge (issue 17)

Generated by \`node hosts/edge/scripts/measure.js${CLI ? ' --cli PATH' : ''}\` on ${new Date().toISOString().slice(0, 10)}; ${cpus().length} CPUs (shared with other work, so compare figures of this one run only), workerd ${workerdVersion}, Node ${process.version}.

| figure | value | how measured |
|---|---|---|
${rows.map((r) => `| ${r.join(' | ')} |`).join('\n')}

Where a server's time goes: every submit it performs is one HTTP request from the client to the server, the gate's calls and the journal's commits (a Durable Object's SQLite turn; serve's fsynced file appends), and two HTTP requests from the server to the target; the caller-performed loop is three round trips. Both servers run the same \`http-api\` of the same component, one instance per journal, whose requests interleave between gate calls (results/serve.md: requests/s under concurrent clients). The Node figure has no HTTP at all: it is the gate and its journal alone. workerd's local SQLite is the Durable Object storage of a single machine; on Cloudflare, the output gate waits for the write to be confirmed by replicas, which this run cannot show.
`;
writeFileSync(join(ROOT, '../../results/edge.md'), md);
console.log(md);
