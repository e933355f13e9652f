// The README's edge demo, as a user runs it (`bash hosts/edge/demo.sh [--serve]`): against
// workerd and against `interlock serve`, the server dies after the refund landed and
// recovery closes it COMMITTED, one refund record.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { SERVERS, ROOT } from './helpers.js';

for (const [server, args] of [[SERVERS[0], []], [SERVERS[1], ['--serve']]]) {
  test(`demo.sh ${args.join(' ')}: ${server.name} killed mid-refund, paid once`, { skip: server.skip }, () => {
    const out = execFileSync('bash', [join(ROOT, 'demo.sh'), ...args], { encoding: 'utf8', env: process.env });
    assert.match(out, new RegExp(`💥 ${server.name} SIGKILLed`));
    assert.match(out, /recovery: COMMITTED \(via recovery-query\)/);
    assert.match(out, /refunded on order #881: \$20 \(1 refund record\(s\)\)/);
    assert.match(out, /verify: 2 streams, 5 entries, 0 problems/);
  });
}
