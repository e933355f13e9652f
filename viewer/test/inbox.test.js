// The inbox page (viewer/inbox.html) in headless Chromium, through its own controls, as a
// person uses it. In the page (the gate component over an in-memory journal, the simulated
// payments service at tier 3, a scripted agent):
//   - a person approves a refund and sees it go out: the agent's next round sends it once,
//     the service holds one refund, the receipt is COMMITTED with the decision beside it;
//   - a send the network drops becomes AMBIGUOUS in the inbox; a person looks it up, says
//     "it did not happen" with evidence; the agent's retry is replayed (nothing sent); a new
//     request (a new key) is a new item, a new decision, and goes out once;
//   - a decider whose lease is revoked is refused, in the gate's words, nothing recorded;
//   - an hour on the clock escalates a pending item to its escalation approvers;
// and saves results/viewer-inbox.png. Against `interlock serve` (INTERLOCK_CLI): see
// inbox-serve.test.js.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { existsSync } from 'node:fs';
import { serve, ROOT } from '../serve.js';
import { launch, act } from './browser.js';

const SHOT = join(ROOT, 'results/viewer-inbox.png');
let server;
let chrome;
let page;

before(async () => {
  server = await serve({ port: 0 });
  chrome = await launch();
  page = chrome.page;
  await page.goto(`http://127.0.0.1:${server.address().port}/viewer/inbox.html`);
  await page.waitForFunction(() => window.inbox?.ready === true, null, { timeout: 30_000 }).catch((e) => {
    throw new Error(`the inbox page did not load: ${chrome.pageErrors.join('; ') || e.message}`);
  });
});

after(async () => {
  await chrome?.close();
  server?.close();
});

const card = (key) => `#items .item[data-key="${key}"]`;

/** What the inbox shows: key -> { kind, status, actions (button verbs) }. */
function inbox() {
  return page.$$eval('#items .item', (cards) => Object.fromEntries(cards.map((c) => [c.dataset.key, {
    kind: c.dataset.kind, status: c.dataset.status, item: c.dataset.item,
    actions: [...c.querySelectorAll('.acts .act')].map((b) => b.dataset.verdict),
  }])));
}

/** The agent's requests as the page shows them: task -> { state, reason, replayed, effect }. */
function tasks() {
  return page.$$eval('#tasks tr.task', (rows) => Object.fromEntries(rows.map((r) => [r.dataset.task,
    { state: r.dataset.state, reason: r.dataset.reason, replayed: r.dataset.replayed === 'true', effect: r.dataset.effect }])));
}

/** The payments service's refunds as the page shows them: [order, cents]. */
function statement() {
  return page.$$eval('#statement li[data-order]', (l) => l.map((x) => [x.dataset.order, Number(x.dataset.cents)]));
}

async function agent(button) {
  await page.click(button);
  await page.waitForFunction(() => ['ok', 'error'].includes(document.querySelector('#status').dataset.state)
    && !document.querySelector('#status').textContent.endsWith('…'), null, { timeout: 20_000 });
  const s = await page.$eval('#status', (e) => ({ state: e.dataset.state, text: e.textContent }));
  assert.equal(s.state, 'ok', s.text);
}

/**
 * `who` decides on the item of `key` through its card. Resolves to the card's result:
 * { ok: true } once the decided card is shown, or { ok: false, error, text }.
 */
async function decide(who, key, verdict, { why, evidence, look = false } = {}) {
  await page.selectOption('#decider', who);
  const sel = card(key);
  const item = await page.$eval(sel, (c) => c.dataset.item);
  if (why !== undefined) await page.fill(`${sel} .why`, why);
  if (look) await page.click(`${sel} .look`);
  if (evidence !== undefined) await page.fill(`${sel} .evidence`, evidence);
  return act(page, sel, item, verdict);
}

async function receipt(task) {
  await page.click(`#tasks tr.task[data-task="${task}"] button`);
  const effect = await page.$eval(`#tasks tr.task[data-task="${task}"]`, (r) => r.dataset.effect);
  await page.waitForSelector(`#receipt [data-effect="${effect}"]`);
  return page.$eval('#receipt > div', (r) => ({
    final: r.dataset.final, executed: r.dataset.executed,
    decisions: [...r.querySelectorAll('.r-decisions li')].map((li) => [li.dataset.decider, li.dataset.verdict]),
    text: r.textContent,
  }));
}

test('the agent submits: the rules hold four refunds for a person, one goes out by rule', async () => {
  assert.equal(await page.$eval('#count', (e) => e.textContent), '0');
  await agent('#agent-start');
  assert.deepEqual(Object.fromEntries(Object.entries(await tasks()).map(([t, v]) => [t, [v.state, v.reason]])), {
    r1: ['COMMITTED', ''],
    r2: ['PROPOSED', 'approval_pending'], r3: ['PROPOSED', 'approval_pending'],
    r4: ['PROPOSED', 'approval_pending'], r5: ['PROPOSED', 'approval_pending'],
  });
  const items = await inbox();
  assert.deepEqual(Object.keys(items).sort(), ['refund:order_1002', 'refund:order_1003', 'refund:order_1004', 'refund:order_1005']);
  for (const it of Object.values(items)) assert.deepEqual([it.kind, it.status, it.actions], ['approval', 'pending', ['approve', 'reject']]);
  // What is known is on the card: the rule and route, who may decide, the premises seen, the deadlines.
  const facts = await page.$eval(card('refund:order_1005'), (c) => Object.fromEntries([...c.querySelectorAll('.fact')].map((f) => [f.dataset.fact, f.querySelector('dd').textContent])));
  assert.match(facts.rule, /large → route finance/);
  assert.match(facts['who may decide'], /^alice@shop, bob@shop$/);
  assert.match(facts.approvals, /0 of 2/);
  assert.match(facts['premises seen'], /eligible · \$0 refunded by others/);
  assert.match(facts.deadlines, /escalates .*\(in 1 h\).*expires .*\(in 24 h\)/);
  assert.deepEqual(await statement(), [['order_1001', 1500]]);
});

test('approve, and see the effect go out once; the receipt shows the decision', async () => {
  // No why on a route that requires one: the gate says so, nothing recorded.
  const bare = await decide('alice@shop', 'refund:order_1002', 'approve', { why: '' });
  assert.equal(bare.ok, false);
  assert.match(bare.text, /\/why: route requires a justification/);
  const ok = await decide('alice@shop', 'refund:order_1002', 'approve', { why: 'tracking shows 9 days late' });
  assert.ok(ok.ok, ok.text);
  assert.ok(!(await inbox())['refund:order_1002'], 'an approved item leaves the inbox');
  assert.deepEqual(await statement(), [['order_1001', 1500]], 'nothing is sent by the approval itself');
  await agent('#agent-round');
  const t = await tasks();
  assert.deepEqual([t.r2.state, t.r3.state], ['COMMITTED', 'PROPOSED']);
  assert.deepEqual(await statement(), [['order_1001', 1500], ['order_1002', 8000]]);
  // Another round sends nothing more.
  await agent('#agent-round');
  assert.deepEqual(await statement(), [['order_1001', 1500], ['order_1002', 8000]]);
  const r = await receipt('r2');
  assert.deepEqual([r.final, r.executed], ['COMMITTED', 'yes']);
  assert.deepEqual(r.decisions, [['alice@shop', 'approve']]);
  assert.match(r.text, /tracking shows 9 days late/);
});

test('a dropped send is AMBIGUOUS in the inbox; "did not happen" never resends by itself; a new request does, once', async () => {
  const ok = await decide('alice@shop', 'refund:order_1004', 'approve', { why: 'photo of the damage' });
  assert.ok(ok.ok, ok.text);
  // The network drops the send; the agent waits as the gate says, then it is AMBIGUOUS (tier 3: no key, no lookup).
  await agent('#agent-round');
  assert.deepEqual([(await tasks()).r4.state, (await tasks()).r4.reason], ['AMBIGUOUS', 'no_dedupe_no_lookup']);
  const amb = (await inbox())['refund:order_1004'];
  assert.deepEqual([amb.kind, amb.status, amb.actions], ['ambiguous', 'AMBIGUOUS', ['happened', 'did_not_happen']]);
  assert.deepEqual(await statement(), [['order_1001', 1500], ['order_1002', 8000]]);
  // Without evidence the gate refuses the verdict.
  const noEvidence = await decide('bob@shop', 'refund:order_1004', 'did_not_happen', { why: 'not on the statement', evidence: '' });
  assert.equal(noEvidence.ok, false);
  assert.match(noEvidence.text, /\/evidence: is required/);
  // Bob looks the order up at the payments service (nothing there) and says so.
  const settled = await decide('bob@shop', 'refund:order_1004', 'did_not_happen', { why: 'no refund for order_1004 at the service', look: true });
  assert.ok(settled.ok, settled.text);
  assert.ok(!(await inbox())['refund:order_1004'], 'a settled item leaves the inbox');
  const ev = await page.$eval(`#decided .item[data-item="${settled.item}"] .decisions li[data-verdict="did_not_happen"] .ev`, (e) => e.textContent);
  assert.deepEqual(JSON.parse(ev), { payments_service_refunds: [] });
  // The agent's retry of the same request: replayed from the journal, nothing sent.
  const resend = `#decided .item[data-item="${settled.item}"] .resend`;
  await page.click(`${resend} .retry`);
  await page.waitForSelector(`${resend} .resend-line[data-step="retry"]`);
  assert.deepEqual(await page.$eval(`${resend} .resend-line[data-step="retry"]`, (e) => [e.dataset.state, e.dataset.replayed]), ['AMBIGUOUS', 'true']);
  await agent('#agent-round');
  assert.deepEqual(await statement(), [['order_1001', 1500], ['order_1002', 8000]]);
  // Asked again as a new request: a new key, a new item, a new decision.
  await page.click(`${resend} .ask-again`);
  await page.waitForSelector(`${resend} .resend-line[data-step="again"]`);
  assert.deepEqual(await page.$eval(`${resend} .resend-line[data-step="again"]`, (e) => [e.dataset.task, e.dataset.state]), ['r4#2', 'PROPOSED']);
  const fresh = (await inbox())['refund:order_1004#2'];
  assert.deepEqual([fresh.kind, fresh.status], ['approval', 'pending']);
  assert.notEqual(fresh.item, settled.item);
  assert.ok((await decide('alice@shop', 'refund:order_1004#2', 'approve', { why: 'checked: never paid' })).ok);
  await agent('#agent-round');
  assert.equal((await tasks())['r4#2'].state, 'COMMITTED');
  assert.equal(await page.$eval(`${resend} .resend-line[data-step="again"]`, (e) => e.dataset.state), 'COMMITTED');
  assert.deepEqual(await statement(), [['order_1001', 1500], ['order_1002', 8000], ['order_1004', 6500]]);
  const r = await receipt('r4');
  assert.deepEqual([r.final, r.executed], ['AMBIGUOUS', 'unknown']);
  assert.deepEqual(r.decisions, [['alice@shop', 'approve'], ['bob@shop', 'did_not_happen']]);
  const r2 = await receipt('r4#2');
  assert.deepEqual([r2.final, r2.decisions], ['COMMITTED', [['alice@shop', 'approve']]]);
});

test('a decider whose lease is revoked is refused, in the gate\'s words; nothing recorded', async () => {
  await page.selectOption('#decider', 'bob@shop');
  await page.click('#lease-toggle');
  await page.waitForFunction(() => document.querySelector('#lease-state').dataset.state === 'REVOKED');
  const refused = await decide('bob@shop', 'refund:order_1003', 'reject', { why: 'asked twice' });
  assert.equal(refused.ok, false);
  assert.equal(refused.error, 'invalid-field');
  assert.match(refused.text, /\/decider: bob@shop may not decide: their lease is revoked/);
  assert.deepEqual((await inbox())['refund:order_1003'].status, 'pending');
  assert.equal(await page.$eval(card('refund:order_1003'), (c) => c.querySelector('[data-fact="decisions"] dd').textContent), 'none yet');
  // Alice still may.
  assert.ok((await decide('alice@shop', 'refund:order_1003', 'reject', { why: 'store credit already given' })).ok);
  await agent('#agent-round');
  assert.deepEqual([(await tasks()).r3.state, (await tasks()).r3.reason], ['REFUSED', 'approval_rejected']);
  assert.deepEqual(await statement(), [['order_1001', 1500], ['order_1002', 8000], ['order_1004', 6500]]);
});

test('an hour passes: the pending item escalates to the escalation approver', async () => {
  await page.fill(`${card('refund:order_1005')} .why`, 'typed before the hour');
  await page.click('#hour');
  await page.waitForFunction((s) => document.querySelector(s)?.dataset.status === 'escalated', card('refund:order_1005'));
  const who = await page.$eval(card('refund:order_1005'), (c) => c.querySelector('[data-fact="who may decide"] dd').textContent);
  assert.match(who, /alice@shop, bob@shop, cfo@shop/);
  // What was typed on the card survives the refresh only while the item is unchanged; the
  // escalated item is a new view: the text is carried over.
  assert.equal(await page.inputValue(`${card('refund:order_1005')} .why`), 'typed before the hour');
  const one = await decide('cfo@shop', 'refund:order_1005', 'approve', { why: 'bulk order cancelled in writing' });
  assert.ok(one.ok, one.text);
  const after = (await inbox())['refund:order_1005'];
  assert.deepEqual([after.status], ['escalated'], 'one of two approvals: still waiting');
  const again = await decide('cfo@shop', 'refund:order_1005', 'approve', { why: 'twice' });
  assert.equal(again.ok, false);
  assert.match(again.text, /cfo@shop already approved; 1 more distinct approver/);
});

test('what changed: approved on premises that no longer hold, the item comes back to its approvers', async () => {
  assert.ok((await decide('alice@shop', 'refund:order_1005', 'approve', { why: 'second pair of eyes' })).ok);
  assert.ok(!(await inbox())['refund:order_1005'], 'two of two: approved');
  await page.click('#hand-refund');
  await page.waitForFunction(() => document.querySelector('#status').dataset.state === 'ok' && /by hand/.test(document.querySelector('#status').textContent));
  await agent('#agent-round');
  assert.deepEqual([(await tasks()).r5.state, (await tasks()).r5.reason], ['PROPOSED', 'approval_stale']);
  const back = (await inbox())['refund:order_1005'];
  assert.deepEqual([back.kind, back.status, back.actions], ['approval', 'pending', ['approve', 'reject']]);
  const facts = await page.$eval(card('refund:order_1005'), (c) => Object.fromEntries([...c.querySelectorAll('.fact')].map((f) => [f.dataset.fact, f.querySelector('dd').textContent])));
  assert.equal(facts['what changed'], 'refunded by others was $0, now $50');
  assert.match(facts['premises seen'], /\$50 refunded by others \(round 2\)/);
  assert.match(facts.approvals, /^0 of 2/);
  assert.deepEqual((await statement()).filter(([o]) => o === 'order_1005'), [['order_1005', 5000]], 'only the hand refund: the agent sent nothing');
});

test('the scoreboard: the gate\'s count of what reached a person', async () => {
  const board = await page.$eval('#scoreboard', (b) => ({
    requests: Number(b.querySelector('.score-line').dataset.requests), byRule: Number(b.querySelector('.score-line').dataset.byRule),
    finance: Object.fromEntries(Object.entries(b.querySelector('tr[data-route="finance"]').dataset)),
  }));
  // r1 approved by rule; r2, r4 and r4#2 approved, r3 rejected, r5 back on its new premises.
  assert.deepEqual([board.requests, board.byRule], [6, 1]);
  assert.deepEqual(board.finance, { route: 'finance', items: '5', pending: '1', escalated: '0', approved: '3', rejected: '1', expired: '0', deadlinesMissed: '0' });
});

test('screenshot: the inbox page (results/viewer-inbox.png)', async () => {
  await page.click(`#tasks tr.task[data-task="r4"] button`);
  await page.waitForSelector('#receipt .receipt[data-final="AMBIGUOUS"]');
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: SHOT, fullPage: true });
  assert.ok(existsSync(SHOT));
  console.log(`screenshot: ${SHOT}`);
});

test('no errors in the page', () => {
  assert.deepEqual(chrome.pageErrors, []);
});
