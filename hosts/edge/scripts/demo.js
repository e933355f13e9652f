// The demo at the edge: the gate as a Worker in workerd (a Durable Object journal), a $20
// refund against a payments API that can be looked up (tier 2), workerd killed (SIGKILL)
// after the refund landed and before the reply, restarted over the same storage: recovery
// looks the refund up and closes it COMMITTED. Paid once.
//   bash hosts/edge/demo.sh          (installs, bundles, runs this)
//   bash hosts/edge/demo.sh --serve  (the same against `interlock serve`: INTERLOCK_CLI, or
//                                     the CLI that scripts/demo.sh built)
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { homedir } from 'node:os';
import { bundle } from './bundle.js';
import { startWorkerd, startServe, paymentsServer, api, refund, tempDir, cleanup } from '../test/helpers.js';

const SERVE = process.argv.includes('--serve');
if (SERVE && !process.env.INTERLOCK_CLI) {
  const target = process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache/interlock-target');
  const built = ['release', 'debug'].map((p) => join(target, p, 'interlock')).find((p) => existsSync(p));
  if (!built) throw new Error('no interlock binary: run scripts/demo.sh (or set INTERLOCK_CLI)');
  process.env.INTERLOCK_CLI = built;
}
const [NAME, start] = SERVE ? ['interlock serve', startServe] : ['workerd', startWorkerd];
const WHERE = SERVE ? 'interlock serve (the wasi:http component on wasmtime), one instance per journal' : 'workerd, one Durable Object per journal';

if (!SERVE) await bundle({ quiet: true });
const disk = tempDir('interlock-edge-demo-');
let w;
const pay = await paymentsServer({
  onApply: async () => {
    console.log(`── the refund executes at the payments API; ${NAME} dies before the reply ──`);
    console.log(`💥 ${NAME} SIGKILLed`);
    await w.kill();
    return 'hang';
  },
});
try {
  const env = { INTERLOCK_TARGETS: pay.targets };
  w = await start({ disk, env });
  console.log(`system: INTERLOCK in ${WHERE} (${w.url}); payments API at tier 2 (${pay.base})`);
  console.log('customer paid $100. case #4471 approves one $20 partial refund.');
  await api(w.url, 'demo', 'PUT', '/leases/case-4471', { expires_at_ms: Date.now() + 3_600_000 });
  console.log('agent decides: refund $20  →  POST /v1/journals/demo/effects');
  await api(w.url, 'demo', 'POST', '/effects', refund()).catch(() => {});
  await w.exited;
  console.log(`── ${NAME} restarts over the same storage ──`);
  w = await start({ disk, env });
  const r = await api(w.url, 'demo', 'POST', '/recover');
  const o = r.json[0].outcome;
  const lines = (await api(w.url, 'demo', 'GET', '/entries')).text.trim().split('\n').map((l) => JSON.parse(l));
  console.log(`journal says DISPATCHED with no COMMITTED → recovery: ${o.state} (via ${lines.at(-1).via})`);
  console.log(`refunded on order #881: $${pay.service.refundedCents('order_881') / 100} (${pay.service.refundCount()} refund record(s))`);
  console.log('journal:');
  for (const e of lines.filter((l) => l.effect_id ?? l.stream.startsWith('effect:'))) {
    console.log(`  ${e.state.padEnd(11)} ${e.stream.slice('effect:'.length)}${e.via ? ` ${e.via}` : ''}`);
  }
  const v = (await api(w.url, 'demo', 'POST', '/verify')).json;
  console.log(`verify: ${v.streams} streams, ${v.entries} entries, ${v.problems.length} problems`);
  console.log(`final ${o.state}`);
  if (o.state !== 'COMMITTED' || pay.service.refundCount() !== 1) process.exitCode = 1;
} finally {
  await w?.stop();
  await pay.close();
  cleanup(disk);
}
