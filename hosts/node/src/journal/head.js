// The three members of an entry a backend reads back (`stream`, `seq`, `open`); every other
// member is the gate's business. The file journal (file.js) no longer uses parseHead and
// validateEntry: it asks the journal-format component (adapters/journal-format), the Rust
// backend's own rules. They remain for the browser backends (memory.js, indexeddb.js),
// which cannot load that component synchronously; they differ from it on bad input
// (`seq: 1.0`, duplicate members, a leading byte-order mark, `seq` above 2^53), which only
// matters for text a host did not get from the gate. StreamIndex is bookkeeping, shared.

/**
 * Parses an entry's head; throws a string saying what is wrong.
 * @param {string} text
 * @returns {{ stream: string, seq: number, open: boolean }}
 */
export function parseHead(text) {
  // An entry must be an object (serde would also accept an array for a struct).
  if (!/^\s*\{/.test(text)) throw 'not a JSON object';
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw `not a journal entry: ${/** @type {Error} */ (e).message}`;
  }
  if (typeof v.stream !== 'string') throw 'not a journal entry: `stream` is missing or not a string';
  if (!Number.isSafeInteger(v.seq) || v.seq < 0) throw 'not a journal entry: `seq` is missing or not an integer';
  if (typeof v.open !== 'boolean') throw 'not a journal entry: `open` is missing or not a bool';
  return { stream: v.stream, seq: v.seq, open: v.open };
}

/**
 * Checks an entry given to `append` (as the Rust backend's `validate`).
 * @param {unknown} entry
 * @param {string} stream
 * @param {number} seq
 * @param {boolean} open
 */
export function validateEntry(entry, stream, seq, open) {
  if (typeof entry !== 'string') throw 'is not a string';
  if (entry.includes('\n')) throw 'contains a newline; an entry must be a single line';
  const head = parseHead(entry);
  if (head.stream !== stream) throw `its stream member is ${JSON.stringify(head.stream)} but the append is to stream ${JSON.stringify(stream)}`;
  if (head.seq !== seq) throw `its seq member is ${head.seq} but should be ${seq}`;
  if (head.open !== open) throw `its open member is ${head.open} but the append says open=${open}`;
}

/**
 * The per-stream index every backend keeps in memory, so that `length`, `open-streams` and
 * `streams` never touch storage, and `read` touches only the entries asked for.
 * `loc` is whatever the backend needs to find an entry (a byte range, the text itself).
 * @template Loc
 */
export class StreamIndex {
  constructor() {
    /** @type {Map<string, { locs: Loc[], open: boolean, order: number }>} */
    this.streams = new Map();
    /** @type {string[]} names in first-append order */
    this.order = [];
    this.entries = 0;
  }
  /** @param {string} stream */
  length(stream) {
    return this.streams.get(stream)?.locs.length ?? 0;
  }
  /**
   * @param {string} stream
   * @param {Loc} loc
   * @param {boolean} open
   */
  push(stream, loc, open) {
    let s = this.streams.get(stream);
    if (!s) {
      s = { locs: [], open, order: this.order.length };
      this.order.push(stream);
      this.streams.set(stream, s);
    }
    s.locs.push(loc);
    s.open = open;
    this.entries += 1;
  }
  /**
   * @param {string} stream
   * @param {number} start
   */
  locs(stream, start) {
    const s = this.streams.get(stream);
    return s ? s.locs.slice(start) : [];
  }
  openStreams() {
    return this.order.filter((name) => this.streams.get(name)?.open);
  }
  allStreams() {
    return this.order.slice();
  }
}
