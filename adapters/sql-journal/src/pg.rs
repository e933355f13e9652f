//! [`PostgresSql`]: a PostgreSQL database, shared by many machines, as the `Sql` of
//! `interlock-journal`; [`PostgresJournal`]: the journal over it, natively.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use interlock_journal::{Dialect, Rows, Sql, SqlValue, Statement, StorageError};
use postgres::types::{ToSql, Type};
use postgres::{Client, Config, NoTls};

use crate::{native_journal, Counters, Error};

/// A PostgreSQL database. Every worker (process, thread, gate instance) connects its own.
///
/// A batch is one transaction. A writing batch that is durable commits with
/// `synchronous_commit = on` (the commit returns once its WAL, and so every earlier
/// commit's, is flushed); any other with `synchronous_commit = off`: visible at once,
/// flushed in WAL order by the WAL writer or the next durable commit.
///
/// A lost connection fails the call (`io`); the next call reconnects. A batch whose commit
/// was not acknowledged fails too (its fate is unknown: the journal reads again): it is
/// never reported as done.
pub struct PostgresSql {
    config: Config,
    /// The database, for messages (never the password).
    name: String,
    conn: Option<Conn>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for PostgresSql {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSql")
            .field("database", &self.name)
            .field("connected", &self.conn.is_some())
            .field("counters", &self.counters)
            .finish()
    }
}

struct Conn {
    client: Client,
    /// Statements prepared on this connection, by text.
    prepared: HashMap<String, postgres::Statement>,
    /// The session's `synchronous_commit` (`true`: on).
    synchronous: Option<bool>,
}

impl PostgresSql {
    pub const DIALECT: Dialect = Dialect::Postgres;

    /// How long a connection attempt may take when the URL does not say.
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

    /// Connects to the database at `url` (a `postgres://` URL or a libpq `key=value` string).
    pub fn open(url: &str) -> Result<PostgresSql, Error> {
        match crate::parse_url(url)? {
            crate::Location::Postgres(config) => PostgresSql::connect(*config),
            crate::Location::Sqlite(_) => Err(Error::BadUrl {
                url: url.to_owned(),
                why: "a SQLite URL, not a PostgreSQL one".to_owned(),
            }),
        }
    }

    /// Connects. The database must be UTF-8, so that entries are stored byte for byte.
    pub fn connect(mut config: Config) -> Result<PostgresSql, Error> {
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Self::CONNECT_TIMEOUT);
        }
        let name = describe(&config);
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            Error::Open(format!("PostgreSQL journal {name}: {what}: {e}"))
        };
        let mut client = config
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
        Ok(PostgresSql {
            config,
            name,
            conn: Some(Conn {
                client,
                prepared: HashMap::new(),
                synchronous: None,
            }),
            counters: Arc::default(),
        })
    }

    /// This handle counting into `counters` (shared with other handles).
    pub fn with_counters(mut self, counters: Arc<Counters>) -> PostgresSql {
        self.counters = counters;
        self
    }

    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    pub fn name(&self) -> String {
        format!("PostgreSQL journal {}", self.name)
    }

    /// The connection, made again if the last one was lost.
    fn conn(&mut self) -> Result<&mut Conn, StorageError> {
        if self.conn.as_ref().is_some_and(|c| c.client.is_closed()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let client = self.config.connect(NoTls).map_err(|e| {
                StorageError::Io(format!(
                    "PostgreSQL journal {}: cannot connect: {e}",
                    self.name
                ))
            })?;
            self.conn = Some(Conn {
                client,
                prepared: HashMap::new(),
                synchronous: None,
            });
        }
        Ok(self.conn.as_mut().expect("connected above"))
    }

    /// The storage error for a failed call; `lost`: the connection is closed.
    fn pg_error(&self, e: &postgres::Error, lost: bool) -> StorageError {
        let name = &self.name;
        if lost || e.is_closed() || e.as_db_error().is_none() {
            return StorageError::Io(format!(
                "PostgreSQL journal {name}: connection lost: {e}; the next call reconnects"
            ));
        }
        StorageError::Io(format!("PostgreSQL journal {name}: {}", text(e)))
    }
}

/// A PostgreSQL error with the server's message (the error's own Display says only "db
/// error").
fn text(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {} ({})", e, db.message(), db.code().code()),
        None => e.to_string(),
    }
}

enum Fail {
    Pg(postgres::Error),
    Unexpected(u32),
    Unacknowledged(postgres::Error),
    Other(String),
}

impl From<postgres::Error> for Fail {
    fn from(e: postgres::Error) -> Self {
        Fail::Pg(e)
    }
}

impl Conn {
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

    fn run(
        &mut self,
        statements: &[Statement],
        write: bool,
        durable: bool,
    ) -> Result<Vec<Rows>, Fail> {
        if write {
            self.set_synchronous(durable)?;
        }
        let Conn {
            client, prepared, ..
        } = self;
        let mut tx = client.transaction()?;
        let mut out = Vec::with_capacity(statements.len());
        for (i, s) in statements.iter().enumerate() {
            // Prepared in order, inside the transaction: a statement may name a table an
            // earlier one of the batch created.
            let st = match prepared.get(&s.sql) {
                Some(st) => st.clone(),
                None => {
                    let st = tx.prepare(&s.sql)?;
                    prepared.insert(s.sql.clone(), st.clone());
                    st
                }
            };
            let st = &st;
            let params: Vec<Box<dyn ToSql + Sync>> = s
                .params
                .iter()
                .map(|p| -> Box<dyn ToSql + Sync> {
                    match p {
                        SqlValue::Null => Box::new(None::<String>),
                        SqlValue::Integer(n) => Box::new(*n),
                        SqlValue::Text(t) => Box::new(t.clone()),
                    }
                })
                .collect();
            let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|b| b.as_ref()).collect();
            if st.columns().is_empty() {
                let changed = tx.execute(st, &refs)?;
                if s.expect_changes.is_some_and(|want| want != changed) {
                    // Dropping the transaction rolls it back.
                    return Err(Fail::Unexpected(i as u32));
                }
                out.push(Vec::new());
            } else {
                let rows = tx.query(st, &refs)?;
                let mut got = Vec::with_capacity(rows.len());
                for row in &rows {
                    let mut cols = Vec::with_capacity(row.len());
                    for (c, col) in row.columns().iter().enumerate() {
                        let t = col.type_();
                        cols.push(if [Type::INT8, Type::INT4, Type::INT2].contains(t) {
                            let v: Option<i64> = match *t {
                                Type::INT8 => row.try_get(c)?,
                                Type::INT4 => row.try_get::<_, Option<i32>>(c)?.map(i64::from),
                                _ => row.try_get::<_, Option<i16>>(c)?.map(i64::from),
                            };
                            v.map_or(SqlValue::Null, SqlValue::Integer)
                        } else if *t == Type::BOOL {
                            let v: Option<bool> = row.try_get(c)?;
                            v.map_or(SqlValue::Null, |b| SqlValue::Integer(i64::from(b)))
                        } else if [Type::TEXT, Type::VARCHAR, Type::NAME, Type::BPCHAR].contains(t) {
                            let v: Option<String> = row.try_get(c)?;
                            v.map_or(SqlValue::Null, SqlValue::Text)
                        } else {
                            return Err(Fail::Other(format!(
                                "column {c} of statement {i} is of type {t}, neither integer nor text"
                            )));
                        });
                    }
                    got.push(cols);
                }
                out.push(got);
            }
        }
        tx.commit().map_err(Fail::Unacknowledged)?;
        Ok(out)
    }
}

impl Sql for PostgresSql {
    fn sql_batch(
        &mut self,
        statements: &[Statement],
        write: bool,
        durable: bool,
    ) -> Result<Vec<Rows>, StorageError> {
        let conn = self.conn()?;
        let out = conn.run(statements, write, durable);
        let lost = conn.client.is_closed();
        match out {
            Ok(rows) => {
                if write {
                    self.counters.committed(durable);
                }
                Ok(rows)
            }
            Err(Fail::Unexpected(i)) => Err(StorageError::UnexpectedChanges(i)),
            Err(Fail::Other(m)) => Err(StorageError::Io(format!(
                "PostgreSQL journal {}: {m}",
                self.name
            ))),
            Err(Fail::Pg(e)) => {
                // The connection may be lost, or left inside a failed transaction: the next
                // call connects again.
                self.conn = None;
                Err(self.pg_error(&e, lost))
            }
            Err(Fail::Unacknowledged(e)) => {
                self.conn = None;
                Err(StorageError::Io(format!(
                    "PostgreSQL journal {}: the commit of a batch of {} statements was not \
                     acknowledged ({e}); it may or may not have committed: read the journal again",
                    self.name,
                    statements.len()
                )))
            }
        }
    }
}

/// The journal in a PostgreSQL database, natively: `interlock_journal::SqlJournal` over
/// [`PostgresSql`].
pub struct PostgresJournal {
    inner: interlock_journal::SqlJournal<PostgresSql>,
    counters: Arc<Counters>,
    name: String,
}

impl std::fmt::Debug for PostgresJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresJournal")
            .field("database", &self.name)
            .field("commits", &self.commits())
            .field("durable_commits", &self.durable_commits())
            .finish()
    }
}

impl PostgresJournal {
    /// How long a connection attempt may take when the URL does not say.
    pub const CONNECT_TIMEOUT: Duration = PostgresSql::CONNECT_TIMEOUT;

    /// Connects to the journal at `url` (a `postgres://` URL or a libpq `key=value` string).
    pub fn open(url: &str) -> Result<PostgresJournal, Error> {
        PostgresJournal::over(PostgresSql::open(url)?)
    }

    /// Connects, creates the schema if needed and checks the format version (a newer one
    /// is refused, nothing changed).
    pub fn connect(config: Config) -> Result<PostgresJournal, Error> {
        PostgresJournal::over(PostgresSql::connect(config)?)
    }
}

native_journal!(PostgresJournal, PostgresSql);

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
