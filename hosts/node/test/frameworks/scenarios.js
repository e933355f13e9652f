// The four rows of the original's framework table (reply lost; a hand refund during the
// outage; the approval revoked during the outage; two approvals racing one $30 cap), each
// run with a framework alone (as documented) and with Interlock inside. One module: the
// tests (test/frameworks/*.test.js) and the experiment scripts
// (experiments/frameworks/*.mjs) both call runRow.
//
// The payments service (the simulator) runs in this process behind a small HTTP server on
// 127.0.0.1, so every worker is a client, as against a real API, and two racing workers
// cannot lose each other's refunds in a state file. Each worker is a child process
// (worker.js) running the framework's real loop with a scripted model; a crash is a real
// SIGKILL of that process at a point the test names, once.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Interlock, Payments, ServiceError } from '../../src/index.js';

const WORKER = fileURLToPath(new URL('./worker.js', import.meta.url));
export const ORDER = '881';
export const LEASE = 'case-4471';
export const ROWS = /** @type {const} */ (['reply_lost', 'hand_refund', 'approval_revoked', 'cap_race']);
/** How a framework's worker carries on after a restart, "as documented". */
export const RESTART = {
  'ai-sdk': 'the restarted worker ran the request again (generateText from the start: the SDK keeps no run state)',
  'openai-agents': 'the restarted worker ran the request again (run() from the start: no run state was saved)',
  langgraph: 'the restarted worker resumed the thread from its SQLite checkpoint (the tool node ran again)',
};
export const CAP = { name: `order_${ORDER}`, limit_cents: 3000, amount_argument: 'amount_cents' };

/**
 * The tool-gating configuration of create_refund (tier 2: refunds looked up by reference).
 * @param {{ cap?: boolean }} [o]
 */
export function refundConfig({ cap = false } = {}) {
  return {
    tools: {
      create_refund: {
        key: cap ? ['order_id', 'case_id'] : ['order_id'],
        // The cap row has no premise read: what holds it must be the cap journal alone (a
        // premise on refunded_total would also refuse the loser, as premise_changed).
        ...(cap ? {} : { premises: { tool: 'get_order', arguments: { order_id: 'order_id', excluding: '$effect_id' }, fields: ['refunded_total'] } }),
        lookup: { tool: 'find_refund', arguments: { reference: '$effect_id' }, found: 'found' },
        idempotency_argument: 'reference',
        // A killed worker's claim lapses after this: the restart's recover() waits it out.
        timeout_ms: 1000,
        ...(cap ? { cap: CAP } : {}),
      },
    },
  };
}

/** The payments service (tier 2, order 881 paid $100) served over HTTP. */
async function startService(dir) {
  const pay = await Payments.create(path.join(dir, 'payments.json'), '2');
  pay.addOrder(ORDER, 10000);
  /** @type {Record<string, (a: any) => unknown>} */
  const tools = {
    get_order: ({ order_id, excluding }) => {
      const p = pay.premises(order_id, excluding);
      return { order_id, eligible: p.eligible, refunded_total: p.refunded_by_others_cents };
    },
    create_refund: ({ order_id, amount_cents, reference }) => pay.refund(order_id, amount_cents, reference, reference, Date.now()),
    find_refund: ({ reference }) => ({ found: pay.findByReference(reference) }),
  };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      const { tool, args } = JSON.parse(body);
      try {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(tools[tool](args) ?? null));
      } catch (e) {
        // The service refused and applied nothing: the worker raises Rejected.
        const status = e instanceof ServiceError ? 422 : 500;
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(/** @type {any} */ (e).message) }));
      }
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', () => r(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    pay,
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise((r) => server.close(() => r(undefined))),
    refunds: () => pay.refunds(ORDER),
  };
}

/**
 * One worker process: the framework's agent, one request ("refund $20 on order 881").
 * @param {object} job
 * @returns {Promise<{ code: number | null, signal: string | null, err: string, report: any }>}
 */
export function worker(job) {
  const child = spawn(process.execPath, [WORKER, JSON.stringify(job)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve) => child.on('exit', (code, signal) => {
    let report = null;
    try { report = out.trim() ? JSON.parse(out.trim().split('\n').at(-1)) : null; } catch { report = { raw: out }; }
    resolve({ code, signal, err, report });
  }));
}

/** @param {{ code: number | null, signal: string | null, err: string }} r */
function expectKilled(r) {
  if (r.signal !== 'SIGKILL') throw new Error(`the worker was to die mid-send, it ended ${r.code ?? r.signal}: ${r.err}`);
}
/** @param {{ code: number | null, signal: string | null, err: string }} r */
function expectDone(r) {
  if (r.code !== 0) throw new Error(`the worker failed (${r.code ?? r.signal}): ${r.err}`);
}

/**
 * Runs `row` with `framework` (a driver in drivers/) alone or with Interlock inside; the
 * cell: refunds counted at the service, and for "with" the final state of the effect.
 * @param {string} framework
 * @param {typeof ROWS[number]} row
 * @param {'alone' | 'with'} mode
 */
export async function runRow(framework, row, mode) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `interlock-fw-${framework}-`));
  const service = await startService(dir);
  const cap = row === 'cap_race';
  // Two racing workers share a journal: SQLite (one machine); the other rows a file journal.
  const journal = cap ? `sqlite://${path.join(dir, 'journal.db')}` : path.join(dir, 'journal');
  const base = { framework, mode, dir, service: service.url, journal, config: refundConfig({ cap }) };
  const gate = async () => Interlock.open(journal);
  const restart = RESTART[/** @type {keyof typeof RESTART} */ (framework)] ?? 'the restarted worker ran the request again';
  /** @type {any[]} */
  let reports = [];
  let note = '';
  try {
    if (row === 'reply_lost') {
      if (mode === 'with') { const g = await gate(); await g.lease(LEASE, { ttlMs: 3_600_000 }); g.close(); }
      const job = { ...base, authority: { lease: LEASE } };
      expectKilled(await worker({ ...job, crash: 'after-apply' }));
      const r = await worker(job);
      expectDone(r);
      reports = [r.report];
      note = mode === 'with'
        ? 'killed after the service took the refund; at restart recover() found it by lookup (COMMITTED) and the model\'s repeated call was answered from the journal'
        : `killed after the service took the refund; ${restart} and the tool sent again (no idempotency key: the tool is the developer's plain function)`;
    } else if (row === 'hand_refund') {
      if (mode === 'with') { const g = await gate(); await g.lease(LEASE, { ttlMs: 3_600_000 }); g.close(); }
      const job = { ...base, authority: { lease: LEASE } };
      expectKilled(await worker({ ...job, crash: 'before-apply' }));
      service.pay.refundByHand(ORDER, 2000, Date.now()); // support, during the outage
      const r = await worker(job);
      expectDone(r);
      reports = [r.report];
      note = mode === 'with'
        ? 'decided $20, killed before the send; support refunded $20 by hand; at restart the re-check saw refunded_total change: REFUSED premise_changed, nothing sent'
        : `decided $20, killed before the send; support refunded $20 by hand; ${restart} and sent the $20 again`;
    } else if (row === 'approval_revoked') {
      const approval = 'apr-7';
      if (mode === 'with') {
        const g = await gate();
        await g.approve({ approval, approver: 'manager@shop', request: { key: ['create_refund', ORDER], effect: { order_id: ORDER, amount_cents: 2000 } } });
        g.close();
      }
      const job = { ...base, authority: { approval } };
      expectKilled(await worker({ ...job, crash: 'before-apply', approved: true }));
      // The manager revokes during the outage: in the journal (with), in the app's own
      // approval store (alone), which the framework's resumed run does not read again.
      if (mode === 'with') { const g = await gate(); await g.revokeApproval(approval); g.close(); }
      else fs.writeFileSync(path.join(dir, 'approval-revoked'), approval);
      const r = await worker({ ...job, approved: true });
      expectDone(r);
      reports = [r.report];
      note = mode === 'with'
        ? 'approved (an Interlock approval), killed before the send, the approval revoked during the outage; at restart REFUSED approval_revoked, nothing sent'
        : `approved, killed before the send, the approval revoked during the outage (in the app's own store: the framework has no revocable approval it re-checks); ${restart} and sent $20`;
    } else if (row === 'cap_race') {
      const cases = [['case-1', 'apr-1'], ['case-2', 'apr-2']];
      if (mode === 'with') {
        const g = await gate();
        for (const [case_id, approval] of cases) {
          await g.approve({ approval, approver: 'manager@shop', request: { key: ['create_refund', ORDER, case_id], effect: { order_id: ORDER, amount_cents: 2000, case_id } } });
        }
        g.close();
      }
      const rs = await Promise.all(cases.map(([case_id, approval]) => worker({ ...base, authority: { approval }, caseId: case_id, approved: true })));
      rs.forEach(expectDone);
      reports = rs.map((r) => r.report);
      note = mode === 'with'
        ? 'two workers, each with its own approved $20, at once on one SQLite journal, no premise read configured; the cap journal reserved $20 of the $30 cap for one, the other REFUSED cap_exceeded before its send'
        : 'two workers, each with its own approved $20, at once; nothing in the framework knows the $30 cap: both sent';
    }
    const refunds = service.refunds();
    /** @type {Record<string, unknown>} */
    const cell = { refunded_cents: refunds.reduce((s, r) => s + r.amount_cents, 0), refunds: refunds.length };
    if (mode === 'with') {
      const outs = reports.flatMap((r) => [...(r.recovered ?? []), ...(r.outputs ?? [])]);
      const states = reports.map((r) => [...(r.recovered ?? []), ...(r.outputs ?? [])].at(-1));
      cell.state = states.map((s) => s?.state).join(', ');
      const reasons = outs.map((o) => o?.reason).filter(Boolean);
      if (reasons.length) cell.reason = [...new Set(reasons)].join(', ');
    }
    cell.note = note;
    return { cell, reports, dir };
  } finally {
    await service.close();
  }
}

/**
 * What each cell must stay: "with" holds at $20 ($0 for the revoked approval) for every
 * framework; "alone" is what was measured here, asserted so the table cannot silently change.
 * @type {Record<string, Record<string, { alone: number, with: number, state: string, reason?: string }>>}
 */
export const EXPECTED = {
  default: {
    reply_lost: { alone: 4000, with: 2000, state: 'COMMITTED' },
    hand_refund: { alone: 4000, with: 2000, state: 'REFUSED', reason: 'premise_changed' },
    approval_revoked: { alone: 2000, with: 0, state: 'REFUSED', reason: 'approval_revoked' },
    cap_race: { alone: 4000, with: 2000, state: 'COMMITTED+REFUSED', reason: 'cap_exceeded' },
  },
};

/**
 * Checks a cell against EXPECTED; returns the problems (none: it holds).
 * @param {string} framework
 * @param {typeof ROWS[number]} row
 * @param {'alone' | 'with'} mode
 * @param {any} cell
 */
export function check(framework, row, mode, cell) {
  const want = (EXPECTED[framework] ?? EXPECTED.default)[row] ?? EXPECTED.default[row];
  const problems = [];
  if (cell.refunded_cents !== want[mode]) problems.push(`${row} ${mode}: refunded ${cell.refunded_cents} cents, expected ${want[mode]}`);
  if (mode === 'with') {
    const states = String(cell.state).split(', ').sort().join('+');
    if (states !== want.state) problems.push(`${row} with: state ${cell.state}, expected ${want.state}`);
    if ((cell.reason ?? undefined) !== want.reason) problems.push(`${row} with: reason ${cell.reason}, expected ${want.reason}`);
  }
  return problems;
}

/**
 * The node:test cases of one framework: a test per cell ("with" must hold; "alone" as measured).
 * @param {typeof import('node:test').test} test
 * @param {string} framework
 */
export function rowTests(test, framework) {
  // The cells are independent (own folders, service, ports); most of a cell is waiting (a
  // process starting, a killed worker's claim lapsing), so three run at once.
  test(`${framework}: the four rows, alone and with Interlock inside`, { concurrency: 3 }, async (t) => {
    const cells = [];
    for (const row of ROWS) {
      for (const mode of /** @type {const} */ (['with', 'alone'])) {
        cells.push(t.test(`${framework}: ${row}, ${mode === 'with' ? 'with Interlock inside' : 'the framework alone (as measured)'}`, async () => {
          const { cell, reports } = await runRow(framework, row, mode);
          const problems = check(framework, row, mode, cell);
          if (problems.length) throw new Error(`${problems.join('; ')}\n${JSON.stringify(reports)}`);
        }));
      }
    }
    await Promise.all(cells);
  });
}
