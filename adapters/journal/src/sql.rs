//! [`SqlJournal`]: the shared backends of the journal (SQLite: many processes on one
//! machine; PostgreSQL: many machines) over a host's [`Sql`].
//!
//! Both run the one schema in `schema.sql` (its two dialect differences written there as
//! tokens) and the statements below, written once: only the parameter markers differ
//! (`?1` in SQLite, `$1` in PostgreSQL). Parameters are integers and text, and so are the
//! columns read, so a host binds and reads nothing else.
//!
//! Compare-and-append is one batch (one transaction) of guarded statements: the stream's
//! row is advanced only if it holds the expected length (`UPDATE ... WHERE name = ? AND
//! length = ?`, expecting one changed row), or created only if it does not exist (`INSERT
//! ... ON CONFLICT (name) DO NOTHING`, expecting one), then the entries are inserted,
//! `(stream, seq)` unique. A guard that changes nothing rolls the batch back; the journal
//! then reads the stream's length and answers `conflict(actual)`. In PostgreSQL the
//! `UPDATE` takes the row's lock, so a second writer waits for the first and then finds
//! the length changed; in SQLite the batch runs under the write lock (`BEGIN IMMEDIATE`).

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use interlock_core::{Journal, JournalError};
use interlock_journal_format::{self as format, FormatError};

use crate::storage::{Rows, Sql, SqlValue, Statement, StorageError};

/// The schema, with `{position_key}` and `{ordinal_key}` standing for the two types that
/// differ by dialect.
pub const SCHEMA: &str = include_str!("schema.sql");

/// The key of the `interlock_meta` row holding the format version.
pub const FORMAT_KEY: &str = "format";

/// The SQL dialects the schema and the statements are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// The statements, written once with SQLite's parameter markers (`?1`); PostgreSQL's
/// (`$1`) are the same with `$` for `?` ([`Dialect::sql`]).
mod st {
    pub const LENGTH: &str = "SELECT length FROM interlock_streams WHERE name = ?1";
    /// A new stream: its row, unless another writer created it first (then nothing, and
    /// the guard of one changed row fails).
    pub const CREATE_STREAM: &str = "INSERT INTO interlock_streams (name, length, open) \
         VALUES (?1, ?2, CAST(?3 AS BIGINT) <> 0) ON CONFLICT (name) DO NOTHING";
    /// An existing stream, only at the expected length (the guard of one changed row).
    pub const ADVANCE_STREAM: &str = "UPDATE interlock_streams \
         SET length = ?2, open = CAST(?3 AS BIGINT) <> 0 WHERE name = ?1 AND length = ?4";
    /// SQLite: one entry; its ordinal is max + 1 (the write lock is held, and the UNIQUE
    /// index answers the max).
    pub const INSERT_ENTRY: &str = "INSERT INTO interlock_entries (stream, seq, entry, ordinal) \
         VALUES (?1, ?2, ?3, (SELECT COALESCE(MAX(ordinal), 0) + 1 FROM interlock_entries))";
    pub const IN_ORDER: &str = "SELECT entry FROM interlock_entries ORDER BY ordinal";
    /// An exporter's walk: entries after an ordinal, in ordinal order.
    pub const AFTER: &str = "SELECT ordinal, entry FROM interlock_entries WHERE ordinal > ?1 \
         ORDER BY ordinal LIMIT ?2";
    /// PostgreSQL hands out identity ordinals when a row is inserted, not when it commits:
    /// a reader could see ordinal 11 committed while 10 is still in flight, and pass it for
    /// good. This lock conflicts with every insert: it waits until the appends in flight
    /// have committed or rolled back, and holds new ones off for the read, so every
    /// ordinal the read can see below its last is final.
    pub const PG_SETTLED: &str = "LOCK TABLE interlock_entries IN SHARE MODE";
    pub const READ: &str =
        "SELECT seq, entry FROM interlock_entries WHERE stream = ?1 AND seq >= ?2 ORDER BY seq";
    /// Recovery's work list: answered from the partial index `interlock_open_streams`.
    pub const OPEN_STREAMS: &str =
        "SELECT name FROM interlock_streams WHERE open ORDER BY position";
    pub const STREAMS: &str = "SELECT name FROM interlock_streams ORDER BY position";
    pub const FORMAT_ROW: &str = "SELECT value FROM interlock_meta WHERE key = ?1";
    pub const STAMP_FORMAT: &str =
        "INSERT INTO interlock_meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING";
    /// SQLite's sync: a commit that writes, in a durable batch (`synchronous = FULL`), so
    /// the write-ahead log, which holds every earlier commit of every process, is fsynced.
    /// A row written and removed in one transaction: the pages are written (SQLite skips a
    /// write that changes nothing, and a commit that wrote nothing syncs nothing), and the
    /// journal's rows are as they were.
    pub const SQLITE_SYNC: [&str; 2] = [
        "INSERT INTO interlock_meta (key, value) VALUES ('sync', '')",
        "DELETE FROM interlock_meta WHERE key = 'sync'",
    ];
    /// PostgreSQL's sync: flushes the WAL up to everything committed so far. A commit
    /// flushes only if its transaction wrote WAL; a transactional logical message is the
    /// smallest such write (no table, no lock). Nothing is written when the WAL is already
    /// flushed; the one column says whether a message was written.
    pub const PG_SYNC: &str =
        "SELECT CASE WHEN pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn() \
         THEN pg_logical_emit_message(true, 'interlock-journal', 'sync')::text END";
    /// Serializes schema creation between workers opening a new database at once
    /// (`CREATE TABLE IF NOT EXISTS` alone races in PostgreSQL). The key spells "intlock".
    pub const PG_SCHEMA_LOCK: &str = "SELECT pg_advisory_xact_lock(29670243599410027)::text";
}

/// Recovery's work list (the statement the query-plan tests look at).
pub const OPEN_STREAMS: &str = st::OPEN_STREAMS;

impl Dialect {
    /// The type of `interlock_streams.position`: a key that grows with every new stream.
    fn position_key(self) -> &'static str {
        match self {
            Dialect::Sqlite => "INTEGER PRIMARY KEY",
            Dialect::Postgres => "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        }
    }

    /// The type of `interlock_entries.ordinal`: the entry's place in the whole journal.
    fn ordinal_key(self) -> &'static str {
        match self {
            Dialect::Sqlite => "INTEGER NOT NULL UNIQUE",
            Dialect::Postgres => "BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE",
        }
    }

    /// The schema's statements in this dialect: first the meta table, then the rest.
    pub fn schema(self) -> Vec<String> {
        SCHEMA
            .replace("{position_key}", self.position_key())
            .replace("{ordinal_key}", self.ordinal_key())
            .split(";\n")
            .map(str::trim)
            .filter(|s| {
                s.lines()
                    .any(|l| !l.trim().is_empty() && !l.starts_with("--"))
            })
            .map(String::from)
            .collect()
    }

    /// A statement written with SQLite's markers, in this dialect.
    pub fn sql(self, sqlite: &str) -> String {
        match self {
            Dialect::Sqlite => sqlite.to_string(),
            Dialect::Postgres => sqlite.replace('?', "$"),
        }
    }

    /// `sql` (SQLite's markers) with `params`, expecting `expect` changed rows.
    fn statement(self, sql: &str, params: Vec<SqlValue>, expect: Option<u64>) -> Statement {
        Statement {
            sql: self.sql(sql),
            params,
            expect_changes: expect,
        }
    }

    /// The statements inserting `entries` at `first` of `stream`: one per entry in SQLite
    /// (each takes max + 1 as its ordinal), one for all of them in PostgreSQL (identity
    /// ordinals, taken in the rows' order).
    fn insert_entries(self, stream: &str, first: i64, entries: &[String]) -> Vec<Statement> {
        match self {
            Dialect::Sqlite => entries
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    self.statement(
                        st::INSERT_ENTRY,
                        vec![text(stream), SqlValue::Integer(first + i as i64), text(e)],
                        Some(1),
                    )
                })
                .collect(),
            Dialect::Postgres => {
                let mut sql =
                    String::from("INSERT INTO interlock_entries (stream, seq, entry) VALUES ");
                let mut params = vec![text(stream), SqlValue::Integer(first)];
                for (i, e) in entries.iter().enumerate() {
                    if i > 0 {
                        sql.push_str(", ");
                    }
                    sql.push_str(&format!("($1, $2::bigint + {i}, ${})", i + 3));
                    params.push(text(e));
                }
                vec![Statement {
                    sql,
                    params,
                    expect_changes: Some(entries.len() as u64),
                }]
            }
        }
    }
}

fn text(s: &str) -> SqlValue {
    SqlValue::Text(s.to_string())
}

/// A length or position as SQL stores it (BIGINT). Journal lengths never come near 2^63;
/// one that did is refused rather than wrapped.
fn to_sql_int(n: u64) -> Result<i64, JournalError> {
    i64::try_from(n).map_err(|_| JournalError::Other(format!("{n} is beyond a BIGINT")))
}

/// The gate's error for a failed batch. A lost acknowledgement, a lost connection, a
/// timeout: the storage failed (`io`), with the host's sentence.
fn storage(e: StorageError) -> JournalError {
    match e {
        StorageError::Io(m) => JournalError::Io(m),
        other => JournalError::Other(format!("SQL journal: {other}")),
    }
}

fn unreadable(what: &str) -> JournalError {
    JournalError::Corrupt(format!("SQL journal: a stored value is unreadable: {what}"))
}

fn as_text(v: &SqlValue) -> Result<String, JournalError> {
    match v {
        SqlValue::Text(t) => Ok(t.clone()),
        other => Err(unreadable(&format!("{other:?} where text was expected"))),
    }
}

fn as_int(v: &SqlValue) -> Result<i64, JournalError> {
    match v {
        SqlValue::Integer(n) => Ok(*n),
        other => Err(unreadable(&format!(
            "{other:?} where an integer was expected"
        ))),
    }
}

/// The first column of every row, as text.
fn texts(rows: &Rows) -> Result<Vec<String>, JournalError> {
    rows.iter()
        .map(|r| {
            r.first()
                .ok_or_else(|| unreadable("a row without columns"))
                .and_then(as_text)
        })
        .collect()
}

/// Checks the format row of an existing journal (`None`: a new one, to be stamped). A
/// refusal is `other` with the file journal's sentence.
fn check_format(value: Option<&str>) -> Result<(), JournalError> {
    let Some(text) = value else { return Ok(()) };
    match format::check_format_file(text) {
        Ok(_) => Ok(()),
        Err(FormatError::BadFormatFile { detail }) => Err(JournalError::Other(format!(
            "its interlock_meta row {FORMAT_KEY:?} is not a format version: {detail}; expected {:?}",
            format::format_file_text()
        ))),
        Err(e) => Err(JournalError::Other(e.to_string())),
    }
}

/// A journal in a SQL database over `S`. Each worker (gate instance, process) has its own
/// connection, and so its own `SqlJournal`; the database makes their compare-and-appends
/// atomic.
#[derive(Debug)]
pub struct SqlJournal<S: Sql> {
    sql: S,
    dialect: Dialect,
}

impl<S: Sql> SqlJournal<S> {
    /// Opens the journal the database holds: creates the schema if needed and checks the
    /// format version. A newer (or unreadable) format is refused (`other`, the file
    /// journal's sentence) before anything but the meta table (the same in every version)
    /// is created; a storage failure is `io`.
    pub fn open(mut sql: S, dialect: Dialect) -> Result<Self, JournalError> {
        let schema = dialect.schema();
        let lock = (dialect == Dialect::Postgres)
            .then(|| dialect.statement(st::PG_SCHEMA_LOCK, Vec::new(), None));
        let format_row = dialect.statement(st::FORMAT_ROW, vec![text(FORMAT_KEY)], None);
        let stamped = |rows: &[Rows]| -> Result<Option<String>, JournalError> {
            match rows.last().and_then(|r| r.first()).and_then(|r| r.first()) {
                None => Ok(None),
                Some(v) => as_text(v).map(Some),
            }
        };
        // The meta table first, and its format row read: a newer journal is refused before
        // anything else is created.
        let mut first: Vec<Statement> = lock.iter().cloned().collect();
        first.push(dialect.statement(&schema[0], Vec::new(), None));
        first.push(format_row.clone());
        let rows = sql.sql_batch(&first, true, false).map_err(storage)?;
        let found = stamped(&rows)?;
        check_format(found.as_deref())?;
        if found.is_none() {
            // A new journal (a journal is stamped in the batch that creates its tables):
            // the rest of the schema, the stamp (unless another opener stamped it first),
            // and the row read again.
            let mut rest: Vec<Statement> = lock.iter().cloned().collect();
            for statement in &schema[1..] {
                rest.push(dialect.statement(statement, Vec::new(), None));
            }
            rest.push(dialect.statement(
                st::STAMP_FORMAT,
                vec![text(FORMAT_KEY), text(&format::format_file_text())],
                None,
            ));
            rest.push(format_row);
            let rows = sql.sql_batch(&rest, true, true).map_err(storage)?;
            check_format(stamped(&rows)?.as_deref())?;
        }
        Ok(SqlJournal { sql, dialect })
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The database.
    pub fn sql(&mut self) -> &mut S {
        &mut self.sql
    }

    /// The database, the journal closed.
    pub fn into_sql(self) -> S {
        self.sql
    }

    fn query(&mut self, sql: &str, params: Vec<SqlValue>) -> Result<Rows, JournalError> {
        let statement = self.dialect.statement(sql, params, None);
        let mut rows = self
            .sql
            .sql_batch(core::slice::from_ref(&statement), false, false)
            .map_err(storage)?;
        Ok(rows.pop().unwrap_or_default())
    }

    /// At most `max` entries after ordinal `cursor`, in ordinal order, each with its
    /// ordinal: an exporter's walk (`interlock_core::export::InOrder`). In PostgreSQL the
    /// read waits out the appends in flight first ([`st::PG_SETTLED`]), so it never passes
    /// an ordinal that a later commit fills.
    pub fn read_in_order(
        &mut self,
        cursor: u64,
        max: usize,
    ) -> Result<Vec<(u64, String)>, JournalError> {
        let after = vec![
            SqlValue::Integer(i64::try_from(cursor).unwrap_or(i64::MAX)),
            SqlValue::Integer(i64::try_from(max).unwrap_or(i64::MAX)),
        ];
        let pg = self.dialect == Dialect::Postgres;
        let mut batch = Vec::new();
        if pg {
            batch.push(self.dialect.statement(st::PG_SETTLED, Vec::new(), None));
        }
        batch.push(self.dialect.statement(st::AFTER, after, None));
        let rows = self.sql.sql_batch(&batch, pg, false).map_err(storage)?;
        let rows = rows.last().cloned().unwrap_or_default();
        rows.iter()
            .map(|r| match &r[..] {
                [ordinal, entry] => Ok((
                    u64::try_from(as_int(ordinal)?)
                        .map_err(|_| unreadable("a negative ordinal"))?,
                    as_text(entry)?,
                )),
                _ => Err(unreadable("an entry row without its two columns")),
            })
            .collect()
    }

    /// Every entry of the journal in append order (by `ordinal`): each followed by a
    /// newline, the bytes a file journal of the same appends holds.
    pub fn entries_in_order(&mut self) -> Result<Vec<String>, JournalError> {
        let rows = self.query(st::IN_ORDER, Vec::new())?;
        texts(&rows)
    }
}

impl<S: Sql> interlock_core::export::InOrder for SqlJournal<S> {
    fn read_in_order(
        &mut self,
        cursor: u64,
        max: usize,
    ) -> Result<Vec<(u64, String)>, JournalError> {
        SqlJournal::read_in_order(self, cursor, max)
    }
}

impl<S: Sql> Journal for SqlJournal<S> {
    /// An empty batch writes nothing and leaves the stream (and its `open`) as it is; if
    /// `durable`, it still syncs. As with the file journal, a conflict is reported before
    /// the entries are checked.
    fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        let invalid = format::validate_append(entries, stream, expected_len, open).err();
        if entries.is_empty() || invalid.is_some() {
            let actual = self.length(stream)?;
            if actual != expected_len {
                return Err(JournalError::Conflict(actual));
            }
            if let Some(e) = invalid {
                return Err(JournalError::Other(e.to_string()));
            }
            return if durable { self.sync() } else { Ok(()) };
        }
        let d = self.dialect;
        let new_len = to_sql_int(expected_len + entries.len() as u64)?;
        let first = to_sql_int(expected_len)?;
        let open_flag = SqlValue::Integer(i64::from(open));
        let mut batch = Vec::with_capacity(entries.len() + 1);
        batch.push(if expected_len == 0 {
            d.statement(
                st::CREATE_STREAM,
                vec![text(stream), SqlValue::Integer(new_len), open_flag],
                Some(1),
            )
        } else {
            d.statement(
                st::ADVANCE_STREAM,
                vec![
                    text(stream),
                    SqlValue::Integer(new_len),
                    open_flag,
                    SqlValue::Integer(first),
                ],
                Some(1),
            )
        });
        batch.extend(d.insert_entries(stream, first, entries));
        match self.sql.sql_batch(&batch, true, durable) {
            Ok(_) => Ok(()),
            // The stream is not at the expected length (a guard changed no row), or an
            // entry's place is taken: nothing was written; say where the stream is.
            Err(StorageError::UnexpectedChanges(_)) => {
                let actual = self.length(stream)?;
                if actual == expected_len {
                    return Err(JournalError::Io(format!(
                        "SQL journal: the append to stream {stream:?} was refused by its guard, \
                         yet the stream holds the expected {actual} entries: its rows \
                         disagree (interlock_streams and interlock_entries)"
                    )));
                }
                Err(JournalError::Conflict(actual))
            }
            Err(e) => Err(storage(e)),
        }
    }

    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        let from = i64::try_from(start).unwrap_or(i64::MAX);
        let rows = self.query(st::READ, vec![text(stream), SqlValue::Integer(from)])?;
        let mut out = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let [seq, entry] = &row[..] else {
                return Err(unreadable("an entry row without its two columns"));
            };
            let (seq, want) = (as_int(seq)?, start + i as u64);
            if u64::try_from(seq).ok() != Some(want) {
                return Err(JournalError::Corrupt(format!(
                    "interlock_entries of stream {stream:?}: seq {want} is missing (found {seq})"
                )));
            }
            out.push(as_text(entry)?);
        }
        Ok(out)
    }

    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        let rows = self.query(st::LENGTH, vec![text(stream)])?;
        match rows.first().and_then(|r| r.first()) {
            None => Ok(0),
            Some(v) => u64::try_from(as_int(v)?).map_err(|_| unreadable("a negative length")),
        }
    }

    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        let rows = self.query(st::OPEN_STREAMS, Vec::new())?;
        texts(&rows)
    }

    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        let rows = self.query(st::STREAMS, Vec::new())?;
        texts(&rows)
    }

    /// Makes every commit so far durable, this worker's and every other's: SQLite fsyncs
    /// its write-ahead log by committing a write with `synchronous = FULL`; PostgreSQL
    /// flushes its WAL with a durable commit of a logical message, when it is not flushed.
    fn sync(&mut self) -> Result<(), JournalError> {
        let sql: &[&str] = match self.dialect {
            Dialect::Sqlite => &st::SQLITE_SYNC,
            Dialect::Postgres => &[st::PG_SYNC],
        };
        let batch: Vec<Statement> = sql
            .iter()
            .map(|s| self.dialect.statement(s, Vec::new(), None))
            .collect();
        self.sql.sql_batch(&batch, true, true).map_err(storage)?;
        Ok(())
    }
}
