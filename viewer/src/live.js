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
import { Gate, MemoryJournal, FakeClock, gateRoot, admin } from '@interlock/gate/core';

const JOURNAL = 'journal.jsonl';
const decode = (/** @type {Uint8Array} */ bytes) => new TextDecoder().decode(bytes);
/** The lines of journal.jsonl's bytes. */
const linesOf = (/** @type {Uint8Array} */ bytes) => decode(bytes).split('\n').slice(0, -1);

/**
 * A file journal in memory that reports the entries the gate appends to journal.jsonl,
 * each batch once it is synced (durable) or once the next write comes (not durable).
 */
class WatchedJournal extends MemoryJournal {
  constructor(emit) {
    super();
    this.emit = emit;
    this.pending = [];
  }
  written(kind, name, at, bytes) {
    if (name !== JOURNAL) return;
    this.report(false);
    if (kind === 'append') this.pending = linesOf(bytes);
  }
  fileSync(name) {
    super.fileSync(name);
    if (name === JOURNAL) this.report(true);
  }
  report(durable) {
    if (this.pending.length === 0) return;
    const entries = this.pending;
    this.pending = [];
    this.emit({ kind: 'journal', entries, durable, total: linesOf(this.bytes()).length });
  }
}

/**
 * Plays `vector`. `show(event)` is awaited for every event, in the order they happened.
 * `components`: { gate } (GateComponent). Returns the runner's report and the journal.
 */
export async function play(vector, { components, show }) {
  const events = [];
  const emit = (ev) => events.push(ev);
  const journal = new WatchedJournal(emit);
  const report = await runVector(vector, { gate: components.gate, storage: journal, host: 'browser', note: emit });
  journal.report(false);
  const lines = linesOf(journal.bytes());
  emit({ kind: 'end', report, lines: [...lines] });
  for (const ev of events) await show(ev);
  return { report, lines };
}

/**
 * A gate over a list of journal lines: receipts and `verify` for the journal as it stands on
 * screen (or as a person edited it). One component instance, its storage swapped and the
 * journal opened again on each load.
 */
export class JournalView {
  static async create(gateComponent) {
    const holder = { current: new MemoryJournal() };
    const storage = new Proxy({}, {
      get: (_, name) => (name === 'backend' ? 'file' : (...a) => holder.current[name](...a)),
    });
    const clock = new FakeClock(0);
    const root = await gateRoot(gateComponent, { storage, clock });
    return new JournalView(new Gate(root, storage, clock), root, holder);
  }

  constructor(gate, root, holder) {
    this.gate = gate;
    this.root = root;
    this.holder = holder;
  }

  /** Loads `lines`; throws the journal's JournalError when they do not even open. */
  load(lines) {
    const j = new MemoryJournal();
    if (lines.length) j.fileAppend(JOURNAL, 0, new TextEncoder().encode(lines.map((l) => `${l}\n`).join('')));
    this.holder.current = j;
    admin(() => this.root.journalAdmin.open('file'));
  }

  receipt(effectId) {
    return this.gate.receipt(effectId);
  }

  verify() {
    return this.gate.verify([]);
  }
}
