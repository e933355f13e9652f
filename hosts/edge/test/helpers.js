// Test helpers: a real workerd process serving a bundled Worker on a free port over a
// storage folder, and a payments service over HTTP (the simulated refund API of
// adapters/payments-sim, the same component every host runs) that plays the target.
import { spawn, execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, readdirSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Payments } from '@interlock/gate';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const WORKERD = join(ROOT, 'node_modules/.bin/workerd');
export const TOKEN = 'test-token-5b1f';

export const tempDir = (prefix = 'interlock-edge-') => mkdtempSync(join(tmpdir(), prefix));

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {any} */ (s.address());
      s.close(() => res(port));
    });
    s.on('error', rej);
  });
}

/**
 * A server process: its output collected, and once `ready(proc, output)` gives its URL, a
 * handle to it (`kill` is SIGKILL, no shutdown of any kind).
 * @param {string} what
 * @param {import('node:child_process').ChildProcess} proc
 * @param {(proc: any, output: () => string) => Promise<string>} ready
 */
async function serverProcess(what, proc, ready) {
  const started = performance.now();
  let log = '';
  proc.stdout?.on('data', (d) => (log += d));
  proc.stderr?.on('data', (d) => (log += d));
  const exited = new Promise((r) => proc.on('exit', (code, signal) => r({ code, signal })));
  const url = await ready(proc, () => log).catch((e) => {
    throw new Error(`${what}: ${e.message}: ${log}`);
  });
  return {
    url,
    proc,
    exited,
    listeningMs: performance.now() - started,
    log: () => log,
    async kill() {
      proc.kill('SIGKILL');
      return exited;
    },
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * Starts `workerd serve dist/<worker>.capnp` on a free port over `disk`; resolves when it
 * answers. `env`: the Worker's bindings (INTERLOCK_TARGETS, ...).
 * @param {{ worker?: string, disk: string, env?: Record<string, string> }} o
 */
export async function startWorkerd({ worker = 'interlock', disk, env = {} }) {
  const port = await freePort();
  const proc = spawn(WORKERD, ['serve', join(ROOT, 'dist', `${worker}.capnp`), '--socket-addr', `http=127.0.0.1:${port}`, '--directory-path', `journal-disk=${disk}`], {
    env: { PATH: process.env.PATH, INTERLOCK_TOKEN: TOKEN, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return serverProcess('workerd', proc, async (p) => {
    const url = `http://127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
      if (p.exitCode !== null) throw new Error('exited');
      try {
        await fetch(`${url}/`);
        return url;
      } catch {
        if (i > 400) throw new Error('did not answer');
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  });
}

/**
 * Starts `interlock serve <disk> --listen 127.0.0.1:0` (the CLI from INTERLOCK_CLI: the
 * wasi:http component on wasmtime); resolves when it prints where it listens. Same shape as
 * startWorkerd; `env`: the component's settings (INTERLOCK_TARGETS, ...).
 * `journals`: a shared journal's URL instead of `disk` (with `name`, the one journal served).
 * `args`: more of serve's options (`--notify-every 1`).
 * @param {{ disk: string, env?: Record<string, string>, journals?: string, name?: string, args?: string[] }} o
 */
export async function startServe({ disk, env = {}, journals, name, args = [] }) {
  const cli = process.env.INTERLOCK_CLI;
  if (!cli) throw new Error('set INTERLOCK_CLI to the interlock binary');
  const proc = spawn(cli, ['serve', journals ?? disk, '--listen', '127.0.0.1:0', ...(name ? ['--name', name] : []), ...args], {
    env: { PATH: process.env.PATH, INTERLOCK_TOKEN: TOKEN, ...(process.env.INTERLOCK_HTTP_WASM ? { INTERLOCK_HTTP_WASM: process.env.INTERLOCK_HTTP_WASM } : {}), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return serverProcess('interlock serve', proc, (p, output) => new Promise((resolve, reject) => {
    p.stdout.on('data', () => {
      const m = /listening on (http:\/\/[^\s]+)/.exec(output());
      if (m) resolve(m[1]);
    });
    p.on('exit', () => reject(new Error('exited')));
  }));
}

/**
 * The two servers of the one HTTP API (docs/http-api.yaml), for tests that run against
 * both: `states(disk, journal)` reads a journal's recorded states from outside the server.
 * `interlock serve` is skipped, saying so, when INTERLOCK_CLI is not set (scripts/test.sh
 * sets it; INTERLOCK_REQUIRE_CLI=1 makes that a failure).
 */
export const SERVERS = [
  {
    name: 'workerd',
    start: startWorkerd,
    skip: undefined,
    /** @param {string} disk */
    states: (disk) => journalFiles(disk).map(statesOnDisk).find((states) => states !== undefined),
    /** Whether any Durable Object storage exists yet. @param {string} disk */
    made: (disk) => journalFiles(disk).length > 0,
  },
  {
    name: 'interlock serve',
    start: startServe,
    skip: process.env.INTERLOCK_CLI || process.env.INTERLOCK_REQUIRE_CLI ? undefined : 'INTERLOCK_CLI is not set (the interlock binary)',
    /** @param {string} disk @param {string} journal */
    states: (disk, journal) => readFileSync(join(disk, journal, 'journal.jsonl'), 'utf8')
      .split('\n').filter(Boolean).map((l) => JSON.parse(l).state).filter(Boolean),
    /** Whether journal `journal`'s folder exists. @param {string} disk @param {string} journal */
    made: (disk, journal) => existsSync(join(disk, journal)),
  },
];

/**
 * A request to the gate's API of journal `journal`.
 * @param {string} url
 * @param {string} journal
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body] object (sent as JSON) or text
 * @param {string | null} [token]
 */
export async function api(url, journal, method, path, body, token = TOKEN) {
  const headers = token === null ? {} : { authorization: `Bearer ${token}` };
  const r = await fetch(`${url}/v1/journals/${journal}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, json, text, headers: r.headers };
}

/** The SQLite files of a storage folder's journals (one per Durable Object). */
export function journalFiles(disk) {
  const dir = join(disk, 'interlock-journal');
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((f) => f.endsWith('.sqlite') && f !== 'metadata.sqlite').map((f) => join(dir, f));
}

/**
 * The states recorded in a DO's SQLite file, read by another process (the sqlite3 CLI);
 * undefined for an object that holds no journal.
 */
export function statesOnDisk(file) {
  const has = execFileSync('sqlite3', ['-readonly', file, "SELECT count(*) FROM sqlite_master WHERE name = 'interlock_entries'"], { encoding: 'utf8' });
  if (has.trim() === '0') return undefined;
  const out = execFileSync('sqlite3', ['-readonly', file, "SELECT json_extract(entry, '$.state') FROM interlock_entries ORDER BY ordinal"], { encoding: 'utf8' });
  return out.split('\n').filter(Boolean);
}

/**
 * The payments service over HTTP, at `tier`:
 *   GET  /orders/:order/premises?excluding=:ref  the premises of a refund (200)
 *   POST /refunds  {order, amount_cents}, Idempotency-Key  a refund (200), or 4xx refused
 *   GET  /refunds?reference=:ref  the refund with that reference (200) or 404
 * `onApply({ key, order, refund })` runs after a refund is applied and before the answer; returning
 * 'hang' never answers (the process dies in the tests, or the client gives up).
 * @param {{ tier?: string, orders?: Record<string, number>, onApply?: (info: any) => any, applyDelayMs?: number }} o
 */
export async function paymentsServer({ tier = '2', orders = { order_881: 10000, order_900: 10000 }, onApply, applyDelayMs = 0 } = {}) {
  const service = await Payments.inMemory(tier);
  for (const [o, cents] of Object.entries(orders)) service.addOrder(o, cents);
  const stats = { applies: 0 };
  const server = createServer(async (req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    let body = '';
    for await (const chunk of req) body += chunk;
    const send = (status, value) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    try {
      let m;
      if (req.method === 'GET' && (m = /^\/orders\/([^/]+)\/premises$/.exec(u.pathname))) {
        return send(200, service.premises(decodeURIComponent(m[1]), u.searchParams.get('excluding')));
      }
      if (req.method === 'POST' && u.pathname === '/refunds') {
        stats.applies += 1;
        const { order, amount_cents } = JSON.parse(body);
        const key = /** @type {string} */ (req.headers['idempotency-key']);
        if (applyDelayMs) await new Promise((r) => setTimeout(r, applyDelayMs));
        let refund;
        try {
          refund = service.refund(order, amount_cents, key, key, Date.now());
        } catch (e) {
          return send(422, { error: String(/** @type {any} */ (e).message) });
        }
        if ((await onApply?.({ key, order, refund })) === 'hang') return; // no answer, ever
        return send(200, refund);
      }
      if (req.method === 'GET' && u.pathname === '/refunds') {
        let r;
        try {
          r = service.findByReference(u.searchParams.get('reference') ?? '');
        } catch (e) {
          return send(501, { error: String(/** @type {any} */ (e).message) });
        }
        return r ? send(200, r) : send(404, { error: 'no such refund' });
      }
      send(404, { error: 'no route' });
    } catch (e) {
      send(500, { error: String(/** @type {any} */ (e)?.message ?? e) });
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${/** @type {any} */ (server.address()).port}`;
  return {
    service,
    stats,
    base,
    /** INTERLOCK_TARGETS for a Worker that performs this service as target `payments`. */
    targets: JSON.stringify({
      payments: {
        premises: { url: `${base}/orders/{order}/premises?excluding={effect_id}` },
        apply: { url: `${base}/refunds` },
        lookup: { url: `${base}/refunds?reference={effect_id}` },
      },
    }),
    close: () => new Promise((r) => {
      server.closeAllConnections();
      server.close(r);
    }),
  };
}

/** A refund proposal of `cents` on order_881 under lease case-4471 (the demo's). */
export function refund(cents = 2000, { key = 'refund:order_881', cap, lookup = true, dedupes = false, order = 'order_881' } = {}) {
  return {
    agent: 'refund-agent',
    target: { name: 'payments', dedupes, lookup, timeout_ms: 2000 },
    key,
    effect: { order, amount_cents: cents },
    authority: { lease: 'case-4471' },
    premises: { eligible: true, refunded_by_others_cents: 0 },
    ...(cap ? { cap } : {}),
  };
}

export const cleanup = (dir) => rmSync(dir, { recursive: true, force: true });
