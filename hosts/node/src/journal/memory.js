// An in-memory journal: every stream in one ordered list of lines, exactly what the file
// journal would hold, so `bytes()` gives the journal.jsonl a file host would have written
// (used to check the conformance pins in a browser). Nothing survives the page or process.
import { JournalError } from '../errors.js';
import { StreamIndex, parseHead, validateEntry } from './head.js';

/** @import { JournalBackend } from '../types.js' */

/** @implements {JournalBackend} */
export class MemoryJournal {
  /** @type {StreamIndex<string>} */
  #index = new StreamIndex();

  constructor() {
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
    lines.forEach((text, i) => {
      let head;
      try {
        head = parseHead(text);
      } catch (detail) {
        throw new JournalError('corrupt', `entry ${i + 1} is not a valid entry: ${detail}`);
      }
      const position = this.#index.length(head.stream);
      if (head.seq !== position) {
        throw new JournalError('corrupt', `entry ${i + 1}: seq is ${head.seq} but stream ${JSON.stringify(head.stream)} has ${position} entries before it`);
      }
      this.#index.push(head.stream, text, head.open);
      this.lines.push(text);
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
    entries.forEach((e, i) => {
      try {
        validateEntry(e, stream, expectedLength + i, open);
      } catch (detail) {
        throw new JournalError('other', `invalid journal entry: entry ${i} of the batch (seq ${expectedLength + i}): ${detail}`);
      }
    });
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
