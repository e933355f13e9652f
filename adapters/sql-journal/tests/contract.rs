//! The journal contract (wit/journal.wit, ARCHITECTURE.md "The journal contract") on
//! SQLite and on PostgreSQL: the one suite of `interlock-journal` (`contract::CASES`, the
//! same cases every store runs), each case on a new database, and what is these stores'
//! own: the open-streams query plan, commit counts, many workers opening a new journal at
//! once, threads and processes racing compare-and-append, file modes, the UTF-8 check.
//!
//! Run with `cargo test -p interlock-sql-journal --test contract`. The PostgreSQL cases
//! start a throwaway cluster with scripts/postgres.sh under a temporary directory and stop
//! it at the end; they are marked ignored (and say why) only when PostgreSQL is not
//! installed.
mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::{entries, Backend, Case};
use interlock_core::{Journal, JournalError};
use interlock_journal::contract::{self, Fixture, Kind, Store};
use interlock_sql_journal::{open_url, Counters, Error, SqlStore};
use libtest_mimic::Trial;

const CASES: &[(&str, Case)] = &[
    (
        "open_streams_is_an_index_query",
        open_streams_is_an_index_query,
    ),
    ("commits_are_counted", commits_are_counted),
    (
        "many_workers_open_a_new_journal_at_once",
        many_workers_open_a_new_journal_at_once,
    ),
    ("threads_race_one_stream", threads_race_one_stream),
    ("processes_race_one_stream", processes_race_one_stream),
];

/// How a child process racing on a stream learns its job (see [`race_child`]).
const RACER: &str = "INTERLOCK_SQL_JOURNAL_RACER";

/// A new database; every handle is a new connection to it, counting into one counter.
struct Database {
    url: String,
    kind: Kind,
    counters: Arc<Counters>,
}

impl Fixture for Database {
    fn kind(&self) -> Kind {
        self.kind
    }
    fn store(&mut self) -> Store {
        let store = match SqlStore::open_url(&self.url).unwrap() {
            SqlStore::Sqlite(s) => SqlStore::Sqlite(s.with_counters(self.counters.clone())),
            SqlStore::Postgres(p) => {
                SqlStore::Postgres(Box::new(p.with_counters(self.counters.clone())))
            }
        };
        Store::Sql(Box::new(store))
    }
    fn durable_writes(&self) -> Option<u64> {
        Some(self.counters.durable_commits())
    }
}

fn main() {
    if let Ok(job) = std::env::var(RACER) {
        race_child(&job);
        return;
    }
    let args = libtest_mimic::Arguments::from_args();
    let (backends, skipped) = common::backends();
    let mut trials = common::trials(CASES, &backends, skipped.is_some());
    for b in &backends {
        let kind = match &**b {
            Backend::Sqlite(_) => Kind::Sql(interlock_journal::Dialect::Sqlite),
            Backend::Postgres(_) => Kind::Sql(interlock_journal::Dialect::Postgres),
        };
        for &(name, only, case) in contract::CASES {
            if !only.applies(kind) {
                continue;
            }
            let b = b.clone();
            trials.push(Trial::test(
                format!("{}::contract::{name}", b.name()),
                move || {
                    let mut fx = Database {
                        url: b.fresh(),
                        kind,
                        counters: Arc::default(),
                    };
                    case(&mut fx).map_err(Into::into)
                },
            ));
        }
    }
    if skipped.is_some() {
        for &(name, only, _) in contract::CASES {
            if only.applies(Kind::Sql(interlock_journal::Dialect::Postgres)) {
                trials.push(
                    Trial::test(format!("postgres::contract::{name}"), || Ok(()))
                        .with_ignored_flag(true),
                );
            }
        }
    }
    trials.push(Trial::test("sqlite::files_are_owner_only", || {
        files_are_owner_only();
        Ok(())
    }));
    trials.push(Trial::test(
        "sqlite::a_newer_format_is_refused_before_anything_is_created",
        || {
            a_newer_format_is_refused_before_anything_is_created();
            Ok(())
        },
    ));
    if let [_, pg] = &backends[..] {
        let pg = pg.clone();
        trials.push(Trial::test(
            "postgres::a_database_that_is_not_utf8_is_refused",
            move || {
                a_database_that_is_not_utf8_is_refused(&pg);
                Ok(())
            },
        ));
    }
    let conclusion = libtest_mimic::run(&args, trials);
    drop(backends); // stops the cluster
    conclusion.exit();
}

/// `open-streams` is answered from the partial index of open streams, not by a scan.
fn open_streams_is_an_index_query(b: &Backend) {
    let url = b.fresh();
    let mut j = b.open(&url);
    for i in 0..1500 {
        let s = format!("effect:{i}");
        let open = i % 500 == 7;
        j.append(&s, 0, &entries(&s, 0, 1, open), false, open)
            .unwrap();
    }
    assert_eq!(
        j.open_streams().unwrap(),
        ["effect:7", "effect:507", "effect:1007"]
    );
    b.execute(&url, "ANALYZE");
    let plan = match b {
        Backend::Sqlite(_) => {
            let conn = rusqlite::Connection::open(common::sqlite_path(&url)).unwrap();
            let sql = format!("EXPLAIN QUERY PLAN {}", interlock_sql_journal::OPEN_STREAMS);
            let mut st = conn.prepare(&sql).unwrap();
            let rows = st.query_map([], |r| r.get::<_, String>("detail")).unwrap();
            rows.map(Result::unwrap).collect::<Vec<_>>()
        }
        Backend::Postgres(_) => b.query(
            &url,
            &format!("EXPLAIN {}", interlock_sql_journal::OPEN_STREAMS),
        ),
    };
    // SQLite: "SCAN interlock_streams USING INDEX interlock_open_streams" walks the index
    // (of open streams only); a scan of the table would say no index.
    assert_eq!(plan.len(), 1, "{plan:?}");
    assert!(plan[0].contains("interlock_open_streams"), "{plan:?}");
    assert!(!plan[0].contains("Seq Scan"), "{plan:?}");
}

/// A durable append is one commit that waits for the disk; a non-durable one does not wait;
/// a conflict commits nothing. On PostgreSQL, a sync leaves the WAL flushed past every
/// commit so far.
fn commits_are_counted(b: &Backend) {
    let url = b.fresh();
    let mut j = b.open_counted(&url);
    let (c0, d0) = (j.commits(), j.durable_commits());
    j.append("a", 0, &entries("a", 0, 3, true), true, true)
        .unwrap();
    assert_eq!((j.commits(), j.durable_commits()), (c0 + 1, d0 + 1));
    j.append("a", 3, &entries("a", 3, 1, true), false, true)
        .unwrap();
    j.append("b", 0, &entries("b", 0, 1, true), false, true)
        .unwrap();
    assert_eq!(
        j.durable_commits(),
        d0 + 1,
        "non-durable appends do not wait"
    );
    assert_eq!(j.commits(), c0 + 3);
    let _ = j
        .append("a", 0, &entries("a", 0, 1, true), true, true)
        .unwrap_err();
    assert_eq!(
        (j.commits(), j.durable_commits()),
        (c0 + 3, d0 + 1),
        "a conflict commits nothing"
    );
    j.sync().unwrap();
    assert_eq!(j.durable_commits(), d0 + 2);
    if let Backend::Postgres(_) = b {
        // The sync's promise, read off the server: everything so far is flushed.
        j.append("b", 1, &entries("b", 1, 1, true), false, true)
            .unwrap();
        let insert = b.query(&url, "SELECT pg_current_wal_insert_lsn()::text")[0].clone();
        j.sync().unwrap();
        let flushed = b.query(
            &url,
            &format!("SELECT (pg_current_wal_flush_lsn() >= '{insert}'::pg_lsn)::text"),
        );
        assert_eq!(flushed, ["true"]);
    }
    if let Backend::Sqlite(_) = b {
        // SQLite's sync is a commit that writes, with synchronous = FULL: with the log
        // emptied first, the sync leaves frames in it (which FULL fsyncs at commit).
        let path = common::sqlite_path(&url);
        let wal = path.with_extension("db-wal");
        rusqlite::Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
        j.sync().unwrap();
        assert!(
            std::fs::metadata(&wal).unwrap().len() > 0,
            "the sync wrote to the log"
        );
    }
}

fn many_workers_open_a_new_journal_at_once(b: &Backend) {
    let url = b.fresh();
    std::thread::scope(|scope| {
        for t in 0..6u64 {
            let url = &url;
            scope.spawn(move || {
                let mut j = open_url(url).unwrap();
                let s = format!("t{t}");
                j.append(&s, 0, &entries(&s, 0, 1, true), true, true)
                    .unwrap();
            });
        }
    });
    let mut j = b.open(&url);
    assert_eq!(j.streams().unwrap().len(), 6);
    assert_eq!(
        b.query(&url, "SELECT value FROM interlock_meta"),
        ["interlock-journal 1\n"]
    );
}

/// Each racer appends one entry at every length 0..rounds, calling `start` before each;
/// returns how many it won. A lost race must be a conflict at a longer length; anything
/// else is the error (after the remaining rounds' `start`s, so that no racer waits forever).
fn race(
    j: &mut dyn Journal,
    stream: &str,
    me: &str,
    rounds: u64,
    start: &dyn Fn(),
) -> Result<u64, String> {
    let mut wins = 0;
    let mut failed = None;
    for r in 0..rounds {
        start();
        if failed.is_some() {
            continue;
        }
        let e = format!(r#"{{"by":"{me}","open":true,"seq":{r},"stream":"{stream}"}}"#);
        match j.append(stream, r, &[e], r.is_multiple_of(2), true) {
            Ok(()) => wins += 1,
            Err(JournalError::Conflict(actual)) if actual > r => {}
            Err(e) => failed = Some(format!("{me}, round {r}: {e:?}")),
        }
    }
    failed.map_or(Ok(wins), Err)
}

/// Every round was won exactly once: the stream holds one entry per round, seq 0, 1, ...
fn check_race(b: &Backend, url: &str, stream: &str, rounds: u64, wins: u64) {
    assert_eq!(wins, rounds, "exactly one winner per round");
    let mut j = b.open(url);
    let stored = j.read(stream, 0).unwrap();
    assert_eq!(stored.len() as u64, rounds);
    for (i, e) in stored.iter().enumerate() {
        assert!(e.contains(&format!(r#""seq":{i},"#)), "{e}");
    }
}

fn threads_race_one_stream(b: &Backend) {
    let url = b.fresh();
    drop(b.open(&url));
    let rounds = 60;
    // Every round starts in all threads at once, so each round is a real race.
    let barrier = std::sync::Barrier::new(4);
    let wins: u64 = std::thread::scope(|scope| {
        let racers: Vec<_> = (0..4)
            .map(|t| {
                let (url, barrier) = (&url, &barrier);
                scope.spawn(move || {
                    let mut j = open_url(url).unwrap();
                    let me = format!("thread {t}");
                    race(&mut j, "effect:race", &me, rounds, &|| {
                        barrier.wait();
                    })
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap().unwrap()).sum()
    });
    check_race(b, &url, "effect:race", rounds, wins);
}

/// The same race between processes: this test binary started again as racers.
fn processes_race_one_stream(b: &Backend) {
    let url = b.fresh();
    drop(b.open(&url));
    let rounds = 60;
    let go = tempfile::tempdir().unwrap();
    let go_file = go.path().join("go");
    let children: Vec<_> = (0..4)
        .map(|p| {
            Command::new(std::env::current_exe().unwrap())
                .env(
                    RACER,
                    format!("{url}\t{}\tprocess {p}\t{rounds}", go_file.display()),
                )
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::fs::write(&go_file, "").unwrap();
    let wins: u64 = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "a racer failed");
            String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    check_race(b, &url, "effect:race", rounds, wins);
}

/// A racer process: opens the journal, waits for the start file, races, prints its wins.
fn race_child(job: &str) {
    let [url, go, me, rounds] = job.split('\t').collect::<Vec<_>>()[..] else {
        panic!("bad racer job {job:?}")
    };
    let mut j = open_url(url).unwrap();
    while !std::path::Path::new(go).exists() {
        std::thread::sleep(Duration::from_millis(1));
    }
    match race(&mut j, "effect:race", me, rounds.parse().unwrap(), &|| ()) {
        Ok(wins) => println!("{wins}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

/// Issue 11: a journal holds customers' orders and amounts; created owner-only.
fn files_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("a/b/journal.db");
    let mut j = open_url(&format!("sqlite://{}", db.display())).unwrap();
    j.append("a", 0, &entries("a", 0, 1, true), true, true)
        .unwrap();
    assert_eq!(mode(&tmp.path().join("a")), 0o700);
    assert_eq!(mode(&tmp.path().join("a/b")), 0o700);
    for f in ["journal.db", "journal.db-wal", "journal.db-shm"] {
        assert_eq!(mode(&tmp.path().join("a/b").join(f)), 0o600, "{f}");
    }
}

/// A newer journal is refused with the file journal's sentence, naming the database, and
/// nothing is created beside its meta table.
fn a_newer_format_is_refused_before_anything_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("journal.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE interlock_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         INSERT INTO interlock_meta VALUES ('format', 'interlock-journal 2' || char(10));",
    )
    .unwrap();
    let e = open_url(&format!("sqlite://{}", db.display()))
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(e, Error::Format(_)), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("journal format version 2 is newer"), "{text}");
    assert!(text.contains(&db.display().to_string()), "{text}");
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE name LIKE 'interlock%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(tables, ["interlock_meta"]);
}

fn a_database_that_is_not_utf8_is_refused(b: &Backend) {
    let Backend::Postgres(cluster) = b else {
        unreachable!()
    };
    cluster
        .admin()
        .batch_execute("CREATE DATABASE latin ENCODING 'LATIN1' TEMPLATE template0")
        .unwrap();
    let e = open_url(&cluster.url_of("latin")).map(|_| ()).unwrap_err();
    assert!(matches!(e, Error::Open(_)), "{e:?}");
    assert!(
        e.to_string().contains("must be UTF8") && e.to_string().contains("LATIN1"),
        "{e}"
    );
}
