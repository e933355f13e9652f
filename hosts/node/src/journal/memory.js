// A file journal's storage in memory: each file a growable byte buffer. The journal's rules
// (its format, index, torn tails) run inside the gate over these calls. Nothing survives the
// page or process; IndexedDbJournal (browser) persists the same calls.
import { StorageError } from '../errors.js';

/** @import { Storage } from '../types.js' */

/** @implements {Storage} */
export class MemoryJournal {
  backend = /** @type {const} */ ('file');
  /** @type {Map<string, { buf: Uint8Array, len: number }>} */
  files = new Map();

  /** @param {string} name */
  #file(name) {
    const f = this.files.get(name);
    if (!f) throw new StorageError('io', `${name}: no such file`);
    return f;
  }

  /** @param {string} name */
  fileSize(name) {
    return this.files.get(name)?.len;
  }

  /**
   * @param {string} name
   * @param {number} offset
   * @param {number} len
   */
  fileRead(name, offset, len) {
    const f = this.#file(name);
    const start = Math.min(offset, f.len);
    return f.buf.slice(start, Math.min(f.len, start + len));
  }

  /**
   * @param {string} name
   * @param {number} at
   * @param {Uint8Array} bytes
   */
  fileAppend(name, at, bytes) {
    const f = this.files.get(name) ?? { buf: new Uint8Array(0), len: 0 };
    if (f.len !== at) throw new StorageError('conflict', f.len);
    if (f.len + bytes.length > f.buf.length) {
      const grown = new Uint8Array(Math.max(f.buf.length * 2, f.len + bytes.length, 4096));
      grown.set(f.buf.subarray(0, f.len));
      f.buf = grown;
    }
    f.buf.set(bytes, f.len);
    f.len += bytes.length;
    this.files.set(name, f);
    this.written('append', name, at, bytes);
  }

  /** @param {string} name */
  fileSync(name) {
    this.#file(name);
  }

  /**
   * @param {string} name
   * @param {number} len
   */
  fileTruncate(name, len) {
    const f = this.#file(name);
    f.len = Math.min(f.len, len);
    this.written('truncate', name, f.len, null);
  }

  /**
   * @param {string} name
   * @param {Uint8Array} bytes
   */
  fileReplace(name, bytes) {
    this.files.set(name, { buf: bytes.slice(), len: bytes.length });
    this.written('replace', name, 0, bytes);
  }

  /**
   * @param {string} name
   * @param {Uint8Array} bytes
   */
  fileCreate(name, bytes) {
    if (this.files.has(name)) return false;
    this.fileReplace(name, bytes);
    return true;
  }

  /** @returns {never} */
  sqlBatch() {
    throw new StorageError('unsupported', 'an in-memory journal is a file journal, not a SQL one');
  }

  /**
   * A file's bytes (empty when it does not exist).
   * @param {string} name
   */
  bytes(name = 'journal.jsonl') {
    const f = this.files.get(name);
    return f ? f.buf.slice(0, f.len) : new Uint8Array(0);
  }

  /**
   * Called after every write, for a subclass that persists: `bytes` appended at `at`, the
   * file cut to `at`, or replaced by `bytes`.
   * @protected
   * @param {'append' | 'truncate' | 'replace'} _kind
   * @param {string} _name
   * @param {number} _at
   * @param {Uint8Array | null} _bytes
   */
  written(_kind, _name, _at, _bytes) {}

  close() {}
}
