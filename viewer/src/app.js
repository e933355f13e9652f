// The viewer page: pick a fault, a tier and a baseline, press play. Both columns are the
// conformance runner (tests/conformance/runner, the component every host runs): the
// Interlock column is the vector played through the gate component (live.js), the baseline
// column the runner's `baseline`, the fault table's, on its own instance of the same
// simulated service. This file only renders.
import { gateComponent } from '@interlock/gate/browser';
import { baseline as playBaseline, startMs } from '../../hosts/node/conformance/driver.js';
import { play, JournalView } from './live.js';
import { FAULTS, TIERS, vectorId } from './catalog.js';
import { $, h, money, badge, shortId, premiseText, changedText, reasonText } from './ui.js';

// ---------------------------------------------------------------- formatting

const duration = (ms) => {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${+(ms / 1000).toFixed(3)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  const hours = ms / 3_600_000;
  return Number.isInteger(hours) ? `${hours} hour${hours === 1 ? '' : 's'}` : `${hours.toFixed(1)} hours`;
};

/** Fake time as an offset from the start of the run ("T+0", "T+25 h"). */
const at = (ms) => {
  const d = ms - T0_MS;
  if (d === 0) return 'T+0';
  if (d < 60_000) return `T+${+(d / 1000).toFixed(3)} s`;
  if (d < 3_600_000) return `T+${Math.round(d / 60_000)} min`;
  return `T+${+(d / 3_600_000).toFixed(2)} h`;
};

const streamLabel = (s) => (s.startsWith('effect:') ? `effect ${shortId(s.slice(7))}` : s.replace(':', ' '));

// ---------------------------------------------------------------- state

export const BASELINES = {
  'plain-retry': { name: 'Plain retry', blurb: 'Re-run the step on restart' },
  'request-ids': { name: 'Request IDs', blurb: 'The standard fix: one idempotency key per request' },
  'durable-workflows': { name: 'Durable workflows', blurb: 'Temporal-style, used as documented' },
};

/** The runner's start of fake time, read at boot. */
let T0_MS = 0;
const sel = { fault: FAULTS[1], variant: 0, tier: '1', baseline: 'plain-retry', pace: 1 };
let comps = null;
let view = null;
let pins = {};
let generation = 0;
let lastLines = [];
const vectors = new Map();

class Stopped extends Error {}

const variantOf = () => sel.fault.variants[Math.min(sel.variant, sel.fault.variants.length - 1)];
const currentId = () => vectorId(variantOf(), sel.tier);

async function loadVector(id) {
  if (!vectors.has(id)) {
    const res = await fetch(new URL(`../../tests/conformance/${id}.json`, import.meta.url));
    if (!res.ok) throw new Error(`cannot load vector ${id}: HTTP ${res.status}`);
    vectors.set(id, await res.json());
  }
  return vectors.get(id);
}

// ---------------------------------------------------------------- controls

function renderControls() {
  for (const [box, beyond] of [[$('faults'), false], [$('beyond'), true]]) {
    box.replaceChildren(...FAULTS.filter((f) => !!f.beyond === beyond).map((f) => h('button', {
      type: 'button', class: 'chip', role: 'radio', 'data-fault': f.id,
      'aria-checked': String(f === sel.fault), title: f.title,
      onclick: () => select({ fault: f, variant: 0, tier: f.variants[0].tiers.includes(sel.tier) ? sel.tier : f.variants[0].tiers[0] }),
    }, h('span', { class: 'chip-id' }, f.id), h('span', { class: 'chip-name' }, f.short))));
  }
  const v = variantOf();
  $('tiers').replaceChildren(...v.tiers.map((t) => h('button', {
    type: 'button', role: 'radio', 'data-tier': t, 'aria-checked': String(t === sel.tier), title: TIERS[t].detail,
    onclick: () => select({ tier: t }),
  }, TIERS[t].label)));
  const vs = sel.fault.variants;
  $('variant-pick').hidden = vs.length < 2;
  $('variants').replaceChildren(...vs.map((x, i) => h('button', {
    type: 'button', role: 'radio', 'data-variant': x.prefix, 'aria-checked': String(i === sel.variant),
    onclick: () => select({ variant: i }),
  }, x.label ?? x.prefix)));
  $('fault-id').textContent = sel.fault.id;
  $('fault-title').textContent = sel.fault.title;
  $('fault-what').textContent = sel.fault.what;
  $('tier-detail').textContent = `Service: ${TIERS[sel.tier].detail}.`;
  $('fault-right').textContent = sel.fault.right;
  $('vector-id').textContent = currentId();
  $('baseline').value = sel.baseline;
  $('baseline-name').textContent = BASELINES[sel.baseline].name;
  $('baseline-title').textContent = BASELINES[sel.baseline].name.toLowerCase();
  $('baseline-blurb').textContent = BASELINES[sel.baseline].blurb;
}

function select(change) {
  Object.assign(sel, change);
  const v = variantOf();
  if (!v.tiers.includes(sel.tier)) sel.tier = v.tiers[0];
  history.replaceState(null, '', `#${currentId()}${sel.baseline === 'plain-retry' ? '' : `/${sel.baseline}`}`);
  renderControls();
  stop();
  clearStage();
}

function fromHash() {
  const [id, base] = decodeURIComponent(location.hash.slice(1)).split('/');
  if (base && BASELINES[base]) sel.baseline = base;
  for (const f of FAULTS) {
    f.variants.forEach((v, i) => {
      for (const t of v.tiers) {
        if (vectorId(v, t) === id) Object.assign(sel, { fault: f, variant: i, tier: t });
      }
    });
  }
}

function stop() {
  generation += 1;
  setPlaying(false);
}

function setPlaying(on) {
  $('play').classList.toggle('playing', on);
  $('play-label').textContent = on ? 'Stop' : 'Play';
  for (const id of ['verify', 'tamper-demo', 'tamper-reset']) $(id).disabled = on || lastLines.length === 0;
}

function setStatus(state, text) {
  const s = $('status');
  s.dataset.state = state;
  s.textContent = text;
}

// ---------------------------------------------------------------- the stage

function clearStage() {
  $('timeline').replaceChildren();
  $('journal').replaceChildren();
  $('receipts').replaceChildren(h('p', { class: 'empty' }, 'Nothing proposed yet.'));
  $('baseline-trace').replaceChildren();
  $('conformance').hidden = true;
  for (const id of ['interlock-refunded', 'baseline-refunded']) setMoney(id, 0);
  $('interlock-verdict').replaceChildren(h('span', { class: 'muted' }, '\u00a0'));
  $('baseline-verdict').replaceChildren(h('span', { class: 'muted' }, '\u00a0'));
  $('score-interlock').dataset.verdict = '';
  $('score-baseline').dataset.verdict = '';
  $('verify-result').textContent = '';
  $('verify-result').dataset.problems = '';
  lastLines = [];
  $('tamper-text').value = '';
  setStatus('idle', 'Press play.');
  const id = currentId();
  loadVector(id).then((v) => {
    if (id !== currentId()) return;
    $('right-amount').textContent = money(v.expect.refunded_cents);
    $('right-why').textContent = v.expect.refunded_cents === 0 ? 'nothing should be paid' : 'on the order, at the end';
  }).catch(() => {});
}

function setMoney(id, cents) {
  const el = $(id);
  if (Number(el.dataset.cents) !== cents) {
    el.classList.remove('bump');
    void el.offsetWidth; // restart the animation
    el.classList.add('bump');
  }
  el.dataset.cents = String(cents);
  el.textContent = money(cents);
}

const DELAY_MS = {
  step: 1100, worker: 450, submit: 700, recover: 450, openEffects: 350, verify: 700,
  ask: 550, service: 750, journal: 650, outcome: 900, crash: 1400,
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One play of one vector: the Interlock column live, the baseline column in step. */
async function run() {
  stop();
  clearStage();
  const gen = generation;
  const id = currentId();
  const v = await loadVector(id);
  const played = await playBaseline(v, sel.baseline);
  const notModelled = played.not_modelled;
  const baseline = notModelled ? null : played;
  const ctx = {
    gen, v, id, baseline, notModelled, outage: false, step: null, effects: [], lines: [], amounts: new Map(),
    list: null, workersSeen: 0,
  };
  if (notModelled) {
    $('baseline-trace').append(h('li', { class: 'na' }, `Not in the fault table: ${notModelled}.`));
    $('baseline-refunded').textContent = 'n/a';
    $('baseline-refunded').dataset.cents = '';
  }
  setPlaying(true);
  setStatus('playing', `Playing ${id}…`);
  if (sel.pace > 0) document.querySelector('.scoreboard').scrollIntoView({ behavior: 'smooth', block: 'start' });
  setupCard(ctx);
  try {
    const { report, lines } = await play(v, { components: comps, show: (ev) => show(ctx, ev) });
    if (gen !== generation) return;
    finish(ctx, report, lines);
  } catch (e) {
    if (e instanceof Stopped || e?.cause instanceof Stopped || gen !== generation) return;
    console.error(e);
    setStatus('error', `The run failed: ${e.message}`);
  } finally {
    if (gen === generation) setPlaying(false);
  }
}

function setupCard(ctx) {
  const paid = ctx.v.paid_cents ?? 10_000;
  const li = h('li', { class: 'step setup' },
    h('div', { class: 'step-head' }, h('span', { class: 'num' }, '0'), h('span', { class: 'op' }, 'the world'),
      h('span', { class: 'say' }, `order_881 paid ${money(paid)}, eligible, nothing refunded. The agent holds lease case-4471 for 48 hours.`)),
    h('ul', { class: 'events' }));
  $('timeline').append(li);
  ctx.list = li.querySelector('.events');
}

function event(ctx, cls, ...kids) {
  const li = h('li', { class: `ev ${cls}` }, ...kids);
  ctx.list.append(li);
  if (sel.pace > 0) li.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
  return li;
}

async function show(ctx, ev) {
  if (ctx.gen !== generation) throw new Stopped();
  const wait = render(ctx, ev);
  if (sel.pace > 0 && wait) await sleep(wait * sel.pace);
  else await null;
  if (ctx.gen !== generation) throw new Stopped();
}

/** Renders one event; returns how long to dwell on it (ms at the readable pace). */
function render(ctx, ev) {
  switch (ev.kind) {
    case 'step': return renderStep(ctx, ev);
    case 'worker':
      ctx.workersSeen += 1;
      if (ev.worker === 1) return 0;
      event(ctx, 'sys', `A fresh gate instance (worker ${ev.worker}) opens the same journal.`);
      return DELAY_MS.worker;
    case 'gate': return renderGateCall(ctx, ev);
    case 'ask': return renderAsk(ctx, ev);
    case 'service': return renderService(ctx, ev);
    case 'reply': return renderReply(ctx, ev);
    case 'journal': return renderJournal(ctx, ev);
    case 'outcome': return renderOutcome(ctx, ev);
    case 'crash': return renderCrash(ctx, ev);
    default: return 0;
  }
}

function stepSay(s) {
  const amt = (c) => money(c);
  switch (s.op) {
    case 'decide': {
      const bits = [`The agent decides: refund ${amt(s.amount_cents)} on order_881`];
      if (s.key && s.key !== 'refund:order_881') bits.push(` (task ${s.task}, key ${s.key})`);
      else bits.push(` (task ${s.task})`);
      if (s.approval) bits.push(`, on approval ${s.approval}`);
      if (s.host_check) bits.push(', subject to the host’s own check');
      if (s.cap) bits.push(`, under a ${amt(s.cap.limit_cents)} cap`);
      if (s.bounds?.refunded_by_others_cents?.at_most !== undefined) bits.push(`, fine as long as others refund at most ${amt(s.bounds.refunded_by_others_cents.at_most)}`);
      return `${bits.join('')}. It reads its premises now.`;
    }
    case 'redecide': return `The model changes its mind: ${s.task} is now ${amt(s.amount_cents)}. Same key, new amount.`;
    case 'send': return s.crash ? `A worker sends ${s.task} through the gate…` : `A worker sends ${s.task} through the gate.`;
    case 'restart': return s.routes
      ? `Every worker is gone. A new process starts that reaches ${s.routes.length ? s.routes.join(', ') : 'no target'}: it recovers every open effect in the journal, then re-sends every unfinished task.`
      : 'Every worker is gone. A new process starts: it recovers every open effect in the journal, then re-sends every unfinished task.';
    case 'race': return `Two workers submit ${s.tasks.join(' and ')} at the same moment; both read the premises before either writes.`;
    case 'approve': return `${s.approver} approves ${s.approval} for ${s.task}, looking at the premises as they are now.`;
    case 'lease': return `Lease ${s.lease} is extended: live for ${duration(s.expires_in_ms)} from now.`;
    case 'revoke_lease': return `Lease ${s.lease} is revoked: the agent may no longer act on case 4471.`;
    case 'hand_refund': return `A person in support refunds ${amt(s.amount_cents)} by hand in the dashboard.`;
    case 'set_eligible': return `The order system marks order_881 ${s.eligible ? 'eligible again' : 'no longer eligible'}.`;
    case 'advance': return `${duration(s.ms)} pass.`;
    case 'fail_checks': return `The host's own authority check will not answer the next ${s.count} time${s.count === 1 ? '' : 's'}.`;
    case 'fail_reads': return `The order system will not answer the next ${s.count} premise read${s.count === 1 ? '' : 's'}.`;
    case 'verify': return 'verify: every stream’s hash chain is checked, link by link.';
    default: return s.op;
  }
}

function renderStep(ctx, ev) {
  const s = ev.step;
  if (s.op === 'restart') {
    ctx.outage = false;
    ctx.recovering = null;
  }
  const li = h('li', { class: `step op-${s.op}${ctx.outage ? ' outage' : ''}`, 'data-step': ev.index },
    h('div', { class: 'step-head' },
      h('span', { class: 'num' }, String(ev.index + 1)),
      h('span', { class: 'op' }, s.op.replace('_', ' ')),
      ctx.outage ? h('span', { class: 'tag outage-tag' }, 'during the outage') : null,
      h('span', { class: 'say' }, stepSay(s))),
    h('ul', { class: 'events' }));
  $('timeline').append(li);
  ctx.list = li.querySelector('.events');
  ctx.step = s;
  if (sel.pace > 0) li.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
  stepBaseline(ctx, s, ev.index);
  return DELAY_MS.step;
}

function stepBaseline(ctx, s, index) {
  if (!ctx.baseline) return;
  const { lines, refunded_cents: refunded } = ctx.baseline.steps[index];
  for (const line of lines) {
    $('baseline-trace').append(h('li', { 'data-raw': line, class: `bt${/dies|lost/.test(line) ? ' crash' : ''}${/-> re_/.test(line) ? ' paid' : ''}${/error/.test(line) ? ' err' : ''}`, 'data-step': index },
      h('span', { class: 'bt-step' }, String(index + 1)), baselineLine(line)));
  }
  setMoney('baseline-refunded', refunded);
}

/** The baseline's trace text (baseline.rs's words), with amounts in dollars. */
function baselineLine(line) {
  return line
    .replace(/refund (\d+) key/, (_, c) => `refund ${money(Number(c))} key`)
    .replace(/refunds (\d+) by hand/, (_, c) => `refunds ${money(Number(c))} by hand`)
    .replace(/recorded (\d+) cents/, (_, c) => `recorded ${money(Number(c))}`)
    .replace(/the clock moves (\d+) ms/, (_, ms) => `the clock moves ${duration(Number(ms))}`);
}

function renderGateCall(ctx, ev) {
  switch (ev.name) {
    case 'submit': {
      let p;
      try {
        p = JSON.parse(ev.args[0]);
      } catch {
        return 0;
      }
      const auth = p.authority?.lease ? `lease ${p.authority.lease}` : `approval ${p.authority?.approval}`;
      event(ctx, 'call',
        h('span', { class: 'who' }, `worker ${ev.worker} → gate`),
        `proposal: ${money(p.effect.amount_cents)}, key ${p.key}, ${auth}`,
        h('details', { class: 'raw' }, h('summary', {}, 'the proposal'), h('pre', {}, JSON.stringify(p, null, 2))));
      return DELAY_MS.submit;
    }
    case 'recover':
      // Recovery asks again after waiting out a live claim: show the first ask only.
      if (ctx.recovering?.has(ev.args[0])) return 0;
      (ctx.recovering ??= new Set()).add(ev.args[0]);
      event(ctx, 'call', h('span', { class: 'who' }, `worker ${ev.worker} → gate`), `recover effect ${shortId(ev.args[0])}`);
      return DELAY_MS.recover;
    case 'openEffects':
      event(ctx, 'sys', ev.out.length === 0
        ? 'The journal has no open effects.'
        : `The journal has ${ev.out.length} open effect${ev.out.length === 1 ? '' : 's'}: started, never finished.`);
      return DELAY_MS.openEffects;
    case 'verify': {
      const r = ev.out;
      const ok = r.problems.length === 0;
      event(ctx, ok ? 'good' : 'bad', ok
        ? `verify: ${Number(r.streams)} streams, ${Number(r.entries)} entries, every link intact.`
        : `verify: ${r.problems.length} problems.`);
      return DELAY_MS.verify;
    }
    default:
      return 0;
  }
}

function renderAsk(ctx, ev) {
  const r = ev.request;
  const who = h('span', { class: 'who' }, `gate → worker ${ev.worker}`);
  switch (ev.tag) {
    case 'capture': event(ctx, 'ask', who, `read the premises again, now: ${r.names.join(', ')}`); break;
    case 'authorize': event(ctx, 'ask', who, 'ask the host’s own authority check'); break;
    case 'apply': event(ctx, 'ask', who, h('strong', {}, 'send it now'), ` (attempt ${r.attempt}, idempotency key ${shortId(r.idempotency_key)})`); break;
    case 'query': event(ctx, 'ask', who, `is there a refund with reference ${shortId(r.effect_id)}?`); break;
    default: event(ctx, 'ask', who, ev.tag);
  }
  return DELAY_MS.ask;
}

function renderService(ctx, ev) {
  setMoney('interlock-refunded', ev.refunded_cents);
  const before = ctx.refundedCents ?? 0;
  ctx.refundedCents = ev.refunded_cents;
  ctx.refundedCentsBefore = before;
  const who = h('span', { class: 'who svc' }, 'payments');
  const err = ev.error ? (typeof ev.error === 'object' ? `${ev.error.tag}` : String(ev.error)) : null;
  switch (ev.name) {
    case 'premises':
      if (err) event(ctx, 'svc bad', who, `premise read failed: ${err}`);
      else event(ctx, 'svc', who, ev.args[1] === null || ev.args[1] === undefined
        ? `premises: ${premiseText(ev.result)}`
        : `premises (its own refund excluded): ${premiseText(ev.result)}`);
      return DELAY_MS.service;
    case 'refund_by_hand':
      event(ctx, 'svc money hand', who, h('strong', {}, `${money(ev.result.amount_cents)} refunded by hand`), ` → ${ev.result.id}`);
      return DELAY_MS.service;
    case 'set_eligible':
      event(ctx, 'svc', who, `order_881 is now ${ev.args[1] ? 'eligible' : 'not eligible'}`);
      return DELAY_MS.service;
    default:
      return 0;
  }
}

// The service's own answer to a step the worker routed to it (codes, not sentences).
function renderReply(ctx, ev) {
  setMoney('interlock-refunded', ev.refunded_cents);
  const before = ctx.refundedCents ?? 0;
  ctx.refundedCents = ev.refunded_cents;
  ctx.refundedCentsBefore = before;
  const who = h('span', { class: 'who svc' }, 'payments');
  const { tag, val } = ev.reply;
  const refund = tag === 'applied' || tag === 'found' ? JSON.parse(val) : null;
  switch (ev.name) {
    case 'capture':
      if (tag !== 'captured') event(ctx, 'svc bad', who, `premise read failed: ${val}`);
      else event(ctx, 'svc', who, `premises (its own refund excluded): ${premiseText(JSON.parse(val))}`);
      return DELAY_MS.service;
    case 'apply': {
      const amount = money(JSON.parse(ev.request.effect).amount_cents);
      if (!refund) event(ctx, 'svc bad', who, `refund of ${amount} refused: ${val}`);
      else if (ev.refunded_cents === before) {
        // Tier 1 saw the idempotency key before: it answers with the first refund, creates nothing.
        event(ctx, 'svc', who, h('strong', {}, 'deduped'), `: the key was seen before, so it returns ${refund.refund_id} and creates nothing`);
      } else event(ctx, 'svc money', who, h('strong', {}, `refund ${money(refund.amount_cents)} sent`), ` → ${refund.refund_id}, key ${shortId(ev.request.idempotency_key)}`);
      return DELAY_MS.service;
    }
    case 'query':
      if (tag === 'failed') event(ctx, 'svc bad', who, `lookup failed: ${val}`);
      else event(ctx, 'svc', who, refund ? `found ${refund.refund_id}: ${money(refund.amount_cents)}, already refunded` : 'no refund with that reference');
      return DELAY_MS.service;
    default:
      return 0;
  }
}

function entrySummary(e) {
  switch (e.state) {
    case 'GRANTED': return `lease ${e.lease} live until ${at(e.expires_at_ms)}`;
    case 'REVOKED': return e.lease ? `lease ${e.lease} revoked` : 'revoked';
    case 'APPROVED': return `approved by ${e.approver ?? e.approval?.approver ?? '?'}`;
    case 'PROPOSED': {
      const p = e.proposal ?? {};
      return `${money(p.effect?.amount_cents ?? 0)} on ${p.effect?.order}, key ${p.key}; premises: ${premiseText(p.premises)}`;
    }
    case 'AUTHORIZED': return authText(e.checks);
    case 'DISPATCHED': return `intent: attempt ${e.attempt}, claimed until ${at(e.claim_until_ms)}; nothing is sent before this line is durable`;
    case 'COMMITTED': return `via ${e.via}${e.result?.refund_id ? `: ${e.result.refund_id}, ${money(e.result.amount_cents)}` : ''}`;
    case 'REFUSED':
    case 'AMBIGUOUS': return [reasonText(e.reason), `executed ${e.executed}`, changedText(e.changed), e.return_to ? `back to ${e.return_to}` : ''].filter(Boolean).join('; ');
    case 'RESERVED': return `${money(e.amount_cents ?? 0)} of the ${money(e.limit_cents ?? 0)} cap reserved`;
    case 'RELEASED': return 'cap reservation released';
    case 'CONFIRMED': return 'confirmed by a person';
    default: return '';
  }
}

function authText(checks = {}) {
  const bits = [];
  if (checks.lease) bits.push(`lease ${checks.lease.name} live until ${at(checks.lease.live_until_ms)}`);
  if (checks.approval) bits.push(`approval ${checks.approval.name ?? checks.approval.approval ?? ''} valid`.replace('  ', ' '));
  if (checks.premises_held) bits.push(`premises held (${premiseText(checks.premises_held)})`);
  if (checks.cap) bits.push(`cap ok`);
  if (checks.host_check !== undefined) bits.push(`host check ${checks.host_check ? 'passed' : 'failed'}`);
  return bits.join('; ');
}

function renderJournal(ctx, ev) {
  const states = [];
  for (const text of ev.entries) {
    const e = JSON.parse(text);
    ctx.lines.push(text);
    states.push(e);
    if (e.stream.startsWith('effect:') && !ctx.effects.includes(e.stream.slice(7))) ctx.effects.push(e.stream.slice(7));
    const li = h('li', { class: `jl s-${e.state.toLowerCase()}`, 'data-stream': e.stream, 'data-seq': e.seq, 'data-state': e.state },
      h('div', { class: 'jl-head' },
        h('span', { class: 'jl-n' }, String(ctx.lines.length)),
        badge(e.state),
        h('span', { class: 'jl-stream' }, `${streamLabel(e.stream)} · seq ${e.seq}`),
        h('span', { class: 'jl-at' }, at(e.at_ms)),
        ev.durable ? h('span', { class: 'jl-durable', title: 'appended durably: on disk before the gate goes on' }, 'durable') : null),
      h('p', { class: 'jl-sum' }, entrySummary(e)),
      h('code', { class: 'jl-raw', title: 'click to expand', onclick: (x) => x.currentTarget.classList.toggle('open') }, text));
    $('journal').append(li);
    if (sel.pace > 0) li.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
  }
  event(ctx, 'jw', h('span', { class: 'who jr' }, 'journal'), 'writes ', ...states.flatMap((e, i) => [i ? ' ' : '', badge(e.state)]),
    ev.durable ? ' durably' : '',
    ...states.filter((e) => e.state === 'AUTHORIZED').map((e) => h('span', { class: 'check' }, ` ✓ ${authText(e.checks)}`)),
    ...states.filter((e) => e.state === 'REFUSED' || e.state === 'AMBIGUOUS').map((e) => h('span', { class: 'why' }, ` ${entrySummary(e)}`)));
  renderReceipts(ctx);
  return DELAY_MS.journal * Math.min(ev.entries.length, 3);
}

function renderOutcome(ctx, ev) {
  const o = ev.outcome;
  const bits = [];
  if (o.state === 'DISPATCHED' && o.reason === 'claim_live') {
    event(ctx, 'sys', `The old worker’s claim is still live: recovery waits ${duration(o.retry_after_ms ?? 0)} (on the test clock) and asks again.`);
    return DELAY_MS.outcome;
  }
  if (o.reason) bits.push(reasonText(o.reason));
  bits.push(`executed ${o.executed}`);
  if (o.changed.length) bits.push(changedText(o.changed));
  if (o.return_to) bits.push(`sent back to ${o.return_to}`);
  if (o.replayed) bits.push('replayed from the journal, nothing sent');
  event(ctx, `outcome o-${o.state.toLowerCase()}`, h('span', { class: 'who' }, `outcome · effect ${shortId(o.effect_id)}`), badge(o.state, 'big'), ` ${bits.join('; ')}`);
  return DELAY_MS.outcome;
}

const CRASH_SAY = {
  before_intent: 'The worker dies before it writes anything. The agent’s task list still says the refund is to do.',
  after_intent: 'The worker dies after the intent is on disk, before it calls the service.',
  after_commit: 'The service applied the refund, but the worker dies before the reply arrives.',
  in_recovery: 'The new process dies too, in the middle of recovery.',
};

function renderCrash(ctx, ev) {
  const li = ctx.list.closest('.step');
  li?.classList.add('crashed');
  event(ctx, 'crash', h('span', { class: 'who' }, 'crash'), CRASH_SAY[ev.at] ?? `crash: ${ev.at}`);
  ctx.outage = true;
  return DELAY_MS.crash;
}

function renderReceipts(ctx) {
  if (ctx.effects.length === 0) return;
  try {
    view.load(ctx.lines);
  } catch {
    return;
  }
  $('receipts').replaceChildren(...ctx.effects.map((id) => receiptCard(view.receipt(id))));
}

function receiptCard(r) {
  const fin = r.final ?? 'PROPOSED';
  const finalState = ['COMMITTED', 'REFUSED', 'AMBIGUOUS', 'CONFIRMED'].includes(fin);
  const row = (name, ok, text, cls = '') => h('div', { class: `rrow ${ok === true ? 'yes' : ok === false ? 'no' : 'unk'} ${cls}`, 'data-field': name },
    h('dt', {}, name), h('dd', {}, h('span', { class: 'rm' }, ok === true ? '✓' : ok === false ? '✗' : ok === null ? '?' : '·'), h('span', {}, text)));
  const auths = r.authorized ?? [];
  const executed = r.executed ?? 'no';
  return h('div', { class: `receipt f-${fin.toLowerCase()}`, 'data-effect': r.effect_id, 'data-final': fin },
    h('div', { class: 'r-head' },
      h('span', { class: 'r-amt' }, money(r.effect?.amount_cents ?? 0)),
      h('span', { class: 'r-id' }, `effect ${shortId(r.effect_id)} · ${r.target?.name ?? ''}`),
      badge(fin, finalState ? 'big' : '')),
    h('dl', {},
      row('proposed', true, `${at(r.proposed?.at_ms ?? T0_MS)} · ${r.proposed?.authority?.lease ? `lease ${r.proposed.authority.lease}` : `approval ${r.proposed?.authority?.approval ?? ''}`} · ${premiseText(r.proposed?.premises)}`),
      row('authorized', auths.length ? true : finalState ? false : undefined, auths.length ? authText(auths[auths.length - 1].checks) : finalState ? 'never: refused before any send' : 'not yet'),
      row('executed', executed === 'yes' ? true : executed === 'unknown' ? null : finalState ? false : undefined,
        executed === 'yes' ? `yes${r.via ? `, via ${r.via}` : ''}${r.result?.refund_id ? ` (${r.result.refund_id})` : ''}${r.attempts > 1 ? `, ${r.attempts} attempts` : ''}`
          : executed === 'unknown' ? 'unknown: whether the first send went out cannot be known, so nothing was resent' : finalState ? 'no' : 'not yet'),
      row('recorded', r.recorded ? true : undefined, r.recorded ? `yes, ${r.head?.length ?? '?'} entries, head ${String(r.head?.hash ?? '').slice(0, 10)}…` : 'not yet'),
      h('div', { class: 'rrow final', 'data-field': 'final' }, h('dt', {}, 'final'),
        h('dd', {}, badge(fin), h('span', {}, [reasonText(r.reason), changedText(r.changed), r.return_to ? `back to ${r.return_to}` : ''].filter(Boolean).join(' · '))))));
}

function verdict(refunded, right) {
  if (refunded === right) return { ok: true, text: 'the right amount' };
  if (refunded > right) return { ok: false, text: right === 0 ? `${money(refunded)} paid that should not have been` : `${money(refunded - right)} too much` };
  return { ok: false, text: `${money(right - refunded)} short` };
}

function finish(ctx, report, lines) {
  const right = ctx.v.expect.refunded_cents;
  setMoney('interlock-refunded', report.refundedCents);
  const iv = verdict(report.refundedCents, right);
  const tasks = Object.entries(report.tasks);
  $('score-interlock').dataset.verdict = iv.ok ? 'ok' : 'wrong';
  $('interlock-verdict').replaceChildren(
    h('span', { class: iv.ok ? 'ok' : 'wrong' }, iv.ok ? '✓ ' : '✗ ', iv.text),
    ...tasks.map(([name, t]) => h('span', { class: 'task', 'data-task': name, 'data-state': t.state, 'data-reason': t.reason ?? '', 'data-executed': t.executed },
      tasks.length > 1 ? `${name} ` : '', badge(t.state), t.reason ? ` ${t.reason}` : '')));
  if (ctx.baseline) {
    const b = ctx.baseline.refunded_cents;
    const bv = verdict(b, right);
    setMoney('baseline-refunded', b);
    $('score-baseline').dataset.verdict = bv.ok ? 'ok' : 'wrong';
    $('baseline-verdict').replaceChildren(h('span', { class: bv.ok ? 'ok' : 'wrong' }, bv.ok ? '✓ ' : '✗ ', bv.text),
      h('span', { class: 'muted' }, ` · ${ctx.baseline.refund_records} refund record${ctx.baseline.refund_records === 1 ? '' : 's'}`));
  } else {
    $('baseline-verdict').replaceChildren(h('span', { class: 'muted' }, 'not modelled by the fault table'));
  }
  const pinned = pins[ctx.id];
  const pinOk = pinned === report.journalSha256;
  const box = $('conformance');
  box.hidden = false;
  box.dataset.failures = String(report.failures.length);
  box.dataset.pin = pinOk ? 'match' : 'differ';
  box.className = `conformance ${report.failures.length === 0 && pinOk ? 'pass' : 'fail'}`;
  box.replaceChildren(
    h('p', {}, h('strong', {}, report.failures.length === 0 ? `✓ ${ctx.id} passes` : `✗ ${ctx.id}: ${report.failures.length} differences`),
      ` — the conformance runner checked every expectation of the vector: ${money(report.refundedCents)} refunded in ${report.refundRecords} record${report.refundRecords === 1 ? '' : 's'}, ${tasks.map(([n, t]) => `${n} ${t.state}`).join(', ')}.`),
    h('p', {}, pinOk ? '✓ The journal is byte-identical to the one every other host writes for this vector: ' : '✗ The journal differs from the pinned one: ',
      h('code', {}, `sha256 ${report.journalSha256.slice(0, 16)}…`)),
    ...report.failures.map((f) => h('p', { class: 'failure' }, f)));
  lastLines = lines;
  $('tamper-text').value = lines.join('\n');
  fitTamper();
  const first = lines.map((l) => l.match(EFFECT_AMOUNT)).find(Boolean);
  $('tamper-demo').textContent = first ? `Change ${money(Number(first[1]))} to ${money(Number(first[1]) * 100)} for me` : 'Change an amount for me';
  setStatus('done', `Done: ${ctx.id} played, ${lines.length} journal lines.`);
}

// ---------------------------------------------------------------- tamper

function fitTamper() {
  const ta = $('tamper-text');
  ta.style.height = 'auto';
  ta.style.height = `${Math.min(ta.scrollHeight + 4, 460)}px`;
}

function verifyText() {
  const lines = $('tamper-text').value.split('\n').filter((l) => l.trim() !== '');
  for (const li of document.querySelectorAll('.jl.broken')) li.classList.remove('broken');
  const out = $('verify-result');
  try {
    view.load(lines);
  } catch (e) {
    out.className = 'verify-result bad';
    out.dataset.problems = JSON.stringify([{ kind: 'unreadable', detail: e.message }]);
    out.replaceChildren(h('strong', {}, '✗ The journal does not even load: '), e.message);
    return;
  }
  const r = view.verify();
  out.dataset.problems = JSON.stringify(r.problems);
  if (r.problems.length === 0) {
    out.className = 'verify-result good';
    out.replaceChildren(h('strong', {}, '✓ verify: '), `${r.streams} streams, ${r.entries} entries, every link intact.`);
    return;
  }
  out.className = 'verify-result bad';
  out.replaceChildren(h('strong', {}, `✗ verify found ${r.problems.length} problem${r.problems.length === 1 ? '' : 's'}`),
    h('ul', {}, ...r.problems.map((p) => h('li', { class: 'problem', 'data-stream': p.stream, 'data-seq': p.seq, 'data-kind': p.kind },
      h('span', { class: 'pk' }, p.kind), ' at ', h('code', {}, `${p.stream}`), `, seq ${p.seq}: ${p.detail}`))));
  for (const p of r.problems) {
    const li = document.querySelector(`.jl[data-stream="${CSS.escape(p.stream)}"][data-seq="${p.seq}"]`);
    li?.classList.add('broken');
  }
}

const EFFECT_AMOUNT = /"effect":\{"amount_cents":(\d+)/;

function tamperDemo() {
  // The first proposal's effect amount (canonical JSON: keys sorted, no spaces).
  const lines = $('tamper-text').value.split('\n');
  const i = lines.findIndex((l) => EFFECT_AMOUNT.test(l));
  if (i < 0) return;
  lines[i] = lines[i].replace(EFFECT_AMOUNT, (_, c) => `"effect":{"amount_cents":${c}00`);
  $('tamper-text').value = lines.join('\n');
  const ta = $('tamper-text');
  const pos = lines.slice(0, i).join('\n').length;
  ta.focus();
  ta.setSelectionRange(pos + 1, pos + 1 + lines[i].length);
  verifyText();
}

// ---------------------------------------------------------------- boot

async function boot() {
  fromHash();
  renderControls();
  clearStage();
  $('baseline').onchange = (e) => select({ baseline: e.target.value });
  $('pace').onchange = (e) => {
    sel.pace = Number(e.target.value);
  };
  sel.pace = Number($('pace').value);
  $('play').onclick = () => ($('play').classList.contains('playing') ? stop() : run());
  $('verify').onclick = verifyText;
  $('tamper-demo').onclick = tamperDemo;
  $('tamper-reset').onclick = () => {
    $('tamper-text').value = lastLines.join('\n');
    verifyText();
  };
  try {
    const [gate, t0, pinRes] = await Promise.all([
      gateComponent(), startMs(), fetch(new URL('../../tests/conformance/journal-pins.json', import.meta.url)),
    ]);
    comps = { gate };
    T0_MS = t0;
    pins = pinRes.ok ? await pinRes.json() : {};
    view = await JournalView.create(gate);
  } catch (e) {
    setStatus('error', `Could not load the components: ${e.message}. Serve the repository root (node viewer/serve.js) after bash scripts/build-wasm.sh and npm run build in hosts/node.`);
    $('play-label').textContent = 'Unavailable';
    throw e;
  }
  $('play').disabled = false;
  $('play-label').textContent = 'Play';
  window.viewer = { ready: true, run, select, sel, faults: FAULTS, stop };
}

boot();
