// The durable browser journal: a file journal's storage in IndexedDB, with the files in
// memory in front (MemoryJournal). The storage import is synchronous (jco has no async
// imports without JSPI) and IndexedDB is asynchronous, so every write goes to memory at once
// and is written behind, one IndexedDB transaction per write, in order (transactions on one
// store run in the order they were created), each `durability: 'strict'`. Each file is kept
// as chunks keyed [name, offset]. The gate's durability rule is kept by the host loop:
// before it performs any step the gate asked for (above all the send) and before it returns
// any outcome, it awaits `flush()`, which resolves only when every write so far has
// committed. So nothing leaves the gate before the intent is on disk.
//
// One writer: a Web Lock named after the database, held for the life of the handle, so a
// second tab on the same journal is refused (JournalLockedError), as flock does for files.
import { JournalError, JournalLockedError, StorageError, refuseJournalUrl } from '../errors.js';
import { MemoryJournal } from './memory.js';

const STORE = 'chunks';

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
  const r = indexedDB.open(name, 2);
  r.onupgradeneeded = () => {
    for (const old of [...r.result.objectStoreNames]) r.result.deleteObjectStore(old);
    r.result.createObjectStore(STORE);
  };
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
  /** @type {Map<string, number[]>} each file's chunk offsets, in order */
  #starts = new Map();
  /** @type {Promise<void>[]} one per write not known committed */
  #pending = [];
  /** @type {string | null} why a write failed: the journal refuses writes from then on */
  #failed = null;

  /**
   * Opens (or creates) the journal stored in the IndexedDB database `name`.
   * @param {string} [name]
   * @returns {Promise<IndexedDbJournal>}
   */
  static async open(name = 'interlock-journal') {
    refuseJournalUrl(name);
    const release = await takeLock(name);
    try {
      const db = await openDb(name);
      const j = new IndexedDbJournal();
      const store = db.transaction(STORE, 'readonly').objectStore(STORE);
      const [keys, values] = await Promise.all([req(store.getAllKeys()), req(store.getAll())]);
      keys.forEach((key, i) => {
        const [file, at] = /** @type {[string, number]} */ (key);
        const bytes = /** @type {Uint8Array} */ (values[i]);
        const f = j.files.get(file) ?? { buf: new Uint8Array(0), len: 0 };
        const buf = new Uint8Array(at + bytes.length);
        buf.set(f.buf.subarray(0, Math.min(f.len, at)));
        buf.set(bytes, at);
        j.files.set(file, { buf, len: buf.length });
        j.#starts.set(file, [...(j.#starts.get(file) ?? []), at]);
      });
      j.#db = db;
      j.#release = release;
      return j;
    } catch (e) {
      await release();
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
   * Writes behind what MemoryJournal just did.
   * @protected
   * @param {'append' | 'truncate' | 'replace'} kind
   * @param {string} name
   * @param {number} at
   * @param {Uint8Array | null} bytes
   */
  written(kind, name, at, bytes) {
    if (this.#failed) throw new StorageError('io', `IndexedDB write failed earlier (${this.#failed}); reopen the journal`);
    if (!this.#db) return; // loading
    const tx = this.#db.transaction(STORE, 'readwrite', { durability: 'strict' });
    const store = tx.objectStore(STORE);
    const rest = (/** @type {number} */ from) => IDBKeyRange.bound([name, from], [name, Infinity]);
    let starts = this.#starts.get(name) ?? [];
    if (kind === 'append') {
      store.put(/** @type {Uint8Array} */ (bytes).slice(), [name, at]);
      starts.push(at);
    } else if (kind === 'replace') {
      store.delete(rest(0));
      store.put(/** @type {Uint8Array} */ (bytes).slice(), [name, 0]);
      starts = [0];
    } else {
      store.delete(rest(at));
      starts = starts.filter((s) => s < at);
      const last = starts.at(-1);
      if (last !== undefined) store.put(this.bytes(name).slice(last, at), [name, last]);
    }
    this.#starts.set(name, starts);
    this.#pending.push(new Promise((resolve) => {
      tx.oncomplete = () => resolve();
      tx.onerror = tx.onabort = () => {
        this.#failed ??= String(tx.error?.message ?? 'aborted');
        resolve();
      };
    }));
  }

  /** Resolves when every write so far is committed; rejects if any failed. */
  async flush() {
    while (this.#pending.length) {
      const batch = this.#pending;
      this.#pending = [];
      await Promise.all(batch);
    }
    if (this.#failed) throw new JournalError('io', `IndexedDB write failed: ${this.#failed}`);
  }

  /**
   * Closes the database and releases the lock; resolves when another handle may open it.
   * @returns {Promise<void>}
   */
  async close() {
    await this.flush().catch(() => {});
    this.#db?.close();
    await this.#release?.();
  }
}
