// The example survives a real crash after the send (a child killed with SIGKILL) with one
// refund, at every tier.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { PKG, tempDir } from './helpers.js';

for (const [tier, want] of [['1', /COMMITTED via recovery-retry/], ['2', /COMMITTED via recovery-query/], ['3', /AMBIGUOUS \(no_dedupe_no_lookup\)/]]) {
  test(`examples/refund.js at tier ${tier}: killed after the send, recovered, paid once`, () => {
    const dir = tempDir();
    try {
      const out = execFileSync(process.execPath, [join(PKG, 'examples/refund.js'), '--tier', tier, '--dir', dir], { encoding: 'utf8' });
      assert.match(out, /killed \(SIGKILL\)/);
      assert.match(out, want);
      assert.match(out, /refunded on order_881: \$20 in 1 refund\(s\)/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
