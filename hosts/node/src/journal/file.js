// The Node file journal: the same directory layout and bytes as the Rust file journal
// (adapters/file-journal/src/lib.rs), so a journal written by one host is opened, verified
// and recovered by the other.
//
//   journal.jsonl  every entry text + "\n", all streams interleaved in append order
//   journal.lock   flock(2)-ed exclusively for the life of the handle (Rust's
//                  File::try_lock is flock too, so Node and the CLI exclude each other)
//
// The journal holds every effect's payload and result (customer data): a folder this
// creates is 0700 and every file it creates 0600, whatever the umask.
//
//   journal.format the format version, written when the journal is created
//
// Every rule about those bytes (entry heads, append validation, the scan, torn tails,
// repair naming, the version, error texts) is the journal-format component's
// (adapters/journal-format, ./format.js); this file does the I/O and keeps the index
// (byte offset and length of each entry, per stream) the scan returns. Reads are positional.
// `durable` -> write then fdatasync, which also makes every earlier append durable.
import fs from 'node:fs';
import { join, dirname } from 'node:path';
import { createRequire } from 'node:module';
import { JournalError, JournalLockedError, refuseJournalUrl } from '../errors.js';
import { StreamIndex } from './stream-index.js';
import './format-node.js';
import { scan as scanFile, validateAppend, checkFormatFile, formatFileText, tornFileName, completePrefix, lockWait, lockedMessage } from './format.js';

/**
 * @import { JournalBackend, RepairReport } from '../types.js'
 */

const require = createRequire(import.meta.url);
const { flockSync } = require('fs-ext');

export const JOURNAL_FILE = 'journal.jsonl';
export const LOCK_FILE = 'journal.lock';
export const TORN_PREFIX = 'journal.torn-';
export const FORMAT_FILE = 'journal.format';

const utf8 = new TextDecoder('utf-8', { fatal: true });
const { O_RDWR, O_CREAT, O_APPEND, O_EXCL, O_RDONLY, O_WRONLY, O_TRUNC } = fs.constants;
const DIR_MODE = 0o700;
const FILE_MODE = 0o600;

/**
 * Creates `path` (O_EXCL, plus `flags`) readable and writable by its owner only. The umask
 * takes bits away from the mode given to open(2) (a umask of 0o200 would leave the owner
 * unable to write it), so the mode is set again on the descriptor.
 * @param {string} path
 * @param {number} flags
 */
function createPrivate(path, flags) {
  const fd = fs.openSync(path, flags | O_CREAT | O_EXCL, FILE_MODE);
  try {
    fs.fchmodSync(fd, FILE_MODE);
  } catch (e) {
    fs.closeSync(fd);
    throw e;
  }
  return fd;
}

/**
 * Opens `path` with `flags`, creating it private (createPrivate) if it does not exist.
 * @param {string} path
 * @param {number} flags
 */
function openOrCreatePrivate(path, flags) {
  try {
    return { fd: createPrivate(path, flags), created: true };
  } catch (e) {
    if (/** @type {NodeJS.ErrnoException} */ (e).code !== 'EEXIST') throw e;
    return { fd: fs.openSync(path, flags), created: false };
  }
}

/**
 * @param {unknown} e
 * @returns {JournalError}
 */
function io(e) {
  return e instanceof JournalError ? e : new JournalError('io', `journal I/O error: ${/** @type {Error} */ (e).message}`);
}

/** @param {string} dir */
function syncDir(dir) {
  const fd = fs.openSync(dir, O_RDONLY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Sleeps this thread (the journal API is synchronous). @param {number} ms */
const sleepSync = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Takes `dir`'s lock, trying again for up to `waitMs` while another writer holds it.
 * @param {string} dir
 * @param {number} waitMs
 */
function lock(dir, waitMs) {
  const { fd } = openOrCreatePrivate(join(dir, LOCK_FILE), O_RDWR);
  const { pollMs } = lockWait();
  const start = Date.now();
  for (;;) {
    try {
      flockSync(fd, 'exnb');
      return fd;
    } catch (e) {
      const { code } = /** @type {NodeJS.ErrnoException} */ (e);
      const held = code === 'EWOULDBLOCK' || code === 'EAGAIN';
      if (held && Date.now() - start < waitMs) {
        sleepSync(pollMs);
        continue;
      }
      fs.closeSync(fd);
      if (held) throw new JournalLockedError(dir, lockedMessage(dir, waitMs));
      throw io(e);
    }
  }
}

/**
 * Checks journal.format under the lock, or writes it for a new journal (no journal.jsonl
 * yet). A journal made before versions (journal.jsonl, no format file) is version 1 and
 * is left as it is. Throws a JournalError for a newer or unknown version.
 * @param {string} dir
 */
function checkFormat(dir) {
  const path = join(dir, FORMAT_FILE);
  if (checkExistingFormat(dir) || fs.existsSync(join(dir, JOURNAL_FILE))) return;
  // Written whole under a temporary name, then renamed: a crash never leaves a partial
  // format file. The directory sync after journal.jsonl's creation makes both durable.
  const tmp = `${path}.tmp`;
  const fd = fs.openSync(tmp, O_WRONLY | O_CREAT | O_TRUNC, FILE_MODE);
  try {
    fs.fchmodSync(fd, FILE_MODE);
    fs.writeSync(fd, formatFileText());
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, path);
}

/**
 * Checks journal.format if there is one (throws for a newer or unknown version); returns
 * whether there was one.
 * @param {string} dir
 */
function checkExistingFormat(dir) {
  let text;
  try {
    text = fs.readFileSync(join(dir, FORMAT_FILE), 'utf8');
  } catch (e) {
    if (/** @type {NodeJS.ErrnoException} */ (e).code === 'ENOENT') return false;
    throw e;
  }
  checkFormatFile(text);
  return true;
}

/** @implements {JournalBackend} */
export class FileJournal {
  /** @type {number | null} journal.jsonl, null once closed */
  #fd;
  /** @type {number | null} journal.lock (flock-ed), null once closed */
  #lockFd;
  /** @type {StreamIndex<[number, number]>} (offset, length) of every entry */
  #index;
  /** journal.jsonl's length in bytes */
  #len;
  /** a non-durable append awaits its fdatasync */
  #pending = false;
  /** @type {string | null} why this journal refuses writes */
  #poisoned = null;

  /**
   * Opens the journal in `dir` (created if missing), takes its lock and rebuilds the index.
   * While another writer holds the lock it waits, up to `lockWaitMs` (default: the journal
   * format's, 5 s; 0: not at all). Throws JournalLockedError (its text names the shared
   * backends, the way to run several writers), TornTailError or CorruptJournalFileError.
   * @param {string} dir
   * @param {{ lockWaitMs?: number }} [options]
   * @returns {FileJournal}
   */
  static open(dir, { lockWaitMs } = {}) {
    refuseJournalUrl(dir);
    if (!fs.existsSync(dir)) {
      fs.mkdirSync(dir, { recursive: true, mode: DIR_MODE });
      fs.chmodSync(dir, DIR_MODE); // exactly 0700, whatever bits the umask took away
      syncDir(dirname(dir));
    }
    const lockFd = lock(dir, lockWaitMs ?? lockWait().waitMs);
    let fd;
    try {
      checkFormat(dir);
      const opened = openOrCreatePrivate(join(dir, JOURNAL_FILE), O_RDWR | O_APPEND);
      fd = opened.fd;
      if (opened.created) syncDir(dir); // a new file: make its existence durable once
      const { index, len } = scan(fd);
      return new FileJournal(dir, fd, lockFd, index, len);
    } catch (e) {
      if (fd !== undefined) fs.closeSync(fd);
      fs.closeSync(lockFd);
      throw e instanceof JournalError ? e : io(e);
    }
  }

  /**
   * Use FileJournal.open.
   * @param {string} dir
   * @param {number} fd
   * @param {number} lockFd
   * @param {StreamIndex<[number, number]>} index
   * @param {number} len
   */
  constructor(dir, fd, lockFd, index, len) {
    this.dir = dir;
    this.#fd = fd;
    this.#lockFd = lockFd;
    this.#index = index;
    this.#len = len;
    /** How many times this journal called fdatasync. */
    this.fsyncs = 0;
  }

  /** The open journal file, unless the journal is closed or poisoned. */
  #usable() {
    if (this.#fd === null) throw new JournalError('other', 'journal is closed');
    if (this.#poisoned) {
      throw new JournalError('io', `journal I/O error: journal ${this.dir} refuses writes after an earlier failure (${this.#poisoned}); reopen it`);
    }
    return this.#fd;
  }

  /**
   * @param {string} stream
   * @param {number} expectedLength
   * @param {string[]} entries
   * @param {boolean} durable
   * @param {boolean} open
   */
  append(stream, expectedLength, entries, durable, open) {
    const fd = this.#usable();
    const actual = this.#index.length(stream);
    if (actual !== expectedLength) throw new JournalError('conflict', actual);
    if (entries.length === 0) {
      if (durable) this.sync();
      return;
    }
    validateAppend(entries, stream, expectedLength, open);
    const lens = entries.map((e) => Buffer.byteLength(e));
    const batch = Buffer.from(entries.join('\n') + '\n');
    const start = this.#len;
    try {
      let done = 0;
      while (done < batch.length) done += fs.writeSync(fd, batch, done, batch.length - done);
    } catch (e) {
      this.#rollBack(start);
      throw io(e);
    }
    if (durable) {
      this.fsyncs += 1;
      try {
        fs.fdatasyncSync(fd);
      } catch (e) {
        // After a failed fdatasync the kernel may have dropped dirty pages: nothing written
        // since the last good sync can be trusted any more.
        this.#rollBack(start);
        this.#poisoned ??= `fdatasync failed: ${/** @type {Error} */ (e).message}`;
        throw io(e);
      }
      this.#pending = false;
    } else {
      this.#pending = true;
    }
    let offset = start;
    lens.forEach((len) => {
      this.#index.push(stream, [offset, len], open);
      offset += len + 1;
    });
    this.#len = offset;
  }

  /** @param {number} len */
  #rollBack(len) {
    try {
      fs.ftruncateSync(/** @type {number} */ (this.#fd), len);
    } catch (e) {
      this.#poisoned ??= `could not truncate ${JOURNAL_FILE} back to ${len} bytes after a failed append: ${/** @type {Error} */ (e).message}`;
    }
  }

  /**
   * @param {string} stream
   * @param {number} start
   * @returns {string[]}
   */
  read(stream, start) {
    const fd = this.#fd;
    if (fd === null) throw new JournalError('other', 'journal is closed');
    const locs = this.#index.locs(stream, start);
    const out = new Array(locs.length);
    for (let i = 0; i < locs.length; i++) {
      const [offset, len] = locs[i];
      const buf = Buffer.allocUnsafe(len);
      let got = 0;
      try {
        while (got < len) {
          const n = fs.readSync(fd, buf, got, len - got, offset + got);
          if (n === 0) throw new Error(`${JOURNAL_FILE} changed under the journal: it ends before byte ${offset + len}`);
          got += n;
        }
        out[i] = utf8.decode(buf);
      } catch (e) {
        throw io(e);
      }
    }
    return out;
  }

  /** @param {string} stream */
  length(stream) {
    return this.#index.length(stream);
  }
  openStreams() {
    return this.#index.openStreams();
  }
  streams() {
    return this.#index.allStreams();
  }

  /** One fdatasync if a non-durable append is pending, else nothing. */
  sync() {
    const fd = this.#usable();
    if (!this.#pending) return;
    this.fsyncs += 1;
    try {
      fs.fdatasyncSync(fd);
    } catch (e) {
      this.#poisoned ??= `fdatasync failed: ${/** @type {Error} */ (e).message}`;
      throw io(e);
    }
    this.#pending = false;
  }

  /** The journal file's bytes (for tests and pins). */
  bytes() {
    return fs.readFileSync(join(this.dir, JOURNAL_FILE));
  }

  /** Closes the file and releases the lock (closing the descriptor drops the flock). */
  close() {
    if (this.#fd === null) return;
    fs.closeSync(this.#fd);
    if (this.#lockFd !== null) fs.closeSync(this.#lockFd);
    this.#fd = null;
    this.#lockFd = null;
  }

  /**
   * Repairs a torn tail in `dir`, taking its lock (JournalLockedError if a handle is open).
   * Copies the partial last line to journal.torn-<offset> (never overwriting: .1, .2, ...),
   * syncs it, then truncates journal.jsonl to its last complete line and syncs. Returns
   * `{ tornOffset, tornBytes, savedTo }` (nulls and 0 when there was nothing to repair).
   * @param {string} dir
   * @returns {RepairReport}
   */
  static repair(dir) {
    refuseJournalUrl(dir);
    const lockFd = lock(dir, 0);
    try {
      // A journal of a newer format may not even be lines: never cut it by these rules.
      checkExistingFormat(dir);
      /** @type {RepairReport} */
      const nothing = { tornOffset: null, tornBytes: 0, savedTo: null };
      let fd;
      try {
        fd = fs.openSync(join(dir, JOURNAL_FILE), O_RDWR);
      } catch (e) {
        if (/** @type {NodeJS.ErrnoException} */ (e).code === 'ENOENT') return nothing;
        throw e;
      }
      try {
        const data = fs.readFileSync(fd);
        const keep = completePrefix(data);
        if (keep === data.length) return nothing;
        const torn = data.subarray(keep);
        let side;
        let sidePath;
        for (let attempt = 0; ; attempt++) {
          sidePath = join(dir, tornFileName(keep, attempt));
          try {
            side = createPrivate(sidePath, O_RDWR);
            break;
          } catch (e) {
            if (/** @type {NodeJS.ErrnoException} */ (e).code !== 'EEXIST') throw e;
          }
        }
        try {
          fs.writeSync(side, torn);
          fs.fsyncSync(side);
        } finally {
          fs.closeSync(side);
        }
        syncDir(dir);
        fs.ftruncateSync(fd, keep);
        fs.fsyncSync(fd);
        return { tornOffset: keep, tornBytes: torn.length, savedTo: sidePath };
      } finally {
        fs.closeSync(fd);
      }
    } finally {
      fs.closeSync(lockFd);
    }
  }
}

/**
 * Reads journal.jsonl and rebuilds the index; throws on a torn tail or a corrupt line.
 * @param {number} fd
 */
function scan(fd) {
  const data = fs.readFileSync(fd);
  /** @type {StreamIndex<[number, number]>} */
  const index = new StreamIndex();
  for (const e of scanFile(data)) index.push(e.stream, [e.offset, e.length], e.open);
  return { index, len: data.length };
}
