// localstripe (PyPI: a stateful fake Stripe server written by others) as its own process, and
// a proxy in front of it that answers one refund badly when armed (the Python tests' twin,
// hosts/python/tests/stripe_support.py). Nothing here judges an answer: the component does.
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import Stripe from 'stripe';
import { freePort } from './fixtures/mcp/harness.js';

/** The Python that has localstripe (hosts/node/test.sh sets it), if any. */
export const LOCALSTRIPE_PYTHON = process.env.INTERLOCK_LOCALSTRIPE_PYTHON;

/** localstripe on a free port, from scratch: `{ url, port, stop }`. */
export async function startLocalstripe() {
  const port = await freePort();
  const child = spawn(/** @type {string} */ (LOCALSTRIPE_PYTHON), ['-m', 'localstripe', '--port', String(port), '--from-scratch'], { stdio: 'ignore' });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const up = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.destroy(); resolve(true); });
      c.on('error', () => resolve(false));
    });
    if (up) break;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`localstripe did not start (exit ${child.exitCode})`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    stop: () => new Promise((resolve) => { child.once('exit', resolve); child.kill(); }),
  };
}

/**
 * A Stripe client at `port` on 127.0.0.1, plain HTTP.
 * @param {number} port
 */
export const stripeAt = (port) => new Stripe('sk_test_interlock', { host: '127.0.0.1', port, protocol: 'http' });

/**
 * A succeeded card charge of `amount` cents; its id.
 * @param {any} stripe
 * @param {number} amount
 */
export async function charge(stripe, amount) {
  const card = await stripe.paymentMethods.create({ type: 'card', card: { number: '4242424242424242', exp_month: 12, exp_year: 2030, cvc: '123' } });
  return (await stripe.charges.create({ amount, currency: 'usd', source: card.id })).id;
}

/**
 * The cents refunded on charge `ch`, and how many refunds.
 * @param {any} stripe
 * @param {string} ch
 */
export async function refunded(stripe, ch) {
  const { data } = await stripe.refunds.list({ charge: ch, limit: 100 });
  return { cents: data.reduce((/** @type {number} */ s, /** @type {any} */ r) => s + r.amount, 0), count: data.length, data };
}

/**
 * The proxy: armed with a mode, it answers the next POST /v1/refunds badly, before or after
 * localstripe took it; everything else passes through. `forwarded` counts refund creations
 * that reached localstripe.
 * @param {number} upstreamPort
 * @param {{ delayMs?: number }} [options]
 */
export async function startProxy(upstreamPort, { delayMs = 2500 } = {}) {
  const state = { mode: /** @type {string | undefined} */ (undefined), forwarded: 0 };
  const server = http.createServer((req, res) => {
    const chunks = /** @type {Buffer[]} */ ([]);
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const refund = req.method === 'POST' && (req.url ?? '').split('?')[0] === '/v1/refunds';
      const mode = refund ? state.mode : undefined;
      if (refund) state.mode = undefined;
      const answer = (/** @type {number} */ status, /** @type {Buffer | string} */ data) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(data);
      };
      if (mode === '500-before') return answer(500, '{"error": {"type": "api_error", "message": "from the proxy"}}');
      if (mode === '429-before') return answer(429, '{"error": {"type": "invalid_request_error", "code": "rate_limit", "message": "from the proxy"}}');
      const headers = { ...req.headers };
      delete headers.host;
      const up = http.request({ host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers }, (r) => {
        const got = /** @type {Buffer[]} */ ([]);
        r.on('data', (c) => got.push(c));
        r.on('end', () => {
          const data = Buffer.concat(got);
          if (refund) state.forwarded += 1;
          if (mode === '500-after') return answer(500, '{"error": {"type": "api_error", "message": "from the proxy"}}');
          if (mode === 'garbage-after') return answer(200, data.subarray(0, data.length >> 1));
          if (mode === 'drop-after') return req.socket.destroy();
          const pass = () => answer(r.statusCode ?? 502, data);
          if (mode === 'delay-after') setTimeout(pass, delayMs);
          else pass();
        });
      });
      up.end(body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {net.AddressInfo} */ (server.address());
  return {
    port,
    state,
    /** @param {string} mode */
    arm: (mode) => { state.mode = mode; },
    stop: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}
