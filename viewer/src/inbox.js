// The inbox page: each item the gate's `inbox` lists, what is known of it, and the actions
// it says are safe now, as buttons that call the gate's `decide`. Two places the journal
// can be: in this page (shop.js: the gate component over an in-memory journal, the
// simulated payments service and a scripted agent), or on a server (server-desk.js: the
// HTTP API of `interlock serve`, same origin through `viewer/serve.js --api`). Either way
// the page only shows what the gate answers, its refusals in its own words: no rule of who
// may decide what, or when, is written here.
import { $, h, money, badge, shortId, premiseText, changedText, reasonText } from './ui.js';
import { ServerDesk } from './server-desk.js';

const SERVER = new URLSearchParams(location.search).has('server');
/** The in-page shop (page mode), or null. */
let shop = null;
/** What answers the person: the shop, or a ServerDesk. */
let desk = null;
/** effect id -> the item as the gate last showed it (inbox or decide), for the receipt's decisions. */
const seen = new Map();
/** effect id -> the item as `decide` answered it, in the order decided. */
const decided = new Map();
/** effect id -> what happened on the resend path (page mode). */
const resend = new Map();
let selected = null;
let busy = false;

const VERBS = {
  approve: 'Approve', reject: 'Reject', happened: 'It happened', did_not_happen: 'It did not happen', dismiss: 'Dismiss',
};
const KINDS = {
  approval: 'needs a decision', ambiguous: 'did it happen?', refused: 'refused', contradiction: 'the service disagrees', closed: 'decided',
};

// ---------------------------------------------------------------- formatting

const now = () => (shop ? shop.now() : Date.now());

/** A time as the page's clock shows it: "Wed 2 Dec, 09:00 UTC". */
const clockText = (ms) => `${new Date(ms).toLocaleString('en-GB', {
  timeZone: 'UTC', weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit',
})} UTC`;

/** How far `ms` is from now, in words ("in 59 min", "2 h ago"). */
const fromNow = (ms) => {
  const d = ms - now();
  const a = Math.abs(d);
  const t = a < 60_000 ? `${Math.round(a / 1000)} s` : a < 3_600_000 ? `${Math.round(a / 60_000)} min` : a < 172_800_000 ? `${+(a / 3_600_000).toFixed(1)} h` : `${Math.round(a / 86_400_000)} days`;
  return d >= 0 ? `in ${t}` : `${t} ago`;
};
const when = (ms) => `${clockText(ms)} (${fromNow(ms)})`;

const refundText = (effect) => (effect && typeof effect.amount_cents === 'number'
  ? `${money(effect.amount_cents)} on ${effect.order ?? '?'}`
  : JSON.stringify(effect));

const evidenceText = (ev) => (typeof ev === 'string' ? ev : JSON.stringify(ev));

function setStatus(state, text) {
  const s = $('status');
  s.dataset.state = state;
  s.textContent = text;
}

/** A gate's or a server's refusal, in its own words. */
const errorText = (e) => e?.message ?? String(e);

// ---------------------------------------------------------------- an item

function fact(name, ...value) {
  return h('div', { class: 'fact', 'data-fact': name }, h('dt', {}, name), h('dd', {}, ...value));
}

function decisionsList(decisions) {
  if (!decisions?.length) return h('span', { class: 'muted' }, 'none yet');
  return h('ol', { class: 'decisions' }, ...decisions.map((d) => h('li', { 'data-decider': d.decider, 'data-verdict': d.verdict },
    h('strong', {}, d.decider), ' ', h('span', { class: `verdict v-${d.verdict}` }, d.verdict.replaceAll('_', ' ')),
    d.at_ms ? h('span', { class: 'muted' }, ` · ${clockText(d.at_ms)}`) : null,
    d.why ? h('span', { class: 'd-why' }, ` · “${d.why}”`) : null,
    d.evidence !== undefined ? h('code', { class: 'ev' }, evidenceText(d.evidence)) : null)));
}

function targetText(t) {
  if (!t || typeof t !== 'object') return String(t ?? '');
  const bits = [t.name];
  bits.push(t.dedupes ? 'dedupes by key' : 'no idempotency keys');
  bits.push(t.lookup ? 'can be asked' : 'no lookup');
  if (t.timeout_ms !== undefined) bits.push(`times out after ${t.timeout_ms} ms`);
  return bits.join(' · ');
}

/** The facts of an item: everything the gate's view says, in words. */
function facts(it) {
  const rows = [
    fact('agent', it.agent ?? '?'),
    fact('target', targetText(it.target)),
    fact('key', h('code', {}, it.key ?? '')),
  ];
  if (it.rule) {
    rows.push(fact('rule', h('code', {}, it.rule), ' → route ', h('strong', {}, it.route)));
    if (it.kind === 'approval') {
      rows.push(fact('who may decide', (it.approvers ?? []).join(', ') || 'nobody now', it.status === 'escalated' ? h('span', { class: 'tag esc' }, 'escalated') : null));
    }
    rows.push(fact('approvals', `${it.approved_by?.length ?? 0} of ${it.approvals_needed}`,
      it.approved_by?.length ? h('span', { class: 'muted' }, ` (${it.approved_by.join(', ')})`) : null,
      it.justification_required ? h('span', { class: 'muted' }, ' · a why is required') : null));
    rows.push(fact('premises seen', premiseText(it.premises_seen) || 'none', it.round ? h('span', { class: 'muted' }, ` (round ${it.round + 1})`) : null));
    const deadlines = [h('span', {}, `asked ${when(it.requested_at_ms)}`)];
    if (it.escalates_at_ms !== undefined) deadlines.push(h('span', { 'data-deadline': 'escalates' }, `escalates ${when(it.escalates_at_ms)}`));
    if (it.expires_at_ms !== undefined) deadlines.push(h('span', { 'data-deadline': 'expires' }, `expires ${when(it.expires_at_ms)}`));
    rows.push(fact('deadlines', h('span', { class: 'deadlines' }, ...deadlines)));
  }
  if (it.state) {
    rows.push(fact('the effect', badge(it.state), ` ${reasonText(it.reason)}`, it.executed ? ` · executed ${it.executed}` : ''));
  }
  rows.push(fact('what changed', it.changed?.length ? h('span', { class: 'changed' }, changedText(it.changed)) : h('span', { class: 'muted' }, 'nothing since it was asked')));
  if (it.contradiction) rows.push(fact('the service says', h('code', {}, JSON.stringify(it.contradiction))));
  rows.push(fact('decisions', decisionsList(it.decisions)));
  rows.push(fact('safe now', it.actions?.length ? it.actions.map((a) => VERBS[a] ?? a).join(' · ') : h('span', { class: 'muted' }, 'nothing')));
  return h('dl', { class: 'facts' }, ...rows);
}

/** Where an item stands: an approval's status, an effect's state. */
const standing = (it) => (it.kind === 'approval' || !it.state ? it.status ?? it.kind : it.state);

function head(it) {
  const status = standing(it);
  return h('div', { class: 'item-head' },
    h('span', { class: `kind k-${it.kind}` }, KINDS[it.kind] ?? it.kind),
    h('span', { class: 'amt' }, refundText(it.effect)),
    h('span', { class: `badge st st-${String(status).toLowerCase()}` }, status),
    h('span', { class: 'iid', title: it.item }, `item ${shortId(it.item)}`));
}

/** An inbox card: the facts, a why and evidence, and one button per safe action. */
function itemCard(it) {
  const needsEvidence = it.actions.some((a) => a === 'happened' || a === 'did_not_happen');
  const why = h('textarea', { class: 'why', rows: 2, placeholder: it.justification_required ? 'why (the route requires it)' : 'why (recorded with your decision)', 'aria-label': 'why' });
  const evidence = needsEvidence
    ? h('textarea', { class: 'evidence', rows: 2, placeholder: 'evidence: what shows it (text, or JSON)', 'aria-label': 'evidence' })
    : null;
  const result = h('p', { class: 'result', 'data-error': '' });
  const card = h('li', {
    class: `item k-${it.kind}`, 'data-item': it.item, 'data-kind': it.kind, 'data-status': standing(it),
    'data-key': it.key ?? '', 'data-view': JSON.stringify(it),
  }, head(it), facts(it),
  h('div', { class: 'act-form' },
    h('label', {}, h('span', { class: 'label' }, 'Why'), why),
    evidence ? h('label', {}, h('span', { class: 'label' }, 'Evidence'), evidence) : null,
    evidence && shop && it.effect?.order ? h('button', {
      type: 'button', class: 'btn ghost small look',
      onclick: () => { evidence.value = JSON.stringify({ payments_service_refunds: shop.statement(it.effect.order) }); },
    }, `Look up ${it.effect.order} at the payments service`) : null),
  h('div', { class: 'acts' }, ...it.actions.map((a) => h('button', {
    type: 'button', class: `btn act a-${a}`, 'data-verdict': a, onclick: () => act(it, a, card),
  }, VERBS[a] ?? a)),
  h('button', { type: 'button', class: 'btn ghost small', onclick: () => showReceipt(it.item) }, 'Receipt')),
  result);
  return card;
}

async function act(it, verdict, card) {
  if (busy) return;
  const why = card.querySelector('.why')?.value.trim();
  const evText = card.querySelector('.evidence')?.value.trim();
  const decision = { item: it.item, verdict };
  if (shop) decision.decider = $('decider').value;
  if (why) decision.why = why;
  if (evText) {
    try {
      decision.evidence = JSON.parse(evText);
    } catch {
      decision.evidence = evText;
    }
  }
  const result = card.querySelector('.result');
  busy = true;
  try {
    const after = await desk.decide(decision);
    seen.set(it.item, after);
    decided.delete(it.item);
    decided.set(it.item, after);
    result.className = 'result ok';
    result.dataset.error = '';
    result.textContent = `Recorded: ${verdict.replaceAll('_', ' ')}.`;
    setStatus('ok', `${shop ? decision.decider : 'You'}: ${verdict.replaceAll('_', ' ')} on ${refundText(it.effect)} recorded.`);
    await render();
  } catch (e) {
    result.className = 'result bad';
    result.dataset.error = e.kind ?? e.case ?? e.name ?? 'error';
    result.textContent = errorText(e);
    setStatus('error', `Not recorded: ${errorText(e)}`);
  } finally {
    busy = false;
  }
}

/** What a decided item means now, and (page mode) the resend path after "did not happen". */
function decidedCard(it) {
  const last = it.decisions?.at(-1);
  const task = shop && [...shop.tasks.values()].find((t) => t.effectId === it.item);
  const what = [];
  if (last?.verdict === 'approve' && it.status === 'approved') {
    what.push(h('p', {}, 'Approved: the agent’s next submit goes on, re-checked as any other (lease, premises).'));
  } else if (last?.verdict === 'approve') {
    what.push(h('p', {}, `${it.approved_by.length} of ${it.approvals_needed} approvals: it still waits in the inbox for another approver.`));
  } else if (last?.verdict === 'reject') {
    what.push(h('p', {}, 'Rejected: the agent’s next submit is refused (approval_rejected), nothing sent.'));
  } else if (last?.verdict === 'happened') {
    what.push(h('p', {}, 'Recorded as CONFIRMED, with who and why.'));
  } else if (last?.verdict === 'did_not_happen') {
    const r = resend.get(it.item) ?? {};
    what.push(h('div', { class: 'resend', 'data-resend': it.item },
      h('p', {}, h('strong', {}, 'Never sent again by itself. '), 'A retry of the same request is answered from the journal: nothing is sent. To send it, the agent asks again as a new request (a new key): the rules meet it afresh, and a person decides again.'),
      shop && task ? h('div', { class: 'acts' },
        h('button', { type: 'button', class: 'btn ghost small retry', onclick: () => retrySame(it, task) }, `Let the agent retry ${task.task}`),
        h('button', { type: 'button', class: 'btn small ask-again', disabled: !!r.again, onclick: () => askAgain(it, task) }, 'Ask again as a new request')) : null,
      r.retry ? h('p', { class: 'resend-line', 'data-step': 'retry', 'data-state': r.retry.state, 'data-replayed': String(r.retry.replayed) },
        `${task.task} again: `, badge(r.retry.state), ` ${reasonText(r.retry.reason)}`, r.retry.replayed ? ' · replayed from the journal, nothing sent' : '') : null,
      r.again ? againLine(r.again.task) : null));
  } else if (last?.verdict === 'dismiss') {
    what.push(h('p', {}, 'Dismissed: nothing more to do.'));
  }
  return h('li', { class: `item decided-item k-${it.kind}`, 'data-item': it.item, 'data-kind': it.kind, 'data-status': standing(it) },
    head(it),
    h('dl', { class: 'facts' }, fact('key', h('code', {}, it.key ?? '')), fact('decisions', decisionsList(it.decisions))),
    ...what,
    h('div', { class: 'acts' }, h('button', { type: 'button', class: 'btn ghost small', onclick: () => showReceipt(it.item) }, 'Receipt')));
}

/** The new request's line: its key and the gate's last answer to it. */
function againLine(name) {
  const t = shop.tasks.get(name);
  const o = t.attempts.at(-1);
  return h('p', { class: 'resend-line', 'data-step': 'again', 'data-task': name, 'data-state': o.state },
    `New request ${name} (key `, h('code', {}, t.key), '): ', badge(o.state), ` ${reasonText(o.reason)}`,
    o.returnTo ? ` · in the inbox, route ${o.returnTo}` : '',
    o.state === 'COMMITTED' ? ` · sent once${o.result?.id ? ` (${o.result.id})` : ''}` : '');
}

async function retrySame(it, task) {
  if (busy) return;
  busy = true;
  try {
    const o = await shop.submit(task.task);
    resend.set(it.item, { ...resend.get(it.item), retry: o });
    setStatus('ok', `The agent retried ${task.task}: ${o.state}${o.replayed ? ', replayed from the journal, nothing sent' : ''}.`);
  } catch (e) {
    setStatus('error', errorText(e));
  } finally {
    busy = false;
  }
  await render();
}

async function askAgain(it, task) {
  if (busy) return;
  busy = true;
  try {
    const again = await shop.askAgain(task.task);
    resend.set(it.item, { ...resend.get(it.item), again });
    setStatus('ok', `The agent asked again: ${again.task}, ${again.outcome.state} ${again.outcome.reason ?? ''}.`);
  } catch (e) {
    setStatus('error', errorText(e));
  } finally {
    busy = false;
  }
  await render();
}

// ---------------------------------------------------------------- rendering

/** The inbox, keyed by item: a card whose item did not change keeps what was typed in it. */
async function renderInbox() {
  const items = await desk.inbox();
  const list = $('items');
  const old = new Map([...list.children].map((c) => [c.dataset.item, c]));
  const cards = items.map((it) => {
    seen.set(it.item, it);
    const was = old.get(it.item);
    if (was && was.dataset.view === JSON.stringify(it)) return was;
    const card = itemCard(it);
    for (const cls of ['why', 'evidence']) {
      const prev = was?.querySelector(`.${cls}`);
      const next = card.querySelector(`.${cls}`);
      if (prev && next) next.value = prev.value;
    }
    return card;
  });
  list.replaceChildren(...cards);
  $('count').textContent = String(items.length);
  $('count').dataset.count = String(items.length);
  $('empty').hidden = items.length > 0;
  $('decided').replaceChildren(...[...decided.values()].reverse().map(decidedCard));
}

function renderTasks() {
  if (!shop) return;
  $('agent-start').disabled = shop.tasks.size > 0;
  $('agent-round').disabled = shop.tasks.size === 0;
  $('tasks').replaceChildren(...[...shop.tasks.values()].map((t) => {
    const o = t.attempts.at(-1);
    return h('tr', {
      class: `task${selected && selected === t.effectId ? ' sel' : ''}`, 'data-task': t.task, 'data-state': o?.state ?? '',
      'data-reason': o?.reason ?? '', 'data-replayed': String(!!o?.replayed), 'data-effect': t.effectId ?? '',
    },
    h('td', {}, h('strong', {}, t.task), t.again ? h('span', { class: 'muted' }, ` (${t.again} asked again)`) : null,
      h('div', { class: 'muted small' }, t.say)),
    h('td', {}, money(t.amount_cents), h('div', { class: 'muted small' }, t.order, ' · ', h('code', {}, t.key))),
    h('td', {}, o ? [badge(o.state), ' ', h('span', { class: 'small' }, reasonText(o.reason)),
      o.replayed ? h('div', { class: 'muted small' }, 'replayed from the journal, nothing sent') : null,
      o.returnTo ? h('div', { class: 'muted small' }, `waits on ${o.returnTo}`) : null,
      h('div', { class: 'muted small' }, `${t.attempts.length} submit${t.attempts.length === 1 ? '' : 's'}`)] : '—'),
    h('td', {}, t.effectId ? h('button', { type: 'button', class: 'btn ghost small', onclick: () => showReceipt(t.effectId) }, 'Receipt') : null));
  }));
  const refunds = JSON.parse(shop.service.snapshot()).refunds;
  $('statement').replaceChildren(...refunds.map((r) => h('li', { 'data-order': r.order, 'data-cents': r.amount_cents, 'data-reference': r.reference ?? '' },
    h('code', {}, r.id), ` ${money(r.amount_cents)} on ${r.order}`, h('span', { class: 'muted' }, r.reference ? ` · reference ${shortId(r.reference)}` : ''))));
  if (refunds.length === 0) $('statement').append(h('li', { class: 'muted' }, 'No refunds yet.'));
  const cents = shop.refundedCents();
  $('refunded').textContent = money(cents);
  $('refunded').dataset.cents = String(cents);
  $('refund-count').textContent = String(refunds.length);
}

function renderWho() {
  if (!shop) return;
  const who = $('decider').value;
  const state = shop.leases().get(who);
  $('lease-state').textContent = state === 'REVOKED' ? 'lease revoked' : state ? 'lease granted' : 'no lease';
  $('lease-state').dataset.state = state ?? 'none';
  $('lease-toggle').textContent = state === 'REVOKED' ? `Grant ${who}’s lease again` : `Revoke ${who}’s lease`;
  $('clock').textContent = clockText(shop.now());
}

async function renderReceipt() {
  if (!selected) return;
  const id = selected;
  const box = $('receipt');
  let r;
  try {
    r = await desk.receipt(id);
  } catch (e) {
    if (id !== selected) return;
    box.replaceChildren(h('div', { class: 'receipt none', 'data-effect': id },
      h('p', {}, h('strong', {}, `effect ${shortId(id)}: no receipt. `), errorText(e)),
      h('p', { class: 'muted' }, 'Until a person approves it, nothing of the effect is recorded: only its request.'),
      decisionsBlock(id)));
    return;
  }
  if (id !== selected) return;
  box.replaceChildren(receiptCard(r));
}

/** Before there is a receipt: the decisions on the item as the inbox (or decide) last showed them. */
function decisionsBlock(id) {
  const it = seen.get(id);
  return h('div', { class: 'r-decisions' }, h('span', { class: 'label' }, 'Decisions on its item'), decisionsList(it?.decisions));
}

/** The receipt's own `people` part: the rule, the route and every decision, pinned as the effect's entries are. */
function peopleBlock(p) {
  if (!p) return h('div', { class: 'r-decisions', 'data-people': 'none' }, h('span', { class: 'muted' }, 'No rule sent it to a person: no decisions.'));
  return h('div', { class: 'r-decisions', 'data-people': p.stream },
    h('span', { class: 'label' }, p.by_rule ? `Approved by rule ${p.rule}` : `Rule ${p.rule ?? '—'}${p.route ? ` → route ${p.route}` : ''}: decisions`),
    decisionsList(p.decisions));
}

function receiptCard(r) {
  const fin = r.final ?? '?';
  const auth = r.authorized?.at(-1)?.checks ?? {};
  const row = (name, ...v) => h('div', { class: 'rrow', 'data-field': name }, h('dt', {}, name), h('dd', {}, ...v));
  return h('div', { class: `receipt f-${fin.toLowerCase()}`, 'data-effect': r.effect_id, 'data-final': fin, 'data-executed': r.executed },
    h('div', { class: 'r-head' }, h('span', { class: 'r-amt' }, money(r.effect?.amount_cents ?? 0)),
      h('span', { class: 'r-id' }, `effect ${shortId(r.effect_id)} · ${r.effect?.order ?? ''} · ${r.target?.name ?? ''}`), badge(fin, 'big')),
    h('dl', {},
      row('proposed', r.proposed ? `${clockText(r.proposed.at_ms)} · ${r.proposed.authority?.lease ? `lease ${r.proposed.authority.lease}` : JSON.stringify(r.proposed.authority)} · ${premiseText(r.proposed.premises)}` : '—'),
      row('authorized', r.authorized?.length ? [auth.lease ? `lease ${auth.lease.name} live` : '', auth.premises_held ? `; premises held (${premiseText(auth.premises_held)})` : ''].join('') : 'never'),
      row('executed', `${r.executed}${r.via ? `, via ${r.via}` : ''}${r.result?.id ? ` (${r.result.id})` : ''} · ${r.attempts} send${r.attempts === 1 ? '' : 's'}`),
      row('final', badge(fin), ` ${[reasonText(r.reason), changedText(r.changed)].filter(Boolean).join(' · ')}`),
      r.confirmed ? row('confirmed', h('code', {}, JSON.stringify(r.confirmed))) : null),
    peopleBlock(r.people));
}

function showReceipt(id) {
  selected = id;
  renderTasks();
  renderReceipt();
  $('receipt-panel').scrollIntoView({ block: 'nearest' });
}

async function renderRules() {
  try {
    $('rules').textContent = JSON.stringify(await desk.rules(), null, 2);
  } catch (e) {
    $('rules').textContent = `Not shown: ${errorText(e)}`;
  }
}

const minutes = (ms) => (ms === null || ms === undefined ? '—' : ms < 60_000 ? `${Math.round(ms / 1000)} s` : ms < 7_200_000 ? `${Math.round(ms / 60_000)} min` : `${+(ms / 3_600_000).toFixed(1)} h`);

/** The gate's scoreboard: items by route, time to decision, deadlines missed, the share approved by rule. */
async function renderScoreboard() {
  let s;
  try {
    s = await desk.scoreboard();
  } catch (e) {
    $('scoreboard').replaceChildren(h('p', { class: 'muted' }, `Not shown: ${errorText(e)}`));
    return;
  }
  const routes = Object.entries(s.routes ?? {});
  const cols = ['items', 'pending', 'escalated', 'approved', 'rejected', 'expired', 'deadlines_missed'];
  $('scoreboard').replaceChildren(
    h('p', { class: 'score-line', 'data-requests': s.requests, 'data-by-rule': s.approved_by_rule },
      `${s.requests} request${s.requests === 1 ? '' : 's'} met the rules; ${s.approved_by_rule} approved by rule (${Math.round((s.share_approved_by_rule ?? 0) * 100)}%); `,
      `${s.effects_waiting_for_a_person ?? 0} effect(s) waiting for a person, ${s.effects_settled_by_a_person ?? 0} settled by one.`),
    routes.length ? h('table', { class: 'tasks score-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'route'), ...cols.map((c) => h('th', {}, c === 'deadlines_missed' ? 'missed' : c)), h('th', {}, 'decided in (median · max)'))),
      h('tbody', {}, ...routes.map(([name, r]) => h('tr', { 'data-route': name, ...Object.fromEntries(cols.map((c) => [`data-${c.replaceAll('_', '-')}`, r[c]])) },
        h('td', {}, h('strong', {}, name)), ...cols.map((c) => h('td', {}, String(r[c] ?? 0))),
        h('td', {}, `${minutes(r.median_time_to_decision_ms)} · ${minutes(r.max_time_to_decision_ms)}`))))) : null);
}

async function render() {
  try {
    await renderInbox();
    renderTasks();
    renderWho();
    await renderReceipt();
    await renderScoreboard();
  } catch (e) {
    setStatus('error', `The inbox could not be read: ${errorText(e)}`);
    throw e;
  }
}

async function agent(fn, what) {
  if (busy) return;
  busy = true;
  setStatus('busy', `${what}…`);
  try {
    const out = await fn();
    setStatus('ok', `${what}: ${out.map((o) => `${o.state}${o.reason ? ` ${o.reason}` : ''}`).join(', ') || 'nothing to submit'}.`);
  } catch (e) {
    setStatus('error', `${what} failed: ${errorText(e)}`);
  } finally {
    busy = false;
  }
  await render();
}

// ---------------------------------------------------------------- boot

async function bootPage() {
  const { Shop, PEOPLE, TIMEOUT_MS } = await import('./shop.js');
  shop = await Shop.open();
  desk = shop;
  $('timeout').textContent = `${TIMEOUT_MS} ms`;
  $('decider').replaceChildren(...PEOPLE.map((p) => h('option', { value: p }, p)));
  $('decider').onchange = () => render();
  $('lease-toggle').onclick = async () => {
    const who = $('decider').value;
    const revoked = shop.leases().get(who) === 'REVOKED';
    await shop.setLease(who, revoked);
    setStatus('ok', revoked ? `${who}’s lease granted again (30 days).` : `${who}’s lease revoked: ${who} decides nothing from now on.`);
    await render();
  };
  $('hour').onclick = async () => {
    shop.advance(3_600_000);
    setStatus('ok', `An hour passes: ${clockText(shop.now())}.`);
    await render();
  };
  $('agent-start').onclick = () => agent(() => shop.start(), 'The agent submits its refunds');
  $('agent-round').onclick = () => agent(() => shop.round(), 'The agent’s next round');
  $('hand-refund').onclick = async () => {
    const r = shop.handRefund('order_1005', 5_000);
    setStatus('ok', `Support refunded ${money(r.amount_cents)} on order_1005 by hand (${r.id}): the premises the approvers saw no longer hold.`);
    await render();
  };
  await renderRules();
  await render();
  setStatus('ready', 'The gate is loaded. Start the agent.');
}

async function bootServer() {
  for (const id of ['page-who', 'page-clock', 'agent-panel']) $(id).hidden = true;
  $('server-form').hidden = false;
  $('mode-page').setAttribute('aria-checked', 'false');
  $('mode-server').setAttribute('aria-checked', 'true');
  $('lede').textContent = 'The inbox of a journal on a server: interlock serve (or the Worker) answers GET /v1/journals/{journal}/inbox, and records each decision you make with your own token, in your name.';
  const form = $('server-form');
  const q = new URLSearchParams(location.search);
  $('journal').value = q.get('journal') ?? sessionStorage.getItem('interlock.journal') ?? 'shop';
  $('token').value = sessionStorage.getItem('interlock.token') ?? '';
  $('server-token').value = sessionStorage.getItem('interlock.server-token') ?? '';
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    setStatus('busy', 'Connecting…');
    try {
      desk = new ServerDesk({ journal: $('journal').value.trim(), token: $('token').value.trim(), serverToken: $('server-token').value.trim() });
    } catch (e) {
      setStatus('error', errorText(e));
      return;
    }
    sessionStorage.setItem('interlock.journal', desk.journal);
    sessionStorage.setItem('interlock.token', desk.token);
    sessionStorage.setItem('interlock.server-token', desk.serverToken);
    decided.clear();
    try {
      await render();
      await renderRules();
      setStatus('ready', `Connected: journal ${desk.journal}.`);
    } catch {
      // said in the status line
    }
  };
  setStatus('ready', 'Give the journal’s name and your token.');
}

async function boot() {
  $('refresh').onclick = () => desk && render().catch(() => {});
  try {
    if (SERVER) await bootServer();
    else await bootPage();
  } catch (e) {
    setStatus('error', `Could not load: ${errorText(e)}. Serve the repository root (node viewer/serve.js) after bash scripts/build-wasm.sh and npm run build in hosts/node.`);
    throw e;
  }
  window.inbox = { ready: true };
}

boot();
