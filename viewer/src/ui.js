// What both pages of the viewer render with (index.html's app.js and inbox.html's
// inbox.js): an element builder, dollars from cents, a state badge. Nothing here decides.

export const $ = (id) => document.getElementById(id);

/** An element: `h('p', { class: 'x', onclick }, 'text', child, [more])`. */
export const h = (tag, attrs = {}, ...kids) => {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'html') el.innerHTML = v;
    else if (k.startsWith('data-') || k === 'title' || k === 'role' || k.startsWith('aria-') || k === 'for') el.setAttribute(k, v);
    else el[k] = v;
  }
  for (const kid of kids.flat()) if (kid !== null && kid !== undefined && kid !== false) el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  return el;
};

/** Cents as dollars: 2000 -> "$20", 1550 -> "$15.50". */
export const money = (cents) => {
  const neg = cents < 0;
  const c = Math.abs(cents);
  const s = c % 100 === 0 ? `$${(c / 100).toLocaleString('en-US')}` : `$${(c / 100).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  return neg ? `−${s}` : s;
};

/** A state (COMMITTED, AMBIGUOUS, ...) as a coloured badge. */
export const badge = (state, extra = '') => h('span', { class: `badge s-${state.toLowerCase()}${extra ? ` ${extra}` : ''}` }, state);

export const shortId = (id) => `${id.slice(0, 8)}…`;

/** A proposal's premises in words. */
export const premiseText = (p) => {
  if (!p || typeof p !== 'object') return '';
  const parts = [];
  for (const [k, v] of Object.entries(p)) {
    if (k === 'eligible') parts.push(v ? 'eligible' : 'not eligible');
    else if (k === 'refunded_by_others_cents') parts.push(`${money(v)} refunded by others`);
    else parts.push(`${k} = ${JSON.stringify(v)}`);
  }
  return parts.join(' · ');
};

/** What changed, premise by premise, in words. */
export const changedText = (changed) => (changed ?? [])
  .map((c) => `${c.name.replace(/_cents$/, '').replaceAll('_', ' ')} was ${fmtValue(c.name, c.was)}, now ${fmtValue(c.name, c.now)}`)
  .join('; ');

const fmtValue = (name, v) => (name.endsWith('_cents') && typeof v === 'number' ? money(v) : JSON.stringify(v));

export const REASONS = {
  claim_live: 'another worker’s claim on it is still live',
  conflicting_payload: 'same key, different request',
  premise_changed: 'a premise changed',
  lease_revoked: 'the lease was revoked',
  lease_expired: 'the lease expired',
  approval_stale: 'the world changed since the approver looked',
  cap_exceeded: 'it would exceed the cap',
  no_dedupe_no_lookup: 'the service can neither dedupe nor be asked',
  dedupe_window_passed: 'the service forgot the key, and cannot be asked',
  target_rejected: 'the service rejected it',
  target_unavailable: 'the service did not answer',
  premises_unreadable: 'the premises could not be read',
  approval_pending: 'waiting for a person',
  approval_rejected: 'a person said no',
  approval_expired: 'the deadline passed with no decision',
};
/** A reason with what it means. */
export const reasonText = (r) => (r ? `${r}${REASONS[r] ? ` (${REASONS[r]})` : ''}` : '');
