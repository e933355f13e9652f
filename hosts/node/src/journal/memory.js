// An in-memory journal: every stream in one ordered list of lines, exactly what the file
// journal would hold, so `bytes()` gives the journal.jsonl a file host would have written
// (used to check the conformance pins in a browser). Nothing survives the page or process.
// Appends and loads are checked by the journal-format component (./format.js), the same
// rules as the file journal's; in a browser, await journalFormat() before making one.
import { JournalError, CorruptJournalFileError } from '../errors.js';
import { StreamIndex } from './stream-index.js';
import { formatReady, scan, validateAppend } from './format.js';

/** @import { JournalBackend } from '../types.js' */

/** @implements {JournalBackend} */
export class MemoryJournal {
  /** @type {StreamIndex<string>} */
  #index = new StreamIndex();

  constructor() {
    if (!formatReady()) {
      throw new JournalError('other', 'the journal-format component is not loaded: in a browser, await journalFormat() first (Interlock.open and Interlock.memory do)');
    }
    /** @type {string[]} every entry, in append order */
    this.lines = [];
    this.closed = false;
  }

  /**
   * A journal rebuilt from entries in append order.
   * @param {string[]} lines
   */
  static fromLines(lines) {
    const j = new MemoryJournal();
    j.load(lines);
    return j;
  }

  /**
   * Replays entries in append order into this empty journal (how durable browser journals load).
   * @protected
   * @param {string[]} lines
   */
  load(lines) {
    let places;
    try {
      places = scan(new TextEncoder().encode(lines.map((l) => `${l}\n`).join('')));
    } catch (e) {
      // The format's own words, counted in entries rather than file lines.
      if (e instanceof CorruptJournalFileError) throw new JournalError('corrupt', `entry ${e.line} is not a valid entry: ${e.detail}`);
      throw e;
    }
    if (places.length !== lines.length) {
      throw new JournalError('corrupt', `${lines.length} entries hold ${places.length} lines: an entry holds a newline`);
    }
    places.forEach(({ stream, open }, i) => {
      this.#index.push(stream, lines[i], open);
      this.lines.push(lines[i]);
    });
  }

  #check() {
    if (this.closed) throw new JournalError('other', 'journal is closed');
  }

  /**
   * @param {string} stream
   * @param {number} expectedLength
   * @param {string[]} entries
   * @param {boolean} durable
   * @param {boolean} open
   */
  append(stream, expectedLength, entries, durable, open) {
    this.#check();
    const actual = this.#index.length(stream);
    if (actual !== expectedLength) throw new JournalError('conflict', actual);
    validateAppend(entries, stream, expectedLength, open);
    for (const e of entries) {
      this.#index.push(stream, e, open);
      this.lines.push(e);
    }
    this.written(entries, durable);
  }

  /**
   * Hook for subclasses that persist what was appended.
   * @protected
   * @param {string[]} _entries
   * @param {boolean} _durable
   */
  written(_entries, _durable) {}

  /**
   * @param {string} stream
   * @param {number} start
   * @returns {string[]}
   */
  read(stream, start) {
    this.#check();
    return this.#index.locs(stream, start);
  }
  /** @param {string} stream */
  length(stream) {
    this.#check();
    return this.#index.length(stream);
  }
  openStreams() {
    this.#check();
    return this.#index.openStreams();
  }
  streams() {
    this.#check();
    return this.#index.allStreams();
  }
  sync() {
    this.#check();
  }

  /** The journal as journal.jsonl bytes. */
  bytes() {
    return new TextEncoder().encode(this.lines.map((l) => l + '\n').join(''));
  }

  /** @returns {void | Promise<void>} */
  close() {
    this.closed = true;
  }
}
