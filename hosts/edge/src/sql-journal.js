// A journal over a synchronous SQLite handle, for runtimes whose SQLite is not
// better-sqlite3: a Durable Object's `ctx.storage.sql` (workerd) and `node:sqlite` (Deno).
// The tables, the statements and every rule are the shared SQL journals' (the one schema,
// adapters/sql-journal/src/schema.sql; hosts/node/src/journal/sqlite.js says the same rules
// for better-sqlite3), so the rows, and the bytes in append order, are every host's.
// Entries are checked by the journal-format component (validateAppend), as everywhere.
import { JournalError } from '../../node/src/errors.js';
import { validateAppend, formatFileText, checkFormatFile } from '../../node/src/journal/format.js';

/**
 * @typedef {{
 *   all(sql: string, ...params: unknown[]): Record<string, unknown>[],
 *   run(sql: string, ...params: unknown[]): void,
 *   transaction<T>(fn: () => T): T,
 * }} SqlHandle  a synchronous SQLite: `transaction` runs `fn` atomically (a throw rolls back)
 */

const FORMAT_KEY = 'format';
const LENGTH = 'SELECT length FROM interlock_streams WHERE name = ?';
const CREATE_STREAM = 'INSERT INTO interlock_streams (name, length, open) VALUES (?, ?, ?)';
const UPDATE_STREAM = 'UPDATE interlock_streams SET length = ?, open = ? WHERE name = ?';
const INSERT_ENTRY = 'INSERT INTO interlock_entries (stream, seq, entry, ordinal) ' +
  'VALUES (?, ?, ?, (SELECT COALESCE(MAX(ordinal), 0) + 1 FROM interlock_entries))';
const IN_ORDER = 'SELECT entry FROM interlock_entries ORDER BY ordinal';
const READ = 'SELECT seq, entry FROM interlock_entries WHERE stream = ? AND seq >= ? ORDER BY seq';
const OPEN_STREAMS = 'SELECT name FROM interlock_streams WHERE open ORDER BY position';
const STREAMS = 'SELECT name FROM interlock_streams ORDER BY position';
const FORMAT_ROW = 'SELECT value FROM interlock_meta WHERE key = ?';
const STAMP_FORMAT = 'INSERT INTO interlock_meta (key, value) VALUES (?, ?)';

/**
 * The schema's statements for SQLite, split as every host splits them.
 * @param {string} schema the text of adapters/sql-journal/src/schema.sql (hosts/node/gen/schema.sql)
 */
function schemaStatements(schema) {
  return schema
    .replaceAll('{position_key}', 'INTEGER PRIMARY KEY')
    .replaceAll('{ordinal_key}', 'INTEGER NOT NULL UNIQUE')
    .split(';\n')
    .map((s) => s.trim())
    .filter((s) => s.split('\n').some((l) => l.trim() !== '' && !l.startsWith('--')));
}

/** @param {string} text */
const io = (text) => new JournalError('io', text, text);

export class SqlJournal {
  /** @type {SqlHandle} */
  #db;

  /**
   * Creates the schema if needed and checks the format row (a newer journal is refused,
   * nothing changed). `name` says which journal in error texts; `schemaText` is the shared
   * schema's text (each runtime reads its file its own way: a Worker bundles it).
   * @param {SqlHandle} db
   * @param {string} name
   * @param {string} schemaText
   */
  static open(db, name, schemaText) {
    const schema = schemaStatements(schemaText);
    db.transaction(() => {
      db.run(schema[0]);
      const stamped = /** @type {string | undefined} */ (db.all(FORMAT_ROW, FORMAT_KEY)[0]?.value);
      if (stamped !== undefined) {
        try {
          checkFormatFile(stamped);
        } catch (e) {
          throw new JournalError('other', `${name}: ${/** @type {any} */ (e).val ?? e}`);
        }
      }
      for (const statement of schema.slice(1)) db.run(statement);
      if (stamped === undefined) db.run(STAMP_FORMAT, FORMAT_KEY, formatFileText());
    });
    return new SqlJournal(db, name);
  }

  /**
   * Use SqlJournal.open.
   * @param {SqlHandle} db
   * @param {string} name
   */
  constructor(db, name) {
    this.#db = db;
    this.name = name;
    /** Appends committed, and those asked to be durable (for tests and measurements). */
    this.commits = 0;
    this.durableAppends = 0;
  }

  /**
   * @template T
   * @param {() => T} f
   */
  #run(f) {
    try {
      return f();
    } catch (e) {
      if (e instanceof JournalError) throw e;
      throw io(`${this.name}: ${/** @type {Error} */ (e).message}`);
    }
  }

  /** @param {string} stream */
  length(stream) {
    return Number(this.#run(() => this.#db.all(LENGTH, stream)[0]?.length ?? 0));
  }

  /**
   * Compare-and-append in one transaction. The runtime's transaction commits whole or not
   * at all; `durable` is carried by the host (see the Worker: the output gate, or an
   * explicit wait before any step leaves), never by this call, which cannot block.
   * @param {string} stream
   * @param {number} expectedLength
   * @param {string[]} entries
   * @param {boolean} durable
   * @param {boolean} open
   */
  append(stream, expectedLength, entries, durable, open) {
    this.#run(() => this.#db.transaction(() => {
      const actual = this.length(stream);
      if (actual !== expectedLength) throw new JournalError('conflict', actual);
      if (entries.length === 0) return;
      validateAppend(entries, stream, expectedLength, open);
      const newLength = expectedLength + entries.length;
      if (actual === 0) this.#db.run(CREATE_STREAM, stream, newLength, open ? 1 : 0);
      else this.#db.run(UPDATE_STREAM, newLength, open ? 1 : 0, stream);
      entries.forEach((entry, i) => this.#db.run(INSERT_ENTRY, stream, expectedLength + i, entry));
    }));
    this.commits += 1;
    if (durable) this.durableAppends += 1;
  }

  /**
   * @param {string} stream
   * @param {number} start
   */
  read(stream, start) {
    const rows = this.#run(() => this.#db.all(READ, stream, start));
    return rows.map((r, i) => {
      if (Number(r.seq) !== start + i) {
        throw new JournalError('corrupt', `interlock_entries of stream ${JSON.stringify(stream)}: seq ${start + i} is missing (found ${r.seq})`);
      }
      if (typeof r.entry !== 'string') throw new JournalError('corrupt', `${this.name}: entry ${r.seq} of stream ${JSON.stringify(stream)} is not text`);
      return r.entry;
    });
  }

  openStreams() {
    return this.#run(() => this.#db.all(OPEN_STREAMS).map((r) => String(r.name)));
  }

  streams() {
    return this.#run(() => this.#db.all(STREAMS).map((r) => String(r.name)));
  }

  /** Nothing to do synchronously: see `append`. */
  sync() {}

  /** Every entry in append order, each followed by "\n": the bytes a file journal holds. */
  text() {
    return this.#run(() => this.#db.all(IN_ORDER).map((r) => `${r.entry}\n`).join(''));
  }

  bytes() {
    return new TextEncoder().encode(this.text());
  }

  close() {}
}
