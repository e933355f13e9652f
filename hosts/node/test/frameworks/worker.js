// One worker process of the framework scenarios (scenarios.js): the framework's agent serving
// one request, "refund $20 on order 881", its tools calling the payments service over HTTP.
// A crash is a real SIGKILL of this process, once (the point is consumed before dying):
// 'before-apply' as the refund is about to be sent, 'after-apply' once the service has
// taken it, before the reply reaches the agent. Prints one JSON line: what happened.
import fs from 'node:fs';
import path from 'node:path';
import { Rejected } from '../../src/index.js';

const job = JSON.parse(process.argv[2]);

/** Dies now, as a killed worker does: nothing after this line runs. */
function die() {
  process.kill(process.pid, 'SIGKILL');
}

/** @param {string} tool @param {unknown} args */
async function service(tool, args) {
  const res = await fetch(job.service, { method: 'POST', body: JSON.stringify({ tool, args }) });
  const body = await res.json();
  if (res.status === 422) throw new Rejected(body.error); // refused, nothing applied
  if (!res.ok) throw new Error(`payments service: ${body.error}`);
  return body;
}

let crash = job.crash;
/** The developer's own tool functions (what the framework's tools call). */
export const functions = {
  /** @param {{ order_id: string, excluding?: string }} a */
  get_order: (a) => service('get_order', a),
  /** @param {{ order_id: string, amount_cents: number, case_id?: string, reference?: string }} a */
  create_refund: async (a) => {
    if (crash === 'before-apply') { crash = undefined; die(); await new Promise(() => {}); }
    const r = await service('create_refund', a);
    if (crash === 'after-apply') { crash = undefined; die(); await new Promise(() => {}); }
    return r;
  },
  /** @param {{ reference: string }} a */
  find_refund: (a) => service('find_refund', a),
};

/** The request the scripted model turns into a call: $20 on order 881 (and the case, in the cap race). */
const call = { order_id: '881', amount_cents: 2000, ...(job.caseId ? { case_id: job.caseId } : {}) };

const driver = await import(`./drivers/${job.framework}.js`);
const report = await driver.run({
  job,
  functions,
  call,
  options: { journal: job.journal, agent: 'refund-agent', authority: job.authority },
  state: path.join(job.dir, `state-${job.caseId ?? 'main'}`),
});
fs.writeSync(1, JSON.stringify(report) + '\n');
process.exit(0);
