// What every Node benchmark submits: the proposal of experiments/bench/src/common.rs under a
// standing lease, and a target that answers at once, so the figures measure the gate.
export const LEASE = 'case-4471';
export const T0_MS = 1_800_000_000_000;
export const LEASE_UNTIL_MS = T0_MS + 10 * 365 * 24 * 3_600_000;
const PREMISES = '{"eligible":true,"refunded_by_others_cents":0}';
const RESULT = '{"amount_cents":2000,"refund_id":"re_0001"}';
// The same proposal text as experiments/bench/src/common.rs.
export const proposal = (n) =>
  `{"agent":"refund-agent","target":{"name":"payments","dedupes":true,"dedupe_window_ms":86400000,"lookup":true,"timeout_ms":1000},` +
  `"key":"refund:order_${n}","effect":{"order":"order_${n}","amount_cents":2000},"authority":{"lease":"${LEASE}"},` +
  `"premises":{"eligible":true,"refunded_by_others_cents":0}}`;
export const nullTarget = {
  capture: () => ({ tag: 'captured', val: PREMISES }),
  authorize: () => ({ tag: 'allowed', val: true }),
  apply: () => ({ tag: 'applied', val: RESULT }),
  query: () => ({ tag: 'found', val: RESULT }),
};
export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
