// viewer/serve.js as people run it (`node viewer/serve.js <port>`, its own process): a
// malformed request gets a 400 and the server keeps serving. Before the fix, `GET /viewer/%`
// threw inside the async handler and the unhandled rejection ended the process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { join } from 'node:path';
import { ROOT } from '../serve.js';

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
