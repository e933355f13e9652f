//! The journal contract (wit/journal.wit, ARCHITECTURE.md "The journal contract") on
//! SQLite and on PostgreSQL: every case runs on both, with `MemJournal` as the reference
//! where there is one answer to compare.
//!
//! Run with `cargo test -p interlock-sql-journal --test contract`. The PostgreSQL cases
//! start a throwaway cluster with scripts/postgres.sh under a temporary directory and stop
//! it at the end; they are marked ignored (and say why) only when PostgreSQL is not
//! installed.
mod common;

use std::process::Command;
use std::time::Duration;

use common::{entries, entry, Backend, Case};
use interlock_core::{Journal, JournalError, MemJournal};
use interlock_file_journal::FileJournal;
use interlock_sql_journal::{open_url, Error};

const CASES: &[(&str, Case)] = &[
    (
        "append_read_length_round_trip",
        append_read_length_round_trip,
    ),
    ("first_append_order", first_append_order),
    ("conflict_writes_nothing", conflict_writes_nothing),
    (
        "empty_batch_is_a_no_op_or_a_sync",
        empty_batch_is_a_no_op_or_a_sync,
    ),
    (
        "bad_appends_are_refused_like_the_file_journal",
        bad_appends_are_refused_like_the_file_journal,
    ),
    ("same_answers_as_mem_journal", same_answers_as_mem_journal),
    (
        "reopen_and_other_handles_see_everything",
        reopen_and_other_handles_see_everything,
    ),
    (
        "entries_are_stored_byte_for_byte",
        entries_are_stored_byte_for_byte,
    ),
    (
        "format_version_recorded_and_newer_refused",
        format_version_recorded_and_newer_refused,
    ),
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

fn main() {
    if let Ok(job) = std::env::var(RACER) {
        race_child(&job);
        return;
    }
    let args = libtest_mimic::Arguments::from_args();
    let (backends, skipped) = common::backends();
    let mut trials = common::trials(CASES, &backends, skipped.is_some());
    trials.push(libtest_mimic::Trial::test(
        "sqlite::files_are_owner_only",
        || {
            files_are_owner_only();
            Ok(())
        },
    ));
    if let [_, pg] = &backends[..] {
        let pg = pg.clone();
        trials.push(libtest_mimic::Trial::test(
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

/// Streams, open streams, and each stream's length and entries.
type Snapshot = (Vec<String>, Vec<String>, Vec<(u64, Vec<String>)>);

fn snapshot(j: &mut dyn Journal) -> Snapshot {
    let streams = j.streams().unwrap();
    let contents = streams
        .iter()
        .map(|s| (j.length(s).unwrap(), j.read(s, 0).unwrap()))
        .collect();
    (streams, j.open_streams().unwrap(), contents)
}

fn append_read_length_round_trip(b: &Backend) {
    let mut j = b.open(&b.fresh());
    j.append("a", 0, &entries("a", 0, 2, true), false, true)
        .unwrap();
    j.append("b", 0, &entries("b", 0, 1, true), true, true)
        .unwrap();
    j.append("a", 2, &entries("a", 2, 1, false), false, false)
        .unwrap();
    assert_eq!(j.length("a").unwrap(), 3);
    assert_eq!(j.length("b").unwrap(), 1);
    assert_eq!(j.length("nope").unwrap(), 0);
    let mut all_a = entries("a", 0, 2, true);
    all_a.push(entry("a", 2, false));
    assert_eq!(j.read("a", 0).unwrap(), all_a);
    assert_eq!(j.read("a", 1).unwrap(), all_a[1..]);
    assert!(j.read("a", 3).unwrap().is_empty());
    assert!(j.read("a", 99).unwrap().is_empty());
    assert!(j.read("a", u64::MAX).unwrap().is_empty());
    assert_eq!(j.read("b", 0).unwrap(), entries("b", 0, 1, true));
    assert!(j.read("nope", 0).unwrap().is_empty());
    j.sync().unwrap();
}

fn first_append_order(b: &Backend) {
    let mut j = b.open(&b.fresh());
    assert!(j.streams().unwrap().is_empty());
    assert!(j.open_streams().unwrap().is_empty());
    for s in ["zeta", "alpha", "mid"] {
        j.append(s, 0, &entries(s, 0, 1, true), false, true)
            .unwrap();
    }
    assert_eq!(j.streams().unwrap(), ["zeta", "alpha", "mid"]);
    assert_eq!(j.open_streams().unwrap(), ["zeta", "alpha", "mid"]);
    j.append("alpha", 1, &entries("alpha", 1, 1, false), false, false)
        .unwrap();
    assert_eq!(j.open_streams().unwrap(), ["zeta", "mid"]);
    j.append("zeta", 1, &entries("zeta", 1, 2, false), true, false)
        .unwrap();
    assert_eq!(j.open_streams().unwrap(), ["mid"]);
    // Closed, then open again: back at its first-append place.
    j.append("alpha", 2, &entries("alpha", 2, 1, true), false, true)
        .unwrap();
    assert_eq!(j.open_streams().unwrap(), ["alpha", "mid"]);
    // Created closed: listed in streams only.
    j.append("closed", 0, &entries("closed", 0, 1, false), false, false)
        .unwrap();
    assert_eq!(j.streams().unwrap(), ["zeta", "alpha", "mid", "closed"]);
    assert_eq!(j.open_streams().unwrap(), ["alpha", "mid"]);
}

fn conflict_writes_nothing(b: &Backend) {
    let url = b.fresh();
    let mut j = b.open(&url);
    assert_eq!(
        j.append("a", 1, &entries("a", 1, 1, true), true, true),
        Err(JournalError::Conflict(0))
    );
    assert!(
        j.streams().unwrap().is_empty(),
        "a lost append creates no stream"
    );
    j.append("a", 0, &entries("a", 0, 2, true), true, true)
        .unwrap();
    for expected in [0, 1, 3, u64::MAX] {
        let batch = if expected == u64::MAX {
            vec![entry("a", 0, true)]
        } else {
            entries("a", expected, 1, false)
        };
        assert_eq!(
            j.append("a", expected, &batch, true, false),
            Err(JournalError::Conflict(2)),
            "expected {expected}"
        );
    }
    assert_eq!(j.read("a", 0).unwrap(), entries("a", 0, 2, true));
    assert_eq!(
        j.open_streams().unwrap(),
        ["a"],
        "a lost append changes no open flag"
    );
    assert_eq!(
        b.query(&url, "SELECT count(*) FROM interlock_entries"),
        [match b {
            Backend::Sqlite(_) => "Integer(2)",
            Backend::Postgres(_) => "2",
        }]
    );
}

fn empty_batch_is_a_no_op_or_a_sync(b: &Backend) {
    let mut j = b.open(&b.fresh());
    j.append("a", 0, &[], true, true).unwrap();
    assert!(
        j.streams().unwrap().is_empty(),
        "an empty append creates no stream"
    );
    j.append("a", 0, &entries("a", 0, 1, true), false, true)
        .unwrap();
    j.append("a", 1, &[], false, false).unwrap();
    assert_eq!(
        j.open_streams().unwrap(),
        ["a"],
        "an empty append does not change open"
    );
    j.append("a", 1, &[], true, false).unwrap();
    assert_eq!(
        j.append("a", 0, &[], true, true),
        Err(JournalError::Conflict(1))
    );
    assert_eq!(j.length("a").unwrap(), 1);
}

/// Every bad batch is refused with the file journal's own error, word for word, and
/// leaves nothing behind.
fn bad_appends_are_refused_like_the_file_journal(b: &Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let mut file = FileJournal::open(&tmp.path().join("j")).unwrap();
    let mut j = b.open(&b.fresh());
    for journal in [&mut file as &mut dyn Journal, &mut *j] {
        journal
            .append("a", 0, &entries("a", 0, 1, true), true, true)
            .unwrap();
    }
    let with_newline = format!(
        "{}\n{}",
        entry("a", 1, true),
        r#"{"open":true,"seq":2,"stream":"a"}"#
    );
    let bad_batches: Vec<(&str, Vec<String>)> = vec![
        ("newline", vec![with_newline]),
        ("stream", vec![entry("b", 1, true)]),
        ("seq", vec![entry("a", 1, true), entry("a", 3, true)]),
        ("open", vec![entry("a", 1, true), entry("a", 2, false)]),
        ("JSON object", vec!["[1,2]".to_owned()]),
        ("not a journal entry", vec![r#"{"open":true}"#.to_owned()]),
        ("JSON object", vec![String::new()]),
        (
            "not a journal entry",
            vec![r#"{"open":true,"seq":"1","stream":"a"}"#.to_owned()],
        ),
    ];
    for (why, batch) in bad_batches {
        let want = file
            .append("a", 1, &batch, true, true)
            .map_err(interlock_file_journal::journal_error);
        let got = j.append("a", 1, &batch, true, true);
        match &got {
            Err(JournalError::Other(m)) => assert!(m.contains(why), "{m:?} should mention {why:?}"),
            other => panic!("{why}: expected a refusal, got {other:?}"),
        }
        assert_eq!(got, want, "{why}: refused as the file journal refuses it");
        assert_eq!(j.length("a").unwrap(), 1, "{why}: nothing written");
        assert_eq!(j.read("a", 0).unwrap(), entries("a", 0, 1, true));
        assert_eq!(j.streams().unwrap(), ["a"]);
    }
    // The handle is still usable.
    j.append("a", 1, &entries("a", 1, 1, true), true, true)
        .unwrap();
    assert_eq!(j.length("a").unwrap(), 2);
}

/// A mixed run of appends gives MemJournal's answers, the reference backend's, and the
/// same journal in append order (its `log`: what a file journal's bytes hold).
fn same_answers_as_mem_journal(b: &Backend) {
    let mut mem = MemJournal::new();
    let mut j = b.open_sql(&b.fresh());
    let streams = ["effect:x", "lease:l", "cap:c", "effect:y", "approval:a"];
    let mut step = 0u64;
    for round in 0..6u64 {
        for (i, s) in streams.iter().enumerate() {
            step += 1;
            if (round + i as u64) % 3 == 2 {
                continue;
            }
            let len = mem.length(s).unwrap();
            let open = !step.is_multiple_of(4);
            let n = 1 + step % 3;
            let batch = entries(s, len, n, open);
            let durable = step.is_multiple_of(2);
            assert_eq!(
                j.append(s, len, &batch, durable, open),
                mem.append(s, len, &batch, durable, open)
            );
            // A stale writer loses the same way.
            if len > 0 {
                let stale = entries(s, len - 1, 1, open);
                assert_eq!(
                    j.append(s, len - 1, &stale, true, open),
                    mem.append(s, len - 1, &stale, true, open)
                );
            }
        }
        assert_eq!(snapshot(&mut j), snapshot(&mut mem), "round {round}");
    }
    let in_order: Vec<String> = mem.log.iter().map(|(_, e)| e.clone()).collect();
    assert_eq!(j.entries_in_order().unwrap(), in_order);
}

fn reopen_and_other_handles_see_everything(b: &Backend) {
    let url = b.fresh();
    let before = {
        let mut j = b.open(&url);
        let mut other = b.open(&url);
        j.append("s2", 0, &entries("s2", 0, 3, true), false, true)
            .unwrap();
        // A second handle (another worker) sees it at once and appends after it.
        assert_eq!(other.length("s2").unwrap(), 3);
        other
            .append("s1", 0, &entries("s1", 0, 1, true), false, true)
            .unwrap();
        j.append("s2", 3, &entries("s2", 3, 1, false), false, false)
            .unwrap();
        other
            .append("s3", 0, &entries("s3", 0, 2, true), true, true)
            .unwrap();
        // Dropped with a non-durable append pending.
        j.append("s1", 1, &entries("s1", 1, 1, true), false, true)
            .unwrap();
        assert_eq!(snapshot(&mut *other), snapshot(&mut *j));
        snapshot(&mut *j)
    };
    let mut j = b.open(&url);
    assert_eq!(snapshot(&mut *j), before);
    assert_eq!(j.streams().unwrap(), ["s2", "s1", "s3"]);
    assert_eq!(j.open_streams().unwrap(), ["s1", "s3"]);
}

fn entries_are_stored_byte_for_byte(b: &Backend) {
    let url = b.fresh();
    let mut j = b.open(&url);
    let odd = "b \"q\" é ☃ 𝄞 \\ \u{2028}";
    let stream_json = serde_json::to_string(odd).unwrap();
    let big = "x".repeat(300_000);
    let batch = vec![
        format!(
            r#"{{"nested":{{"k":[1,2.5e-7,"é\u00e9\t"]}},"open":false,"seq":0,"stream":{stream_json}}}"#
        ),
        format!(r#"{{"big":"{big}","open":false,"seq":1,"stream":{stream_json}}}"#),
        // Not canonical (spaces, key order): a backend stores what it is given.
        format!(r#"{{ "stream" : {stream_json}, "seq" : 2, "open" : false }}"#),
    ];
    j.append(odd, 0, &batch, true, false).unwrap();
    assert_eq!(j.read(odd, 0).unwrap(), batch);
    assert_eq!(j.streams().unwrap(), [odd]);
    let stored = b.query(&url, "SELECT entry FROM interlock_entries ORDER BY seq");
    assert_eq!(stored, batch, "the rows hold the bytes given");
    if let Backend::Sqlite(_) = b {
        assert_eq!(
            b.query(&url, "SELECT DISTINCT typeof(entry) FROM interlock_entries"),
            ["text"]
        );
    }
    drop(j);
    assert_eq!(b.open(&url).read(odd, 1).unwrap(), batch[1..]);
}

fn format_version_recorded_and_newer_refused(b: &Backend) {
    let url = b.fresh();
    drop(b.open(&url));
    assert_eq!(
        b.query(
            &url,
            "SELECT value FROM interlock_meta WHERE key = 'format'"
        ),
        ["interlock-journal 1\n"]
    );
    drop(b.open(&url)); // and an existing one opens as it is

    for (text, want) in [
        (
            "interlock-journal 2\n",
            "journal format version 2 is newer than this reader understands (1); upgrade Interlock",
        ),
        (
            "interlock-journal one\n",
            "is not a format version: its version is not a decimal number",
        ),
    ] {
        let url = b.fresh();
        if let Backend::Sqlite(_) = b {
            std::fs::create_dir_all(common::sqlite_path(&url).parent().unwrap()).unwrap();
        }
        let literal = text.replace('\n', "' || chr(10) || '");
        let literal = match b {
            Backend::Sqlite(_) => literal.replace("chr(10)", "char(10)"),
            Backend::Postgres(_) => literal,
        };
        b.execute(
            &url,
            &format!(
                "CREATE TABLE interlock_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 INSERT INTO interlock_meta VALUES ('format', '{literal}');"
            ),
        );
        let e = open_url(&url).map(|_| ()).unwrap_err();
        assert!(matches!(e, Error::Format(_)), "{e:?}");
        assert!(e.to_string().contains(want), "{e}");
        // Nothing was created beside the meta table, nor changed in it.
        let tables = match b {
            Backend::Sqlite(_) => "SELECT name FROM sqlite_master WHERE name LIKE 'interlock%'",
            Backend::Postgres(_) => {
                "SELECT tablename FROM pg_tables WHERE tablename LIKE 'interlock%'"
            }
        };
        assert_eq!(b.query(&url, tables), ["interlock_meta"]);
        assert_eq!(b.query(&url, "SELECT value FROM interlock_meta"), [text]);
    }
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
            let sql = format!(
                "EXPLAIN QUERY PLAN {}",
                interlock_sql_journal::sqlite::OPEN_STREAMS
            );
            let mut st = conn.prepare(&sql).unwrap();
            let rows = st.query_map([], |r| r.get::<_, String>("detail")).unwrap();
            rows.map(Result::unwrap).collect::<Vec<_>>()
        }
        Backend::Postgres(_) => b.query(
            &url,
            &format!("EXPLAIN {}", interlock_sql_journal::pg::OPEN_STREAMS),
        ),
    };
    // SQLite: "SCAN interlock_streams USING INDEX interlock_open_streams" walks the index
    // (of open streams only); a scan of the table would say no index.
    assert_eq!(plan.len(), 1, "{plan:?}");
    assert!(plan[0].contains("interlock_open_streams"), "{plan:?}");
    assert!(!plan[0].contains("Seq Scan"), "{plan:?}");
}

/// A durable append is one commit that waits for the disk; a non-durable one does not wait.
fn commits_are_counted(b: &Backend) {
    let url = b.fresh();
    let mut j = b.open_counted(&url);
    j.append("a", 0, &entries("a", 0, 3, true), true, true)
        .unwrap();
    assert_eq!((j.commits(), j.durable_commits()), (1, 1));
    j.append("a", 3, &entries("a", 3, 1, true), false, true)
        .unwrap();
    j.append("b", 0, &entries("b", 0, 1, true), false, true)
        .unwrap();
    assert_eq!(j.durable_commits(), 1, "non-durable appends do not wait");
    assert_eq!(j.commits(), 3);
    let _ = j
        .append("a", 0, &entries("a", 0, 1, true), true, true)
        .unwrap_err();
    assert_eq!(
        (j.commits(), j.durable_commits()),
        (3, 1),
        "a conflict commits nothing"
    );
    j.sync().unwrap();
    match b {
        // One fsync of the log, whatever is pending (another process's appends may be).
        Backend::Sqlite(_) => assert_eq!(j.durable_commits(), 2),
        // A flush only when the WAL is not flushed already (another worker may have).
        Backend::Postgres(_) => assert!((1..=2).contains(&j.durable_commits())),
    }
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
