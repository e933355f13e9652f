//! [`SqliteSql`]: a SQLite database file, shared by the processes of one machine, as the
//! `Sql` of `interlock-journal`; [`SqliteJournal`]: the journal over it, natively.

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use interlock_journal::{Dialect, Rows, Sql, SqlValue, Statement, StorageError};
use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, ErrorCode, TransactionBehavior};

use crate::{native_journal, Counters, Error};

/// A SQLite database in WAL mode. Every process (and thread) opens its own; SQLite's file
/// locks make each batch atomic across all of them, and a writing batch takes the write
/// lock before its first statement (`BEGIN IMMEDIATE`).
///
/// A durable batch commits with `synchronous=FULL` (one fsync of the write-ahead log,
/// which also covers every earlier commit, whoever made it); any other with
/// `synchronous=NORMAL` (written to the log, not synced): made durable, in log order, by
/// the next durable commit of any process.
pub struct SqliteSql {
    conn: Connection,
    path: PathBuf,
    /// The `synchronous` setting in force on the connection (`true`: FULL).
    synchronous_full: bool,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for SqliteSql {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteSql")
            .field("path", &self.path)
            .field("counters", &self.counters)
            .finish()
    }
}

impl SqliteSql {
    pub const DIALECT: Dialect = Dialect::Sqlite;

    /// How long a write waits for another process's transaction before it fails.
    pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

    /// Opens (or creates, readable by its owner only, with missing parent directories) the
    /// database at `path` and switches it to WAL mode.
    pub fn open(path: &Path) -> Result<SqliteSql, Error> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            Error::Open(format!("SQLite journal {}: {what}: {e}", path.display()))
        };
        create_owner_only(path).map_err(|e| fail("cannot create the database file", &e))?;
        let conn = Connection::open(path).map_err(|e| fail("cannot open", &e))?;
        conn.busy_timeout(Self::BUSY_TIMEOUT)
            .map_err(|e| fail("cannot set the busy timeout", &e))?;
        conn.set_prepared_statement_cache_capacity(64);
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| fail("cannot switch to WAL mode", &e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(fail(
                "cannot switch to WAL mode",
                &format!("it stays in {mode} mode"),
            ));
        }
        conn.execute_batch("PRAGMA synchronous = NORMAL")
            .map_err(|e| fail("cannot set synchronous", &e))?;
        Ok(SqliteSql {
            conn,
            path: path.to_owned(),
            synchronous_full: false,
            counters: Arc::default(),
        })
    }

    /// This handle counting into `counters` (shared with other handles).
    pub fn with_counters(mut self, counters: Arc<Counters>) -> SqliteSql {
        self.counters = counters;
        self
    }

    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn name(&self) -> String {
        format!("SQLite journal {}", self.path.display())
    }

    fn set_synchronous(&mut self, full: bool) -> rusqlite::Result<()> {
        if self.synchronous_full != full {
            self.conn.execute_batch(if full {
                "PRAGMA synchronous = FULL"
            } else {
                "PRAGMA synchronous = NORMAL"
            })?;
            self.synchronous_full = full;
        }
        Ok(())
    }

    fn error(&self, e: rusqlite::Error) -> StorageError {
        let at = self.path.display();
        match &e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::DatabaseBusy => {
                StorageError::Io(format!(
                    "SQLite journal {at}: other writers held the database for longer than {} s: {e}",
                    Self::BUSY_TIMEOUT.as_secs()
                ))
            }
            _ => StorageError::Io(format!("SQLite journal {at}: {e}")),
        }
    }

    fn run(
        &mut self,
        statements: &[Statement],
        write: bool,
        durable: bool,
    ) -> Result<Vec<Rows>, Fail> {
        if write {
            self.set_synchronous(durable)?;
        }
        // IMMEDIATE takes the write lock before the first statement, so nothing can change
        // between a guard and the writes after it.
        let tx = self.conn.transaction_with_behavior(if write {
            TransactionBehavior::Immediate
        } else {
            TransactionBehavior::Deferred
        })?;
        let mut out = Vec::with_capacity(statements.len());
        for (i, s) in statements.iter().enumerate() {
            let mut st = tx.prepare_cached(&s.sql)?;
            let params = rusqlite::params_from_iter(s.params.iter().map(|p| match p {
                SqlValue::Null => Value::Null,
                SqlValue::Integer(n) => Value::Integer(*n),
                SqlValue::Text(t) => Value::Text(t.clone()),
            }));
            if st.column_count() > 0 {
                let n = st.column_count();
                let mut rows = st.query(params)?;
                let mut got = Vec::new();
                while let Some(row) = rows.next()? {
                    let mut cols = Vec::with_capacity(n);
                    for c in 0..n {
                        cols.push(match row.get_ref(c)? {
                            ValueRef::Null => SqlValue::Null,
                            ValueRef::Integer(v) => SqlValue::Integer(v),
                            ValueRef::Text(t) => SqlValue::Text(
                                std::str::from_utf8(t)
                                    .map_err(|e| {
                                        Fail::Other(format!("a stored text is not UTF-8: {e}"))
                                    })?
                                    .to_owned(),
                            ),
                            other => {
                                return Err(Fail::Other(format!(
                                    "column {c} of statement {i} is {:?}, neither integer nor text",
                                    other.data_type()
                                )))
                            }
                        });
                    }
                    got.push(cols);
                }
                out.push(got);
            } else {
                let changed = st.execute(params)? as u64;
                if s.expect_changes.is_some_and(|want| want != changed) {
                    // Dropping the transaction rolls it back.
                    return Err(Fail::Unexpected(i as u32));
                }
                out.push(Vec::new());
            }
        }
        tx.commit()?;
        if write {
            self.counters.committed(durable);
        }
        Ok(out)
    }
}

enum Fail {
    Sql(rusqlite::Error),
    Unexpected(u32),
    Other(String),
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(e)
    }
}

impl Sql for SqliteSql {
    fn sql_batch(
        &mut self,
        statements: &[Statement],
        write: bool,
        durable: bool,
    ) -> Result<Vec<Rows>, StorageError> {
        self.run(statements, write, durable).map_err(|f| match f {
            Fail::Sql(e) => self.error(e),
            Fail::Unexpected(i) => StorageError::UnexpectedChanges(i),
            Fail::Other(m) => {
                StorageError::Io(format!("SQLite journal {}: {m}", self.path.display()))
            }
        })
    }
}

/// The journal in one SQLite file, natively: `interlock_journal::SqlJournal` over
/// [`SqliteSql`].
pub struct SqliteJournal {
    inner: interlock_journal::SqlJournal<SqliteSql>,
    counters: Arc<Counters>,
    name: String,
}

impl std::fmt::Debug for SqliteJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteJournal")
            .field("database", &self.name)
            .field("commits", &self.commits())
            .field("durable_commits", &self.durable_commits())
            .finish()
    }
}

impl SqliteJournal {
    /// How long a write waits for another process's transaction before it fails.
    pub const BUSY_TIMEOUT: Duration = SqliteSql::BUSY_TIMEOUT;

    /// Opens (or creates) the journal database at `path`: creates the schema if needed and
    /// checks its format version (a newer one is refused, nothing changed).
    pub fn open(path: &Path) -> Result<SqliteJournal, Error> {
        SqliteJournal::over(SqliteSql::open(path)?)
    }

    /// The database, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }
}

native_journal!(SqliteJournal, SqliteSql);

/// Creates the database file (empty: a valid empty database) and its missing parent
/// directories readable by their owner only, as the file journal does: a journal holds
/// customers' orders and amounts. SQLite gives its `-wal` and `-shm` files the database
/// file's permissions.
fn create_owner_only(path: &Path) -> io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
        }
    }
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}
