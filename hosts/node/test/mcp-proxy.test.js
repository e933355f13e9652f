// The MCP proxies with the official TypeScript SDK on both sides: a TS-SDK Client (the
// agent) talks to `interlock mcp-proxy` (the CLI; binary from INTERLOCK_CLI) and to
// `python -m interlock.mcp_proxy` (INTERLOCK_PYTHON), which talk to the TS-SDK payments
// server (test/fixtures/mcp/payments-server.js), over stdio and over Streamable HTTP
// (`--listen`, `--upstream`). The surface under test:
//   PROXY --config F [--listen H:P] [--upstream URL] [--agent A] [--lease L] [--journal J] -- cmd...
// A proxy whose variable is unset is skipped, saying so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Payments } from '../src/index.js';
import { refundConfig, paymentsTools, ORDER, LEASE } from './fixtures/mcp/payments-tools.js';
import { protect } from '../src/tools.js';
import { GATE_WASM } from './helpers.js';
import {
  tmp, serverArgs, stateFile, start, startHttpServer, stdioClient, httpClient, freePort, waitFor, value, text, lease, alive, sleep,
} from './fixtures/mcp/harness.js';

const PROXIES = [
  // The CLI runs the component this package transpiles (dist/), not whatever its search finds first.
  { name: 'interlock mcp-proxy', variable: 'INTERLOCK_CLI', command: process.env.INTERLOCK_CLI, prefix: ['--wasm', GATE_WASM, 'mcp-proxy'] },
  { name: 'python -m interlock.mcp_proxy', variable: 'INTERLOCK_PYTHON', command: process.env.INTERLOCK_PYTHON, prefix: ['-m', 'interlock.mcp_proxy'] },
];
const TOOLS = ['create_refund', 'echo', 'find_refund', 'get_order', 'refund_by_hand'];
const REFUND = { order_id: ORDER, amount_cents: 2000 };

/**
 * One proxy run's place: its folder (journal, payments state, config file) and how to
 * start the proxy in it.
 * @param {typeof PROXIES[number]} proxy
 * @param {{ tier?: string, extra?: Record<string, unknown> }} [options]
 */
async function place(proxy, { tier = '2', extra = {} } = {}) {
  const dir = tmp();
  const journal = path.join(dir, 'journal');
  const config = path.join(dir, 'interlock.mcp.json');
  fs.writeFileSync(config, JSON.stringify(refundConfig(tier, extra, journal), null, 2));
  await lease(journal);
  // The server's state exists before any proxy starts it, so every start sees one order.
  const pay = await Payments.create(stateFile(dir), tier);
  pay.addOrder(ORDER, 10000);
  const hang = path.join(dir, 'hang');
  const args = (/** @type {string[]} */ more) => [...proxy.prefix, '--config', config, '--agent', 'refund-agent', ...more];
  return {
    dir,
    journal,
    hang,
    /** Makes the next create_refund hang, `where`: 'before-apply' or 'after-apply'. */
    hangNext: (/** @type {string} */ where) => fs.writeFileSync(hang, where),
    hung: () => waitFor(() => fs.existsSync(`${hang}.hit`), 'the upstream to hang'),
    refunds: async () => (await Payments.open(stateFile(dir))).refunds(ORDER),
    /** The proxy over stdio, its upstream a stdio child; `kill()` SIGKILLs the proxy. */
    async stdio() {
      const c = await stdioClient(/** @type {string} */ (proxy.command), args(['--', process.execPath, ...serverArgs(dir, { tier, hang })]));
      return { client: c.client, close: c.close, kill: () => killPid(c.pid), err: c.err };
    },
    /** The proxy listening on Streamable HTTP, its upstream the payments server at `upstream` (a URL) or a stdio child. */
    async http(/** @type {string | undefined} */ upstream) {
      const port = await freePort();
      const upstreamArgs = upstream ? ['--upstream', upstream] : ['--', process.execPath, ...serverArgs(dir, { tier, hang })];
      const p = start(/** @type {string} */ (proxy.command), args(['--listen', `127.0.0.1:${port}`, ...upstreamArgs]), process.env);
      const c = await waitFor(() => httpClient(`http://127.0.0.1:${port}/mcp`), `the proxy to listen (${p.err()})`);
      return {
        client: c.client,
        close: async () => { await c.close(); await p.kill('SIGTERM'); },
        // The client is closed too: an HTTP call in flight to a dead proxy would otherwise
        // wait out the SDK's request timeout (60 s) instead of failing.
        kill: async () => { await p.kill('SIGKILL'); await c.close(); },
        err: p.err,
      };
    },
  };
}

/** SIGKILLs `pid` and waits until it is gone. */
async function killPid(/** @type {number} */ pid) {
  process.kill(pid, 'SIGKILL');
  await waitFor(() => !alive(pid), `process ${pid} to die`);
}

/** What Node's protect() answers the last of `calls` to create_refund (a fresh service and journal). */
async function protectSays(/** @type {Record<string, unknown>[]} */ calls) {
  const dir = tmp();
  const { functions } = await paymentsTools(path.join(dir, 'payments.json'));
  const tools = await protect(functions, refundConfig('2', {}, path.join(dir, 'journal')));
  await tools.gate.grantLease(LEASE, Date.now() + 60_000);
  let out;
  for (const c of calls) out = await tools.create_refund(c);
  tools.close();
  return out.message;
}

/**
 * A gated call's outcome: the proxy's `_meta["interlock/outcome"]` when it puts it there (a
 * committed call's structured content is then the tool's own result, which an upstream
 * outputSchema may require), else its structured content (ARCHITECTURE.md, "Tool gating").
 */
const outcome = (r) => r._meta?.['interlock/outcome'] ?? value(r);

for (const proxy of PROXIES) {
  const skip = proxy.command ? false : `${proxy.variable} is not set (the ${proxy.name} binary or interpreter to test)`;
  const t = (/** @type {string} */ name, /** @type {() => Promise<void>} */ fn) => test(`${proxy.name}: ${name}`, { skip, timeout: 120_000 }, fn);

  t('stdio: the upstream\'s tools listed unchanged; a gated refund happens once; echo passes through untouched', async () => {
    const p = await place(proxy);
    const s = await p.stdio();
    try {
      assert.deepEqual((await s.client.listTools()).tools.map((x) => x.name).sort(), TOOLS);
      const r = await s.client.callTool({ name: 'create_refund', arguments: REFUND });
      assert.ok(!r.isError, text(r));
      assert.equal(outcome(r).state, 'COMMITTED');
      assert.match(text(r), /create_refund done; it happened once/);
      const echo = await s.client.callTool({ name: 'echo', arguments: { text: 'hi' } });
      assert.ok(!echo.isError);
      assert.deepEqual(value(echo), { text: 'hi' });
    } finally {
      await s.close();
    }
    const refunds = await p.refunds();
    assert.equal(refunds.length, 1);
    // The send carried the gate's key in the idempotency argument (the lookup's reference).
    assert.match(refunds[0].reference, /^[0-9a-f]{32}$/);
  });

  t('stdio, F3: the same call twice, then twice at once: one refund', async () => {
    const p = await place(proxy);
    const s = await p.stdio();
    try {
      const a = await s.client.callTool({ name: 'create_refund', arguments: REFUND });
      const b = await s.client.callTool({ name: 'create_refund', arguments: REFUND });
      assert.ok(!a.isError && !b.isError, text(b));
      assert.equal(outcome(b).replayed, true);
      assert.match(text(b), /already done by an earlier identical call/);
      const other = { order_id: ORDER, amount_cents: 1000, case_id: 'x' };
      await Promise.all([1, 2].map(() => s.client.callTool({ name: 'create_refund', arguments: other })));
    } finally {
      await s.close();
    }
    // One refund for the first call; the concurrent pair has a different payload under the
    // same key, so it is refused as conflicting: nothing more sent.
    assert.deepEqual((await p.refunds()).map((r) => r.amount_cents), [2000]);
  });

  t('stdio, F5: the same key with another amount: isError, conflicting_payload, nothing sent', async () => {
    const p = await place(proxy);
    const s = await p.stdio();
    try {
      await s.client.callTool({ name: 'create_refund', arguments: REFUND });
      const r = await s.client.callTool({ name: 'create_refund', arguments: { ...REFUND, amount_cents: 3000 } });
      assert.equal(r.isError, true);
      assert.equal(outcome(r).state, 'REFUSED');
      assert.equal(outcome(r).reason, 'conflicting_payload');
      // The same words as Node's protect() says for the same calls: one reply, from the component.
      assert.equal(text(r), await protectSays([REFUND, { ...REFUND, amount_cents: 3000 }]));
    } finally {
      await s.close();
    }
    assert.equal((await p.refunds()).length, 1);
  });

  t('stdio, F8: killed before the send, a hand refund, restart: REFUSED with what changed, $20 total', async () => {
    const p = await place(proxy);
    p.hangNext('before-apply');
    const s = await p.stdio();
    const pending = s.client.callTool({ name: 'create_refund', arguments: REFUND }).catch((e) => e);
    await p.hung();
    await s.kill();
    await pending;
    await sleep(200); // the upstream child sees its stdin close and exits
    const pay = await Payments.open(stateFile(p.dir));
    pay.refundByHand(ORDER, 2000, Date.now());

    const again = await p.stdio();
    try {
      const r = await again.client.callTool({ name: 'create_refund', arguments: REFUND });
      assert.equal(r.isError, true);
      assert.equal(outcome(r).state, 'REFUSED');
      assert.equal(outcome(r).reason, 'premise_changed');
      assert.match(text(r), /refunded_total was 0, is now 2000/);
    } finally {
      await again.close();
    }
    const refunds = await p.refunds();
    assert.deepEqual(refunds.map((r) => [r.amount_cents, r.by_hand]), [[2000, true]]);
  });

  t('stdio, F9: killed before the send, the lease revoked, restart: REFUSED, nothing sent', async () => {
    const p = await place(proxy);
    p.hangNext('before-apply');
    const s = await p.stdio();
    const pending = s.client.callTool({ name: 'create_refund', arguments: REFUND }).catch((e) => e);
    await p.hung();
    await s.kill();
    await pending;
    await lease(p.journal, { revoke: true });
    const again = await p.stdio();
    try {
      const r = await again.client.callTool({ name: 'create_refund', arguments: REFUND });
      assert.equal(r.isError, true);
      assert.equal(outcome(r).reason, 'lease_revoked');
    } finally {
      await again.close();
    }
    assert.equal((await p.refunds()).length, 0);
  });

  t('stdio, tier 2: killed after the upstream applied, restart: resolved by the lookup tool, one refund', async () => {
    const p = await place(proxy);
    p.hangNext('after-apply');
    const s = await p.stdio();
    const pending = s.client.callTool({ name: 'create_refund', arguments: REFUND }).catch((e) => e);
    await p.hung();
    await s.kill();
    await pending;
    const again = await p.stdio();
    try {
      const r = await again.client.callTool({ name: 'create_refund', arguments: REFUND });
      assert.ok(!r.isError, text(r));
      assert.equal(outcome(r).state, 'COMMITTED');
    } finally {
      await again.close();
    }
    assert.equal((await p.refunds()).length, 1);
  });

  t('stdio, tier 3: killed after the upstream applied, restart: AMBIGUOUS said to the model, nothing resent', async () => {
    const p = await place(proxy, { tier: '3' });
    p.hangNext('after-apply');
    const s = await p.stdio();
    const pending = s.client.callTool({ name: 'create_refund', arguments: REFUND }).catch((e) => e);
    await p.hung();
    await s.kill();
    await pending;
    const again = await p.stdio();
    try {
      const r = await again.client.callTool({ name: 'create_refund', arguments: REFUND });
      assert.equal(r.isError, true);
      assert.equal(outcome(r).state, 'AMBIGUOUS');
      assert.match(text(r), /UNKNOWN whether create_refund happened/);
    } finally {
      await again.close();
    }
    assert.equal((await p.refunds()).length, 1);
  });

  t('stdio, F11: two calls racing one $30 cap at once: one lands', async () => {
    const extra = { key: ['order_id', 'case_id'], cap: { name: `order_${ORDER}`, limit_cents: 3000, amount_argument: 'amount_cents' } };
    const p = await place(proxy, { extra });
    const s = await p.stdio();
    try {
      const rs = await Promise.all(['c1', 'c2'].map((case_id) => s.client.callTool({ name: 'create_refund', arguments: { ...REFUND, case_id } })));
      assert.deepEqual(rs.map((r) => Boolean(r.isError)).sort(), [false, true]);
    } finally {
      await s.close();
    }
    assert.equal((await p.refunds()).length, 1);
  });

  t('stdio: a call missing its key argument: isError with the pointer, nothing sent or recorded', async () => {
    const p = await place(proxy);
    const s = await p.stdio();
    try {
      const r = await s.client.callTool({ name: 'create_refund', arguments: { amount_cents: 2000 } });
      assert.equal(r.isError, true);
      assert.match(text(r), /\/arguments\/order_id/);
    } finally {
      await s.close();
    }
    assert.equal((await p.refunds()).length, 0);
  });

  t('a bad config: the proxy refuses to start, naming the JSON pointer', async () => {
    const p = await place(proxy);
    const bad = path.join(p.dir, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify(refundConfig('2', { keys: ['order_id'] }, p.journal)));
    const run = start(/** @type {string} */ (proxy.command), [...proxy.prefix, '--config', bad, '--', process.execPath, ...serverArgs(p.dir)], process.env);
    const code = await Promise.race([run.exited.then(() => run.child.exitCode), sleep(20_000).then(() => 'still running')]);
    await run.kill();
    assert.notEqual(code, 0);
    assert.notEqual(code, 'still running');
    assert.match(run.err(), /\/tools\/create_refund\/keys/);
  });

  t('Streamable HTTP both sides (--listen, --upstream): once, F3, echo', async () => {
    const p = await place(proxy);
    const upstream = await startHttpServer(p.dir);
    try {
      const s = await p.http(upstream.url);
      try {
        assert.deepEqual((await s.client.listTools()).tools.map((x) => x.name).sort(), TOOLS);
        const a = await s.client.callTool({ name: 'create_refund', arguments: REFUND });
        assert.ok(!a.isError, text(a));
        const b = await s.client.callTool({ name: 'create_refund', arguments: REFUND });
        assert.equal(outcome(b).replayed, true);
        assert.deepEqual(value(await s.client.callTool({ name: 'echo', arguments: { text: 'hi' } })), { text: 'hi' });
      } finally {
        await s.close();
      }
    } finally {
      await upstream.kill();
    }
    assert.equal((await p.refunds()).length, 1);
  });

  t('Streamable HTTP both sides: killed while the upstream holds the reply, restart: the lookup settles it, one refund', async () => {
    const p = await place(proxy);
    const upstream = await startHttpServer(p.dir, { hang: p.hang });
    try {
      p.hangNext('after-apply');
      const s = await p.http(upstream.url);
      const pending = s.client.callTool({ name: 'create_refund', arguments: REFUND }).catch((e) => e);
      await p.hung();
      await s.kill();
      await pending;
      const again = await p.http(upstream.url);
      try {
        const r = await again.client.callTool({ name: 'create_refund', arguments: REFUND });
        assert.ok(!r.isError, text(r));
        assert.equal(outcome(r).state, 'COMMITTED');
      } finally {
        await again.close();
      }
    } finally {
      await upstream.kill();
    }
    assert.equal((await p.refunds()).length, 1);
  });

  t('Streamable HTTP to the agent, stdio upstream: tier 2 killed after the send, restart: one refund', async () => {
    const p = await place(proxy);
    p.hangNext('after-apply');
    const s = await p.http(undefined);
    const pending = s.client.callTool({ name: 'create_refund', arguments: REFUND }).catch((e) => e);
    await p.hung();
    await s.kill();
    await pending;
    await sleep(200);
    const again = await p.http(undefined);
    try {
      const r = await again.client.callTool({ name: 'create_refund', arguments: REFUND });
      assert.ok(!r.isError, text(r));
      assert.equal(outcome(r).state, 'COMMITTED');
    } finally {
      await again.close();
    }
    assert.equal((await p.refunds()).length, 1);
  });
}
