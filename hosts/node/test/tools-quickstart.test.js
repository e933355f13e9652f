// The README's quickstart for Node protect(): the lines between the markers are the
// README's snippet, as is. Around them: a payments service (the simulator) whose
// get_order / create_refund / find_refund stand for the developer's own functions.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Payments } from '@interlock/gate';
// README: protect (begin)
import { protect } from '@interlock/gate';
// README: protect (end)

test('the README quickstart for protect() runs as written: one refund, a message for the model', async () => {
  process.chdir(fs.mkdtempSync(path.join(os.tmpdir(), 'interlock-quickstart-')));
  const payments = await Payments.inMemory('2');
  payments.addOrder('881', 10000);
  const get_order = ({ order_id, excluding }) => ({ refunded_total: payments.premises(order_id, excluding).refunded_by_others_cents });
  const create_refund = ({ order_id, amount_cents, reference }) => payments.refund(order_id, amount_cents, null, reference, Date.now());
  const find_refund = ({ reference }) => ({ found: payments.findByReference(reference) });

  // README: protect (begin)
  const tools = await protect({ get_order, create_refund, find_refund }, {
    journal_dir: '.interlock/tools',
    tools: { create_refund: {
      key: ['order_id'],
      premises: { tool: 'get_order', arguments: { order_id: 'order_id', excluding: '$effect_id' }, fields: ['refunded_total'] },
      lookup: { tool: 'find_refund', arguments: { reference: '$effect_id' }, found: 'found' },
      idempotency_argument: 'reference',
      authority: { lease: 'case-4471' },
    } },
  });
  await tools.gate.grantLease('case-4471', Date.now() + 3_600_000); // a person grants the case's lease
  await tools.recover(); // once, at startup: settles what a crash left open

  const out = await tools.create_refund({ order_id: '881', amount_cents: 2000 });
  console.log(out.ok, out.message); // hand out.message back to the model as the tool's result
  // README: protect (end)

  assert.equal(out.ok, true);
  assert.match(out.message, /^create_refund done; it happened once/);
  assert.equal(out.outcome.state, 'COMMITTED');
  const again = await tools.create_refund({ order_id: '881', amount_cents: 2000 });
  assert.equal(again.outcome.replayed, true);
  assert.equal(payments.refundCount(), 1);
  assert.ok(fs.existsSync('.interlock/tools'));
  tools.close();
});
