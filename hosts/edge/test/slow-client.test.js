// One slow client stalls nobody, against both servers. A client sends the head of a
// request that promises 100000 bytes, sends 10 and holds the connection open, once without
// the token and once with it; meanwhile every other request (with and without the token,
// to the same journal and to another) is answered at once. The one without the token is
// refused from its headers alone (its body is never read); the one with it is answered 400
// `invalid-body` once the API's deadline for a body (10 s) has passed, and nothing is
// recorded for it.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { SERVERS, api, tempDir, cleanup, TOKEN } from './helpers.js';

/** The API's deadline for a whole body (interlock_core::http_api::BODY_DEADLINE_MS). */
const BODY_DEADLINE_MS = 10_000;
const FAR = 4_102_444_800_000;

/**
 * A raw HTTP/1.1 request that sends its head and 10 of the 100000 body bytes it promises,
 * then holds the connection open.
 * @param {string} url
 * @param {string} path
 * @param {string | null} token
 */
function slowRequest(url, path, token) {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  const started = performance.now();
  let text = '';
  /** @type {Promise<number>} ms from the start to the first byte of the answer */
  const answered = new Promise((resolve) => socket.on('data', (d) => {
    text += d;
    resolve(performance.now() - started);
  }));
  /** @type {Promise<number>} ms from the start to the close */
  const closed = new Promise((resolve) => socket.on('close', () => resolve(performance.now() - started)));
  socket.on('error', () => {});
  const auth = token === null ? '' : `Authorization: Bearer ${token}\r\n`;
  socket.write(`POST ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n${auth}\r\n`);
  socket.write('{"agent":"'); // 10 bytes, then nothing
  return {
    answered,
    closed,
    /** The answer's status. */
    status: () => Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1]),
    /** The answer's body (the part received). */
    body: () => text.slice(text.indexOf('\r\n\r\n') + 4),
    end: () => socket.destroy(),
  };
}

/**
 * `p`, or a failure after `ms` saying `what` was not answered.
 * @template T
 * @param {Promise<T>} p
 * @param {number} ms
 * @param {string} what
 * @returns {Promise<T>}
 */
function within(p, ms, what) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const late = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

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

  test('a client that sends its body slowly, or never, stalls no other request', async () => {
    const slow = [slowRequest(w.url, '/v1/journals/x/effects', null), slowRequest(w.url, '/v1/journals/x/effects', TOKEN)];
    try {
      // Both are in the server, waiting for their bodies.
      await new Promise((r) => setTimeout(r, 300));
      const others = [
        ['an authorized request to the same journal', 'x', 'PUT', '/leases/case-4471', { expires_at_ms: FAR }, TOKEN, 204],
        ['an authorized read of the same journal', 'x', 'GET', '/entries', undefined, TOKEN, 200],
        ['an unauthorized request to the same journal', 'x', 'POST', '/effects', {}, null, 401],
        ['an authorized request to another journal', 'y', 'PUT', '/leases/case-4471', { expires_at_ms: FAR }, TOKEN, 204],
        ['an unauthorized request to another journal', 'y', 'GET', '/entries', undefined, null, 401],
      ];
      for (const [what, journal, method, path, body, token, status] of others) {
        const r = await within(api(w.url, journal, method, path, body, token), 3000, what);
        assert.equal(r.status, status, `${what}: ${r.text}`);
      }
      // Without the token: refused from the headers, its body never read.
      const [refused, held] = slow;
      await within(refused.answered, 3000, 'the slow request without the token');
      assert.equal(refused.status(), 401, refused.body());
      assert.match(refused.body(), /"unauthorized"/);
      // With it: answered once the deadline for its body has passed, and closed.
      const ms = await within(held.answered, BODY_DEADLINE_MS + 5000, 'the slow request with the token');
      assert.ok(ms >= BODY_DEADLINE_MS - 1000, `answered after ${ms} ms, before the deadline`);
      assert.equal(held.status(), 400, held.body());
      assert.match(held.body(), /"invalid-body"/);
      await within(held.closed, 5000, 'the close of the slow request');
      const states = (await api(w.url, 'x', 'GET', '/entries')).text.trim().split('\n').map((l) => JSON.parse(l).state);
      assert.deepEqual(states, ['GRANTED'], 'nothing recorded for the slow request');
    } finally {
      for (const s of slow) s.end();
    }
  });
});
