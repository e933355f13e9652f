#!/usr/bin/env node
// Serves the viewer as static files on 127.0.0.1 (no server logic: any static server rooted
// at the repository root would do). Only what the pages need is served: viewer/, the Node
// host's browser code and its transpiled components (hosts/node/src, hosts/node/gen), the
// conformance runner and its driver (hosts/node/conformance) and the vectors (tests/conformance).
//
//   node viewer/serve.js [port] [--api URL]    then open http://127.0.0.1:<port>/viewer/
//
// `--api URL` (e.g. http://127.0.0.1:8787, where `interlock serve` listens): requests under
// /v1/ are passed to that server as they are (method, path, headers, body) and its answers
// passed back, so the inbox page (viewer/inbox.html?server) reaches the gate's HTTP API from
// its own origin: the gate needs no CORS. Without it, /v1/ answers 404 saying so.
//
// As a module: `serve({ port, api })` resolves to the listening http.Server (port 0 = any).
import { createServer, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { readFile, stat } from 'node:fs/promises';
import { dirname, extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ALLOWED = ['viewer/', 'hosts/node/src/', 'hosts/node/gen/', 'hosts/node/conformance/', 'tests/conformance/'];
const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png', '.svg': 'image/svg+xml', '.md': 'text/plain; charset=utf-8',
};

/** The request's path under ROOT, or null when it is not a well-formed path (a bad escape). */
function requestPath(url) {
  try {
    return normalize(decodeURIComponent(new URL(url, 'http://x').pathname)).replace(/^\/+/, '');
  } catch {
    return null;
  }
}

/** Hop-by-hop headers (RFC 9110, 7.6.1): never forwarded by a proxy. */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host']);

/** Passes one request under /v1/ to the API at `api` (a URL) and its answer back, streamed. */
function proxy(req, res, api) {
  const target = new URL(req.url, api);
  const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !HOP.has(k)));
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  const out = send(target, { method: req.method, headers }, (up) => {
    const back = Object.fromEntries(Object.entries(up.headers).filter(([k]) => !HOP.has(k)));
    res.writeHead(up.statusCode ?? 502, back);
    up.pipe(res);
  });
  out.on('error', (e) => {
    if (res.headersSent) res.destroy();
    else res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { kind: 'bad-gateway', message: `the API at ${api} did not answer: ${e.message}` } }));
  });
  req.pipe(out);
}

async function handle(req, res, api) {
  if (req.url.startsWith('/v1/')) {
    if (api) proxy(req, res, api);
    else res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { kind: 'not-found', message: 'this viewer/serve.js has no API to pass /v1/ to: start it with --api URL (where interlock serve listens)' } }));
    return;
  }
  let path = requestPath(req.url);
  if (path === null || path.includes('\0')) {
    res.writeHead(400, { 'content-type': 'text/plain' }).end('bad request');
    return;
  }
  if (path === '' || path === '.') {
    res.writeHead(302, { location: '/viewer/' }).end();
    return;
  }
  if (path === 'viewer') path = 'viewer/';
  if (path.endsWith('/')) path += 'index.html';
  if (path.includes('..') || !ALLOWED.some((p) => path.startsWith(p)) || path.includes('node_modules')) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    return;
  }
  const file = join(ROOT, path);
  try {
    if (!(await stat(file)).isFile()) throw new Error('not a file');
    const body = await readFile(file);
    res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream', 'cache-control': 'no-cache' }).end(body);
  } catch {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  }
}

export function serve({ port = 0, host = '127.0.0.1', api } = {}) {
  if (api !== undefined) {
    const u = new URL(api); // a bad URL throws here, before anything listens
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError(`--api: ${api} is not an http(s) URL`);
  }
  // A throw in an async handler is an unhandled rejection, which ends the process: one bad
  // request must never take the page down for everyone else.
  const server = createServer((req, res) => {
    handle(req, res, api).catch((e) => {
      console.error(`viewer/serve.js: ${req.method} ${req.url}: ${e?.stack ?? e}`);
      if (res.headersSent) res.destroy();
      else res.writeHead(500, { 'content-type': 'text/plain' }).end('internal error');
    });
  });
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, host, () => ok(server));
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const at = args.indexOf('--api');
  let api;
  if (at >= 0) {
    api = args[at + 1];
    args.splice(at, 2);
    if (!api || !/^https?:\/\//.test(api)) {
      console.error('usage: node viewer/serve.js [port] [--api http://HOST:PORT]  (--api: where interlock serve listens)');
      process.exit(2);
    }
  }
  const port = Number(args[0] ?? process.env.PORT ?? 8080);
  for (const f of ['hosts/node/gen/gate/interlock_gate.js', 'hosts/node/conformance/gen/conformance_runner.js']) {
    try {
      await stat(join(ROOT, f));
    } catch {
      console.error(`missing ${f}: run \`bash scripts/build-wasm.sh\` at the repository root, then \`npm ci && npm run build\` in hosts/node`);
      process.exit(2);
    }
  }
  const server = await serve({ port, api });
  const base = `http://127.0.0.1:${server.address().port}/viewer/`;
  console.log(`Interlock viewer: ${base}  the inbox: ${base}inbox.html${api ? `?server  (/v1/ -> ${api})` : ''}  (Ctrl-C to stop)`);
}
