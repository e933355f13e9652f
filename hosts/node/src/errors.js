// Errors of the Interlock host. A gate call that fails with the WIT `gate-error` throws a
// subclass of GateError, one per case, carrying the case's payload. REFUSED and AMBIGUOUS
// are not errors: they are outcomes. A trap of the component is rethrown as it came
// (a WebAssembly.RuntimeError or jco's own error) and the instance refuses every later call.

/** Base class of every error this package throws on purpose. */
export class InterlockError extends Error {
  /**
   * @param {string} [message]
   * @param {ErrorOptions} [options]
   */
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * The gate refused a call (WIT `gate-error`); `case` is the WIT case name, `payload` its value.
 * @template [P=unknown]
 */
export class GateError extends InterlockError {
  /**
   * @param {string} kase
   * @param {P} payload
   * @param {string} [message]
   */
  constructor(kase, payload, message) {
    super(message);
    this.case = kase;
    this.payload = payload;
  }
}
/**
 * An input is not JSON; payload: the parser's message.
 * @extends {GateError<string>}
 */
export class InvalidJsonError extends GateError {}
/**
 * An input is JSON but not the schema; payload: `{ field, problem }` (field is a JSON
 * pointer). Also thrown by the host itself for a value JSON cannot carry as given.
 * @extends {GateError<{ field: string, problem: string }>}
 */
export class InvalidFieldError extends GateError {}
/**
 * An input is over the gate's limit; payload: the limit in bytes.
 * @extends {GateError<number>}
 */
export class TooLargeError extends GateError {}
/**
 * No such effect in the journal; payload: the effect id.
 * @extends {GateError<string>}
 */
export class UnknownEffectError extends GateError {}
/**
 * No such operation in progress; payload: the operation id.
 * @extends {GateError<number>}
 */
export class UnknownOperationError extends GateError {}
/**
 * The reply does not answer the step; payload: a message.
 * @extends {GateError<string>}
 */
export class UnexpectedReplyError extends GateError {}
/**
 * The journal failed, nothing was sent; payload: `{ tag, val }` (WIT `journal-error`).
 * @extends {GateError<JournalErrorValue>}
 */
export class JournalFailedError extends GateError {}
/**
 * A stream fails verification; payload: which and where.
 * @extends {GateError<string>}
 */
export class CorruptJournalError extends GateError {}
/**
 * Compare-and-append kept losing to other workers; nothing was sent. Retry.
 * @extends {GateError<string>}
 */
export class ContentionError extends GateError {}

/**
 * WIT `journal-error` with numbers for bigints.
 * @typedef {{ tag: 'conflict', val: number } | { tag: 'io' | 'corrupt' | 'torn-tail' | 'other', val: string }} JournalErrorValue
 */

/**
 * Each case's class and message, by WIT case name.
 * @type {Record<string, [new (kase: string, payload: any, message?: string) => GateError, (v: any) => string]>}
 */
const CASES = {
  'invalid-json': [InvalidJsonError, (v) => `the input is not JSON: ${v}`],
  'invalid-field': [InvalidFieldError, (v) => `invalid input at ${v.field || 'its top level'}: ${v.problem}`],
  'too-large': [TooLargeError, (v) => `the input is larger than ${v} bytes`],
  'unknown-effect': [UnknownEffectError, (v) => `no effect ${v} in the journal`],
  'unknown-operation': [UnknownOperationError, (v) => `no operation ${v} is in progress`],
  'unexpected-reply': [UnexpectedReplyError, (v) => `the reply does not answer the step: ${v}`],
  journal: [JournalFailedError, (v) => `the journal failed (nothing was sent): ${describeJournalError(v)}`],
  'corrupt-journal': [CorruptJournalError, (v) => `the journal fails verification, the gate will not act on it: ${v}`],
  contention: [ContentionError, (v) => `other workers kept winning the journal: ${v}; retry`],
};

/**
 * A WIT `journal-error` for a person.
 * @param {{ tag: string, val: unknown }} error
 * @returns {string}
 */
export function describeJournalError({ tag, val }) {
  switch (tag) {
    case 'conflict': return `append conflict (stream length is ${val})`;
    case 'io': return `i/o error: ${val}`;
    case 'corrupt': return `corrupt: ${val}`;
    case 'torn-tail': return `torn tail: ${val}`;
    default: return String(val);
  }
}

/**
 * The host's own refusal of an input before it reaches the gate (a value JSON cannot carry
 * as given), with the same type and payload as the gate's: `field` is a JSON pointer.
 * @param {string} field
 * @param {string} problem
 * @returns {InvalidFieldError}
 */
export function invalidField(field, problem) {
  return /** @type {InvalidFieldError} */ (gateError({ tag: 'invalid-field', val: { field, problem } }));
}

/**
 * Turns jco's `{ tag, val }` gate error into its typed Error (bigints become numbers).
 * @param {import('../gen/gate/interfaces/interlock-gate-gate.js').GateError | { tag: string, val?: unknown }} e
 * @returns {GateError}
 */
export function gateError(e) {
  const { tag } = e;
  /** @type {any} */
  let val = e.val;
  if (typeof val === 'bigint') val = Number(val);
  if (tag === 'journal' && typeof val?.val === 'bigint') val = { tag: val.tag, val: Number(val.val) };
  const known = CASES[tag];
  if (!known) return new GateError(tag, val, `gate error ${tag}: ${JSON.stringify(val)}`);
  return new known[0](tag, val, known[1](val));
}

// ---------------------------------------------------------------------- journal backends

/**
 * A journal backend's failure, as the WIT `journal-error` (`tag`: conflict, io, corrupt,
 * torn-tail, other). Backends throw it; the host hands `{ tag, val }` to the component.
 */
export class JournalError extends InterlockError {
  /**
   * @param {'conflict' | 'io' | 'corrupt' | 'torn-tail' | 'other'} tag
   * @param {unknown} val the stream's length (conflict) or a message
   * @param {string} [message]
   */
  constructor(tag, val, message) {
    super(message ?? describeJournalError({ tag, val }));
    this.tag = tag;
    this.val = val;
  }
}

/** Another writer holds the journal (the file journal's `journal.lock`, a browser lock). */
export class JournalLockedError extends JournalError {
  /**
   * @param {string} where
   * @param {string} [message] the journal's own words (a file journal's come from the format)
   */
  constructor(where, message = `journal ${where} is locked by another writer`) {
    super('other', message);
    this.where = where;
  }
}

/**
 * A journal location that is a URL no journal of this host has (`file://`, `http://`, ...;
 * in a browser any URL), or a malformed `sqlite://` URL. It is refused rather than taken as
 * a folder's name. Node opens `sqlite:///abs/path.db` and `postgres://...` journals.
 */
export class UnsupportedJournalError extends InterlockError {
  /**
   * @param {string} where
   * @param {string} [message]
   */
  constructor(where, message) {
    super(message ?? `journal ${JSON.stringify(where)} is a URL that names no journal: give a folder, sqlite:///abs/path.db or postgres://user@host/db (Node), or a database name (browser)`);
    this.where = where;
  }
}

/**
 * Throws UnsupportedJournalError when `where` looks like a URL (`scheme://...`).
 * @param {unknown} where
 */
export function refuseJournalUrl(where) {
  if (typeof where !== 'string' || !/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(where)) return;
  if (/^(sqlite|postgres|postgresql):\/\//.test(where)) {
    throw new UnsupportedJournalError(where, `journal ${JSON.stringify(where)} is a shared journal's URL, not a folder or a database name: ` +
      'in Node, open it with Interlock.open(url) or openJournal(url); a browser cannot');
  }
  throw new UnsupportedJournalError(where);
}

/** The journal ends with a partial line: the last write was torn (the gate's words say where). Run `repair`. */
export class TornTailError extends JournalError {}

/**
 * A WIT `journal-error` (journal-admin's) as a typed JournalError.
 * @param {{ tag: string, val?: unknown }} e
 * @returns {JournalError}
 */
export function journalError({ tag, val }) {
  const v = typeof val === 'bigint' ? Number(val) : val;
  const kind = /** @type {'conflict' | 'io' | 'corrupt' | 'torn-tail' | 'other'} */ (tag);
  return tag === 'torn-tail' ? new TornTailError(kind, v, String(v)) : new JournalError(kind, v, tag === 'conflict' ? undefined : String(v));
}

/**
 * A storage call that failed (the WIT `storage-error` a storage implementation throws):
 * `conflict` (the file's length), `unexpected-changes` (the statement's index), `io` or
 * `unsupported` (a message).
 */
export class StorageError extends InterlockError {
  /**
   * @param {'conflict' | 'unexpected-changes' | 'io' | 'unsupported'} tag
   * @param {number | string} val
   * @param {string} [message]
   */
  constructor(tag, val, message) {
    super(message ?? `storage ${tag}: ${val}`);
    this.tag = tag;
    this.val = val;
  }
}

/**
 * A test's crash injection (`crashAt`) fired: the gate asked its host to stop here as a
 * killed process would. The instance is dropped; open the journal again to go on.
 */
export class CrashedError extends InterlockError {
  /** @param {string} point `before-send`, `after-send` or `in-recovery` */
  constructor(point) {
    super(`crashed at ${point} (crashAt)`);
    this.point = point;
  }
}

// ---------------------------------------------------------------------- targets

/**
 * Throw this from an effect's function when the target refused and applied nothing
 * (a definitive error such as an HTTP 4xx). Any other throw means the send's fate is
 * unknown, and recovery resolves it by what the target can do.
 */
export class Rejected extends InterlockError {}

/** A target function did not answer within the target's `timeoutMs`. */
export class TargetTimeoutError extends InterlockError {}
