// A Node worker of hosts/cli/tests/shared_kill.rs (the many-workers kill runs): the same loop
// as that test's CLI workers, in this host. It submits refunds drawn from the moving window
// of keys and now and then recovers, on the shared journal at URL, against the one payments
// service of the run (its state file, each request under the flock of payments.lock, given
// up unsent when the service cannot take it within a quarter of the claim), until it is
// killed. Prints `ready` once set up.
//
//   node shared-worker.js URL SERVICE_FILE SEED START_MS PLAN
//
// PLAN is the run as the test gives it (JSON): the proposal of effect 0, the number of
// orders, the window of keys and the service's send wait, so this file holds none of them.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import { Gate, GateError, Payments, SystemClock, gateComponent, openJournal, paymentsTarget } from '../src/index.js';

const { flockSync } = createRequire(import.meta.url)('fs-ext');

/** Effect `k`: the plan's proposal under key `refund:k`, on order `k` mod orders. */
const proposal = (plan, k) => {
  const p = structuredClone(plan.proposal);
  p.key = `refund:${k}`;
  p.effect.order = `order_${k % plan.orders}`;
  return JSON.stringify(p);
};

/** splitmix64, as the test's workers draw. */
function rng(seed) {
  let s = BigInt.asUintN(64, BigInt(seed));
  return (n) => {
    s = BigInt.asUintN(64, s + 0x9e3779b97f4a7c15n);
    let z = s;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    return Number((z ^ (z >> 31n)) % BigInt(n));
  };
}

const sleepSync = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** The run's one payments service, one request at a time. */
function sharedService(path, clock, sendWaitMs) {
  const lockPath = path.replace(/\.json$/, '.lock');
  const withService = async (f) => {
    const fd = fs.openSync(lockPath, 'a');
    try {
      const until = Date.now() + sendWaitMs;
      for (;;) {
        try {
          flockSync(fd, 'exnb');
          break;
        } catch (e) {
          if (e.code !== 'EWOULDBLOCK' && e.code !== 'EAGAIN') throw e;
          if (Date.now() >= until) return null;
          sleepSync(1);
        }
      }
      return f(paymentsTarget(await Payments.open(path), clock));
    } finally {
      fs.closeSync(fd); // releases the flock
    }
  };
  const late = (tag) => ({ tag, val: 'the service did not answer in time' });
  return {
    routes: ['payments'],
    capture: async (req) => (await withService((t) => t.capture(req))) ?? late('failed'),
    authorize: async () => ({ tag: 'failed', val: 'no host check in this test' }),
    // Given up before it reached the service: its fate is not known to the gate.
    apply: async (req) => (await withService((t) => t.apply(req))) ?? late('unknown'),
    query: async (req) => (await withService((t) => t.query(req))) ?? late('failed'),
  };
}

const [url, service, seed, startMs, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const draw = rng(seed);
const clock = new SystemClock();
const gate = await Gate.instantiate(await gateComponent(), { journal: openJournal(url), clock });
const target = sharedService(service, clock, plan.send_wait_ms);
console.log('ready');
for (;;) {
  try {
    if (draw(5) === 0) {
      await gate.recoverAll(target);
    } else {
      const window = Math.floor((clock.nowMs() - Number(startMs)) / plan.window_ms);
      await gate.submit(proposal(plan, window * plan.window + draw(plan.window)), target);
    }
  } catch (e) {
    // A gate error (the journal failing while the server restarts) ends one operation;
    // anything else (a trap) ends the worker.
    if (!(e instanceof GateError)) throw e;
    console.error(`error: ${e.message}`);
  }
}
