// The per-stream index every journal backend keeps in memory (bookkeeping, not a rule of
// the format: the format is adapters/journal-format, through ./format.js).

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
