//! [`PostgresJournal`]: the journal in a PostgreSQL database, shared by many machines.

use std::time::Duration;

use interlock_core::{Journal, JournalError};
use interlock_journal_format as format;
use postgres::error::SqlState;
use postgres::{Client, Config, NoTls, SimpleQueryMessage, Statement};

use crate::{check_format, check_run, invalid, to_sql_int, Dialect, Error, FORMAT_KEY};

/// A journal in a PostgreSQL database. Every worker (process or thread) connects its own.
///
/// An append is one transaction: the stream's row is locked (`SELECT ... FOR UPDATE`), its
/// length compared, the entries inserted and the row advanced, then committed; the
/// `(stream, seq)` primary key refuses a second entry at one place whatever happens. A
/// durable append commits with `synchronous_commit = on` (the commit returns once its WAL,
/// and so every earlier commit's, is flushed); a non-durable one with
/// `synchronous_commit = off`: visible at once, flushed in WAL order by the WAL writer, the
/// next durable commit or [`Journal::sync`] (group commit).
///
/// A lost connection fails the call with [`JournalError::Io`]; the next call reconnects.
/// An append whose commit was not acknowledged fails too (its fate is unknown: the gate
/// re-reads the stream): it is never reported as done.
pub struct PostgresJournal {
    config: Config,
    /// The database, for messages (never the password).
    name: String,
    conn: Option<Conn>,
    commits: u64,
    durable_commits: u64,
}

impl std::fmt::Debug for PostgresJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresJournal")
            .field("database", &self.name)
            .field("connected", &self.conn.is_some())
            .field("commits", &self.commits)
            .field("durable_commits", &self.durable_commits)
            .finish()
    }
}

struct Conn {
    client: Client,
    st: Statements,
    /// The session's `synchronous_commit` (`true`: on).
    synchronous: Option<bool>,
}

/// Every statement, prepared once per connection.
struct Statements {
    lock_stream: Statement,
    length: Statement,
    create_stream: Statement,
    update_stream: Statement,
    insert_entries: Statement,
    read: Statement,
    open_streams: Statement,
    streams: Statement,
}

const LOCK_STREAM: &str = "SELECT length FROM interlock_streams WHERE name = $1 FOR UPDATE";
const LENGTH: &str = "SELECT length FROM interlock_streams WHERE name = $1";
/// Two writers may create one stream at once: the second waits for the first, inserts
/// nothing, and reports the conflict.
const CREATE_STREAM: &str =
    "INSERT INTO interlock_streams (name, length, open) VALUES ($1, $2, $3) \
     ON CONFLICT (name) DO NOTHING";
const UPDATE_STREAM: &str = "UPDATE interlock_streams SET length = $2, open = $3 WHERE name = $1";
/// Ordinals are taken in the batch's order.
const INSERT_ENTRIES: &str = "INSERT INTO interlock_entries (stream, seq, entry) \
     SELECT $1, $2::bigint + e.i - 1, e.entry FROM unnest($3::text[]) WITH ORDINALITY AS e(entry, i) \
     ORDER BY e.i";
const IN_ORDER: &str = "SELECT entry FROM interlock_entries ORDER BY ordinal";
const READ: &str =
    "SELECT seq, entry FROM interlock_entries WHERE stream = $1 AND seq >= $2 ORDER BY seq";
/// Recovery's work list: answered from the partial index `interlock_open_streams`.
pub const OPEN_STREAMS: &str = "SELECT name FROM interlock_streams WHERE open ORDER BY position";
const STREAMS: &str = "SELECT name FROM interlock_streams ORDER BY position";
/// Flushes the WAL up to everything committed so far. A commit flushes only if its
/// transaction wrote WAL; a transactional logical message is the smallest such write (no
/// table, no lock). Nothing is written when the WAL is already flushed.
const SYNC: &str = "BEGIN; SET LOCAL synchronous_commit = on; \
     SELECT CASE WHEN pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn() \
     THEN pg_logical_emit_message(true, 'interlock-journal', 'sync') END; COMMIT";
/// Serializes schema creation between workers opening a new database at once
/// (`CREATE TABLE IF NOT EXISTS` alone races in PostgreSQL). The key spells "intlock".
const SCHEMA_LOCK: &str = "SELECT pg_advisory_xact_lock(29670243599410027)";

impl PostgresJournal {
    /// How long a connection attempt may take when the URL does not say.
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

    /// Connects to the journal at `url` (a `postgres://` URL or a libpq `key=value` string).
    pub fn open(url: &str) -> Result<PostgresJournal, Error> {
        match crate::parse_url(url)? {
            crate::Location::Postgres(config) => PostgresJournal::connect(*config),
            crate::Location::Sqlite(_) => Err(Error::BadUrl {
                url: url.to_owned(),
                why: "a SQLite URL, not a PostgreSQL one".to_owned(),
            }),
        }
    }

    /// Connects, creates the schema if needed and checks the format version (a newer one
    /// is refused, nothing changed). The database must be UTF-8, so that entries are
    /// stored byte for byte.
    pub fn connect(mut config: Config) -> Result<PostgresJournal, Error> {
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Self::CONNECT_TIMEOUT);
        }
        let mut journal = PostgresJournal {
            name: describe(&config),
            config,
            conn: None,
            commits: 0,
            durable_commits: 0,
        };
        let name = journal.name.clone();
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            Error::Open(format!("PostgreSQL journal {name}: {what}: {e}"))
        };
        let mut client = journal
            .config
            .connect(NoTls)
            .map_err(|e| fail("cannot connect", &e))?;
        let encoding = client
            .query_one("SHOW server_encoding", &[])
            .and_then(|r| r.try_get::<_, String>(0))
            .map_err(|e| fail("cannot read the server encoding", &e))?;
        if encoding != "UTF8" {
            return Err(fail(
                "the database must be UTF8 to store entries byte for byte",
                &format!("it is {encoding} (CREATE DATABASE ... ENCODING 'UTF8')"),
            ));
        }
        set_up(&mut client, &journal.name).map_err(|e| match e {
            SetUp::Format(e) => e,
            SetUp::Sql(e) => fail("cannot set up the schema", &e),
        })?;
        journal.conn = Some(Conn::new(client).map_err(|e| fail("cannot prepare statements", &e))?);
        Ok(journal)
    }

    /// Transactions this handle committed (appends; a sync that flushed counts too).
    pub fn commits(&self) -> u64 {
        self.commits
    }

    /// Commits this handle made that waited for the WAL flush: durable appends and syncs
    /// that had something to flush.
    pub fn durable_commits(&self) -> u64 {
        self.durable_commits
    }

    /// Every entry of the journal in append order (by `ordinal`): each followed by a
    /// newline, the bytes a file journal of the same appends holds.
    pub fn entries_in_order(&mut self) -> Result<Vec<String>, JournalError> {
        self.with(|c| {
            let rows = c.client.query(IN_ORDER, &[])?;
            rows.iter()
                .map(|r| r.try_get::<_, String>(0))
                .collect::<Result<Vec<_>, postgres::Error>>()
                .map_err(Fail::from)
        })
    }

    /// The connection, made again if the last one was lost.
    fn conn(&mut self) -> Result<&mut Conn, JournalError> {
        if self.conn.as_ref().is_some_and(|c| c.client.is_closed()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let client = self.config.connect(NoTls).map_err(|e| {
                JournalError::Io(format!(
                    "PostgreSQL journal {}: cannot connect: {e}",
                    self.name
                ))
            })?;
            let conn = Conn::new(client).map_err(|e| self.pg_error(e, true))?;
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("connected above"))
    }

    /// Runs `f` on the connection. After a database error the connection is dropped (it
    /// may be lost, or left inside a failed transaction): the next call reconnects.
    fn with<T>(&mut self, f: impl FnOnce(&mut Conn) -> Result<T, Fail>) -> Result<T, JournalError> {
        let conn = self.conn()?;
        let out = f(conn);
        let lost = conn.client.is_closed();
        if matches!(out, Err(Fail::Pg(_))) {
            self.conn = None;
        }
        out.map_err(|e| match e {
            Fail::Journal(e) => e,
            Fail::Pg(e) => self.pg_error(e, lost),
        })
    }

    /// The gate's error for a failed call; `lost`: the connection is closed.
    fn pg_error(&self, e: postgres::Error, lost: bool) -> JournalError {
        let name = &self.name;
        if lost || e.is_closed() || e.as_db_error().is_none() {
            return JournalError::Io(format!(
                "PostgreSQL journal {name}: connection lost: {e}; the next call reconnects"
            ));
        }
        match e.code().map(SqlState::code) {
            // Connection (08), resources (53), operator intervention (57: a shutdown, a
            // cancel), system (58) and internal (XX) errors: the storage failed.
            Some(c)
                if ["08", "53", "57", "58", "XX"]
                    .iter()
                    .any(|p| c.starts_with(p)) =>
            {
                JournalError::Io(format!("PostgreSQL journal {name}: {e}"))
            }
            _ => JournalError::Other(format!("PostgreSQL journal {name}: {e}")),
        }
    }
}

impl Conn {
    fn new(mut client: Client) -> Result<Conn, postgres::Error> {
        let st = Statements {
            lock_stream: client.prepare(LOCK_STREAM)?,
            length: client.prepare(LENGTH)?,
            create_stream: client.prepare(CREATE_STREAM)?,
            update_stream: client.prepare(UPDATE_STREAM)?,
            insert_entries: client.prepare(INSERT_ENTRIES)?,
            read: client.prepare(READ)?,
            open_streams: client.prepare(OPEN_STREAMS)?,
            streams: client.prepare(STREAMS)?,
        };
        Ok(Conn {
            client,
            st,
            synchronous: None,
        })
    }

    /// Sets `synchronous_commit` for the session's next commits (only when it changes).
    fn set_synchronous(&mut self, on: bool) -> Result<(), postgres::Error> {
        if self.synchronous != Some(on) {
            self.client.batch_execute(if on {
                "SET synchronous_commit = on"
            } else {
                "SET synchronous_commit = off"
            })?;
            self.synchronous = Some(on);
        }
        Ok(())
    }

    fn length(&mut self, stream: &str) -> Result<u64, postgres::Error> {
        let row = self.client.query_opt(&self.st.length, &[&stream])?;
        Ok(row.map_or(0, |r| r.get::<_, i64>(0) as u64))
    }

    fn names(&mut self, open: bool) -> Result<Vec<String>, postgres::Error> {
        let st = if open {
            &self.st.open_streams
        } else {
            &self.st.streams
        };
        let rows = self.client.query(st, &[])?;
        rows.iter().map(|r| r.try_get(0)).collect()
    }

    fn append(
        &mut self,
        name: &str,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), Fail> {
        self.set_synchronous(durable)?;
        let Conn { client, st, .. } = self;
        let mut tx = client.transaction()?;
        let row = tx.query_opt(&st.lock_stream, &[&stream])?;
        let actual = row.as_ref().map_or(0, |r| r.get::<_, i64>(0) as u64);
        if actual != expected_len {
            return Err(JournalError::Conflict(actual).into());
        }
        format::validate_append(entries, stream, expected_len, open).map_err(invalid)?;
        let new_len = to_sql_int(expected_len + entries.len() as u64)?;
        let first = to_sql_int(expected_len)?;
        if row.is_none() {
            if tx.execute(&st.create_stream, &[&stream, &new_len, &open])? == 0 {
                // Another writer created the stream first; it holds at least one entry.
                let actual: i64 = tx.query_one(&st.lock_stream, &[&stream])?.get(0);
                return Err(JournalError::Conflict(actual as u64).into());
            }
        } else {
            tx.execute(&st.update_stream, &[&stream, &new_len, &open])?;
        }
        match tx.execute(&st.insert_entries, &[&stream, &first, &entries]) {
            Ok(_) => {}
            // Only a writer that skipped the row lock can get here: the unique key stops it.
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                drop(tx);
                return Err(JournalError::Conflict(self.length(stream)?).into());
            }
            Err(e) => return Err(e.into()),
        }
        tx.commit().map_err(|e| {
            JournalError::Io(format!(
                "PostgreSQL journal {name}: the commit of {} entries to stream {stream:?} was \
                 not acknowledged ({e}); they may or may not be recorded: read the stream again",
                entries.len()
            ))
        })?;
        Ok(())
    }
}

impl Journal for PostgresJournal {
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
        let name = self.name.clone();
        self.with(|c| c.append(&name, stream, expected_len, entries, durable, open))?;
        self.commits += 1;
        if durable {
            self.durable_commits += 1;
        }
        Ok(())
    }

    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        let from = i64::try_from(start).unwrap_or(i64::MAX);
        let rows = self.with(|c| {
            let rows = c.client.query(&c.st.read, &[&stream, &from])?;
            rows.iter()
                .map(|r| Ok((r.try_get::<_, i64>(0)?, r.try_get::<_, String>(1)?)))
                .collect::<Result<Vec<_>, postgres::Error>>()
                .map_err(Fail::from)
        })?;
        check_run(stream, start, rows.iter().map(|(seq, _)| *seq))?;
        Ok(rows.into_iter().map(|(_, entry)| entry).collect())
    }

    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        self.with(|c| Ok(c.length(stream)?))
    }

    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.with(|c| Ok(c.names(true)?))
    }

    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.with(|c| Ok(c.names(false)?))
    }

    /// Flushes the WAL up to every commit so far, this worker's and every other's.
    fn sync(&mut self) -> Result<(), JournalError> {
        let flushed = self.with(|c| {
            let messages = c.client.simple_query(SYNC)?;
            // The one row says whether a message was written (and so flushed by COMMIT).
            Ok(messages.iter().any(|m| match m {
                SimpleQueryMessage::Row(r) => r.get(0).is_some(),
                _ => false,
            }))
        })?;
        if flushed {
            self.commits += 1;
            self.durable_commits += 1;
        }
        Ok(())
    }
}

enum Fail {
    Journal(JournalError),
    Pg(postgres::Error),
}

impl From<JournalError> for Fail {
    fn from(e: JournalError) -> Self {
        Fail::Journal(e)
    }
}

impl From<postgres::Error> for Fail {
    fn from(e: postgres::Error) -> Self {
        Fail::Pg(e)
    }
}

enum SetUp {
    Format(Error),
    Sql(postgres::Error),
}

impl From<postgres::Error> for SetUp {
    fn from(e: postgres::Error) -> Self {
        SetUp::Sql(e)
    }
}

/// Creates the schema in one transaction under an advisory lock; a newer format is refused
/// before anything but the meta table (the same in every version) is created, and the
/// transaction is rolled back.
fn set_up(client: &mut Client, name: &str) -> Result<(), SetUp> {
    let schema = Dialect::Postgres.schema();
    let mut tx = client.transaction()?;
    tx.batch_execute(SCHEMA_LOCK)?;
    tx.batch_execute(&schema[0])?;
    let stamped: Option<String> = tx
        .query_opt(
            "SELECT value FROM interlock_meta WHERE key = $1",
            &[&FORMAT_KEY],
        )?
        .map(|r| r.get(0));
    check_format(stamped.as_deref(), &format!("PostgreSQL journal {name}"))
        .map_err(SetUp::Format)?;
    for statement in &schema[1..] {
        tx.batch_execute(statement)?;
    }
    if stamped.is_none() {
        tx.execute(
            "INSERT INTO interlock_meta (key, value) VALUES ($1, $2)",
            &[&FORMAT_KEY, &format::format_file_text()],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// `database on host:port as user`, for messages.
fn describe(config: &Config) -> String {
    use postgres::config::Host;
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
        .map(|(h, p)| match h {
            Host::Tcp(h) => format!("{h}:{p}"),
            Host::Unix(d) => format!("{}/.s.PGSQL.{p}", d.display()),
        })
        .collect();
    format!(
        "{} on {} as {}",
        config.get_dbname().unwrap_or("(default database)"),
        if hosts.is_empty() {
            "(default host)".to_owned()
        } else {
            hosts.join(",")
        },
        config.get_user().unwrap_or("(default user)")
    )
}
