// The payments MCP server fixture (TS SDK McpServer), called directly by the TS SDK Client
// over stdio and Streamable HTTP: the baseline the proxy tests stand on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { tmp, serverArgs, stdioClient, httpClient, startHttpServer, value, waitFor, sleep } from './fixtures/mcp/harness.js';
import { Payments } from '../src/index.js';

const TOOLS = ['create_refund', 'echo', 'find_refund', 'get_order', 'refund_by_hand'];

test('the payments server over stdio: tools, a refund, its lookup, a refusal; state kept in the file', async () => {
  const dir = tmp();
  const c = await stdioClient(process.execPath, serverArgs(dir));
  try {
    const { tools } = await c.client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
    const r = await c.client.callTool({ name: 'create_refund', arguments: { order_id: '881', amount_cents: 2000, reference: 'ref-1' } });
    assert.equal(r.isError, undefined);
    assert.equal(value(r).amount_cents, 2000);
    assert.equal(value(await c.client.callTool({ name: 'find_refund', arguments: { reference: 'ref-1' } })).found.id, value(r).id);
    assert.equal(value(await c.client.callTool({ name: 'find_refund', arguments: { reference: 'nope' } })).found, null);
    assert.deepEqual(value(await c.client.callTool({ name: 'get_order', arguments: { order_id: '881' } })), { order_id: '881', eligible: true, refunded_total: 2000 });
    assert.equal(value(await c.client.callTool({ name: 'get_order', arguments: { order_id: '881', excluding: 'ref-1' } })).refunded_total, 0);
    const bad = await c.client.callTool({ name: 'create_refund', arguments: { order_id: 'nope', amount_cents: 1 } });
    assert.equal(bad.isError, true);
  } finally {
    await c.close();
  }
  const pay = await Payments.open(path.join(dir, 'payments.json'));
  assert.equal(pay.refundCount(), 1);
});

test('the payments server over Streamable HTTP; PAYMENTS_HANG hangs one create_refund after applying, once', async () => {
  const dir = tmp();
  const flag = path.join(dir, 'hang');
  fs.writeFileSync(flag, 'after-apply');
  const s = await startHttpServer(dir, { hang: flag });
  try {
    const c = await httpClient(s.url);
    const hung = c.client.callTool({ name: 'create_refund', arguments: { order_id: '881', amount_cents: 2000, reference: 'r' } }).catch((e) => e);
    await waitFor(() => fs.existsSync(`${flag}.hit`), 'the hang');
    await waitFor(async () => (await Payments.open(path.join(dir, 'payments.json'))).refundCount() === 1, 'the refund applied');
    const echo = await c.client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    assert.deepEqual(value(echo), { text: 'hi' });
    void hung;
    await c.close();
  } finally {
    await s.kill();
  }
});

test('a stdio server exits when its stdin closes (a killed proxy leaves no orphan holding state)', async () => {
  const child = spawn(process.execPath, serverArgs(tmp()), { stdio: ['pipe', 'ignore', 'inherit'] });
  const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
  await sleep(300);
  child.stdin.end();
  assert.deepEqual(await exited, { code: 0, signal: null });
});
