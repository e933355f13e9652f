// docs/http-api.yaml is the API both servers answer: it parses as OpenAPI 3.1, and every
// path and method it documents is routed by the Worker and by `interlock serve` (with the
// token: anything but "no route"; without it: 401, before any journal is reached).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { SERVERS, api, tempDir, cleanup, ROOT } from './helpers.js';

const spec = parse(readFileSync(join(ROOT, '../../docs/http-api.yaml'), 'utf8'));
const PREFIX = '/v1/journals/{journal}';
const SAMPLE = { effect: '0123456789abcdef0123456789abcdef', item: '0123456789abcdef0123456789abcdef', op: '7', lease: 'case-4471', scheme: 'stripe', size: '1' };
const routes = Object.entries(spec.paths).flatMap(([path, item]) =>
  Object.keys(item).filter((m) => ['get', 'put', 'post', 'delete'].includes(m)).map((m) => ({
    method: m.toUpperCase(),
    // `security: []`: authenticated by something else than the bearer token (a signature).
    open: Array.isArray(item[m].security) && item[m].security.length === 0,
    path: path.slice(PREFIX.length).replace(/\{(\w+)\}/g, (_, name) => SAMPLE[/** @type {keyof typeof SAMPLE} */ (name)]),
  })));

test('the OpenAPI document parses and documents every route under /v1/journals/{journal}', () => {
  assert.equal(spec.openapi, '3.1.0');
  assert.ok(Object.keys(spec.paths).every((p) => p.startsWith(PREFIX)));
  assert.equal(routes.length, 28);
  assert.deepEqual(routes.filter((r) => r.open).map((r) => r.path), ['/webhooks/stripe']);
});

for (const server of SERVERS) describe(server.name, { skip: server.skip }, () => {
  let disk, w;
  before(async () => {
    disk = tempDir();
    w = await server.start({ disk });
  });
  after(async () => {
    await w?.stop();
    cleanup(disk);
  });

  test('every documented route is routed, and refused without the token unless it is signed', async () => {
    for (const { method, path, open } of routes) {
      const refused = await api(w.url, 'doc', method, path, undefined, null);
      if (open) assert.notEqual(refused.status, 401, `${method} ${path} takes no token`);
      else assert.equal(refused.status, 401, `${method} ${path}`);
      const r = await api(w.url, 'doc', method, path, method === 'GET' || method === 'DELETE' ? undefined : '{}');
      assert.ok(!(r.status === 404 && /no route/.test(r.json?.error?.message ?? '')), `${method} ${path}: ${r.text}`);
    }
    const unknown = await api(w.url, 'doc', 'PATCH', '/effects');
    assert.match(unknown.json.error.message, /no route/, 'an undocumented one is not');
  });
});
