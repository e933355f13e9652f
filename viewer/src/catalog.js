// What the viewer offers: the faults of docs/FAULTS.md (F1..F12) and the cases beyond
// the original, each mapped onto the conformance vectors that script it
// (tests/conformance/<prefix>-t<tier>.json). The test checks that every vector of those
// families is reachable here, and says why the others are not (VECTORS_NOT_SHOWN).

export const TIERS = {
  1: { label: 'dedupes', detail: 'tier 1: the service dedupes by idempotency key for 24 hours' },
  2: { label: 'lookup', detail: 'tier 2: no dedupe, but a refund can be looked up by reference' },
  3: { label: 'neither', detail: 'tier 3: no dedupe, no lookup' },
  '1+lookup': { label: 'dedupes + lookup', detail: 'tier 1 that also offers lookup by reference' },
};

const ALL = ['1', '2', '3'];

export const FAULTS = [
  { id: 'F1', short: 'Crash before the send', title: 'Crash before the refund is sent',
    what: 'The process dies before the send, then restarts.', right: '$20, sent once',
    variants: [{ label: 'before the intent', prefix: 'F1', tiers: ALL }, { label: 'after the intent', prefix: 'F1-intent', tiers: ALL }] },
  { id: 'F2', short: 'Reply lost', title: 'Crash after sending, before the reply',
    what: 'The service commits the refund, the reply is lost, the process restarts.',
    right: '$20. Dedupes: the retry is deduped. Lookup: found, COMMITTED. Neither: AMBIGUOUS, nothing resent',
    variants: [{ prefix: 'F2', tiers: ALL }] },
  { id: 'F3', short: 'Sent twice', title: 'Same request submitted twice',
    what: 'The identical request is submitted twice.', right: '$20; the second gets the first one’s outcome',
    variants: [{ label: 'one after the other', prefix: 'F3', tiers: ALL }, { label: 'at once', prefix: 'F3-race', tiers: ALL }] },
  { id: 'F4', short: 'Model says $30', title: 'Model says $30 on the retry',
    what: 'Crash after the send; on restart the model re-decides $30 for the same key.', right: '$20 stands, $30 REFUSED',
    variants: [{ prefix: 'F4', tiers: ALL }] },
  { id: 'F5', short: 'Different amount', title: 'Same request, different amount',
    what: 'A second submit with the same key and another amount.', right: 'the second REFUSED, nothing more sent',
    variants: [{ prefix: 'F5', tiers: ALL }] },
  { id: 'F6', short: 'Permission pulled', title: 'Permission pulled before the refund lands',
    what: 'The lease ends between the decision and the send.', right: 'REFUSED, $0',
    variants: [{ label: 'revoked', prefix: 'F6', tiers: ALL }, { label: 'expired', prefix: 'F6-expired', tiers: ALL }] },
  { id: 'F7', short: 'Not eligible', title: 'Order stops being eligible',
    what: 'A premise changes between the decision and the send.', right: 'REFUSED, $0, the receipt says which premise changed',
    variants: [{ prefix: 'F7', tiers: ALL }] },
  { id: 'F8', short: 'Hand refund', title: 'Support refunds by hand during the outage',
    what: 'Crash before the send; a person refunds $20 by hand; restart.', right: '$20 total, the agent’s retry REFUSED',
    variants: [{ prefix: 'F8', tiers: ALL }] },
  { id: 'F9', short: 'Revoked in outage', title: 'Permission pulled during the outage',
    what: 'Crash; the lease is revoked; restart.', right: 'REFUSED, nothing (more) sent',
    variants: [{ prefix: 'F9', tiers: ALL }] },
  { id: 'F10', short: '24-hour window', title: 'Retry after the 24-hour ID window',
    what: 'Crash after the send; restart 25 hours later, when the service has forgotten the key.',
    right: '$20, found by lookup, nothing resent. Without lookup: AMBIGUOUS, never a resend',
    variants: [{ prefix: 'F10', tiers: ['1+lookup', '1'] }] },
  { id: 'F11', short: 'Race one cap', title: 'Two approvals race one $30 cap',
    what: 'Two $20 refunds on one order, approved at once, under a $30 cap.', right: 'one lands, the other REFUSED',
    variants: [{ prefix: 'F11', tiers: ALL }] },
  { id: 'F12', short: 'Stale approval', title: 'A stale approval',
    what: 'A manager approves $120 seeing “nothing refunded”; support refunds $120 by hand; the agent sends later.',
    right: 'REFUSED, sent back to the approver with what changed', variants: [{ prefix: 'F12', tiers: ALL }] },
  { id: 'B1', beyond: true, short: '$5 inside a bound', title: 'An unrelated $5 refund inside a declared bound',
    what: 'The decision says “refunds by others at most $10”; someone refunds $5 meanwhile.', right: 'the approved $20 still goes out',
    variants: [{ prefix: 'bound', tiers: ALL }] },
  { id: 'B2', beyond: true, short: 'A read fails', title: 'A premise read fails at recovery',
    what: 'Crash after the intent; at restart the order system does not answer.', right: 'nothing is sent blind; the next try resolves it',
    variants: [{ prefix: 'read-fails', tiers: ALL }] },
  { id: 'B3', beyond: true, short: 'Crash in recovery', title: 'A crash during recovery itself',
    what: 'Crash after the send; the restart dies mid-recovery; a second restart.', right: '$20, once',
    variants: [{ prefix: 'recovery-crash', tiers: ['1', '2'] }] },
  { id: 'B4', beyond: true, short: 'A check throws', title: 'The host’s own check cannot be made at recovery',
    what: 'The refund lands, the reply is lost; at restart the host’s authority check throws, twice.',
    right: 'not a “no”: the effect stays open, then resolves by its tier; $20, once',
    variants: [{ prefix: 'check-fails', tiers: ['1', '3'] }] },
  { id: 'B5', beyond: true, short: 'Wrong host', title: 'Recovered by a process that cannot reach the service',
    what: 'The refund lands, the reply is lost; the restarted process has no payments adapter; a later one has.',
    right: 'left open, nothing asked or written; the later process resolves it; $20, once',
    variants: [{ prefix: 'unroutable', tiers: ALL }] },
];

/** Vectors the viewer does not play, and why (the test fails on any other unplayed one). */
export const VECTORS_NOT_SHOWN = {
  torn: 'tears, reopens and repairs journal.jsonl: a file journal’s fault; the page’s journal is in memory',
  'bad-proposals': 'malformed proposals rejected with typed errors: nothing to watch unfold',
  'unsafe-numbers': 'amounts JSON cannot carry exactly, rejected with typed errors: nothing to watch unfold',
  tools: 'tool-gating vectors: an agent’s tool calls through the MCP proxy’s mapping and the replies to the model; the page plays refunds, not tool calls',
  standing: 'authority by the agent’s standing lease (granted at first use, named in the receipt): a rule of authority, not a fault the page plays',
  strict: 'strict authority refusing a proposal that names none, rejected with a typed error: nothing to watch unfold',
  people: 'people in the loop (approval rules, deadlines, decisions on an AMBIGUOUS effect): a person acts between the steps; the inbox page (inbox.html) is where a person does, live',
};

export const vectorId = (variant, tier) => `${variant.prefix}-t${tier}`;

/** Every vector id the viewer can play. */
export function allVectorIds() {
  return FAULTS.flatMap((f) => f.variants.flatMap((v) => v.tiers.map((t) => vectorId(v, t))));
}
