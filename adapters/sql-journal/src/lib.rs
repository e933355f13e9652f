//! Shared backends of the Interlock journal (`wit/journal.wit`): [`SqliteJournal`] for many
//! processes on one machine and [`PostgresJournal`] for many machines.
//!
//! Both store the one schema in `schema.sql` (written once, its two dialect differences
//! spelled out there) and implement the gate's one journal trait, [`interlock_core::Journal`],
//! with the same rules as the file journal: compare-and-append inside one transaction
//! (the stream's length checked and advanced under a lock, `(stream, seq)` unique), entries
//! stored byte for byte and checked with `interlock-journal-format`'s append validation,
//! the format version in a `meta` row, durability = a commit that waits for the disk, and
//! non-durable appends committed without waiting (group commit: the next durable commit or
//! [`Journal::sync`] flushes them, in order). README.md says how each rule is translated.
//!
//! [`open_url`] opens either from a URL: `sqlite:///abs/path.db` or `postgres://...`
//! (a libpq `key=value` string works too).

use std::path::PathBuf;
use std::str::FromStr;

use interlock_core::{Journal, JournalError};
use interlock_journal_format::{self as format, FormatError};

pub mod pg;
pub mod sqlite;
#[cfg(feature = "testing")]
pub mod testing;

pub use pg::PostgresJournal;
pub use sqlite::SqliteJournal;

/// The schema, with `{position_key}` and `{ordinal_key}` standing for the two types that
/// differ by dialect.
pub const SCHEMA: &str = include_str!("schema.sql");

/// The key of the `interlock_meta` row holding the format version.
pub const FORMAT_KEY: &str = "format";

/// The SQL dialects the schema is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

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
}

/// Why a journal could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The URL names no journal this crate can open; says what was expected.
    #[error("not a journal URL: {url:?}: {why}")]
    BadUrl { url: String, why: String },

    /// The journal was written in a newer format (or its format row is not one): nothing
    /// was read or written.
    #[error("{0}")]
    Format(String),

    /// The database could not be opened, reached or set up.
    #[error("{0}")]
    Open(String),
}

/// Where a journal URL points.
#[derive(Debug, Clone)]
pub enum Location {
    /// A SQLite database file (an absolute path).
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(Box<postgres::Config>),
}

/// Reads a journal URL: `sqlite://` followed by an absolute path (taken literally: no
/// percent-decoding, no query), `postgres://` or `postgresql://` URLs and libpq
/// `key=value` strings as PostgreSQL understands them.
pub fn parse_url(url: &str) -> Result<Location, Error> {
    let bad = |why: &str| Error::BadUrl {
        url: url.to_owned(),
        why: why.to_owned(),
    };
    if let Some(rest) = url.strip_prefix("sqlite:") {
        let path = rest
            .strip_prefix("//")
            .ok_or_else(|| bad("a SQLite URL is sqlite:// followed by an absolute path"))?;
        if !path.starts_with('/') || path.len() == 1 {
            return Err(bad(
                "a SQLite URL needs an absolute path to a file: sqlite:///abs/path.db",
            ));
        }
        return Ok(Location::Sqlite(PathBuf::from(path)));
    }
    let postgres_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    if postgres_url || (!url.contains("://") && url.contains('=')) {
        return postgres::Config::from_str(url)
            .map(|c| Location::Postgres(Box::new(c)))
            .map_err(|e| bad(&format!("not a PostgreSQL connection string: {e}")));
    }
    Err(bad(
        "expected sqlite:///abs/path.db, postgres://user@host:port/db or a libpq key=value string",
    ))
}

/// A journal in either database.
#[derive(Debug)]
pub enum SqlJournal {
    Sqlite(SqliteJournal),
    Postgres(Box<PostgresJournal>),
}

impl SqlJournal {
    /// Every entry in append order (see [`SqliteJournal::entries_in_order`]).
    pub fn entries_in_order(&mut self) -> Result<Vec<String>, JournalError> {
        match self {
            SqlJournal::Sqlite(j) => j.entries_in_order(),
            SqlJournal::Postgres(j) => j.entries_in_order(),
        }
    }

    fn inner(&mut self) -> &mut dyn Journal {
        match self {
            SqlJournal::Sqlite(j) => j,
            SqlJournal::Postgres(j) => &mut **j,
        }
    }
}

impl Journal for SqlJournal {
    fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        self.inner()
            .append(stream, expected_len, entries, durable, open)
    }
    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        self.inner().read(stream, start)
    }
    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        self.inner().length(stream)
    }
    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.inner().open_streams()
    }
    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.inner().streams()
    }
    fn sync(&mut self) -> Result<(), JournalError> {
        self.inner().sync()
    }
}

/// Opens the journal at `url` (see [`parse_url`]), creating its schema if needed.
pub fn open_url(url: &str) -> Result<SqlJournal, Error> {
    Ok(match parse_url(url)? {
        Location::Sqlite(path) => SqlJournal::Sqlite(SqliteJournal::open(&path)?),
        Location::Postgres(config) => {
            SqlJournal::Postgres(Box::new(PostgresJournal::connect(*config)?))
        }
    })
}

/// Checks the format row of an existing journal (`None`: a new one, to be stamped).
fn check_format(value: Option<&str>, journal: &str) -> Result<(), Error> {
    let Some(text) = value else { return Ok(()) };
    match format::check_format_file(text) {
        Ok(_) => Ok(()),
        Err(e @ FormatError::NewerVersion { .. }) => Err(Error::Format(format!("{journal}: {e}"))),
        Err(FormatError::BadFormatFile { detail }) => Err(Error::Format(format!(
            "{journal}: its interlock_meta row {FORMAT_KEY:?} is not a format version: \
             {detail}; expected {:?}",
            format::format_file_text()
        ))),
        Err(e) => Err(Error::Format(format!("{journal}: {e}"))),
    }
}

/// The gate's error for an append the format refuses (as the file journal reports it).
fn invalid(e: FormatError) -> JournalError {
    JournalError::Other(e.to_string())
}

/// A length or position as SQL stores it (BIGINT). Journal lengths never come near 2^63;
/// one that did is refused rather than wrapped.
fn to_sql_int(n: u64) -> Result<i64, JournalError> {
    i64::try_from(n).map_err(|_| JournalError::Other(format!("{n} is beyond a BIGINT")))
}

/// Checks that rows read for `stream` from `start` run seq = start, start + 1, ...
fn check_run(
    stream: &str,
    start: u64,
    seqs: impl Iterator<Item = i64>,
) -> Result<(), JournalError> {
    for (i, seq) in seqs.enumerate() {
        let want = start + i as u64;
        if u64::try_from(seq).ok() != Some(want) {
            return Err(JournalError::Corrupt(format!(
                "interlock_entries of stream {stream:?}: seq {want} is missing (found {seq})"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
