// Which journal's storage a location names (Node): the one argument of Interlock.open. A URL of a
// shared journal is read as the Rust crate and the CLI read it (adapters/sql-journal,
// `parse_url`; hosts/cli `is_journal_url`): `sqlite://` followed by an absolute path, taken
// literally (no percent-decoding, no query), or a `postgres://` / `postgresql://` URL. Any
// other `scheme://` is refused (UnsupportedJournalError); anything else is a folder.
import { UnsupportedJournalError } from '../errors.js';
import { FileJournal } from './file.js';
import { MemoryJournal } from './memory.js';
import { SqliteJournal } from './sqlite.js';
import { PostgresJournal } from './postgres.js';

/** @import { Storage } from '../types.js' */

/**
 * The journal at `location`: `sqlite:///abs/path.db` (SqliteJournal), `postgres://...` or
 * `postgresql://...` (PostgresJournal), `':memory:'` (MemoryJournal), else a folder
 * (FileJournal, which refuses any other URL). `lockWaitMs` is the file journal's,
 * `journalTimeoutMs` the PostgreSQL journal's bound on every call.
 * @param {string} location
 * @param {{ lockWaitMs?: number, journalTimeoutMs?: number }} [options]
 * @returns {Storage & { close(): void }}
 */
export function openJournal(location, { lockWaitMs, journalTimeoutMs } = {}) {
  if (typeof location !== 'string') throw new TypeError(`a journal location is a folder or a URL (a string), not ${typeof location}`);
  if (location === ':memory:') return new MemoryJournal();
  const sqlite = sqlitePath(location);
  if (sqlite !== undefined) return SqliteJournal.open(sqlite);
  if (/^postgres(ql)?:\/\//.test(location)) return PostgresJournal.open(location, { timeoutMs: journalTimeoutMs });
  return FileJournal.open(location, { lockWaitMs });
}

/**
 * The file a `sqlite://` URL names (undefined for anything else); UnsupportedJournalError,
 * saying what was expected, when it names none.
 * @param {string} location
 */
function sqlitePath(location) {
  if (!location.startsWith('sqlite://')) return undefined;
  const path = location.slice('sqlite://'.length);
  if (!path.startsWith('/') || path.length === 1) {
    throw new UnsupportedJournalError(location, `not a journal URL: ${JSON.stringify(location)}: a SQLite URL needs an absolute path to a file: sqlite:///abs/path.db`);
  }
  return path;
}

/**
 * Whether `location` names a SQLite or PostgreSQL journal.
 * @param {string} location
 */
export function isSqlJournalUrl(location) {
  return /^(sqlite|postgres|postgresql):\/\//.test(location);
}
