// A journal written by a JS agent (the AI SDK with protectTools, killed after the service
// took the refund) is recovered by the CLI (`interlock mcp-proxy`, which recovers every open
// effect before it serves) and by Python (`python -m interlock.mcp_proxy`): each keeps the
// bytes the JS agent wrote, byte for byte, in front; each settles the effect the same way
// (COMMITTED via the lookup); the service holds one refund.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cliBinary, GATE_WASM } from '../helpers.js';
import { Payments } from '../../src/index.js';
import { tmp, serverArgs, stateFile, stdioClient, lease } from '../fixtures/mcp/harness.js';
import { refundConfig, ORDER } from '../fixtures/mcp/payments-tools.js';

const AGENT = fileURLToPath(new URL('./js-agent.js', import.meta.url));
const PY_SRC = fileURLToPath(new URL('../../../python/src', import.meta.url));
// The package's source runs with the repository's components (dist/), as its tests do.
const DIST = Object.fromEntries(Object.entries({
  INTERLOCK_WASM: 'interlock_gate.wasm', INTERLOCK_PAYMENTS_WASM: 'payments_sim.wasm', INTERLOCK_JOURNAL_FORMAT_WASM: 'journal_format.wasm',
}).map(([k, f]) => [k, process.env[k] ?? fileURLToPath(new URL(`../../../../dist/${f}`, import.meta.url))]));
const cli = process.env.INTERLOCK_CLI ?? cliBinary();
const python = process.env.INTERLOCK_PYTHON ?? fileURLToPath(new URL('../../../python/.venv/bin/python', import.meta.url));
const skip = !cli ? 'the CLI binary is missing: cargo build -p interlock-cli (or set INTERLOCK_CLI)'
  : !fs.existsSync(python) ? 'the Python venv is missing: bash hosts/python/test.sh (or set INTERLOCK_PYTHON)' : false;

/** A folder: payments.json (order 881, $100, tier 2), the config file, the journal with the lease. */
async function place(dir = tmp()) {
  const config = path.join(dir, 'interlock.mcp.json');
  fs.writeFileSync(config, JSON.stringify(refundConfig('2', {}, path.join(dir, 'journal')), null, 2));
  return { dir, config, journal: path.join(dir, 'journal', 'journal.jsonl') };
}

/** The journal's entries, without what depends on when they were written. */
const entries = (/** @type {string} */ text) => text.trim().split('\n').map((l) => {
  const { at_ms, hash, prev, ...rest } = JSON.parse(l);
  return rest;
});

test('a journal a JS agent crashed is recovered by the CLI and by Python byte for byte, its bytes kept', { skip }, async () => {
  const js = await place();
  await lease(path.join(js.dir, 'journal'));
  const pay = await Payments.create(stateFile(js.dir), '2');
  pay.addOrder(ORDER, 10000);
  const run = spawnSync(process.execPath, [AGENT, js.config, stateFile(js.dir)], { encoding: 'utf8' });
  assert.equal(run.signal, 'SIGKILL', run.stderr);
  const written = fs.readFileSync(js.journal);
  assert.match(written.toString(), /"DISPATCHED"/);

  // Both recover at one fixed time (past the dead agent's claim, inside its lease), so what
  // they write on top of the JS journal can be compared byte for byte, hashes included.
  const at = String(Date.now() + 60_000);
  const hosts = [
    { name: 'interlock mcp-proxy', command: /** @type {string} */ (cli), prefix: ['--wasm', GATE_WASM, '--clock-ms', at, 'mcp-proxy'], env: process.env },
    { name: 'python -m interlock.mcp_proxy', command: python, prefix: ['-m', 'interlock.mcp_proxy', '--clock-ms', at], env: { ...process.env, PYTHONPATH: PY_SRC, ...DIST } },
  ];
  const after = [];
  for (const host of hosts) {
    // Each host gets its own copy of what the JS agent left: the journal and the service.
    const copy = await place();
    fs.cpSync(path.join(js.dir, 'journal'), path.join(copy.dir, 'journal'), { recursive: true });
    fs.copyFileSync(stateFile(js.dir), stateFile(copy.dir));
    const args = [...host.prefix, '--config', copy.config, '--agent', 'refund-agent', '--', process.execPath, ...serverArgs(copy.dir)];
    const c = await stdioClient(host.command, args, /** @type {any} */ (host.env)).catch((e) => {
      const r = spawnSync(host.command, args, { env: host.env, encoding: 'utf8', input: '' });
      throw new Error(`${host.name} did not start: ${e.message}\n${r.stderr}`);
    });
    await c.client.listTools(); // serving: the recovery at start is done
    await c.close();
    const bytes = fs.readFileSync(copy.journal);
    assert.deepEqual(bytes.subarray(0, written.length), written, `${host.name} kept the JS agent's bytes in front`);
    const added = entries(bytes.subarray(written.length).toString());
    assert.deepEqual(added.map((e) => [e.state, e.via]), [['COMMITTED', 'recovery-query']], `${host.name}: ${c.err()}`);
    assert.equal((await Payments.open(stateFile(copy.dir))).refunds(ORDER).length, 1);
    after.push(bytes);
  }
  // What the CLI and Python wrote on top of the JS journal is the same, byte for byte.
  assert.ok(after[0].equals(after[1]), `the CLI and Python recovered differently:\n${after[0]}\n${after[1]}`);
});
