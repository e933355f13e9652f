//! [`SqliteJournal`]: the journal in one SQLite file, shared by the processes of one machine.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use interlock_core::{Journal, JournalError};
use interlock_journal_format as format;
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, TransactionBehavior};

use crate::{check_format, check_run, invalid, to_sql_int, Dialect, Error, FORMAT_KEY};

/// A journal in a SQLite database file in WAL mode. Every process (and thread) opens its
/// own; SQLite's file locks make compare-and-append atomic across all of them.
///
/// A durable append commits with `synchronous=FULL` (one fsync of the write-ahead log,
/// which also covers every earlier commit, whoever made it); a non-durable one commits
/// with `synchronous=NORMAL` (written to the log, not synced): they are made durable, in
/// log order, by the next durable commit or [`Journal::sync`] of any process.
pub struct SqliteJournal {
    conn: Connection,
    path: PathBuf,
    /// The database's write-ahead log, which `sync` flushes.
    wal: PathBuf,
    /// The `synchronous` setting in force on the connection (`true`: FULL).
    synchronous_full: bool,
    commits: u64,
    durable_commits: u64,
}

impl std::fmt::Debug for SqliteJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteJournal")
            .field("path", &self.path)
            .field("commits", &self.commits)
            .field("durable_commits", &self.durable_commits)
            .finish()
    }
}

const LENGTH: &str = "SELECT length FROM interlock_streams WHERE name = ?1";
const CREATE_STREAM: &str =
    "INSERT INTO interlock_streams (name, length, open) VALUES (?1, ?2, ?3)";
const UPDATE_STREAM: &str = "UPDATE interlock_streams SET length = ?2, open = ?3 WHERE name = ?1";
/// The ordinal is max + 1: the write lock (`BEGIN IMMEDIATE`) is held, and the UNIQUE index
/// answers the max.
const INSERT_ENTRY: &str = "INSERT INTO interlock_entries (stream, seq, entry, ordinal) \
     VALUES (?1, ?2, ?3, (SELECT COALESCE(MAX(ordinal), 0) + 1 FROM interlock_entries))";
const IN_ORDER: &str = "SELECT entry FROM interlock_entries ORDER BY ordinal";
const READ: &str =
    "SELECT seq, entry FROM interlock_entries WHERE stream = ?1 AND seq >= ?2 ORDER BY seq";
/// Recovery's work list: answered from the partial index `interlock_open_streams`.
pub const OPEN_STREAMS: &str = "SELECT name FROM interlock_streams WHERE open ORDER BY position";
const STREAMS: &str = "SELECT name FROM interlock_streams ORDER BY position";
const FORMAT_ROW: &str = "SELECT value FROM interlock_meta WHERE key = ?1";
const STAMP_FORMAT: &str = "INSERT INTO interlock_meta (key, value) VALUES (?1, ?2)";

impl SqliteJournal {
    /// How long a write waits for another process's transaction before it fails.
    pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

    /// Opens (or creates, readable by its owner only, with missing parent directories) the
    /// journal database at `path`, switches it to WAL mode, creates the schema if needed
    /// and checks its format version (a newer one is refused, nothing changed).
    pub fn open(path: &Path) -> Result<SqliteJournal, Error> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            Error::Open(format!("SQLite journal {}: {what}: {e}", path.display()))
        };
        create_owner_only(path).map_err(|e| fail("cannot create the database file", &e))?;
        let conn = Connection::open(path).map_err(|e| fail("cannot open", &e))?;
        conn.busy_timeout(Self::BUSY_TIMEOUT)
            .map_err(|e| fail("cannot set the busy timeout", &e))?;
        // A newer journal is refused before anything (even its journal mode) is changed.
        let stamped = read_format(&conn).map_err(|e| fail("cannot read the format version", &e))?;
        check_format(
            stamped.as_deref(),
            &format!("SQLite journal {}", path.display()),
        )?;
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
        let mut journal = SqliteJournal {
            wal: wal_path(&conn, path),
            conn,
            path: path.to_owned(),
            synchronous_full: false,
            commits: 0,
            durable_commits: 0,
        };
        journal.set_up().map_err(|e| match e {
            SetUp::Format(e) => e,
            SetUp::Sql(e) => fail("cannot set up the schema", &e),
        })?;
        Ok(journal)
    }

    /// Creates the schema under the write lock, so that processes opening a new journal at
    /// once do not race; a newer format is refused before anything but the meta table (the
    /// same in every version) is created, and the transaction is rolled back.
    fn set_up(&mut self) -> Result<(), SetUp> {
        let name = format!("SQLite journal {}", self.path.display());
        let schema = Dialect::Sqlite.schema();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(&schema[0])?;
        let stamped: Option<String> = tx
            .query_row(FORMAT_ROW, [FORMAT_KEY], |r| r.get(0))
            .optional()?;
        check_format(stamped.as_deref(), &name).map_err(SetUp::Format)?;
        for statement in &schema[1..] {
            tx.execute_batch(statement)?;
        }
        if stamped.is_none() {
            tx.execute(
                STAMP_FORMAT,
                params![FORMAT_KEY, format::format_file_text()],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Transactions this handle committed (appends).
    pub fn commits(&self) -> u64 {
        self.commits
    }

    /// fsyncs this handle asked for: durable appends and syncs.
    pub fn durable_commits(&self) -> u64 {
        self.durable_commits
    }

    /// Every entry of the journal in append order (by `ordinal`): each followed by a
    /// newline, the bytes a file journal of the same appends holds.
    pub fn entries_in_order(&mut self) -> Result<Vec<String>, JournalError> {
        let rows = (|| {
            let mut st = self.conn.prepare_cached(IN_ORDER)?;
            let rows = st.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect::<Result<Vec<_>, _>>()
        })();
        rows.map_err(|e| self.error(e))
    }

    fn set_synchronous(&mut self, full: bool) -> Result<(), JournalError> {
        if self.synchronous_full != full {
            let pragma = if full {
                "PRAGMA synchronous = FULL"
            } else {
                "PRAGMA synchronous = NORMAL"
            };
            self.conn.execute_batch(pragma).map_err(|e| self.error(e))?;
            self.synchronous_full = full;
        }
        Ok(())
    }

    fn error(&self, e: rusqlite::Error) -> JournalError {
        let at = self.path.display();
        match &e {
            rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::IntegralValueOutOfRange(..) => {
                JournalError::Corrupt(format!("SQLite journal {at}: a stored value is unreadable: {e}"))
            }
            rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::DatabaseBusy => {
                JournalError::Io(format!(
                    "SQLite journal {at}: other writers held the database for longer than {} s: {e}",
                    Self::BUSY_TIMEOUT.as_secs()
                ))
            }
            _ => JournalError::Io(format!("SQLite journal {at}: {e}")),
        }
    }

    fn try_append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), Fail> {
        self.set_synchronous(durable)?;
        // IMMEDIATE takes the write lock before the length is read, so no other writer can
        // advance the stream between the check and the insert.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let actual: Option<i64> = tx
            .prepare_cached(LENGTH)?
            .query_row([stream], |r| r.get(0))
            .optional()?;
        let actual = actual.map_or(0, |n| n as u64);
        if actual != expected_len {
            return Err(JournalError::Conflict(actual).into());
        }
        format::validate_append(entries, stream, expected_len, open).map_err(invalid)?;
        let new_len = to_sql_int(expected_len + entries.len() as u64)?;
        if actual == 0 {
            tx.prepare_cached(CREATE_STREAM)?
                .execute(params![stream, new_len, open])?;
        } else {
            tx.prepare_cached(UPDATE_STREAM)?
                .execute(params![stream, new_len, open])?;
        }
        {
            let mut insert = tx.prepare_cached(INSERT_ENTRY)?;
            for (i, entry) in entries.iter().enumerate() {
                insert.execute(params![stream, to_sql_int(expected_len + i as u64)?, entry])?;
            }
        }
        tx.commit()?;
        self.commits += 1;
        if durable {
            self.durable_commits += 1;
        }
        Ok(())
    }
}

impl Journal for SqliteJournal {
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
        if entries.is_empty() {
            let actual = self.length(stream)?;
            if actual != expected_len {
                return Err(JournalError::Conflict(actual));
            }
            return if durable { self.sync() } else { Ok(()) };
        }
        self.try_append(stream, expected_len, entries, durable, open)
            .map_err(|f| match f {
                Fail::Journal(e) => e,
                Fail::Sql(e) => self.error(e),
            })
    }

    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        let from = i64::try_from(start).unwrap_or(i64::MAX);
        let rows = (|| {
            let mut st = self.conn.prepare_cached(READ)?;
            let rows = st.query_map(params![stream, from], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })?;
            rows.collect::<Result<Vec<_>, _>>()
        })()
        .map_err(|e| self.error(e))?;
        check_run(stream, start, rows.iter().map(|(seq, _)| *seq))?;
        Ok(rows.into_iter().map(|(_, entry)| entry).collect())
    }

    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        let n: Option<i64> = self
            .conn
            .prepare_cached(LENGTH)
            .and_then(|mut st| st.query_row([stream], |r| r.get(0)).optional())
            .map_err(|e| self.error(e))?;
        Ok(n.map_or(0, |n| n as u64))
    }

    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.names(OPEN_STREAMS)
    }

    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.names(STREAMS)
    }

    /// One fsync of the write-ahead log. Every commit of every process is in the log (or
    /// was checkpointed into the database file, which SQLite syncs when it checkpoints), so
    /// this makes every append so far durable, including other processes' non-durable ones.
    fn sync(&mut self) -> Result<(), JournalError> {
        match File::open(&self.wal) {
            Ok(wal) => wal.sync_data().map_err(|e| {
                JournalError::Io(format!(
                    "SQLite journal {}: fsync of {} failed: {e}",
                    self.path.display(),
                    self.wal.display()
                ))
            })?,
            // No log: everything was checkpointed into the database file and synced.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(JournalError::Io(format!(
                    "SQLite journal {}: cannot open {} to sync it: {e}",
                    self.path.display(),
                    self.wal.display()
                )))
            }
        }
        self.durable_commits += 1;
        Ok(())
    }
}

impl SqliteJournal {
    fn names(&self, sql: &str) -> Result<Vec<String>, JournalError> {
        (|| {
            let mut st = self.conn.prepare_cached(sql)?;
            let rows = st.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect::<Result<Vec<_>, _>>()
        })()
        .map_err(|e| self.error(e))
    }
}

enum Fail {
    Journal(JournalError),
    Sql(rusqlite::Error),
}

impl From<JournalError> for Fail {
    fn from(e: JournalError) -> Self {
        Fail::Journal(e)
    }
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(e)
    }
}

enum SetUp {
    Format(Error),
    Sql(rusqlite::Error),
}

impl From<rusqlite::Error> for SetUp {
    fn from(e: rusqlite::Error) -> Self {
        SetUp::Sql(e)
    }
}

/// The format row, if the database has a meta table.
fn read_format(conn: &Connection) -> rusqlite::Result<Option<String>> {
    let has_meta: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'interlock_meta')",
        [],
        |r| r.get(0),
    )?;
    if !has_meta {
        return Ok(None);
    }
    conn.query_row(FORMAT_ROW, [FORMAT_KEY], |r| r.get(0))
        .optional()
}

/// The write-ahead log of the database `conn` has open (SQLite names it `<database>-wal`).
fn wal_path(conn: &Connection, path: &Path) -> PathBuf {
    let db = conn.path().map_or_else(|| path.to_owned(), PathBuf::from);
    let mut wal = db.into_os_string();
    wal.push("-wal");
    PathBuf::from(wal)
}

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
