// Plays one conformance vector through the conformance runner itself (the component every
// host runs, through hosts/node/conformance/driver.js), and lets a person watch it.
//
// Nothing here decides anything and nothing is re-implemented: the runner interprets the
// vector's world script and answers the gate's steps from the simulated service (the Rust
// tier rules), and the gate component decides. This file only listens: the runner's own
// events (each step, worker, gate call, step asked, reply, service call, outcome, crash)
// and every entry the gate appends to the journal (a MemoryJournal), in the one order they
// happened. The run itself is synchronous (the runner is one call), so the page plays the
// events back at a readable pace afterwards; their order is the run's, so the intent line
// is on screen before the refund goes out, exactly as it was durable before the send.
import { runVector } from '../../hosts/node/conformance/driver.js';
import { Gate } from '../../hosts/node/src/gate.js';
import { MemoryJournal } from '../../hosts/node/src/journal/memory.js';
import { FakeClock } from '../../hosts/node/src/clock.js';
import { journalFormat } from '../../hosts/node/src/load-browser.js';

/** A MemoryJournal that reports every append. */
class WatchedJournal extends MemoryJournal {
  constructor(emit) {
    super();
    this.emit = emit;
  }
  written(entries, durable) {
    this.emit({ kind: 'journal', entries: [...entries], durable, total: this.lines.length });
  }
}

/**
 * Plays `vector`. `show(event)` is awaited for every event, in the order they happened.
 * `components`: { gate } (GateComponent). Returns the runner's report and the journal.
 */
export async function play(vector, { components, show }) {
  await journalFormat();
  const events = [];
  const emit = (ev) => events.push(ev);
  const journal = new WatchedJournal(emit);
  const report = await runVector(vector, {
    gate: components.gate, journal, storage: { bytes: () => journal.bytes() }, host: 'browser', note: emit,
  });
  emit({ kind: 'end', report, lines: [...journal.lines] });
  for (const ev of events) await show(ev);
  return { report, lines: [...journal.lines] };
}

/**
 * A read-only gate over a list of journal lines: receipts and `verify` for the journal as
 * it stands on screen (or as a person edited it). One component instance, the lines swapped.
 */
export class JournalView {
  static async create(gateComponent) {
    await journalFormat();
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
