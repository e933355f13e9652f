// What only `interlock serve` has: a shared SQL journal (one journal, served under --name),
// beside the folder of journals the other tests use.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { SERVERS, startServe, paymentsServer, api, refund, tempDir, cleanup } from './helpers.js';

const FAR = 4_102_444_800_000;

test('serve over a shared SQLite journal: the one journal it names, no other', { skip: SERVERS[1].skip }, async () => {
  const disk = tempDir();
  const pay = await paymentsServer();
  const url = `sqlite://${join(disk, 'shared.db')}`;
  let w = await startServe({ disk, journals: url, name: 'refunds', env: { INTERLOCK_TARGETS: pay.targets } });
  try {
    assert.equal((await api(w.url, 'refunds', 'PUT', '/leases/case-4471', { expires_at_ms: FAR })).status, 204);
    const r = await api(w.url, 'refunds', 'POST', '/effects', refund());
    assert.equal(r.json.state, 'COMMITTED', r.text);
    const other = await api(w.url, 'another', 'GET', '/entries');
    assert.equal(other.status, 503, other.text);
    assert.match(other.json.error.message, /serves one journal, "refunds"/);
    // A second server over the same journal sees the same effect, replayed, not resent.
    await w.stop();
    w = await startServe({ disk, journals: url, name: 'refunds', env: { INTERLOCK_TARGETS: pay.targets } });
    const again = await api(w.url, 'refunds', 'POST', '/effects', refund());
    assert.equal(again.json.replayed, true, again.text);
    assert.equal(pay.service.refundCount(), 1);
  } finally {
    await w.stop();
    await pay.close();
    cleanup(disk);
  }
});
