// An in-memory journal: every stream in one ordered list of lines, exactly what the file
// journal would hold, so `bytes()` gives the journal.jsonl a file host would have written
// (used to check the conformance pins in a browser). Nothing survives the page or process.
import { JournalError } from '../errors.js';
import { StreamIndex, parseHead, validateEntry } from './head.js';

export class MemoryJournal {
  constructor() {
    this.lines = [];
    this.index = new StreamIndex();
    this.closed = false;
  }

  /** A journal rebuilt from entries in append order (how durable browser journals load). */
  static fromLines(lines, ...args) {
    const j = new this(...args);
    lines.forEach((text, i) => {
      let head;
      try {
        head = parseHead(text);
      } catch (detail) {
        throw new JournalError('corrupt', `entry ${i + 1} is not a valid entry: ${detail}`);
      }
      const position = j.index.length(head.stream);
      if (head.seq !== position) {
        throw new JournalError('corrupt', `entry ${i + 1}: seq is ${head.seq} but stream ${JSON.stringify(head.stream)} has ${position} entries before it`);
      }
      j.index.push(head.stream, text, head.open);
      j.lines.push(text);
    });
    return j;
  }

  #check() {
    if (this.closed) throw new JournalError('other', 'journal is closed');
  }

  append(stream, expectedLength, entries, durable, open) {
    this.#check();
    const actual = this.index.length(stream);
    if (actual !== expectedLength) throw new JournalError('conflict', actual);
    entries.forEach((e, i) => {
      try {
        validateEntry(e, stream, expectedLength + i, open);
      } catch (detail) {
        throw new JournalError('other', `invalid journal entry: entry ${i} of the batch (seq ${expectedLength + i}): ${detail}`);
      }
    });
    for (const e of entries) {
      this.index.push(stream, e, open);
      this.lines.push(e);
    }
    this.written(entries, durable);
  }

  /** Hook for subclasses that persist what was appended. */
  written(_entries, _durable) {}

  read(stream, start) {
    this.#check();
    return this.index.locs(stream, start);
  }
  length(stream) {
    this.#check();
    return this.index.length(stream);
  }
  openStreams() {
    this.#check();
    return this.index.openStreams();
  }
  streams() {
    this.#check();
    return this.index.allStreams();
  }
  sync() {
    this.#check();
  }

  /** The journal as journal.jsonl bytes. */
  bytes() {
    return new TextEncoder().encode(this.lines.map((l) => l + '\n').join(''));
  }

  close() {
    this.closed = true;
  }
}
