//! The shared journals on their databases: [`SqliteSql`] (many processes on one machine)
//! and [`PostgresSql`] (many machines), the `Sql` of `interlock-journal` over rusqlite and
//! postgres, and [`SqliteJournal`], [`PostgresJournal`] and [`open_url`]: the journal
//! itself natively (`interlock_journal::SqlJournal` over them), for native users.
//!
//! Every rule of the journal (the schema in `schema.sql`, its dialect tokens, the format
//! row, compare-and-append as guarded statements, the sync statements) is in
//! `interlock-journal`, which also runs inside the gate component over these same runners
//! when the CLI hosts it. What is here is the databases' own: connections, the busy
//! timeout, reconnecting, `synchronous` per commit, a commit whose acknowledgement is lost,
//! the UTF-8 check, file modes. README.md says how each rule is translated.
//!
//! [`open_url`] opens either from a URL: `sqlite:///abs/path.db` or `postgres://...`
//! (a libpq `key=value` string works too).

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use interlock_core::{Journal, JournalError};
use interlock_journal::{Dialect, Rows, Sql, Statement, StorageError};

pub mod pg;
pub mod sqlite;
#[cfg(feature = "testing")]
pub mod testing;

pub use interlock_journal::{FORMAT_KEY, OPEN_STREAMS, SCHEMA};
pub use pg::{PostgresJournal, PostgresSql};
pub use sqlite::{SqliteJournal, SqliteSql};

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

impl Error {
    /// The journal's refusal to open, for the database `name`: a format it does not read
    /// (`other`) or a storage failure.
    fn from_journal(name: &str, e: JournalError) -> Error {
        match e {
            JournalError::Other(m) => Error::Format(format!("{name}: {m}")),
            // The storage's sentences name the database already.
            other => Error::Open(describe(&other)),
        }
    }
}

fn describe(e: &JournalError) -> String {
    match e {
        JournalError::Conflict(n) => format!("conflict at {n}"),
        JournalError::Io(m)
        | JournalError::Corrupt(m)
        | JournalError::TornTail(m)
        | JournalError::Other(m) => m.clone(),
    }
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

/// Commits counted by every handle that shares them (a test's workers, or one handle).
#[derive(Debug, Default)]
pub struct Counters {
    commits: AtomicU64,
    durable: AtomicU64,
}

impl Counters {
    fn committed(&self, durable: bool) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        if durable {
            self.durable.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Transactions that wrote and committed.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Of those, the ones that waited for the disk (durable appends and syncs).
    pub fn durable_commits(&self) -> u64 {
        self.durable.load(Ordering::Relaxed)
    }
}

/// Either database, as the `Sql` a journal (or the gate component) runs over.
#[derive(Debug)]
pub enum SqlStore {
    Sqlite(SqliteSql),
    Postgres(Box<PostgresSql>),
}

impl SqlStore {
    /// Opens (or creates) the database at `url` (see [`parse_url`]); the journal's schema
    /// is the journal's to create.
    pub fn open_url(url: &str) -> Result<SqlStore, Error> {
        Ok(match parse_url(url)? {
            Location::Sqlite(path) => SqlStore::Sqlite(SqliteSql::open(&path)?),
            Location::Postgres(config) => {
                SqlStore::Postgres(Box::new(PostgresSql::connect(*config)?))
            }
        })
    }

    pub fn dialect(&self) -> Dialect {
        match self {
            SqlStore::Sqlite(_) => Dialect::Sqlite,
            SqlStore::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The database, for messages.
    pub fn name(&self) -> String {
        match self {
            SqlStore::Sqlite(s) => s.name(),
            SqlStore::Postgres(p) => p.name(),
        }
    }

    /// The commits this store's handle counted.
    pub fn counters(&self) -> Arc<Counters> {
        match self {
            SqlStore::Sqlite(s) => s.counters(),
            SqlStore::Postgres(p) => p.counters(),
        }
    }
}

impl Sql for SqlStore {
    fn sql_batch(
        &mut self,
        statements: &[Statement],
        write: bool,
        durable: bool,
    ) -> Result<Vec<Rows>, StorageError> {
        match self {
            SqlStore::Sqlite(s) => s.sql_batch(statements, write, durable),
            SqlStore::Postgres(p) => p.sql_batch(statements, write, durable),
        }
    }
}

/// A journal in either database, natively.
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

/// The native journal over a runner, as `$ty` (the same methods for both databases).
macro_rules! native_journal {
    ($ty:ident, $sql:ident) => {
        use interlock_core::{Journal, JournalError};

        impl $ty {
            /// The journal over a database already open.
            pub fn over(sql: $sql) -> Result<$ty, Error> {
                let name = sql.name();
                let counters = sql.counters();
                let inner = interlock_journal::SqlJournal::open(sql, $sql::DIALECT)
                    .map_err(|e| $crate::Error::from_journal(&name, e))?;
                Ok($ty {
                    inner,
                    counters,
                    name,
                })
            }

            /// Transactions this handle committed (appends; syncs).
            pub fn commits(&self) -> u64 {
                self.counters.commits()
            }

            /// Commits this handle made that waited for the disk: durable appends and syncs.
            pub fn durable_commits(&self) -> u64 {
                self.counters.durable_commits()
            }

            /// Every entry of the journal in append order (by `ordinal`): each followed by
            /// a newline, the bytes a file journal of the same appends holds.
            pub fn entries_in_order(&mut self) -> Result<Vec<String>, JournalError> {
                self.inner.entries_in_order()
            }
        }

        impl Journal for $ty {
            fn append(
                &mut self,
                stream: &str,
                expected_len: u64,
                entries: &[String],
                durable: bool,
                open: bool,
            ) -> Result<(), JournalError> {
                self.inner
                    .append(stream, expected_len, entries, durable, open)
            }
            fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
                self.inner.read(stream, start)
            }
            fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
                self.inner.length(stream)
            }
            fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
                self.inner.open_streams()
            }
            fn streams(&mut self) -> Result<Vec<String>, JournalError> {
                self.inner.streams()
            }
            fn sync(&mut self) -> Result<(), JournalError> {
                self.inner.sync()
            }
        }
    };
}
pub(crate) use native_journal;

#[cfg(test)]
mod tests;
