// One scenario, run in Node (test/standing.test.js, `@interlock/gate`) and in headless
// Chromium (test/browser/standing.test.js, `@interlock/gate/browser`): `Interlock.open(
// '.interlock')` with no options and an effect that names no lease or approval (issue 23,
// item 2). By default the effect commits under the agent's standing lease, granted once
// (GRANTED in the journal), named in the receipt, announced once when the effect is defined;
// with { strict: true } the call is refused (InvalidFieldError at /authority), nothing
// recorded, nothing sent. Returns plain data for the test to check.

/**
 * Runs `body` with console.warn recorded (and still shown).
 * @template T
 * @param {() => Promise<T>} body
 * @returns {Promise<{ value: T, warned: string[] }>}
 */
async function warnings(body) {
  /** @type {string[]} */
  const warned = [];
  const warn = console.warn;
  console.warn = (...args) => {
    warned.push(args.map(String).join(' '));
    warn.apply(console, args);
  };
  try {
    return { value: await body(), warned };
  } finally {
    console.warn = warn;
  }
}

/** Every journal entry, parsed. */
const entries = (/** @type {any} */ gate) => gate.gate.entriesInOrder().map((/** @type {string} */ e) => JSON.parse(e));
/** The streams of the journal, in order of their first entry. */
const streams = (/** @type {any} */ gate) => [...new Set(entries(gate).map((/** @type {any} */ e) => e.stream))];

/**
 * The refund effect a developer writes, naming no lease or approval.
 * @param {any} gate
 * @param {any} payments
 * @param {{ sent: number, read: number }} counts
 */
function defineRefund(gate, payments, counts) {
  return gate.effect(
    {
      target: 'payments',
      params: ['order', 'amount_cents'],
      key: (/** @type {any} */ e) => `refund:${e.order}`,
      premises: async (/** @type {any} */ e, /** @type {any} */ { effectId }) => {
        counts.read++;
        return payments.premises(e.order, effectId);
      },
      lookup: async (/** @type {any} */ _e, /** @type {any} */ { effectId }) => payments.findByReference(effectId),
      dedupes: false,
    },
    async (/** @type {string} */ order, /** @type {number} */ amount, /** @type {string} */ _key, /** @type {any} */ { effectId }) => {
      counts.sent++;
      const r = payments.refund(order, amount, null, effectId, Date.now());
      return { refund_id: r.id };
    },
  );
}

/**
 * @param {{ Interlock: any, Payments: any, InvalidFieldError: any }} api the entry's exports
 * @param {{ fresh: () => Promise<void> }} place `fresh()` makes `.interlock` name a new, empty journal
 */
export async function standingByDefault({ Interlock, Payments }, { fresh }) {
  await fresh();
  const payments = await Payments.inMemory('2');
  payments.addOrder('order_881', 10_000);
  const counts = { sent: 0, read: 0 };
  const { value: gate, warned: atOpen } = await warnings(() => Interlock.open('.interlock'));
  try {
    const { value: refund, warned: atDefine } = await warnings(async () => defineRefund(gate, payments, counts));
    const { value: calls, warned: atCall } = await warnings(async () => {
      await gate.recover(); // once, at startup
      const first = await refund('order_881', 2000);
      const again = await refund('order_881', 2000); // the same request: answered from the journal
      return { first, again };
    });
    const receipt = gate.receipt(calls.first.effectId);
    return {
      atOpen,
      atDefine,
      atCall,
      notice: gate.gate.standingNotice('agent'),
      first: [calls.first.state, calls.first.executed, calls.first.replayed],
      again: [calls.again.state, calls.again.replayed, calls.again.effectId === calls.first.effectId],
      authority: receipt.proposed.authority,
      leaseChecked: receipt.authorized?.[0]?.checks?.lease?.name,
      granted: entries(gate).filter((e) => e.state === 'GRANTED').map((e) => [e.stream, e.lease]),
      sent: counts.sent,
      refunds: payments.refunds('order_881').length,
      problems: gate.verify().problems.length,
    };
  } finally {
    await gate.close();
  }
}

/**
 * @param {{ Interlock: any, Payments: any, InvalidFieldError: any }} api the entry's exports
 * @param {{ fresh: () => Promise<void> }} place
 */
export async function strictRefuses({ Interlock, Payments, InvalidFieldError }, { fresh }) {
  await fresh();
  const payments = await Payments.inMemory('2');
  payments.addOrder('order_881', 10_000);
  const counts = { sent: 0, read: 0 };
  const { value: out, warned } = await warnings(async () => {
    const gate = await Interlock.open('.interlock', { strict: true });
    try {
      const refund = defineRefund(gate, payments, counts);
      const error = await refund('order_881', 2000).then(() => null, (/** @type {any} */ e) => e);
      return { error, streams: streams(gate) };
    } finally {
      await gate.close();
    }
  });
  // What a reopened journal holds: nothing was recorded (no effect, no standing lease).
  const reopened = await Interlock.open('.interlock', { strict: true });
  const streamsAfterReopen = streams(reopened);
  await reopened.close();
  return {
    invalidField: out.error instanceof InvalidFieldError,
    error: String(out.error),
    field: out.error?.payload?.field,
    streams: out.streams,
    streamsAfterReopen,
    warned,
    sent: counts.sent,
    read: counts.read,
    refunds: payments.refunds('order_881').length,
  };
}
