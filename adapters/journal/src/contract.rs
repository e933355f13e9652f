//! The journal contract (`wit/journal.wit`, ARCHITECTURE.md "The journal contract") as one
//! suite of cases, run against every store: the file journal over std files and over memory,
//! the SQL journal over SQLite and PostgreSQL (`adapters/file-journal`, `adapters/journal`,
//! `adapters/sql-journal` run it natively), and, through a component that imports
//! `storage`, over each host's own storage (README.md, "The contract suite").
//!
//! A case is a function of a [`Fixture`]: a new, empty store of one kind, which hands out
//! handles on itself ([`Fixture::store`]). Two handles are two workers of one journal: two
//! gate instances sharing a host's file store, or two connections to one database. A case
//! reaches the store past the journal only through the same primitive calls a host
//! provides (to tear a file, or to write a meta row by hand), so the same case runs
//! wherever the storage interface does. A case answers `Err(why)` rather than panicking, so
//! that a component running it can say why.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use interlock_core::{Journal, JournalError, MemJournal};

use crate::file::{Error as FileError, FileJournal};
use crate::memory::MemFiles;
use crate::sql::{Dialect, SqlJournal};
use crate::storage::{Files, Sql, SqlValue, Statement};
use crate::{FORMAT_FILE, INDEX_FILE, JOURNAL_FILE, TORN_PREFIX};

/// Which journal a store holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Sql(Dialect),
}

/// A handle on a store.
pub enum Store {
    Files(Box<dyn Files>),
    Sql(Box<dyn Sql>),
}

/// A new, empty store for one case.
pub trait Fixture {
    fn kind(&self) -> Kind;
    /// A new handle on the store: another worker's (all handles share the store).
    fn store(&mut self) -> Store;
    /// Durable writes the store made so far, every handle's (fdatasyncs; commits that
    /// waited for the disk), if it counts them.
    fn durable_writes(&self) -> Option<u64> {
        None
    }
}

/// A case: `Err` says what did not hold.
pub type Case = fn(&mut dyn Fixture) -> Result<(), String>;

/// Which stores a case applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Only {
    All,
    File,
    Sql,
}

impl Only {
    pub fn applies(self, kind: Kind) -> bool {
        match self {
            Only::All => true,
            Only::File => kind == Kind::File,
            Only::Sql => matches!(kind, Kind::Sql(_)),
        }
    }
}

/// Every case: its name, the stores it applies to, and the case.
pub const CASES: &[(&str, Only, Case)] = &[
    (
        "append_read_length_round_trip",
        Only::All,
        append_read_length_round_trip,
    ),
    ("first_append_order", Only::All, first_append_order),
    (
        "conflict_writes_nothing",
        Only::All,
        conflict_writes_nothing,
    ),
    (
        "empty_batch_is_a_no_op_or_a_sync",
        Only::All,
        empty_batch_is_a_no_op_or_a_sync,
    ),
    (
        "bad_appends_are_refused_with_one_text",
        Only::All,
        bad_appends_are_refused_with_one_text,
    ),
    (
        "same_answers_as_mem_journal",
        Only::All,
        same_answers_as_mem_journal,
    ),
    (
        "reopen_and_other_handles_see_everything",
        Only::All,
        reopen_and_other_handles_see_everything,
    ),
    (
        "two_handles_race_compare_and_append",
        Only::All,
        two_handles_race_compare_and_append,
    ),
    (
        "entries_are_stored_byte_for_byte",
        Only::All,
        entries_are_stored_byte_for_byte,
    ),
    (
        "durable_writes_are_counted",
        Only::All,
        durable_writes_are_counted,
    ),
    (
        "torn_tail_is_reported_and_repaired",
        Only::File,
        torn_tail_is_reported_and_repaired,
    ),
    (
        "torn_tail_without_any_complete_line",
        Only::File,
        torn_tail_without_any_complete_line,
    ),
    (
        "repair_of_a_store_without_journal_does_nothing",
        Only::File,
        repair_of_a_store_without_journal_does_nothing,
    ),
    (
        "corrupt_lines_are_reported_with_their_line_number",
        Only::File,
        corrupt_lines_are_reported_with_their_line_number,
    ),
    (
        "invalid_entries_write_nothing",
        Only::File,
        invalid_entries_write_nothing,
    ),
    (
        "a_new_file_journal_records_its_format_version",
        Only::File,
        a_new_file_journal_records_its_format_version,
    ),
    (
        "a_newer_or_unknown_file_format_is_refused",
        Only::File,
        a_newer_or_unknown_file_format_is_refused,
    ),
    (
        "a_checkpoint_reopens_to_the_same_index",
        Only::File,
        a_checkpoint_reopens_to_the_same_index,
    ),
    (
        "a_second_checkpoint_merges_the_first_and_the_tail",
        Only::File,
        a_second_checkpoint_merges_the_first_and_the_tail,
    ),
    (
        "a_checkpoint_that_does_not_match_is_ignored",
        Only::File,
        a_checkpoint_that_does_not_match_is_ignored,
    ),
    (
        "a_checkpoint_replaced_by_another_handle",
        Only::File,
        a_checkpoint_replaced_by_another_handle,
    ),
    (
        "the_format_row_is_recorded_and_a_newer_refused",
        Only::Sql,
        the_format_row_is_recorded_and_a_newer_refused,
    ),
];

/// Runs the case named `name` on `fixture` (`Err` also when there is no such case or it
/// does not apply to the fixture's store).
pub fn run(name: &str, fixture: &mut dyn Fixture) -> Result<(), String> {
    let Some((_, only, case)) = CASES.iter().find(|(n, _, _)| *n == name) else {
        return Err(format!("no contract case {name:?}"));
    };
    if !only.applies(fixture.kind()) {
        return Err(format!(
            "{name} does not apply to a {:?} store",
            fixture.kind()
        ));
    }
    case(fixture)
}

// ---------------------------------------------------------------- helpers

macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!("line {}: {}", line!(), format!($($msg)+)));
        }
    };
}

macro_rules! check_eq {
    ($a:expr, $b:expr) => {
        check_eq!($a, $b, "")
    };
    ($a:expr, $b:expr, $($msg:tt)+) => {{
        let (a, b) = (&$a, &$b);
        if a != b {
            return Err(format!(
                "line {}: {} is {:?}, expected {:?} {}",
                line!(),
                stringify!($a),
                a,
                b,
                format!($($msg)+)
            ));
        }
    }};
}

/// The value, or `Err` naming the call that failed and why.
macro_rules! t {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => {
                return Err(format!(
                    "line {}: {} failed: {e:?}",
                    line!(),
                    stringify!($e)
                ))
            }
        }
    };
}

/// A canonical-looking entry (sorted keys, no spaces).
pub fn entry(stream: &str, seq: u64, open: bool) -> String {
    format!(r#"{{"data":"payload {stream} {seq}","open":{open},"seq":{seq},"stream":"{stream}"}}"#)
}

pub fn entries(stream: &str, from: u64, n: u64, open: bool) -> Vec<String> {
    (from..from + n).map(|i| entry(stream, i, open)).collect()
}

/// A journal over a new handle, as a new worker opens it.
pub fn open(fx: &mut dyn Fixture) -> Result<Box<dyn Journal>, JournalError> {
    match (fx.kind(), fx.store()) {
        (Kind::File, Store::Files(f)) => FileJournal::open(f)
            .map(|j| Box::new(j) as Box<dyn Journal>)
            .map_err(crate::journal_error),
        (Kind::Sql(d), Store::Sql(s)) => {
            SqlJournal::open(s, d).map(|j| Box::new(j) as Box<dyn Journal>)
        }
        _ => Err(JournalError::Other(
            "the fixture's store is not of its kind".into(),
        )),
    }
}

fn files(fx: &mut dyn Fixture) -> Result<Box<dyn Files>, String> {
    match fx.store() {
        Store::Files(f) => Ok(f),
        Store::Sql(_) => Err("a file case on a SQL store".into()),
    }
}

fn sql(fx: &mut dyn Fixture) -> Result<Box<dyn Sql>, String> {
    match fx.store() {
        Store::Sql(s) => Ok(s),
        Store::Files(_) => Err("a SQL case on a file store".into()),
    }
}

fn file_journal(fx: &mut dyn Fixture) -> Result<FileJournal<Box<dyn Files>>, FileError> {
    match fx.store() {
        Store::Files(f) => FileJournal::open(f),
        Store::Sql(_) => Err(FileError::Changed("a file case on a SQL store".into())),
    }
}

/// Every entry in append order: the lines of `journal.jsonl`, or the rows by ordinal.
fn in_order(fx: &mut dyn Fixture) -> Result<Vec<String>, String> {
    match (fx.kind(), fx.store()) {
        (Kind::File, Store::Files(mut f)) => {
            let bytes = whole(&mut *f, JOURNAL_FILE)?;
            let text = String::from_utf8(bytes).map_err(|e| format!("{e}"))?;
            Ok(text.lines().map(String::from).collect())
        }
        (Kind::Sql(d), Store::Sql(s)) => {
            let mut j = SqlJournal::open(s, d).map_err(|e| format!("{e:?}"))?;
            j.entries_in_order().map_err(|e| format!("{e:?}"))
        }
        _ => Err("the fixture's store is not of its kind".into()),
    }
}

/// The whole file (empty when missing).
fn whole(files: &mut dyn Files, name: &str) -> Result<Vec<u8>, String> {
    match files.file_size(name).map_err(|e| format!("{e:?}"))? {
        None => Ok(Vec::new()),
        Some(n) => files.file_read(name, 0, n).map_err(|e| format!("{e:?}")),
    }
}

/// Streams, open streams, and each stream's length and entries.
type Snapshot = (Vec<String>, Vec<String>, Vec<(u64, Vec<String>)>);

fn snapshot(j: &mut dyn Journal) -> Result<Snapshot, JournalError> {
    let streams = j.streams()?;
    let mut contents = Vec::new();
    for s in &streams {
        contents.push((j.length(s)?, j.read(s, 0)?));
    }
    Ok((streams, j.open_streams()?, contents))
}

// ---------------------------------------------------------------- every store

fn append_read_length_round_trip(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut j = t!(open(fx));
    t!(j.append("a", 0, &entries("a", 0, 2, true), false, true));
    t!(j.append("b", 0, &entries("b", 0, 1, true), true, true));
    t!(j.append("a", 2, &entries("a", 2, 1, false), false, false));
    check_eq!(t!(j.length("a")), 3);
    check_eq!(t!(j.length("b")), 1);
    check_eq!(t!(j.length("nope")), 0);
    let mut all_a = entries("a", 0, 2, true);
    all_a.push(entry("a", 2, false));
    check_eq!(t!(j.read("a", 0)), all_a);
    check_eq!(t!(j.read("a", 1)), all_a[1..].to_vec());
    for past in [3, 99, u64::MAX] {
        check!(t!(j.read("a", past)).is_empty(), "read from {past}");
    }
    check_eq!(t!(j.read("b", 0)), entries("b", 0, 1, true));
    check!(
        t!(j.read("nope", 0)).is_empty(),
        "an unknown stream reads empty"
    );
    t!(j.sync());
    Ok(())
}

fn first_append_order(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut j = t!(open(fx));
    check!(t!(j.streams()).is_empty(), "a new journal has no stream");
    check!(
        t!(j.open_streams()).is_empty(),
        "a new journal has no open stream"
    );
    for s in ["zeta", "alpha", "mid"] {
        t!(j.append(s, 0, &entries(s, 0, 1, true), false, true));
    }
    check_eq!(t!(j.streams()), ["zeta", "alpha", "mid"]);
    check_eq!(t!(j.open_streams()), ["zeta", "alpha", "mid"]);
    t!(j.append("alpha", 1, &entries("alpha", 1, 1, false), false, false));
    check_eq!(t!(j.open_streams()), ["zeta", "mid"]);
    t!(j.append("zeta", 1, &entries("zeta", 1, 2, false), true, false));
    check_eq!(t!(j.open_streams()), ["mid"]);
    // Closed, then open again: back at its first-append place.
    t!(j.append("alpha", 2, &entries("alpha", 2, 1, true), false, true));
    check_eq!(t!(j.open_streams()), ["alpha", "mid"]);
    // Created closed: listed in streams only.
    t!(j.append("closed", 0, &entries("closed", 0, 1, false), false, false));
    check_eq!(t!(j.streams()), ["zeta", "alpha", "mid", "closed"]);
    check_eq!(t!(j.open_streams()), ["alpha", "mid"]);
    Ok(())
}

fn conflict_writes_nothing(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut j = t!(open(fx));
    check_eq!(
        j.append("a", 1, &entries("a", 1, 1, true), true, true),
        Err(JournalError::Conflict(0))
    );
    check!(
        t!(j.streams()).is_empty(),
        "a lost append creates no stream"
    );
    check!(in_order(fx)?.is_empty(), "a lost append writes nothing");
    t!(j.append("a", 0, &entries("a", 0, 2, true), true, true));
    let before = in_order(fx)?;
    for expected in [0, 1, 3, u64::MAX] {
        let batch = if expected == u64::MAX {
            vec![entry("a", 0, true)]
        } else {
            entries("a", expected, 1, false)
        };
        check_eq!(
            j.append("a", expected, &batch, true, false),
            Err(JournalError::Conflict(2)),
            "expected {expected}"
        );
    }
    check_eq!(t!(j.read("a", 0)), entries("a", 0, 2, true));
    check_eq!(
        t!(j.open_streams()),
        ["a"],
        "a lost append changes no open flag"
    );
    check_eq!(in_order(fx)?, before, "a lost append writes nothing");
    Ok(())
}

fn empty_batch_is_a_no_op_or_a_sync(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut j = t!(open(fx));
    t!(j.append("a", 0, &[], true, true));
    check!(
        t!(j.streams()).is_empty(),
        "an empty append creates no stream"
    );
    t!(j.append("a", 0, &entries("a", 0, 1, true), false, true));
    t!(j.append("a", 1, &[], false, false));
    check_eq!(
        t!(j.open_streams()),
        ["a"],
        "an empty append does not change open"
    );
    let before = fx.durable_writes();
    t!(j.append("a", 1, &[], true, false));
    if let (Some(b), Some(a)) = (before, fx.durable_writes()) {
        check_eq!(a, b + 1, "a durable empty append syncs the pending append");
    }
    check_eq!(
        j.append("a", 0, &[], true, true),
        Err(JournalError::Conflict(1))
    );
    check_eq!(t!(j.length("a")), 1);
    Ok(())
}

/// Every bad batch is refused with the one text of `interlock-journal-format` (the file
/// journal's, whatever the store) and leaves nothing behind; a conflict is reported first.
fn bad_appends_are_refused_with_one_text(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut reference = t!(FileJournal::open(MemFiles::new()));
    let mut j = t!(open(fx));
    t!(reference.append("a", 0, &entries("a", 0, 1, true), true, true));
    t!(j.append("a", 0, &entries("a", 0, 1, true), true, true));
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
        ("JSON object", vec!["[1,2]".to_string()]),
        ("not a journal entry", vec![r#"{"open":true}"#.to_string()]),
        ("JSON object", vec![String::new()]),
        (
            "not a journal entry",
            vec![r#"{"open":true,"seq":"1","stream":"a"}"#.to_string()],
        ),
    ];
    for (why, batch) in bad_batches {
        let want = reference
            .append("a", 1, &batch, true, true)
            .map_err(crate::journal_error);
        let got = j.append("a", 1, &batch, true, true);
        match &got {
            Err(JournalError::Other(m)) => check!(m.contains(why), "{m:?} should mention {why:?}"),
            other => return Err(format!("{why}: expected a refusal, got {other:?}")),
        }
        check_eq!(got, want, "{why}: refused with the one text");
        check_eq!(t!(j.length("a")), 1, "{why}: nothing written");
        check_eq!(t!(j.read("a", 0)), entries("a", 0, 1, true));
        check_eq!(t!(j.streams()), ["a"]);
        // At another length, the conflict is what is reported.
        check_eq!(
            j.append("a", 0, &batch, true, true),
            Err(JournalError::Conflict(1))
        );
    }
    check_eq!(in_order(fx)?, entries("a", 0, 1, true), "nothing written");
    // The journal is still usable.
    t!(j.append("a", 1, &entries("a", 1, 1, true), true, true));
    check_eq!(t!(j.length("a")), 2);
    Ok(())
}

/// A mixed run of appends gives MemJournal's answers (the reference backend's), and the
/// same entries in append order (its `log`: what a file journal's bytes hold).
fn same_answers_as_mem_journal(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut mem = MemJournal::new();
    let mut j = t!(open(fx));
    let streams = ["effect:x", "lease:l", "cap:c", "effect:y", "approval:a"];
    let mut step = 0u64;
    for round in 0..6u64 {
        for (i, s) in streams.iter().enumerate() {
            step += 1;
            if (round + i as u64) % 3 == 2 {
                continue;
            }
            let len = t!(mem.length(s));
            let open = !step.is_multiple_of(4);
            let n = 1 + step % 3;
            let batch = entries(s, len, n, open);
            let durable = step.is_multiple_of(2);
            check_eq!(
                j.append(s, len, &batch, durable, open),
                mem.append(s, len, &batch, durable, open)
            );
            // A stale writer loses the same way.
            if len > 0 {
                let stale = entries(s, len - 1, 1, open);
                check_eq!(
                    j.append(s, len - 1, &stale, true, open),
                    mem.append(s, len - 1, &stale, true, open)
                );
            }
        }
        check_eq!(
            t!(snapshot(&mut *j)),
            t!(snapshot(&mut mem)),
            "round {round}"
        );
    }
    let log: Vec<String> = mem.log.iter().map(|(_, e)| e.clone()).collect();
    check_eq!(in_order(fx)?, log);
    Ok(())
}

fn reopen_and_other_handles_see_everything(fx: &mut dyn Fixture) -> Result<(), String> {
    let before = {
        let mut j = t!(open(fx));
        let mut other = t!(open(fx));
        t!(j.append("s2", 0, &entries("s2", 0, 3, true), false, true));
        // A second handle (another worker) sees it at once and appends after it.
        check_eq!(t!(other.length("s2")), 3);
        t!(other.append("s1", 0, &entries("s1", 0, 1, true), false, true));
        t!(j.append("s2", 3, &entries("s2", 3, 1, false), false, false));
        t!(other.append("s3", 0, &entries("s3", 0, 2, true), true, true));
        // Dropped with a non-durable append pending.
        t!(j.append("s1", 1, &entries("s1", 1, 1, true), false, true));
        let theirs = t!(snapshot(&mut *other));
        let ours = t!(snapshot(&mut *j));
        check_eq!(theirs, ours);
        ours
    };
    let mut j = t!(open(fx));
    check_eq!(t!(snapshot(&mut *j)), before);
    check_eq!(t!(j.streams()), ["s2", "s1", "s3"]);
    check_eq!(t!(j.open_streams()), ["s1", "s3"]);
    // The reopened journal keeps appending at the right place.
    t!(j.append("s1", 2, &entries("s1", 2, 1, false), true, false));
    check_eq!(t!(j.read("s1", 2)), entries("s1", 2, 1, false));
    check_eq!(t!(j.open_streams()), ["s3"]);
    Ok(())
}

/// Two workers of one journal, interleaved: each append goes in at most once, a stale
/// writer gets the stream's actual length, and a writer whose own stream did not move is
/// not turned away because another stream did.
fn two_handles_race_compare_and_append(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut one = t!(open(fx));
    let mut two = t!(open(fx));
    t!(one.append("a", 0, &entries("a", 0, 1, true), false, true));
    // Two has not looked since; its append to another stream still goes in.
    t!(two.append("b", 0, &entries("b", 0, 1, true), true, true));
    // Both append at length 1 of "a": the first wins, the second learns the length.
    let batch = entries("a", 1, 1, true);
    t!(two.append("a", 1, &batch, false, true));
    check_eq!(
        one.append("a", 1, &batch, true, true),
        Err(JournalError::Conflict(2))
    );
    check_eq!(
        one.append("b", 0, &entries("b", 0, 1, true), true, true),
        Err(JournalError::Conflict(1))
    );
    // One appends after what it learned; two sees it.
    t!(one.append("a", 2, &entries("a", 2, 2, false), true, false));
    check_eq!(t!(two.length("a")), 4);
    check_eq!(t!(two.read("a", 0)), {
        let mut all = entries("a", 0, 2, true);
        all.extend(entries("a", 2, 2, false));
        all
    });
    check_eq!(t!(two.open_streams()), ["b"]);
    let mut want = entries("a", 0, 1, true);
    want.extend(entries("b", 0, 1, true));
    want.extend(entries("a", 1, 1, true));
    want.extend(entries("a", 2, 2, false));
    check_eq!(in_order(fx)?, want, "every append in once, in order");
    Ok(())
}

fn entries_are_stored_byte_for_byte(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut j = t!(open(fx));
    let odd = "b \"q\" é ☃ 𝄞 \\ \u{2028}";
    let stream_json = "\"b \\\"q\\\" é ☃ 𝄞 \\\\ \u{2028}\"";
    let big = "x".repeat(300_000);
    let batch = vec![
        format!(
            r#"{{"nested":{{"k":[1,2.5e-7,"é\u00e9\t"]}},"open":false,"seq":0,"stream":{stream_json}}}"#
        ),
        format!(r#"{{"big":"{big}","open":false,"seq":1,"stream":{stream_json}}}"#),
        // Not canonical (spaces, key order): a backend stores what it is given.
        format!(r#"{{ "stream" : {stream_json}, "seq" : 2, "open" : false }}"#),
    ];
    t!(j.append(odd, 0, &batch, true, false));
    check_eq!(t!(j.read(odd, 0)), batch);
    check_eq!(t!(j.streams()), [odd]);
    let a = entries("a", 0, 2, true);
    t!(j.append("a", 0, &a, false, true));
    let mut want = batch.clone();
    want.extend(a);
    check_eq!(
        in_order(fx)?,
        want,
        "the entries, in append order, as given"
    );
    if fx.kind() == Kind::File {
        let mut f = files(fx)?;
        let bytes = whole(&mut *f, JOURNAL_FILE)?;
        let mut text = want.join("\n");
        text.push('\n');
        check!(
            bytes == text.as_bytes(),
            "journal.jsonl is every entry and a newline"
        );
    }
    drop(j);
    let mut j = t!(open(fx));
    check_eq!(t!(j.read(odd, 1)), batch[1..].to_vec());
    Ok(())
}

/// A durable append is one durable write (one fdatasync, one commit that waits for the
/// disk); a non-durable one is none; a sync after non-durable appends is one.
fn durable_writes_are_counted(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut j = t!(open(fx));
    let Some(start) = fx.durable_writes() else {
        return Ok(());
    };
    t!(j.append("a", 0, &entries("a", 0, 3, true), true, true));
    check_eq!(fx.durable_writes(), Some(start + 1), "one durable append");
    t!(j.append("a", 3, &entries("a", 3, 1, true), false, true));
    t!(j.append("b", 0, &entries("b", 0, 1, true), false, true));
    check_eq!(
        fx.durable_writes(),
        Some(start + 1),
        "non-durable appends do not wait"
    );
    let _ = j.append("a", 0, &entries("a", 0, 1, true), true, true);
    check_eq!(
        fx.durable_writes(),
        Some(start + 1),
        "a conflict writes nothing"
    );
    t!(j.sync());
    check_eq!(fx.durable_writes(), Some(start + 2), "a sync after them");
    // A durable append group-commits earlier non-durable ones: still one.
    t!(j.append("b", 1, &entries("b", 1, 1, true), false, true));
    t!(j.append("a", 4, &entries("a", 4, 1, true), true, true));
    check_eq!(fx.durable_writes(), Some(start + 3));
    Ok(())
}

// ---------------------------------------------------------------- file journals

fn torn_tail_is_reported_and_repaired(fx: &mut dyn Fixture) -> Result<(), String> {
    {
        let mut j = t!(open(fx));
        t!(j.append("a", 0, &entries("a", 0, 2, true), true, true));
        t!(j.append("b", 0, &entries("b", 0, 1, false), true, false));
    }
    let mut f = files(fx)?;
    let good = whole(&mut *f, JOURNAL_FILE)?;
    let torn = br#"{"data":"half","open":tr"#;
    t!(f.file_append(JOURNAL_FILE, good.len() as u64, torn));
    match file_journal(fx) {
        Err(FileError::TornTail { offset, bytes }) => {
            check_eq!(offset, good.len() as u64);
            check_eq!(bytes, torn.len() as u64);
        }
        other => return Err(format!("expected a torn tail, got {:?}", other.map(|_| ()))),
    }
    let msg = journal_text(fx)?;
    check!(msg.contains(JOURNAL_FILE), "{msg}");
    check!(msg.contains(&good.len().to_string()), "{msg}");
    check!(msg.contains("repair"), "{msg}");
    let mut with_torn = good.clone();
    with_torn.extend_from_slice(torn);
    check_eq!(
        whole(&mut *f, JOURNAL_FILE)?,
        with_torn,
        "open never modifies the file"
    );

    let report = t!(FileJournal::repair(&mut f));
    let side = format!("{TORN_PREFIX}{}", good.len());
    check_eq!(report.torn_offset, Some(good.len() as u64));
    check_eq!(report.torn_bytes, torn.len() as u64);
    check_eq!(report.saved_to.as_deref(), Some(side.as_str()));
    check!(report.to_string().contains(&side), "{report}");
    check_eq!(whole(&mut *f, &side)?, torn.to_vec());
    check_eq!(whole(&mut *f, JOURNAL_FILE)?, good);

    let nothing = t!(FileJournal::repair(&mut f));
    check_eq!(
        (
            nothing.torn_offset,
            nothing.torn_bytes,
            nothing.saved_to.clone()
        ),
        (None, 0, None)
    );
    check!(
        nothing.to_string().contains("nothing to repair"),
        "{nothing}"
    );

    let mut j = t!(open(fx));
    check_eq!(t!(j.read("a", 0)), entries("a", 0, 2, true));
    check_eq!(t!(j.read("b", 0)), entries("b", 0, 1, false));
    check_eq!(t!(j.open_streams()), ["a"]);
    t!(j.append("a", 2, &entries("a", 2, 1, true), true, true));
    drop(j);

    // A second torn tail at the same offset never overwrites the first side file.
    let offset = whole(&mut *f, JOURNAL_FILE)?.len() as u64;
    t!(f.file_append(JOURNAL_FILE, offset, b"xyz"));
    let older = format!("{TORN_PREFIX}{offset}");
    check!(t!(f.file_create(&older, b"older")), "{older} is new");
    let report = t!(FileJournal::repair(&mut f));
    let side2 = format!("{TORN_PREFIX}{offset}.1");
    check_eq!(report.saved_to.as_deref(), Some(side2.as_str()));
    check_eq!(whole(&mut *f, &side2)?, b"xyz".to_vec());
    check_eq!(whole(&mut *f, &older)?, b"older".to_vec());
    let mut j = t!(open(fx));
    check_eq!(t!(j.length("a")), 3);
    Ok(())
}

/// The message a file journal that does not open gives, through the gate's error.
fn journal_text(fx: &mut dyn Fixture) -> Result<String, String> {
    match open(fx) {
        Ok(_) => Err("the journal opened".into()),
        Err(JournalError::TornTail(m) | JournalError::Corrupt(m) | JournalError::Other(m)) => Ok(m),
        Err(e) => Err(format!("unexpected {e:?}")),
    }
}

fn torn_tail_without_any_complete_line(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut f = files(fx)?;
    t!(f.file_append(JOURNAL_FILE, 0, b"{\"open\""));
    match file_journal(fx) {
        Err(FileError::TornTail {
            offset: 0,
            bytes: 7,
        }) => {}
        other => return Err(format!("expected a torn tail, got {:?}", other.map(|_| ()))),
    }
    let report = t!(FileJournal::repair(&mut f));
    check_eq!((report.torn_offset, report.torn_bytes), (Some(0), 7));
    check!(whole(&mut *f, JOURNAL_FILE)?.is_empty(), "cut to nothing");
    let mut j = t!(open(fx));
    check!(t!(j.streams()).is_empty(), "no streams");
    Ok(())
}

fn repair_of_a_store_without_journal_does_nothing(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut f = files(fx)?;
    let report = t!(FileJournal::repair(&mut f));
    check_eq!(report.torn_offset, None);
    check_eq!(t!(f.file_size(JOURNAL_FILE)), None, "nothing created");
    Ok(())
}

fn corrupt_lines_are_reported_with_their_line_number(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut f = files(fx)?;
    let cases: &[(&str, &str)] = &[
        (
            r#"{"open":true,"seq":1,"stream":"a""#,
            "not a journal entry",
        ),
        ("not json at all", "not a JSON object"),
        ("", "not a JSON object"),
        (r#"["a",1,true]"#, "not a JSON object"),
        (r#"{"open":true,"stream":"a"}"#, "seq"),
        (r#"{"open":true,"seq":1}"#, "stream"),
        (r#"{"seq":1,"stream":"a"}"#, "open"),
        (r#"{"open":"yes","seq":1,"stream":"a"}"#, "invalid type"),
        (r#"{"open":true,"seq":"1","stream":"a"}"#, "invalid type"),
        (r#"{"open":true,"seq":-1,"stream":"a"}"#, "invalid"),
        (r#"{"open":true,"seq":1,"stream":7}"#, "invalid type"),
        (r#"{"open":true,"seq":1,"stream":"a"} x"#, "trailing"),
    ];
    let seq_cases = [
        (entry("a", 2, true), "seq is 2"),
        (entry("a", 0, true), "seq is 0"),
        (entry("c", 1, true), "has 0 entries"),
    ];
    let all = cases
        .iter()
        .map(|(l, w)| (l.to_string(), *w))
        .chain(seq_cases.iter().map(|(l, w)| (l.clone(), *w)));
    for (bad, want) in all {
        let text = format!("{}\n{}\n{bad}\n", entry("a", 0, true), entry("b", 0, true));
        t!(f.file_replace(JOURNAL_FILE, text.as_bytes()));
        match file_journal(fx) {
            Err(FileError::Corrupt { line: 3, detail }) => {
                check!(
                    detail.contains(want),
                    "detail {detail:?} should mention {want:?}"
                )
            }
            other => {
                return Err(format!(
                    "expected corrupt line 3 for {bad:?}, got {:?}",
                    other.map(|_| ())
                ))
            }
        }
        let msg = journal_text(fx)?;
        check!(msg.contains("journal.jsonl line 3"), "{msg}");
    }
    // Not UTF-8.
    let mut bytes = format!("{}\n", entry("a", 0, true)).into_bytes();
    bytes.extend_from_slice(b"{\"stream\":\"\xff\"}\n");
    t!(f.file_replace(JOURNAL_FILE, &bytes));
    match file_journal(fx) {
        Err(FileError::Corrupt { line: 2, .. }) => Ok(()),
        other => Err(format!(
            "expected corrupt line 2, got {:?}",
            other.map(|_| ())
        )),
    }
}

fn invalid_entries_write_nothing(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut j = t!(file_journal(fx));
    t!(j.append("a", 0, &entries("a", 0, 1, true), true, true));
    let mut f = files(fx)?;
    let bytes = whole(&mut *f, JOURNAL_FILE)?;
    let invalid = j
        .append("a", 1, &entries("a", 2, 1, true), false, true)
        .map_err(|e| e.to_string());
    match invalid {
        Err(m) => check!(m.contains("seq member is 2 but should be 1"), "{m}"),
        Ok(()) => return Err("a bad seq was written".into()),
    }
    let conflict = j
        .append("a", 0, &entries("a", 0, 1, true), false, true)
        .map_err(|e| e.to_string());
    match conflict {
        Err(m) => check!(m.contains("1 entries"), "{m}"),
        Ok(()) => return Err("a stale append was written".into()),
    }
    check_eq!(whole(&mut *f, JOURNAL_FILE)?, bytes, "nothing written");
    t!(j.append("a", 1, &entries("a", 1, 1, true), true, true));
    check_eq!(t!(j.length("a")), 2);
    Ok(())
}

/// A new journal records its format version; a journal made before versions
/// (journal.jsonl, no journal.format) is version 1 and is left as it is.
fn a_new_file_journal_records_its_format_version(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut f = files(fx)?;
    t!(f.file_append(
        JOURNAL_FILE,
        0,
        format!("{}\n", entry("a", 0, true)).as_bytes()
    ));
    let mut j = t!(open(fx));
    check_eq!(t!(j.length("a")), 1);
    check_eq!(
        t!(f.file_size(FORMAT_FILE)),
        None,
        "an old journal is left as it is"
    );
    // A new one, in a new store: only this case's second store is at hand, so the check is
    // that an empty store gets the file (see the native tests for a fresh folder).
    t!(f.file_truncate(JOURNAL_FILE, 0));
    Ok(())
}

/// A newer format is refused with a clear error, never guessed at, and nothing changes: no
/// journal.jsonl is created beside it, and repair does not cut it.
fn a_newer_or_unknown_file_format_is_refused(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut f = files(fx)?;
    for (round, (text, want)) in [
        (
            "interlock-journal 2\n",
            "journal format version 2 is newer than this reader understands (1); upgrade Interlock",
        ),
        (
            "interlock-journal one\n",
            "journal format file journal.format is not valid",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        t!(f.file_replace(FORMAT_FILE, text.as_bytes()));
        match file_journal(fx) {
            Err(e @ FileError::Format(_)) => {
                check!(e.to_string().starts_with(want), "{e}");
            }
            other => {
                return Err(format!(
                    "expected a format error, got {:?}",
                    other.map(|_| ())
                ))
            }
        }
        // A store has no delete: after the first round journal.jsonl is there, empty.
        let none = if round == 0 { None } else { Some(0) };
        check_eq!(t!(f.file_size(JOURNAL_FILE)), none, "no journal.jsonl made");
        check_eq!(whole(&mut *f, FORMAT_FILE)?, text.as_bytes().to_vec());
        t!(f.file_append(JOURNAL_FILE, 0, b"not lines"));
        match FileJournal::repair(&mut f) {
            Err(FileError::Format(_)) => {}
            other => return Err(format!("repair of a newer journal: {other:?}")),
        }
        check_eq!(whole(&mut *f, JOURNAL_FILE)?, b"not lines".to_vec());
        t!(f.file_truncate(JOURNAL_FILE, 0));
    }
    Ok(())
}

/// 40 streams, every third left open, some with several appends.
fn fill(j: &mut dyn Journal, prefix: &str) -> Result<(), JournalError> {
    for i in 0..40u64 {
        let s = format!("{prefix}{i}");
        let open = i % 3 == 0;
        j.append(&s, 0, &entries(&s, 0, 2, true), false, true)?;
        j.append(&s, 2, &entries(&s, 2, 1 + i % 2, open), false, open)?;
    }
    Ok(())
}

fn a_checkpoint_reopens_to_the_same_index(fx: &mut dyn Fixture) -> Result<(), String> {
    let before = {
        let mut j = t!(file_journal(fx));
        t!(fill(&mut j, "s"));
        t!(j.checkpoint());
        check_eq!(j.checkpoint_covers(), Some(j.len()));
        t!(snapshot(&mut j))
    };
    let mut f = files(fx)?;
    let bytes = whole(&mut *f, JOURNAL_FILE)?;
    let mut j = t!(file_journal(fx));
    check_eq!(j.scanned_bytes(), 0, "nothing after the checkpoint to scan");
    check_eq!(t!(snapshot(&mut j)), before);
    // Appends after the checkpoint: to an open stream, a closed one, and new streams.
    t!(j.append("s0", 3, &entries("s0", 3, 1, false), false, false));
    t!(j.append("s1", 4, &entries("s1", 4, 1, true), false, true));
    t!(fill(&mut j, "t"));
    check_eq!(
        j.append("s2", 0, &entries("s2", 0, 1, true), false, true),
        Err(FileError::Conflict { actual: 3 }),
        "a checkpointed stream keeps its length"
    );
    let after = t!(snapshot(&mut j));
    drop(j);
    check!(
        whole(&mut *f, JOURNAL_FILE)?.starts_with(&bytes),
        "the journal is only appended to"
    );
    let mut j = t!(file_journal(fx));
    check!(j.scanned_bytes() > 0, "the tail is scanned");
    check_eq!(t!(snapshot(&mut j)), after, "checkpoint + tail");
    drop(j);
    // A checkpoint that no longer fits is ignored (here: garbage in its place).
    t!(f.file_replace(INDEX_FILE, b"not a checkpoint"));
    let mut j = t!(file_journal(fx));
    check_eq!(j.checkpoint_covers(), None);
    check_eq!(
        t!(snapshot(&mut j)),
        after,
        "the whole file, without the checkpoint"
    );
    Ok(())
}

fn a_second_checkpoint_merges_the_first_and_the_tail(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut j = t!(file_journal(fx));
    t!(fill(&mut j, "a"));
    t!(j.checkpoint());
    t!(j.append("a0", 3, &entries("a0", 3, 1, false), false, false));
    t!(fill(&mut j, "b"));
    t!(j.checkpoint());
    let want = t!(snapshot(&mut j));
    drop(j);
    let mut j = t!(file_journal(fx));
    check_eq!(j.scanned_bytes(), 0);
    check_eq!(t!(snapshot(&mut j)), want);
    check_eq!(t!(j.open_streams()).len(), 2 * 14 - 1);
    Ok(())
}

fn a_checkpoint_that_does_not_match_is_ignored(fx: &mut dyn Fixture) -> Result<(), String> {
    let mut j = t!(file_journal(fx));
    t!(fill(&mut j, "s"));
    t!(j.checkpoint());
    let want = t!(snapshot(&mut j));
    drop(j);
    let mut f = files(fx)?;
    let index = whole(&mut *f, INDEX_FILE)?;
    let journal = whole(&mut *f, JOURNAL_FILE)?;
    // A flipped byte in the header, or in a stream record.
    for at in [20, 200] {
        let mut bad = index.clone();
        bad[at] ^= 1;
        t!(f.file_replace(INDEX_FILE, &bad));
        let mut j = t!(file_journal(fx));
        match j.checkpoint_covers() {
            None => check_eq!(t!(snapshot(&mut j)), want, "ignored, byte {at}"),
            // Records are checked when read: a bad one is an error, never a wrong answer.
            Some(_) => check!(j.streams().is_err(), "byte {at}"),
        }
    }
    // The journal rewritten below the checkpoint: same length, another last entry.
    t!(f.file_replace(INDEX_FILE, &index));
    let mut other = journal.clone();
    let n = other.len();
    other[n - 3] = b'X';
    t!(f.file_replace(JOURNAL_FILE, &other));
    check!(
        matches!(file_journal(fx), Err(FileError::Corrupt { .. })),
        "ignored, so the full scan finds the bad line"
    );
    // The journal truncated below the checkpoint (a repaired torn tail).
    t!(f.file_replace(JOURNAL_FILE, &journal[..journal.len() / 2]));
    t!(FileJournal::repair(&mut f));
    let mut j = t!(file_journal(fx));
    check_eq!(j.checkpoint_covers(), None);
    check!(t!(j.streams()).len() < 40, "half the journal");
    Ok(())
}

/// Two journals share a store; one writes a new checkpoint while the other uses the old
/// one: the other notices and reloads its index, and answers right.
fn a_checkpoint_replaced_by_another_handle(fx: &mut dyn Fixture) -> Result<(), String> {
    {
        let mut j = t!(file_journal(fx));
        t!(fill(&mut j, "s"));
        t!(j.checkpoint());
    }
    let mut reader = t!(file_journal(fx));
    check!(
        reader.checkpoint_covers().is_some(),
        "the reader uses the checkpoint"
    );
    let mut writer = t!(file_journal(fx));
    t!(fill(&mut writer, "t"));
    t!(writer.append("s1", 4, &entries("s1", 4, 1, true), false, true));
    t!(writer.checkpoint());
    let want = t!(snapshot(&mut writer));
    // s2 is closed and never touched by the reader: found through the (new) checkpoint.
    check_eq!(t!(reader.length("s2")), 3);
    check_eq!(t!(reader.length("s1")), 5);
    check_eq!(t!(snapshot(&mut reader)), want);
    Ok(())
}

// ---------------------------------------------------------------- SQL journals

fn the_format_row_is_recorded_and_a_newer_refused(fx: &mut dyn Fixture) -> Result<(), String> {
    let Kind::Sql(dialect) = fx.kind() else {
        return Err("a SQL case on a file store".into());
    };
    let mut raw = sql(fx)?;
    let format_row = Statement {
        sql: dialect.sql("SELECT value FROM interlock_meta WHERE key = ?1"),
        params: vec![SqlValue::Text("format".into())],
        expect_changes: None,
    };
    let set_row = |text: &str| Statement {
        sql: dialect.sql("UPDATE interlock_meta SET value = ?1 WHERE key = 'format'"),
        params: vec![SqlValue::Text(text.into())],
        expect_changes: Some(1),
    };
    drop(t!(open(fx)));
    let rows = t!(raw.sql_batch(core::slice::from_ref(&format_row), false, false));
    check_eq!(
        rows,
        vec![vec![vec![SqlValue::Text("interlock-journal 1\n".into())]]]
    );
    drop(t!(open(fx))); // and an existing one opens as it is
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
        t!(raw.sql_batch(&[set_row(text)], true, true));
        match open(fx) {
            Err(JournalError::Other(m)) => check!(m.contains(want), "{m}"),
            Err(e) => return Err(format!("{text:?}: expected a refusal, got {e:?}")),
            Ok(_) => return Err(format!("{text:?}: the journal opened")),
        }
        let rows = t!(raw.sql_batch(core::slice::from_ref(&format_row), false, false));
        check_eq!(
            rows,
            vec![vec![vec![SqlValue::Text(text.into())]]],
            "nothing changed"
        );
    }
    t!(raw.sql_batch(&[set_row("interlock-journal 1\n")], true, true));
    drop(t!(open(fx)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::rc::Rc;
    use core::cell::RefCell;

    /// Memory files shared by every handle, as a host's store is.
    #[derive(Clone, Default)]
    struct Shared(Rc<RefCell<MemFiles>>);

    impl Files for Shared {
        fn file_size(&mut self, n: &str) -> Result<Option<u64>, crate::StorageError> {
            self.0.borrow_mut().file_size(n)
        }
        fn file_read(&mut self, n: &str, o: u64, l: u64) -> Result<Vec<u8>, crate::StorageError> {
            self.0.borrow_mut().file_read(n, o, l)
        }
        fn file_append(&mut self, n: &str, at: u64, b: &[u8]) -> Result<(), crate::StorageError> {
            self.0.borrow_mut().file_append(n, at, b)
        }
        fn file_sync(&mut self, n: &str) -> Result<(), crate::StorageError> {
            self.0.borrow_mut().file_sync(n)
        }
        fn file_truncate(&mut self, n: &str, l: u64) -> Result<(), crate::StorageError> {
            self.0.borrow_mut().file_truncate(n, l)
        }
        fn file_replace(&mut self, n: &str, b: &[u8]) -> Result<(), crate::StorageError> {
            self.0.borrow_mut().file_replace(n, b)
        }
        fn file_create(&mut self, n: &str, b: &[u8]) -> Result<bool, crate::StorageError> {
            self.0.borrow_mut().file_create(n, b)
        }
    }

    struct Memory(Shared);

    impl Fixture for Memory {
        fn kind(&self) -> Kind {
            Kind::File
        }
        fn store(&mut self) -> Store {
            Store::Files(Box::new(self.0.clone()))
        }
        fn durable_writes(&self) -> Option<u64> {
            Some(self.0 .0.borrow().syncs)
        }
    }

    #[test]
    fn every_file_case_on_memory_files() {
        for (name, only, case) in CASES {
            if !only.applies(Kind::File) {
                continue;
            }
            let mut fx = Memory(Shared::default());
            if let Err(why) = case(&mut fx) {
                panic!("{name}: {why}");
            }
        }
    }
}
