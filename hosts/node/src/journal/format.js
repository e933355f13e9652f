// The journal's format (adapters/journal-format, as the component in gen/journal-format):
// every rule about entries, journal.jsonl and journal.format, and their error texts, written
// once in Rust, for every journal of this package (file, memory, IndexedDB). This file only
// translates its results into this host's errors. It runs in Node and in a browser: each
// environment says how to get the component's compiled core module synchronously
// (format-node.js reads the file; load-browser.js's journalFormat() compiles it beforehand,
// since a page may not compile a large module synchronously).
import { instantiate } from '../../gen/journal-format/journal_format.js';
import { JournalError, TornTailError, CorruptJournalFileError } from '../errors.js';

/**
 * @import { FormatError } from '../../gen/journal-format/interfaces/interlock-journal-format-format.js'
 */

/** @type {import('../../gen/journal-format/journal_format.js').Root['format'] | undefined} */
let format;
/** @type {((name: string) => WebAssembly.Module) | undefined} */
let coreModule;

/**
 * How this environment gets the component's compiled core modules, synchronously.
 * @param {(name: string) => WebAssembly.Module} get
 */
export function useCoreModules(get) {
  coreModule ??= get;
}

/** Whether the component can be used now (in a browser: after `journalFormat()`). */
export function formatReady() {
  return coreModule !== undefined;
}

/** The component, instantiated on first use (it imports nothing). */
function component() {
  if (!format) {
    if (!coreModule) {
      throw new JournalError('other', 'the journal-format component is not loaded: in a browser, await journalFormat() (Interlock.open and Interlock.memory do) before making a journal');
    }
    format = instantiate(coreModule, {}).format;
  }
  return format;
}

/**
 * Bytes as the component takes them: one char per byte (they need not be UTF-8).
 * @param {Uint8Array} bytes
 */
function latin1(bytes) {
  const B = /** @type {any} */ (globalThis).Buffer;
  if (B) return B.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
  let out = '';
  for (let i = 0; i < bytes.length; i += 0x8000) out += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return out;
}

/**
 * This host's error for the component's: the same text, the host's types.
 * @param {unknown} e
 * @returns {unknown}
 */
function hostError(e) {
  const payload = /** @type {{ payload?: FormatError }} */ (e).payload;
  if (!payload || typeof payload.message !== 'string') return e;
  const { kind, message } = payload;
  switch (kind.tag) {
    case 'corrupt':
      return new CorruptJournalFileError(Number(kind.val[0]), kind.val[1]);
    case 'torn-tail':
      return new TornTailError(Number(kind.val[0]), Number(kind.val[1]));
    default:
      return new JournalError('other', message);
  }
}

/**
 * @template T
 * @param {() => T} f
 * @returns {T}
 */
function call(f) {
  try {
    return f();
  } catch (e) {
    throw hostError(e);
  }
}

/**
 * Every entry of a whole journal.jsonl, in file order, as its place (offset, length
 * without "\n"), stream and open flag; throws TornTailError or CorruptJournalFileError.
 * @param {Uint8Array} data
 * @returns {{ offset: number, length: number, stream: string, open: boolean }[]}
 */
export function scan(data) {
  const { streams, places } = call(() => component().scan(latin1(data)));
  const out = new Array(places.length / 4);
  for (let i = 0; i < out.length; i++) {
    const p = places.subarray(4 * i, 4 * i + 4);
    out[i] = { offset: Number(p[0]), length: Number(p[1]), stream: streams[Number(p[2])], open: p[3] === 1n };
  }
  return out;
}

/**
 * Checks an append batch (one crossing for the whole batch); throws a JournalError.
 * @param {unknown[]} entries
 * @param {string} stream
 * @param {number} firstSeq
 * @param {boolean} open
 */
export function validateAppend(entries, stream, firstSeq, open) {
  const i = entries.findIndex((e) => typeof e !== 'string');
  if (i >= 0) {
    // The component's list<string> cannot carry it; the same wording as its other refusals.
    throw new JournalError('other', `invalid journal entry: entry ${i} of the batch (seq ${firstSeq + i}): is not a string`);
  }
  call(() => component().validateAppend(/** @type {string[]} */ (entries), stream, BigInt(firstSeq), open));
}

/**
 * The version journal.format's text names; throws a JournalError if it is refused.
 * @param {string} text
 */
export function checkFormatFile(text) {
  return Number(call(() => component().checkFormatFile(text)));
}

/** The text of journal.format for a new journal. */
export function formatFileText() {
  return component().formatFileText();
}

/**
 * @param {number} offset
 * @param {number} attempt
 */
export function tornFileName(offset, attempt) {
  return component().tornFileName(BigInt(offset), attempt);
}

/**
 * How long opening a file journal waits by default for another writer's lock, and how
 * often it tries again (ms).
 * @returns {{ waitMs: number, pollMs: number }}
 */
export function lockWait() {
  const [wait, poll] = component().lockWait();
  return { waitMs: Number(wait), pollMs: Number(poll) };
}

/**
 * The error text when another writer still holds `dir`'s lock after `waitedMs`.
 * @param {string} dir
 * @param {number} waitedMs
 */
export function lockedMessage(dir, waitedMs) {
  return component().lockedMessage(dir, BigInt(waitedMs));
}

/** @param {Uint8Array} data */
export function completePrefix(data) {
  return Number(component().completePrefix(latin1(data)));
}
