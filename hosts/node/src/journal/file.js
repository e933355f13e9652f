// A file journal's storage in Node: a folder, the same files and bytes as the CLI's
// (hosts/cli/src/storage.rs, StdFiles), so a journal written by one host is read by the
// other. The journal's rules (journal.format, journal.index, torn tails, repair) run inside
// the gate over these calls; this file does I/O only:
//
//   journal.lock  flock(2)-ed exclusively for the life of the handle (the CLI's lock is
//                 flock too, so Node and the CLI exclude each other)
//
// The journal holds every effect's payload and result (customer data): a folder this
// creates is 0700 and every file it creates 0600, whatever the umask.
import fs from 'node:fs';
import { join, dirname } from 'node:path';
import { createRequire } from 'node:module';
import { JournalLockedError, StorageError, refuseJournalUrl } from '../errors.js';

/** @import { Storage } from '../types.js' */

const { flockSync } = createRequire(import.meta.url)('fs-ext');
const { O_RDWR, O_CREAT, O_EXCL, O_RDONLY, O_WRONLY, O_TRUNC } = fs.constants;

/** How long an open waits for the lock another writer holds, by default (the CLI's). */
export const LOCK_WAIT_MS = 5_000;
const LOCK_POLL_MS = 20;

/** @param {string} dir */
function syncDir(dir) {
  const fd = fs.openSync(dir, O_RDONLY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Opens `path` with `flags | O_CREAT`, owner-only whatever the umask.
 * @param {string} path
 * @param {number} flags
 */
function openPrivate(path, flags) {
  const fd = fs.openSync(path, flags | O_CREAT, 0o600);
  fs.fchmodSync(fd, 0o600);
  return fd;
}

/** @param {number} ms */
const sleepSync = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Takes `dir`'s lock, trying again for up to `waitMs` while another writer holds it.
 * @param {string} dir
 * @param {number} waitMs
 */
function lock(dir, waitMs) {
  const fd = openPrivate(join(dir, 'journal.lock'), O_RDWR);
  const start = Date.now();
  for (;;) {
    try {
      flockSync(fd, 'exnb');
      return fd;
    } catch (e) {
      const held = ['EWOULDBLOCK', 'EAGAIN'].includes(/** @type {NodeJS.ErrnoException} */ (e).code ?? '');
      if (held && Date.now() - start < waitMs) {
        sleepSync(LOCK_POLL_MS);
        continue;
      }
      fs.closeSync(fd);
      if (!held) throw e;
      const waited = waitMs === 0 ? '' : `, still after waiting ${waitMs} ms`;
      throw new JournalLockedError(dir, `journal directory ${dir} is locked by another writer (journal.lock is held)${waited}; ` +
        'a file journal has one writer per directory: to run several workers, share a SQLite journal on one machine ' +
        '(sqlite:///path/to/journal.db) or a PostgreSQL journal across machines (postgres://user@host/db)');
    }
  }
}

/** @implements {Storage} */
export class FileJournal {
  backend = /** @type {const} */ ('file');
  /** @type {Map<string, { fd: number, len: number }>} the files opened so far */
  #open = new Map();
  /** @type {number | null} */
  #lockFd;

  /**
   * The journal folder `dir` (created owner-only, with missing parents, if missing),
   * locked for this process: waits up to `lockWaitMs` (default 5 s) for another writer's
   * lock, then throws JournalLockedError.
   * @param {string} dir
   * @param {{ lockWaitMs?: number }} [options]
   */
  static open(dir, { lockWaitMs = LOCK_WAIT_MS } = {}) {
    refuseJournalUrl(dir);
    if (!fs.existsSync(dir)) {
      const first = fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      for (let d = dir; first !== undefined; d = dirname(d)) {
        fs.chmodSync(d, 0o700);
        if (d === first) break;
      }
      syncDir(dirname(dir));
    }
    return new FileJournal(dir, lock(dir, lockWaitMs));
  }

  /**
   * Use FileJournal.open.
   * @param {string} dir
   * @param {number} lockFd
   */
  constructor(dir, lockFd) {
    this.dir = dir;
    this.#lockFd = lockFd;
  }

  /**
   * Runs `fn`, a system error becoming the storage's `io`.
   * @template T
   * @param {string} what
   * @param {string} name
   * @param {() => T} fn
   * @returns {T}
   */
  #io(what, name, fn) {
    if (this.#lockFd === null) throw new StorageError('io', `journal ${this.dir} is closed`);
    if (!name || name.includes('/') || name === '.' || name === '..') {
      throw new StorageError('io', `${JSON.stringify(name)} is not a file name of a journal folder`);
    }
    try {
      return fn();
    } catch (e) {
      if (e instanceof StorageError) throw e;
      throw new StorageError('io', `cannot ${what} ${name} in ${this.dir}: ${/** @type {Error} */ (e).message}`);
    }
  }

  /**
   * The open file `name`, opened now if it exists.
   * @param {string} name
   */
  #file(name) {
    let f = this.#open.get(name);
    if (!f) {
      let fd;
      try {
        fd = fs.openSync(join(this.dir, name), O_RDWR);
      } catch (e) {
        if (/** @type {NodeJS.ErrnoException} */ (e).code === 'ENOENT') return undefined;
        throw e;
      }
      f = { fd, len: fs.fstatSync(fd).size };
      this.#open.set(name, f);
    }
    return f;
  }

  /** @param {string} name */
  #forget(name) {
    const f = this.#open.get(name);
    if (f) fs.closeSync(f.fd);
    this.#open.delete(name);
  }

  /** @param {string} name */
  fileSize(name) {
    return this.#io('stat', name, () => this.#file(name)?.len);
  }

  /**
   * @param {string} name
   * @param {number} offset
   * @param {number} len
   */
  fileRead(name, offset, len) {
    return this.#io('read', name, () => {
      const f = this.#file(name);
      if (!f) throw new StorageError('io', `cannot read ${name} in ${this.dir}: no such file`);
      const n = Math.max(0, Math.min(f.len, offset + len) - offset);
      const buf = Buffer.allocUnsafe(n);
      let done = 0;
      while (done < n) done += fs.readSync(f.fd, buf, done, n - done, offset + done);
      return new Uint8Array(buf.buffer, buf.byteOffset, n);
    });
  }

  /**
   * @param {string} name
   * @param {number} at
   * @param {Uint8Array} bytes
   */
  fileAppend(name, at, bytes) {
    this.#io('append to', name, () => {
      let f = this.#file(name);
      if (!f) {
        f = { fd: openPrivate(join(this.dir, name), O_RDWR), len: 0 };
        this.#open.set(name, f);
        syncDir(this.dir);
      }
      if (f.len !== at) throw new StorageError('conflict', f.len);
      try {
        let done = 0;
        while (done < bytes.length) done += fs.writeSync(f.fd, bytes, done, bytes.length - done, at + done);
      } catch (e) {
        fs.ftruncateSync(f.fd, at); // nothing of a failed append stays visible
        throw e;
      }
      f.len = at + bytes.length;
    });
  }

  /** @param {string} name */
  fileSync(name) {
    this.#io('sync', name, () => {
      const f = this.#file(name);
      if (f) fs.fdatasyncSync(f.fd);
    });
  }

  /**
   * @param {string} name
   * @param {number} len
   */
  fileTruncate(name, len) {
    this.#io('truncate', name, () => {
      const f = this.#file(name);
      if (!f) throw new StorageError('io', `cannot truncate ${name} in ${this.dir}: no such file`);
      fs.ftruncateSync(f.fd, len);
      fs.fsyncSync(f.fd);
      f.len = len;
    });
  }

  /**
   * @param {string} name
   * @param {Uint8Array} bytes
   */
  fileReplace(name, bytes) {
    this.#io('write', name, () => {
      const tmp = join(this.dir, `${name}.tmp`);
      const fd = openPrivate(tmp, O_WRONLY | O_TRUNC);
      try {
        fs.writeSync(fd, bytes);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      fs.renameSync(tmp, join(this.dir, name));
      syncDir(this.dir);
      this.#forget(name); // the open handle is the old file's
    });
  }

  /**
   * @param {string} name
   * @param {Uint8Array} bytes
   */
  fileCreate(name, bytes) {
    return this.#io('create', name, () => {
      let fd;
      try {
        fd = openPrivate(join(this.dir, name), O_RDWR | O_EXCL);
      } catch (e) {
        if (/** @type {NodeJS.ErrnoException} */ (e).code === 'EEXIST') return false;
        throw e;
      }
      this.#forget(name);
      this.#open.set(name, { fd, len: 0 });
      fs.writeSync(fd, bytes);
      fs.fsyncSync(fd);
      syncDir(this.dir);
      /** @type {{ len: number }} */ (this.#open.get(name)).len = bytes.length;
      return true;
    });
  }

  /** @returns {never} */
  sqlBatch() {
    throw new StorageError('unsupported', `journal ${this.dir} is a file journal, not a SQL one`);
  }

  /** Releases the files and the lock (another writer may open the folder). */
  close() {
    for (const name of [...this.#open.keys()]) this.#forget(name);
    if (this.#lockFd !== null) fs.closeSync(this.#lockFd);
    this.#lockFd = null;
  }
}
