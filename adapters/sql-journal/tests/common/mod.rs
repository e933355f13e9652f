//! What the test binaries share: entries, the two backends behind journal URLs, and a
//! throwaway PostgreSQL cluster started with the project's own scripts/postgres.sh.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use interlock_core::Journal;
pub use interlock_sql_journal::testing::Cluster;
use interlock_sql_journal::{open_url, PostgresJournal, SqlJournal, SqliteJournal};
use libtest_mimic::Trial;
use tempfile::TempDir;

pub mod world;

pub const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres.sh");

/// A canonical-looking entry (sorted keys, no spaces), as the file journal's tests use.
pub fn entry(stream: &str, seq: u64, open: bool) -> String {
    format!(r#"{{"data":"payload {stream} {seq}","open":{open},"seq":{seq},"stream":"{stream}"}}"#)
}

pub fn entries(stream: &str, from: u64, n: u64, open: bool) -> Vec<String> {
    (from..from + n).map(|i| entry(stream, i, open)).collect()
}

/// One of the two backends, making new journals and reaching their tables directly.
pub enum Backend {
    Sqlite(TempDir),
    Postgres(Cluster),
}

impl Backend {
    pub fn sqlite() -> Backend {
        Backend::Sqlite(tempfile::tempdir().unwrap())
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// The URL of a new, empty journal (nothing created yet for SQLite).
    pub fn fresh(&self) -> String {
        match self {
            Backend::Sqlite(dir) => {
                static N: AtomicUsize = AtomicUsize::new(0);
                let n = N.fetch_add(1, Ordering::SeqCst);
                format!("sqlite://{}/j{n}/journal.db", dir.path().display())
            }
            Backend::Postgres(cluster) => cluster.database(),
        }
    }

    pub fn open(&self, url: &str) -> Box<dyn Journal + Send> {
        Box::new(self.open_sql(url))
    }

    pub fn open_sql(&self, url: &str) -> SqlJournal {
        open_url(url).unwrap_or_else(|e| panic!("open {url}: {e}"))
    }

    /// Opens the backend's own type, to see what it counts.
    pub fn open_counted(&self, url: &str) -> Box<dyn Counted> {
        match self {
            Backend::Sqlite(_) => Box::new(SqliteJournal::open(&sqlite_path(url)).unwrap()),
            Backend::Postgres(_) => Box::new(PostgresJournal::open(url).unwrap()),
        }
    }

    /// Runs SQL statements on the journal's database, past the journal.
    pub fn execute(&self, url: &str, sql: &str) {
        match self {
            Backend::Sqlite(_) => rusqlite::Connection::open(sqlite_path(url))
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
            Backend::Postgres(_) => postgres::Client::connect(url, postgres::NoTls)
                .unwrap()
                .batch_execute(sql)
                .unwrap(),
        }
    }

    /// The first column of every row of `sql`, as text.
    pub fn query(&self, url: &str, sql: &str) -> Vec<String> {
        match self {
            Backend::Sqlite(_) => {
                let conn = rusqlite::Connection::open(sqlite_path(url)).unwrap();
                let mut st = conn.prepare(sql).unwrap();
                let rows = st
                    .query_map([], |r| {
                        let v: rusqlite::types::Value = r.get(0)?;
                        Ok(match v {
                            rusqlite::types::Value::Text(t) => t,
                            other => format!("{other:?}"),
                        })
                    })
                    .unwrap();
                rows.map(Result::unwrap).collect()
            }
            Backend::Postgres(_) => postgres::Client::connect(url, postgres::NoTls)
                .unwrap()
                .simple_query(sql)
                .unwrap()
                .into_iter()
                .filter_map(|m| match m {
                    postgres::SimpleQueryMessage::Row(r) => r.get(0).map(String::from),
                    _ => None,
                })
                .collect(),
        }
    }
}

pub fn sqlite_path(url: &str) -> PathBuf {
    PathBuf::from(url.strip_prefix("sqlite://").expect("a sqlite URL"))
}

/// A journal that says how many commits it made and how many waited for the disk.
pub trait Counted: Journal + Send {
    fn commits(&self) -> u64;
    fn durable_commits(&self) -> u64;
}

impl Counted for SqliteJournal {
    fn commits(&self) -> u64 {
        SqliteJournal::commits(self)
    }
    fn durable_commits(&self) -> u64 {
        SqliteJournal::durable_commits(self)
    }
}

impl Counted for PostgresJournal {
    fn commits(&self) -> u64 {
        PostgresJournal::commits(self)
    }
    fn durable_commits(&self) -> u64 {
        PostgresJournal::durable_commits(self)
    }
}

/// Both backends for a test binary: SQLite always, PostgreSQL unless it is not installed
/// (then the reason, which the binary prints and marks the PostgreSQL tests ignored with).
pub fn backends() -> (Vec<Arc<Backend>>, Option<String>) {
    let sqlite = Arc::new(Backend::sqlite());
    match Cluster::start() {
        Ok(c) => (vec![sqlite, Arc::new(Backend::Postgres(c))], None),
        Err(why) => {
            eprintln!("PostgreSQL tests skipped: {why}");
            (vec![sqlite], Some(why))
        }
    }
}

/// A case run on one backend.
pub type Case = fn(&Backend);

/// The trials of `cases` on every backend, named `backend::case`; the PostgreSQL ones are
/// ignored when PostgreSQL is not installed.
pub fn trials(
    cases: &[(&'static str, Case)],
    backends: &[Arc<Backend>],
    skipped: bool,
) -> Vec<Trial> {
    let mut out = Vec::new();
    for b in backends {
        for &(name, case) in cases {
            let b = b.clone();
            out.push(Trial::test(format!("{}::{name}", b.name()), move || {
                case(&b);
                Ok(())
            }));
        }
    }
    if skipped {
        for &(name, _) in cases {
            out.push(Trial::test(format!("postgres::{name}"), || Ok(())).with_ignored_flag(true));
        }
    }
    out
}
