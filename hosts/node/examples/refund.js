// A $20 refund through Interlock with an async refund function, a real crash after the
// send, and a restart: paid once.
//
//   node examples/refund.js [--tier 1|2|3] [--dir DIR] [--no-recover]
//
// --no-recover stops after the crash and leaves the journal for another host (the CLI's
// `interlock recover DIR` recovers it the same way).
//
// The parent process starts a child that submits the refund. The refund function awaits
// the (simulated) payments API; the API commits the refund, and the child is killed with
// SIGKILL before the reply reaches the gate. The restarted process recovers: tier 1 resends
// under the same idempotency key (deduped), tier 2 looks the refund up, tier 3 says
// AMBIGUOUS and sends nothing.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Interlock, Payments } from '../src/index.js';

const { values: opts, positionals } = parseArgs({
  options: { tier: { type: 'string', default: '1' }, dir: { type: 'string' }, 'no-recover': { type: 'boolean', default: false } },
  allowPositionals: true,
});
const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'interlock-refund-'));
const paymentsFile = join(dir, 'payments.json');
const dollars = (cents) => `$${cents / 100}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The agent's side of the story: one gate, one effect. Same code before and after the crash. */
async function agent({ onSent } = {}) {
  const payments = await Payments.open(paymentsFile);
  const tier = payments.tier();
  const gate = await Interlock.open(dir, { agent: 'refund-agent' });
  const refund = gate.effect(
    {
      target: 'payments',
      params: ['order', 'amount_cents'],
      key: (e) => `refund:${e.order}`, // from the approved request, never from model output
      lease: 'case-4471',
      premises: (e, { effectId }) => payments.premises(e.order, effectId),
      dedupes: tier.startsWith('1'),
      lookup: tier.includes('lookup') || tier === '2'
        ? async (_e, { effectId }) => payments.findByReference(effectId)
        : undefined,
      timeoutMs: 1000,
    },
    async (order, amountCents, idempotencyKey, { effectId }) => {
      await sleep(20); // the network
      const r = payments.refund(order, amountCents, idempotencyKey, effectId, Date.now());
      await onSent?.(r);
      return { refund_id: r.id, amount_cents: r.amount_cents };
    },
  );
  return { gate, refund, payments };
}

if (positionals[0] === 'child') {
  const { refund } = await agent({
    onSent: async () => {
      // The service committed. Tell the parent, then wait to be killed: the reply never
      // reaches the gate.
      process.stdout.write('SENT\n');
      await new Promise(() => {});
    },
  });
  await refund('order_881', 2000);
} else {
  const payments = await Payments.create(paymentsFile, opts.tier);
  payments.addOrder('order_881', 10_000);
  {
    const gate = await Interlock.open(dir);
    await gate.lease('case-4471', { ttlMs: 3_600_000 });
    gate.close();
  }
  console.log(`payments API at tier ${opts.tier}; customer paid $100; case #4471 approves one $20 refund`);
  console.log('agent decides: refund $20');
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), 'child', '--dir', dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      if (String(d).includes('SENT')) child.kill('SIGKILL');
    });
    child.on('exit', (code, signal) => (signal === 'SIGKILL' ? resolve() : reject(new Error(`child exited ${code} ${signal}: no crash`))));
  });
  console.log('refund sent; the process was killed (SIGKILL) before the reply: crash');
  if (opts['no-recover']) {
    console.log(`journal left for recovery: ${dir}`);
    process.exit(0);
  }
  console.log('── process restarts ──');
  const { gate, refund, payments: after } = await agent();
  for (const { effectId, outcome, error } of await gate.recover()) {
    if (error) throw error;
    const receipt = gate.receipt(effectId);
    console.log(`recovered ${effectId}: ${outcome.state}${outcome.reason ? ` (${outcome.reason})` : ''}${receipt.via ? ` via ${receipt.via}` : ''}`);
  }
  const again = await refund('order_881', 2000); // the agent's own retry
  console.log(`agent retries: ${again.state}${again.replayed ? ' (replayed)' : ''}`);
  const refunds = after.refunds('order_881');
  console.log(`refunded on order_881: ${dollars(after.refundedCents('order_881'))} in ${refunds.length} refund(s)`);
  console.log(`journal: ${dir}`);
  gate.close();
}
