#!/usr/bin/env node
// Serves the viewer as static files on 127.0.0.1 (no server logic: any static server rooted
// at the repository root would do). Only what the page needs is served: viewer/, the Node
// host's browser code and its transpiled components (hosts/node/src, hosts/node/gen), the
// conformance runner and its driver (hosts/node/conformance) and the vectors (tests/conformance).
//
//   node viewer/serve.js [port]      then open http://127.0.0.1:<port>/viewer/
//
// As a module: `serve({ port })` resolves to the listening http.Server (port 0 = any).
import { createServer } from 'node:http';
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

async function handle(req, res) {
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

export function serve({ port = 0, host = '127.0.0.1' } = {}) {
  // A throw in an async handler is an unhandled rejection, which ends the process: one bad
  // request must never take the page down for everyone else.
  const server = createServer((req, res) => {
    handle(req, res).catch((e) => {
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
  const port = Number(process.argv[2] ?? process.env.PORT ?? 8080);
  for (const f of ['hosts/node/gen/gate/interlock_gate.js', 'hosts/node/conformance/gen/conformance_runner.js']) {
    try {
      await stat(join(ROOT, f));
    } catch {
      console.error(`missing ${f}: run \`bash scripts/build-wasm.sh\` at the repository root, then \`npm ci && npm run build\` in hosts/node`);
      process.exit(2);
    }
  }
  const server = await serve({ port });
  console.log(`Interlock viewer: http://127.0.0.1:${server.address().port}/viewer/  (Ctrl-C to stop)`);
}
