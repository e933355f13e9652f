// Requests per second at 1, 8 and 64 concurrent clients on one journal, for `interlock serve`
// beside the Worker (workerd), and writes ../../results/serve.md and bench-serve.json (the
// figures results/bench.md folds in). Two kinds of work:
//   caller: a submit whose target the caller performs (POST /submit, POST /ops captured,
//           POST /ops applied: three requests an effect);
//   served: POST /effects, the server performing the target: a premises GET and a refund
//           POST to a local target service that answers the refund after SLOW_MS (50).
// Each client runs one effect at a time, back to back, for DURATION_MS; every effect must end
// COMMITTED, and the payments service must have applied each served one once.
//   node scripts/throughput.js [--quick] --cli PATH [--before PATH] [--serve 'LABEL::PATH::VAR=VALUE ...']...
// `--before`: another interlock binary (e.g. main's) measured the same way, beside; each
// `--serve`: one more, with its label and the environment it is started with.
import { execFileSync } from 'node:child_process';
import { writeFileSync, readFileSync, openSync, writeSync, fdatasyncSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { cpus } from 'node:os';
import { bundle } from './bundle.js';
import { createServer } from 'node:http';
import { startWorkerd, startServe, api, refund, tempDir, cleanup, ROOT } from '../test/helpers.js';

const FAR = 4_102_444_800_000;
// --quick (CI): one short run at 1 and 8 clients, which checks the run works; it writes nothing.
const QUICK = process.argv.includes('--quick');
const DURATION_MS = Number(process.env.DURATION_MS ?? (QUICK ? 300 : 4000));
const SLOW_MS = Number(process.env.SLOW_MS ?? 50);
const CLIENTS = (process.env.CLIENTS ?? (QUICK ? '1,8' : '1,8,64')).split(',').map(Number);
const RUNS = Number(process.env.RUNS ?? (QUICK ? 1 : 3));
const arg = (name) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const CLI = arg('--cli') ?? process.env.INTERLOCK_CLI;
const BEFORE = arg('--before');
const MORE = process.argv.flatMap((a, i) => (process.argv[i - 1] === '--serve' ? [a] : [])).map((a) => {
  const [label, path, env = ''] = a.split('::');
  return { label, path, env: Object.fromEntries(env.split(' ').filter(Boolean).map((kv) => kv.split('='))) };
});

await bundle({ quiet: true });

let n = 0;
/** One effect the caller performs: three requests. */
async function callerEffect(url, j) {
  const key = `c${n++}`;
  let step = (await api(url, j, 'POST', '/submit', { ...refund(100, { key, order: key }), target: { name: 'mail', dedupes: true, lookup: false } })).json;
  let requests = 1;
  while (step.ask !== 'done') {
    const reply = step.ask === 'capture' ? { reply: 'captured', value: { eligible: true, refunded_by_others_cents: 0 } } : { reply: 'applied', value: { sent: true } };
    step = (await api(url, j, 'POST', `/ops/${step.op}`, reply)).json;
    requests += 1;
  }
  if (step.outcome?.state !== 'COMMITTED' || step.outcome.replayed) throw new Error(`caller effect ${key}: ${JSON.stringify(step)}`);
  return requests;
}

/**
 * The target the servers perform: a plain HTTP service whose premises are always those the
 * proposal states and whose refund POST answers after SLOW_MS, each refund counted by its
 * Idempotency-Key (the effect), so a resend shows. Cheap on purpose: the clients share its
 * process, and what is measured is the server.
 */
async function target() {
  const applied = new Map();
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const send = (status, v) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(v));
      };
      if (req.method === 'GET' && req.url?.startsWith('/premises')) return send(200, { eligible: true, refunded_by_others_cents: 0 });
      if (req.method === 'POST' && req.url === '/refunds') {
        const key = String(req.headers['idempotency-key']);
        applied.set(key, (applied.get(key) ?? 0) + 1);
        return setTimeout(() => send(200, { id: `re_${key.slice(0, 12)}` }), SLOW_MS);
      }
      send(404, { error: 'no such refund' });
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${/** @type {any} */ (server.address()).port}`;
  return {
    applied,
    targets: JSON.stringify({
      payments: {
        premises: { url: `${base}/premises/{order}` },
        apply: { url: `${base}/refunds` },
        lookup: { url: `${base}/lookup?reference={effect_id}` },
      },
    }),
    close: () => new Promise((r) => {
      server.closeAllConnections();
      server.close(r);
    }),
  };
}

/** One effect the server performs: one request (and two to the target). */
async function servedEffect(url, j) {
  const key = `s${n++}`;
  const r = await api(url, j, 'POST', '/effects', refund(100, { key, order: key }));
  if (r.json?.state !== 'COMMITTED' || r.json.replayed) throw new Error(`served effect ${key}: ${r.text}`);
  return 1;
}

/** A process's CPU time so far (user + system) in ms, Linux; clock ticks of 10 ms. */
function cpuMs(pid) {
  try {
    // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return NaN;
  }
}

/**
 * `clients` loops of `one` for DURATION_MS: effects/s, requests/s, and the server's CPU time
 * per effect (ms; `pid` the server's process).
 */
async function load(clients, one, pid) {
  const cpu0 = cpuMs(pid);
  let effects = 0;
  let requests = 0;
  const until = performance.now() + DURATION_MS;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: clients }, async () => {
    while (performance.now() < until) {
      const made = await one();
      requests += made;
      effects += 1;
    }
  }));
  const s = (performance.now() - t0) / 1000;
  return { effects: effects / s, requests: requests / s, cpu: (cpuMs(pid) - cpu0) / effects };
}

/**
 * One server, fresh storage per kind of work: the rate at each number of clients.
 * @param {(o: { disk: string, env: Record<string, string> }) => Promise<any>} start
 */
async function measure(start) {
  const out = { rss: {} };
  for (const kind of ['caller', 'served']) {
    const pay = await target();
    const disk = tempDir();
    const w = await start({ disk, env: { INTERLOCK_TARGETS: pay.targets } });
    try {
      const j = 'load';
      await api(w.url, j, 'PUT', '/leases/case-4471', { expires_at_ms: FAR });
      const one = kind === 'caller' ? () => callerEffect(w.url, j) : () => servedEffect(w.url, j);
      for (let i = 0; i < 10; i++) await one();
      const before = [...pay.applied.values()].reduce((a, b) => a + b, 0);
      let served = 0;
      out[kind] = {};
      for (const c of CLIENTS) {
        const counted = kind === 'served' ? async () => { served += 1; return one(); } : one;
        out[kind][c] = await load(c, counted, w.proc.pid);
      }
      const applied = [...pay.applied.values()].reduce((a, b) => a + b, 0) - before;
      if (kind === 'served' && applied !== served) throw new Error(`${applied} refunds applied for ${served} effects`);
      if ([...pay.applied.values()].some((times) => times > 1)) throw new Error('a refund was sent twice');
      out.rss[kind] = rss(w.proc.pid);
    } finally {
      await w.stop();
      await pay.close();
      cleanup(disk);
    }
  }
  return out;
}

/** A server process's resident memory in MiB (Linux). */
function rss(pid) {
  try {
    const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
    return kb / 1024;
  } catch {
    return NaN;
  }
}

const servers = [['Worker (workerd)', startWorkerd]];
const serveWith = (cli, more = {}) => (o) => {
  process.env.INTERLOCK_CLI = cli;
  return startServe({ ...o, env: { ...o.env, ...more } });
};
if (BEFORE) servers.push(['`interlock serve` before (one request at a time per journal)', serveWith(BEFORE)]);
if (CLI) servers.push(['`interlock serve`', serveWith(CLI)]);
for (const m of MORE) servers.push([m.label, serveWith(m.path, m.env)]);

/** The median fdatasync of a 200-byte append in a temporary folder, in ms: the disk's state. */
function fsyncMs() {
  const dir = tempDir();
  const fd = openSync(join(dir, 'probe'), 'a');
  const ts = [];
  for (let i = 0; i < 100; i++) {
    const t = performance.now();
    writeSync(fd, 'x'.repeat(199) + '\n');
    fdatasyncSync(fd);
    ts.push(performance.now() - t);
  }
  closeSync(fd);
  cleanup(dir);
  return median(ts);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// The servers take turns, RUNS times, so a change in the machine's load falls on all alike.
const fsyncBefore = fsyncMs();
const runs = servers.map(() => []);
for (let run = 0; run < RUNS; run++) {
  for (const [i, [name, start]] of servers.entries()) {
    runs[i].push(await measure(start));
    console.error(`run ${run + 1}: measured ${name}`);
  }
}
const fsyncAfter = fsyncMs();

const fmt = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
/** One cell: the median of the runs, and the range of requests/s. */
const cell = (rs, kind, c) => {
  const of = (k) => median(rs.map((r) => r[kind][c][k]));
  const req = rs.map((r) => r[kind][c].requests);
  const range = rs.length > 1 ? ` (${fmt(Math.min(...req))}-${fmt(Math.max(...req))})` : '';
  return `${fmt(of('requests'))} req/s${range}, ${fmt(of('effects'))} effects/s, ${of('cpu').toFixed(2)} ms CPU`;
};
const table = (kind, what) => [
  `| ${what} | ${CLIENTS.map((c) => `${c} client${c > 1 ? 's' : ''}`).join(' | ')} |`,
  `|---|${CLIENTS.map(() => '---|').join('')}`,
  ...servers.map(([name], i) => `| ${name} | ${CLIENTS.map((c) => cell(runs[i], kind, c)).join(' | ')} |`),
].join('\n');
const memory = servers.map(([name], i) => `${name} ${fmt(median(runs[i].map((r) => r.rss.caller)))} MiB (caller), ${fmt(median(runs[i].map((r) => r.rss.served)))} MiB (served)`).join('; ');

const workerdVersion = execFileSync(join(ROOT, 'node_modules/.bin/workerd'), ['--version'], { encoding: 'utf8' }).trim();
const md = `# \`interlock serve\` beside the Worker: requests per second on one journal (issue 28)

Generated by \`node hosts/edge/scripts/throughput.js --cli PATH${BEFORE ? ' --before PATH' : ''}${MORE.map((m) => ` --serve '${m.label}::PATH::${Object.entries(m.env).map(([k, v]) => `${k}=${v}`).join(' ')}'`).join('')}\` on ${new Date().toISOString().slice(0, 10)}; ${cpus().length} CPUs shared by the servers, the target service and the clients (Node's fetch, keep-alive), and with other work on the machine, so compare figures of this one run only. workerd ${workerdVersion}, Node ${process.version}; \`interlock serve\` a release build, its journal a file journal (fsync per durable append). Each client runs one effect at a time, back to back, for ${DURATION_MS / 1000} s, all on one journal; every effect ended COMMITTED and each served refund was applied once. The servers took turns, ${RUNS} times; each cell is the median of the ${RUNS} runs: requests per second (their range), effects per second, and the server process's CPU time per effect (user + system, from /proc: what the server itself spends, whatever else loads the machine). The disk's median fdatasync of a small append, measured here before and after: ${fsyncBefore.toFixed(2)} ms and ${fsyncAfter.toFixed(2)} ms.

A submit whose target the caller performs (three requests an effect: \`POST /submit\`, \`POST /ops\` captured, \`POST /ops\` applied):

${table('caller', 'server')}

The server performs the target (one request an effect: \`POST /effects\`; the server's premises GET and refund POST to a local target service, in the clients' process, that answers the refund after ${SLOW_MS} ms):

${table('served', 'server')}

Resident memory of each server process (workerd's, serve's) at the end of its runs, median: ${memory}.
`;
// The figures interlock-bench folds into results/bench.md (its `report::foreign`): the
// served requests/s of `interlock serve` at each client count, the Worker's beside.
const at = (i, kind, c, k = 'requests') => median(runs[i].map((r) => r[kind][c][k]));
const serveAt = servers.findIndex(([name]) => name === '`interlock serve`');
const figures = serveAt < 0 ? [] : [
  ...CLIENTS.map((c) => ({
    id: `serve.served_${c}`,
    what: `\`interlock serve\`: requests/s on one journal, ${c} client${c > 1 ? 's' : ''}, the server performing a ${SLOW_MS} ms target`,
    value: at(serveAt, 'served', c),
    unit: 'req/s',
    detail: `median of ${RUNS} runs of ${DURATION_MS / 1000} s; ${at(serveAt, 'served', c, 'cpu').toFixed(2)} ms server CPU per effect; the Worker (workerd) beside: ${fmt(at(0, 'served', c))} req/s; the caller performing the target: serve ${fmt(at(serveAt, 'caller', c))} req/s, the Worker ${fmt(at(0, 'caller', c))} req/s (results/serve.md)`,
  })),
  (() => {
    const [lo, hi] = [CLIENTS[0], CLIENTS.at(-1)];
    const ratio = at(serveAt, 'served', hi) / at(serveAt, 'served', lo);
    return {
      id: `serve.served_${hi}_vs_${lo}`,
      what: `\`interlock serve\`: requests/s at ${hi} clients / at ${lo} (one journal, a ${SLOW_MS} ms target)`,
      value: ratio,
      unit: 'x',
      goal: `concurrent: >= 8x (one request at a time, a slow target's wait included, would be 1x)`,
      met: ratio >= 8,
      detail: `the Worker: ${(at(0, 'served', hi) / at(0, 'served', lo)).toFixed(1)}x`,
    };
  })(),
];
if (!QUICK) {
  writeFileSync(join(ROOT, '../../results/serve.md'), md);
  const command = 'node hosts/edge/scripts/throughput.js --cli target/release/interlock';
  writeFileSync(join(ROOT, '../../results/bench-serve.json'), JSON.stringify({ command, figures }, null, 2) + '\n');
}
console.log(md);
