// What the SQLite and PostgreSQL journals share (Node only): the one schema, read from the
// file the Rust crate includes (adapters/sql-journal/src/schema.sql, copied into gen/ by
// `npm run build`, so the package carries it), the format row's check, and the check of
// the rows a read returns. adapters/sql-journal/README.md says how each rule of the journal
// contract is translated; these modules follow it statement for statement.
import { readFileSync } from 'node:fs';
import { JournalError } from '../errors.js';
import './format-node.js';
import { checkFormatFile } from './format.js';

/** The key of the `interlock_meta` row holding the format version. */
export const FORMAT_KEY = 'format';

const SCHEMA = new URL('../../gen/schema.sql', import.meta.url);

/**
 * The types the schema leaves to each dialect (schema.sql's header says why).
 * @type {Record<'sqlite' | 'postgres', { position_key: string, ordinal_key: string }>}
 */
const DIALECTS = {
  sqlite: { position_key: 'INTEGER PRIMARY KEY', ordinal_key: 'INTEGER NOT NULL UNIQUE' },
  postgres: { position_key: 'BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY', ordinal_key: 'BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE' },
};

/** @type {string | undefined} */
let schemaText;

/**
 * The schema's statements in `dialect`, split as the Rust crate splits them (`;` at the end
 * of a line; chunks that are only comments dropped): the meta table first, then the rest.
 * @param {'sqlite' | 'postgres'} dialect
 * @returns {string[]}
 */
export function schemaStatements(dialect) {
  if (schemaText === undefined) {
    try {
      schemaText = readFileSync(SCHEMA, 'utf8');
    } catch (e) {
      throw new JournalError('other', `cannot read the shared journals' schema ${SCHEMA.pathname} (${/** @type {Error} */ (e).message}): run \`npm run build\` in hosts/node`);
    }
  }
  const { position_key, ordinal_key } = DIALECTS[dialect];
  return schemaText
    .replaceAll('{position_key}', position_key)
    .replaceAll('{ordinal_key}', ordinal_key)
    .split(';\n')
    .map((s) => s.trim())
    .filter((s) => s.split('\n').some((l) => l.trim() !== '' && !l.startsWith('--')));
}

/**
 * Checks the format row of an existing journal (`undefined`: a new one, to be stamped) with
 * the journal-format component; throws JournalError('other') naming `journal`, as the Rust
 * crate words it, when the row names a newer version or none.
 * @param {string | undefined} value
 * @param {string} journal e.g. `SQLite journal /var/lib/j.db`
 */
export function checkStoredFormat(value, journal) {
  if (value === undefined) return;
  try {
    checkFormatFile(value);
  } catch (e) {
    if (!(e instanceof JournalError)) throw e;
    // The component speaks of journal.format; here the version is a row. Its detail is
    // the part between the component's fixed words.
    const bad = /^journal format file \S+ is not valid: (.*); expected (.*)$/s.exec(String(e.val));
    throw journalError('other', bad
      ? `${journal}: its interlock_meta row "${FORMAT_KEY}" is not a format version: ${bad[1]}; expected ${bad[2]}`
      : `${journal}: ${e.val}`);
  }
}

/**
 * Checks that rows read for `stream` from `start` run seq = start, start + 1, ...
 * @param {string} stream
 * @param {number} start
 * @param {number[]} seqs
 */
export function checkRun(stream, start, seqs) {
  seqs.forEach((seq, i) => {
    if (seq !== start + i) {
      throw journalError('corrupt', `interlock_entries of stream ${JSON.stringify(stream)}: seq ${start + i} is missing (found ${seq})`);
    }
  });
}

/**
 * An append of no entries, as every SQL journal takes it: nothing is written and the
 * stream (and its `open`) stays as it is; a wrong expected length is the conflict; a
 * `durable` one still syncs.
 * @param {{ length(stream: string): number, sync(): void }} journal
 * @param {string} stream
 * @param {number} expectedLength
 * @param {boolean} durable
 */
export function appendNothing(journal, stream, expectedLength, durable) {
  const actual = journal.length(stream);
  if (actual !== expectedLength) throw new JournalError('conflict', actual);
  if (durable) journal.sync();
}

/**
 * The JournalError for `text`, its message the text itself (the gate gets exactly the
 * words the Rust backends give).
 * @param {'io' | 'corrupt' | 'other'} tag
 * @param {string} text
 */
export function journalError(tag, text) {
  return new JournalError(tag, text, text);
}
