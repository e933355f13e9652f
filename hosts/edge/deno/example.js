// The package under Deno, as an app would use it: a $20 refund gated over a SQLite journal
// (node:sqlite) at the path given, against the simulated payments API (tier 2). Prints the
// outcome as JSON.   deno run --allow-read --allow-write --allow-env deno/example.js /tmp/j.db
import { Interlock, Payments, paymentsTarget } from './mod.js';

const path = Deno.args[0];
const payments = await Payments.inMemory('2');
payments.addOrder('order_881', 10000);
const interlock = await Interlock.open(path);
const gate = interlock.gate;
await gate.grantLease('case-4471', Date.now() + 3_600_000);
const target = paymentsTarget(payments, interlock.clock);
const proposal = {
  agent: 'refund-agent',
  target: { name: 'payments', dedupes: false, lookup: true },
  key: 'refund:order_881',
  effect: { order: 'order_881', amount_cents: 2000 },
  authority: { lease: 'case-4471' },
  premises: payments.premises('order_881', null),
};
const first = await gate.submit(proposal, target);
const again = await gate.submit(proposal, target);
console.log(JSON.stringify({ first, again, refunds: payments.refundCount(), verify: gate.verify() }));
interlock.storage.close();
