-- The Interlock journal in SQL: one schema for SQLite and PostgreSQL, and for every host
-- (the SQL journal of adapters/journal, which runs inside the gate component, includes
-- this file; adapters/sql-journal/README.md is the contract in prose).
--
-- Dialect differences, the only ones:
--   The type of interlock_streams.position, written below as the token position_key in
--   braces, which a reader replaces:
--     SQLite:     INTEGER PRIMARY KEY (the rowid: max + 1, under SQLite's one write lock)
--     PostgreSQL: BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY
--   The type of interlock_entries.ordinal, the token ordinal_key in braces:
--     SQLite:     INTEGER NOT NULL UNIQUE (the writer inserts max + 1, under the write lock)
--     PostgreSQL: BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE
--   open is BOOLEAN in both; SQLite stores it as 0 or 1, and `WHERE open` reads it the
--   same in both.
--
-- Statements are separated by ";" at the end of a line. The first statement (the meta
-- table) is the same in every version of this schema: a reader creates it, reads the
-- format row and refuses a newer journal before it creates or touches anything else.

-- One row per setting. key 'format' holds the format version, as the exact text of a file
-- journal's journal.format: 'interlock-journal 1' and a newline.
CREATE TABLE IF NOT EXISTS interlock_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- One row per stream. position is the stream's place in first-append order; length its
-- number of entries (a stream exists only once something was appended to it); open what
-- its last append said.
CREATE TABLE IF NOT EXISTS interlock_streams (
    position {position_key},
    name     TEXT NOT NULL UNIQUE,
    length   BIGINT NOT NULL CHECK (length > 0),
    open     BOOLEAN NOT NULL
);

-- Recovery's work list, read without a scan: only open streams are in this index.
CREATE INDEX IF NOT EXISTS interlock_open_streams ON interlock_streams (position) WHERE open;

-- Every entry, stored byte for byte as the gate wrote it. (stream, seq) is unique, so two
-- writers can never both add entry seq to a stream. ordinal is the entry's place in the
-- whole journal (append order across streams): the entries by ordinal, each followed by a
-- newline, are the bytes a file journal of the same appends holds (journal.jsonl), which
-- is how the conformance pins and the hosts compare journals.
CREATE TABLE IF NOT EXISTS interlock_entries (
    stream  TEXT NOT NULL,
    seq     BIGINT NOT NULL CHECK (seq >= 0),
    entry   TEXT NOT NULL,
    ordinal {ordinal_key},
    PRIMARY KEY (stream, seq)
);
