// The durable browser journal: IndexedDB, with the in-memory index and entries in front.
//
// The journal import is synchronous (jco has no async imports without JSPI), and IndexedDB
// is asynchronous, so appends go to memory at once and are written behind, one IndexedDB
// transaction per append, in append order (transactions on one store run in the order they
// were created). A `durable` append uses `durability: 'strict'` (flushed to disk before the
// transaction completes), which also covers every earlier one. The gate's durability rule
// is kept by the host loop: before it performs any step the gate asked for (above all the
// apply, the send) and before it returns any outcome, it awaits `flush()`, which resolves
// only when every append so far has committed. So nothing leaves the gate before the
// intent is on disk; a tab killed earlier loses only entries no one acted on.
//
// One writer: a Web Lock named after the database, held for the life of the handle, so a
// second tab on the same journal is refused (JournalLockedError), as flock does for files.
import { JournalError, JournalLockedError, refuseJournalUrl } from '../errors.js';
import { MemoryJournal } from './memory.js';
import { journalFormat } from '../load-browser.js';

const STORE = 'entries';

/**
 * @template T
 * @param {IDBRequest<T>} r
 * @returns {Promise<T>}
 */
const req = (r) => new Promise((resolve, reject) => {
  r.onsuccess = () => resolve(r.result);
  r.onerror = () => reject(r.error);
});

/** @param {string} name */
function openDb(name) {
  const r = indexedDB.open(name, 1);
  r.onupgradeneeded = () => r.result.createObjectStore(STORE);
  return req(r);
}

/**
 * @param {string} name
 * @returns {Promise<() => Promise<void>>} releases the lock
 */
async function takeLock(name) {
  if (!globalThis.navigator?.locks) return async () => {};
  /** @type {(value?: unknown) => void} */
  let unhold = () => {};
  const held = new Promise((r) => (unhold = r));
  /** @type {Promise<unknown>} */
  let done = Promise.resolve();
  const got = await new Promise((resolve) => {
    done = navigator.locks.request(`interlock-journal:${name}`, { ifAvailable: true }, (lock) => {
      resolve(Boolean(lock));
      return lock ? held : undefined;
    });
  });
  if (!got) throw new JournalLockedError(`indexeddb:${name}`);
  // Resolves once the lock manager has really let go, so a reopen right after succeeds.
  return async () => {
    unhold();
    await done;
  };
}

export class IndexedDbJournal extends MemoryJournal {
  /** @type {IDBDatabase | undefined} */
  #db;
  /** @type {(() => Promise<void>) | undefined} releases the Web Lock */
  #release;
  /** @type {Promise<void>[]} one per append not known committed */
  #pending = [];
  /** @type {string | null} why a write failed: the journal refuses appends from then on */
  #failed = null;

  /**
   * Opens (or creates) the journal stored in the IndexedDB database `name`.
   * @param {string} [name]
   * @returns {Promise<IndexedDbJournal>}
   */
  static async open(name = 'interlock-journal') {
    refuseJournalUrl(name);
    await journalFormat();
    const release = await takeLock(name);
    try {
      const db = await openDb(name);
      const tx = db.transaction(STORE, 'readonly');
      const lines = /** @type {string[]} */ (await req(tx.objectStore(STORE).getAll())); // keys are 0, 1, 2, ...: append order
      const j = new IndexedDbJournal();
      j.load(lines);
      j.#db = db;
      j.#release = release;
      return j;
    } catch (e) {
      release();
      throw e instanceof JournalError ? e : new JournalError('io', `IndexedDB: ${/** @type {any} */ (e)?.message ?? e}`);
    }
  }

  /**
   * Deletes the database `name` (it must not be open).
   * @param {string} name
   */
  static async destroy(name) {
    await req(indexedDB.deleteDatabase(name));
  }

  /**
   * @param {string} stream
   * @param {number} expectedLength
   * @param {string[]} entries
   * @param {boolean} durable
   * @param {boolean} open
   */
  append(stream, expectedLength, entries, durable, open) {
    if (this.#failed) throw new JournalError('io', `IndexedDB write failed earlier (${this.#failed}); reopen the journal`);
    super.append(stream, expectedLength, entries, durable, open);
  }

  /**
   * @protected
   * @param {string[]} entries
   * @param {boolean} durable
   */
  written(entries, durable) {
    const first = this.lines.length - entries.length;
    const db = /** @type {IDBDatabase} */ (this.#db);
    const tx = db.transaction(STORE, 'readwrite', { durability: durable ? 'strict' : 'relaxed' });
    const store = tx.objectStore(STORE);
    entries.forEach((e, i) => store.add(e, first + i));
    this.#pending.push(new Promise(/** @param {(value?: void) => void} resolve */ (resolve) => {
      tx.oncomplete = () => resolve();
      tx.onerror = tx.onabort = () => {
        this.#failed ??= String(tx.error?.message ?? 'aborted');
        resolve();
      };
    }));
  }

  /** Resolves when every append so far is committed; rejects if any write failed. */
  async flush() {
    while (this.#pending.length) {
      const batch = this.#pending;
      this.#pending = [];
      await Promise.all(batch);
    }
    if (this.#failed) throw new JournalError('io', `IndexedDB write failed: ${this.#failed}`);
  }

  sync() {
    // Durability of buffered appends is awaited by flush(); nothing to do synchronously.
    super.sync();
  }

  /**
   * Closes the database and releases the lock; resolves when another handle may open it.
   * @returns {Promise<void> | undefined}
   */
  close() {
    super.close();
    this.#db?.close();
    return this.#release?.();
  }
}
