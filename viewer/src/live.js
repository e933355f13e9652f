// Plays one conformance vector through the conformance runner itself
// (hosts/node/src/conformance.js, unchanged), and lets a person watch it.
//
// Nothing here decides anything and nothing is re-implemented: the runner interprets the
// vector's world script, the gate component decides, the payments component (the Rust tier
// rules) answers. This file only listens at the seams the runner already has:
//   - the journal backend (a MemoryJournal): every entry the component appends;
//   - the two components' instances: every export the gate is asked (submit, resume,
//     recover, ...), every step it asks for (capture, authorize, apply, query, done), every
//     call to the payments service, and its reply to each step the runner routes to it;
//   - the vector's steps: when the runner starts reading step i.
// and it pauses where the runner already awaits: the gate's host loop awaits the journal's
// `flush()` before it performs any step the gate asked for (durability before the send),
// and a new worker awaits the component's instantiation. At those points the page shows
// what happened so far, at a readable pace, while the runner waits. So the intent line is
// on screen before the refund goes out, exactly as it is durable before the send.
import { runVector } from '../../hosts/node/src/conformance.js';
import { Gate, toOutcome } from '../../hosts/node/src/gate.js';
import { MemoryJournal } from '../../hosts/node/src/journal/memory.js';
import { FakeClock } from '../../hosts/node/src/clock.js';

const GATE_EXPORTS_WATCHED = ['submit', 'resume', 'recover', 'grantLease', 'revokeLease', 'approve', 'verify', 'openEffects'];
const SERVICE_CALLS_WATCHED = ['refund', 'refundByHand', 'setEligible', 'findByReference', 'premises'];
const TARGET_STEPS_WATCHED = ['capture', 'apply', 'query'];

const plain = (v) => (typeof v === 'bigint' ? Number(v) : v);

/** A MemoryJournal that reports every append and makes the host loop's flush a pause. */
class WatchedJournal extends MemoryJournal {
  constructor(emit, drain) {
    super();
    this.emit = emit;
    this.drain = drain;
  }
  written(entries, durable) {
    this.emit({ kind: 'journal', entries: [...entries], durable, total: this.lines.length });
  }
  flush() {
    return this.drain();
  }
}

/** A component loader whose instances report what they are asked and answer. */
function watchedComponent(component, wrap) {
  return {
    getCoreModule: component.getCoreModule,
    async instantiate(getCoreModule, imports) {
      const root = await component.instantiate(getCoreModule, imports);
      return wrap(root);
    },
  };
}

/**
 * Plays `vector`. `show(event)` is awaited for every event, in order, while the runner is
 * paused at its next await; it is where the page renders and waits out its pace.
 * `components`: { gate, payments } (GateComponent). Returns the runner's report.
 */
export async function play(vector, { components, show, sha256 }) {
  const queue = [];
  let draining = null;
  const emit = (ev) => queue.push(ev);
  const drain = async () => {
    // One drainer at a time; a second caller waits for the same queue to empty.
    while (draining) await draining;
    draining = (async () => {
      while (queue.length) await show(queue.shift());
    })();
    try {
      await draining;
    } finally {
      draining = null;
    }
  };

  let current = -1;
  let pendingCrash = null;
  const stepStarts = (i) => {
    if (i <= current) return;
    if (pendingCrash) emit({ kind: 'crash', ...pendingCrash });
    pendingCrash = null;
    current = i;
    const step = vector.steps[i];
    emit({ kind: 'step', index: i, step });
    if (step.crash) pendingCrash = { index: i, step, at: step.crash };
  };
  // The runner reads `step.op` first thing for each step: that read is when step i starts.
  const steps = vector.steps.map((step, i) => new Proxy(step, {
    get(t, k, r) {
      stepStarts(i);
      return Reflect.get(t, k, r);
    },
    has(t, k) {
      stepStarts(i);
      return Reflect.has(t, k);
    },
  }));

  let workers = 0;
  const gate = watchedComponent(components.gate, async (root) => root);
  gate.instantiate = async (getCoreModule, imports) => {
    const root = await components.gate.instantiate(getCoreModule, imports);
    const worker = ++workers;
    const api = {};
    for (const name of Object.keys(root.gate)) {
      const fn = root.gate[name];
      if (typeof fn !== 'function' || !GATE_EXPORTS_WATCHED.includes(name)) {
        api[name] = fn;
        continue;
      }
      api[name] = (...args) => {
        const out = fn(...args);
        emit({ kind: 'gate', worker, name, args: args.map(plain), out });
        if (out?.ask) {
          const ask = out.ask;
          emit(ask.tag === 'done'
            ? { kind: 'outcome', worker, outcome: toOutcome(ask.val) }
            : { kind: 'ask', worker, tag: ask.tag, request: ask.val });
        }
        return out;
      };
    }
    emit({ kind: 'worker', worker });
    await drain();
    return { ...root, gate: api };
  };

  let service = null;
  const payments = watchedComponent(components.payments, (root) => {
    const svc = root.service;
    const api = { ...svc };
    for (const name of SERVICE_CALLS_WATCHED) {
      api[name] = (...args) => {
        let result;
        try {
          result = svc[name](...args);
        } catch (e) {
          emit({ kind: 'service', name, args: args.map(plain), error: e?.payload ?? String(e), refundedCents: refunded() });
          throw e;
        }
        const parsed = typeof result === 'string' ? JSON.parse(result) : result;
        emit({ kind: 'service', name, args: args.map(plain), result: parsed, refundedCents: refunded() });
        return result;
      };
    }
    // The service answers the gate's steps itself (its `target` export).
    const steps = { ...root.target };
    for (const name of TARGET_STEPS_WATCHED) {
      steps[name] = (request, ...rest) => {
        const reply = root.target[name](request, ...rest);
        emit({ kind: 'reply', name, request, reply, refundedCents: refunded() });
        return reply;
      };
    }
    service = svc;
    return { ...root, service: api, target: steps };
  });
  const refunded = () => {
    try {
      return Number(service.refundedCents('order_881'));
    } catch {
      return 0;
    }
  };

  const journal = new WatchedJournal(emit, drain);
  const report = await runVector({ ...vector, steps }, {
    gate,
    payments,
    journal,
    journalBytes: () => journal.bytes(),
    sha256,
  });
  if (pendingCrash) emit({ kind: 'crash', ...pendingCrash });
  emit({ kind: 'end', report, lines: [...journal.lines] });
  await drain();
  return { report, lines: [...journal.lines] };
}

/**
 * A read-only gate over a list of journal lines: receipts and `verify` for the journal as
 * it stands on screen (or as a person edited it). One component instance, the lines swapped.
 */
export class JournalView {
  static async create(gateComponent) {
    const holder = { current: new MemoryJournal() };
    const journal = {
      append: () => {
        throw new Error('the journal view is read-only');
      },
      read: (...a) => holder.current.read(...a),
      length: (...a) => holder.current.length(...a),
      openStreams: () => holder.current.openStreams(),
      streams: () => holder.current.streams(),
      sync: () => {},
    };
    const gate = await Gate.instantiate(gateComponent, { journal, clock: new FakeClock(0) });
    return new JournalView(gate, holder);
  }

  constructor(gate, holder) {
    this.gate = gate;
    this.holder = holder;
  }

  /** Loads `lines`; throws the journal's JournalError when they do not even parse. */
  load(lines) {
    this.holder.current = MemoryJournal.fromLines(lines);
  }

  receipt(effectId) {
    return this.gate.receipt(effectId);
  }

  verify() {
    return this.gate.verify([]);
  }
}
