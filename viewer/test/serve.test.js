// viewer/serve.js as people run it (`node viewer/serve.js <port>`, its own process): a
// malformed request gets a 400 and the server keeps serving. Before the fix, `GET /viewer/%`
// threw inside the async handler and the unhandled rejection ended the process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, request } from 'node:http';
import { join } from 'node:path';
import { ROOT, serve } from '../serve.js';

/** Starts `node viewer/serve.js 0` (any free port); resolves to { child, port }. */
function start() {
  const child = spawn(process.execPath, [join(ROOT, 'viewer/serve.js'), '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  return new Promise((ok, fail) => {
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/http:\/\/127\.0\.0\.1:(\d+)\//);
      if (m) ok({ child, port: Number(m[1]) });
    });
    child.once('exit', (code) => fail(new Error(`serve.js exited (${code}) before listening: ${err}`)));
  });
}

/** A raw GET of `path` (sent as is, never re-encoded); resolves to the status code. */
function get(port, path) {
  return new Promise((ok, fail) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'GET', agent: false }, (res) => {
      res.resume();
      res.on('end', () => ok(res.statusCode));
    });
    req.on('error', fail);
    req.end();
  });
}

test('malformed request paths get a 400 and the server stays up', async () => {
  const { child, port } = await start();
  let exited = null;
  child.once('exit', (code, signal) => { exited = code ?? signal; });
  try {
    for (const path of ['/viewer/%', '/viewer/%zz', '/viewer/%E0%A4%A', '//', '///', '/viewer/%00']) {
      assert.equal(await get(port, path), 400, `GET ${path}`);
      assert.equal(exited, null, `serve.js exited after GET ${path}`);
    }
    assert.equal(await get(port, '/viewer/'), 200);
    assert.equal(await get(port, '/viewer/index.html'), 200);
    assert.equal(await get(port, '/viewer/no-such-file.js'), 404);
    assert.equal(await get(port, '/etc/passwd'), 404);
    assert.equal(exited, null);
  } finally {
    child.kill();
  }
});

/** Any request with `body`; resolves to { status, headers, body }. */
function send(port, method, path, { body, headers = {} } = {}) {
  return new Promise((ok, fail) => {
    const req = request({ host: '127.0.0.1', port, path, method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => ok({ status: res.statusCode, headers: res.headers, body: text }));
    });
    req.on('error', fail);
    req.end(body);
  });
}

test('--api passes /v1/ to the API as it came (method, path, headers, body) and its answer back', async () => {
  // The API: a plain HTTP server that answers with what it received.
  const api = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => res.writeHead(req.url.endsWith('/missing') ? 404 : 200, { 'content-type': 'application/json', 'x-api': 'yes' })
      .end(JSON.stringify({ method: req.method, url: req.url, auth: req.headers.authorization ?? null, body })));
  });
  await new Promise((r) => api.listen(0, '127.0.0.1', r));
  const apiUrl = `http://127.0.0.1:${api.address().port}`;
  const viewer = await serve({ port: 0, api: apiUrl });
  const plain = await serve({ port: 0 });
  const port = viewer.address().port;
  try {
    const post = await send(port, 'POST', '/v1/journals/shop/inbox/abc/decision?x=1', {
      body: '{"verdict":"approve"}', headers: { authorization: 'Bearer alice-token', 'content-type': 'application/json' },
    });
    assert.equal(post.status, 200);
    assert.equal(post.headers['x-api'], 'yes');
    assert.deepEqual(JSON.parse(post.body), { method: 'POST', url: '/v1/journals/shop/inbox/abc/decision?x=1', auth: 'Bearer alice-token', body: '{"verdict":"approve"}' });
    assert.equal((await send(port, 'GET', '/v1/journals/shop/missing')).status, 404, "the API's status comes back as it is");
    assert.equal((await send(port, 'GET', '/viewer/inbox.html')).status, 200, 'the pages are still served');
    // Without --api: 404 saying how to get one; nothing is passed anywhere.
    const none = await send(plain.address().port, 'GET', '/v1/journals/shop/inbox');
    assert.equal(none.status, 404);
    assert.match(JSON.parse(none.body).error.message, /--api URL/);
  } finally {
    viewer.close();
    plain.close();
    await new Promise((r) => api.close(r));
  }
  // An API that does not answer: 502 with the reason, and the viewer keeps serving.
  const dead = await serve({ port: 0, api: apiUrl });
  try {
    const r = await send(dead.address().port, 'GET', '/v1/journals/shop/inbox');
    assert.equal(r.status, 502);
    assert.match(JSON.parse(r.body).error.message, /did not answer/);
    assert.equal((await send(dead.address().port, 'GET', '/viewer/')).status, 200);
  } finally {
    dead.close();
  }
  assert.throws(() => serve({ api: 'ftp://example' }), /not an http\(s\) URL/);
});
