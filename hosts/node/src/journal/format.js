// The journal's file format (adapters/journal-format, as the component in
// gen/journal-format): every rule about journal.jsonl and journal.format, and their error
// texts, written once in Rust. This file only translates its results into this host's errors.
import { readFileSync } from 'node:fs';
import { instantiate } from '../../gen/journal-format/journal_format.js';
import { JournalError, TornTailError, CorruptJournalFileError } from '../errors.js';

/**
 * @import { FormatError } from '../../gen/journal-format/interfaces/interlock-journal-format-format.js'
 */

/** @type {import('../../gen/journal-format/journal_format.js').Root['format'] | undefined} */
let format;

/** The component, compiled and instantiated on first use (it imports nothing). */
function component() {
  if (!format) {
    const base = new URL('../../gen/journal-format/', import.meta.url);
    format = instantiate((name) => new WebAssembly.Module(readFileSync(new URL(name, base))), {}).format;
  }
  return format;
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
 * @param {Buffer} data
 * @returns {{ offset: number, length: number, stream: string, open: boolean }[]}
 */
export function scan(data) {
  // One char per byte: the component's transport for bytes that need not be UTF-8.
  const { streams, places } = call(() => component().scan(data.toString('latin1')));
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

/** @param {Buffer} data */
export function completePrefix(data) {
  return Number(component().completePrefix(data.toString('latin1')));
}
