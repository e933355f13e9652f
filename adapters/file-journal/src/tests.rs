use super::*;
use std::fs;
use tempfile::TempDir;

/// A canonical-looking entry (sorted keys, no spaces).
fn entry(stream: &str, seq: u64, open: bool) -> String {
    format!(r#"{{"data":"payload {stream} {seq}","open":{open},"seq":{seq},"stream":"{stream}"}}"#)
}

fn entries(stream: &str, from: u64, n: u64, open: bool) -> Vec<String> {
    (from..from + n).map(|i| entry(stream, i, open)).collect()
}

fn journal_bytes(dir: &Path) -> Vec<u8> {
    fs::read(dir.join(JOURNAL_FILE)).unwrap()
}

fn setup() -> (TempDir, PathBuf) {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("journal");
    (tmp, dir)
}

#[test]
fn append_read_round_trip() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    assert_eq!(j.dir(), dir.as_path());
    j.append("a", 0, &entries("a", 0, 2, true), false, true)
        .unwrap();
    j.append("b", 0, &entries("b", 0, 1, true), true, true)
        .unwrap();
    j.append("a", 2, &entries("a", 2, 1, false), false, false)
        .unwrap();

    assert_eq!(j.length("a"), 3);
    assert_eq!(j.length("b"), 1);
    assert_eq!(j.length("nope"), 0);
    let mut all_a = entries("a", 0, 2, true);
    all_a.push(entry("a", 2, false));
    assert_eq!(j.read("a", 0).unwrap(), all_a);
    assert_eq!(j.read("a", 1).unwrap(), all_a[1..].to_vec());
    assert_eq!(j.read("a", 3).unwrap(), Vec::<String>::new());
    assert_eq!(j.read("a", 99).unwrap(), Vec::<String>::new());
    assert_eq!(j.read("a", u64::MAX).unwrap(), Vec::<String>::new());
    assert_eq!(j.read("b", 0).unwrap(), entries("b", 0, 1, true));
    assert_eq!(j.read("nope", 0).unwrap(), Vec::<String>::new());
}

#[test]
fn open_creates_missing_directories() {
    let (_tmp, dir) = setup();
    let nested = dir.join("x").join("y");
    let j = FileJournal::open(&nested).unwrap();
    assert!(nested.join(JOURNAL_FILE).is_file());
    assert!(nested.join(LOCK_FILE).is_file());
    assert!(j.streams().is_empty());
    assert!(j.open_streams().is_empty());
}

#[test]
fn streams_and_open_streams_in_first_append_order() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    for s in ["zeta", "alpha", "mid"] {
        j.append(s, 0, &entries(s, 0, 1, true), false, true)
            .unwrap();
    }
    assert_eq!(j.streams(), ["zeta", "alpha", "mid"]);
    assert_eq!(j.open_streams(), ["zeta", "alpha", "mid"]);

    // open -> closed
    j.append("alpha", 1, &entries("alpha", 1, 1, false), false, false)
        .unwrap();
    assert_eq!(j.open_streams(), ["zeta", "mid"]);
    j.append("zeta", 1, &entries("zeta", 1, 2, false), false, false)
        .unwrap();
    assert_eq!(j.open_streams(), ["mid"]);
    // closed -> open again keeps the first-append position
    j.append("alpha", 2, &entries("alpha", 2, 1, true), false, true)
        .unwrap();
    assert_eq!(j.open_streams(), ["alpha", "mid"]);
    // a stream created closed is listed in streams but not open_streams
    j.append("closed", 0, &entries("closed", 0, 1, false), false, false)
        .unwrap();
    assert_eq!(j.streams(), ["zeta", "alpha", "mid", "closed"]);
    assert_eq!(j.open_streams(), ["alpha", "mid"]);
}

#[test]
fn reopen_rebuilds_the_same_index() {
    let (_tmp, dir) = setup();
    let snapshot = |j: &FileJournal| {
        let streams = j.streams();
        let contents: Vec<(u64, Vec<String>)> = streams
            .iter()
            .map(|s| (j.length(s), j.read(s, 0).unwrap()))
            .collect();
        (streams, j.open_streams(), contents)
    };
    let before = {
        let mut j = FileJournal::open(&dir).unwrap();
        j.append("s2", 0, &entries("s2", 0, 3, true), false, true)
            .unwrap();
        j.append("s1", 0, &entries("s1", 0, 1, true), false, true)
            .unwrap();
        j.append("s2", 3, &entries("s2", 3, 1, false), false, false)
            .unwrap();
        j.append("s3", 0, &entries("s3", 0, 2, true), true, true)
            .unwrap();
        // Dropped with nothing pending; the next one is left non-durable on purpose.
        j.append("s1", 1, &entries("s1", 1, 1, true), false, true)
            .unwrap();
        snapshot(&j)
    };
    let mut j = FileJournal::open(&dir).unwrap();
    assert_eq!(snapshot(&j), before);
    assert_eq!(j.streams(), ["s2", "s1", "s3"]);
    assert_eq!(j.open_streams(), ["s1", "s3"]);
    assert_eq!(j.fsyncs(), 0);
    // and the reopened handle keeps appending at the right place
    j.append("s1", 2, &entries("s1", 2, 1, false), true, false)
        .unwrap();
    assert_eq!(j.read("s1", 2).unwrap(), entries("s1", 2, 1, false));
    assert_eq!(j.open_streams(), ["s3"]);
}

#[test]
fn conflict_returns_actual_length_and_writes_nothing() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    match j.append("a", 1, &entries("a", 1, 1, true), true, true) {
        Err(Error::Conflict { actual: 0 }) => {}
        other => panic!("expected Conflict{{actual: 0}}, got {other:?}"),
    }
    assert!(journal_bytes(&dir).is_empty());
    assert!(
        j.streams().is_empty(),
        "a lost append must not create a stream"
    );

    j.append("a", 0, &entries("a", 0, 2, true), true, true)
        .unwrap();
    let bytes = journal_bytes(&dir);
    for expected in [0, 1, 3] {
        match j.append("a", expected, &entries("a", expected, 1, true), true, true) {
            Err(Error::Conflict { actual: 2 }) => {}
            other => panic!("expected Conflict{{actual: 2}}, got {other:?}"),
        }
    }
    assert_eq!(journal_bytes(&dir), bytes);
    assert_eq!(j.length("a"), 2);
    assert_eq!(j.fsyncs(), 1, "a conflict must not sync");
}

#[test]
fn fsync_counting() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    assert_eq!(j.fsyncs(), 0);
    j.sync().unwrap();
    assert_eq!(j.fsyncs(), 0, "sync with nothing pending does nothing");

    j.append("a", 0, &entries("a", 0, 3, true), true, true)
        .unwrap();
    assert_eq!(j.fsyncs(), 1, "one durable append, one fdatasync");
    j.sync().unwrap();
    assert_eq!(j.fsyncs(), 1, "nothing pending after a durable append");

    j.append("a", 3, &entries("a", 3, 1, true), false, true)
        .unwrap();
    j.append("b", 0, &entries("b", 0, 1, true), false, true)
        .unwrap();
    assert_eq!(j.fsyncs(), 1, "non-durable appends do not sync");
    j.sync().unwrap();
    assert_eq!(j.fsyncs(), 2, "sync after non-durable appends syncs once");
    j.sync().unwrap();
    assert_eq!(j.fsyncs(), 2);

    // A durable append group-commits earlier non-durable ones: still one sync.
    j.append("b", 1, &entries("b", 1, 1, true), false, true)
        .unwrap();
    j.append("a", 4, &entries("a", 4, 1, true), true, true)
        .unwrap();
    assert_eq!(j.fsyncs(), 3);
    j.sync().unwrap();
    assert_eq!(j.fsyncs(), 3);
}

#[test]
fn empty_batch_is_a_no_op_or_a_sync() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    j.append("a", 0, &[], true, true).unwrap();
    assert!(j.streams().is_empty(), "an empty append creates no stream");
    assert_eq!(j.fsyncs(), 0);
    j.append("a", 0, &entries("a", 0, 1, true), false, true)
        .unwrap();
    j.append("a", 1, &[], false, false).unwrap();
    assert_eq!(
        j.open_streams(),
        ["a"],
        "an empty append does not change open"
    );
    assert_eq!(j.fsyncs(), 0);
    j.append("a", 1, &[], true, false).unwrap();
    assert_eq!(
        j.fsyncs(),
        1,
        "a durable empty append syncs pending appends"
    );
    assert!(matches!(
        j.append("a", 0, &[], true, true),
        Err(Error::Conflict { actual: 1 })
    ));
}

#[test]
fn second_open_is_locked_until_drop() {
    let (_tmp, dir) = setup();
    let first = FileJournal::open(&dir).unwrap();
    match FileJournal::open_waiting(&dir, Duration::ZERO) {
        Err(Error::Locked {
            dir: d,
            waited_ms: 0,
        }) => assert_eq!(d, dir),
        other => panic!("expected Locked, got {other:?}"),
    }
    match FileJournal::repair(&dir) {
        Err(Error::Locked { .. }) => {}
        other => panic!("repair must take the lock too, got {other:?}"),
    }
    let msg = FileJournal::open_waiting(&dir, Duration::from_millis(50))
        .unwrap_err()
        .to_string();
    assert!(msg.contains(&dir.display().to_string()), "{msg}");
    // It says how long it waited, and how to run several writers.
    assert!(msg.contains("still after waiting 50 ms"), "{msg}");
    assert!(
        msg.contains("sqlite:///") && msg.contains("postgres://"),
        "{msg}"
    );
    drop(first);
    let mut second = FileJournal::open(&dir).unwrap();
    second
        .append("a", 0, &entries("a", 0, 1, true), true, true)
        .unwrap();
}

#[test]
fn torn_tail_is_reported_and_repaired() {
    let (_tmp, dir) = setup();
    {
        let mut j = FileJournal::open(&dir).unwrap();
        j.append("a", 0, &entries("a", 0, 2, true), true, true)
            .unwrap();
        j.append("b", 0, &entries("b", 0, 1, false), true, false)
            .unwrap();
    }
    let good = journal_bytes(&dir);
    let torn = br#"{"data":"half","open":tr"#;
    let mut bytes = good.clone();
    bytes.extend_from_slice(torn);
    fs::write(dir.join(JOURNAL_FILE), &bytes).unwrap();

    let err = FileJournal::open(&dir).unwrap_err();
    match err {
        Error::TornTail { offset, bytes } => {
            assert_eq!(offset, good.len() as u64);
            assert_eq!(bytes, torn.len() as u64);
        }
        ref other => panic!("expected TornTail, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(JOURNAL_FILE), "{msg}");
    assert!(msg.contains(&good.len().to_string()), "{msg}");
    assert!(msg.contains("repair"), "{msg}");
    // open never modified the file
    assert_eq!(journal_bytes(&dir), bytes);

    let report = FileJournal::repair(&dir).unwrap();
    let side = dir.join(format!("{TORN_PREFIX}{}", good.len()));
    assert_eq!(
        report,
        RepairReport {
            torn_offset: Some(good.len() as u64),
            torn_bytes: torn.len() as u64,
            saved_to: Some(side.clone()),
        }
    );
    assert!(report.to_string().contains(&side.display().to_string()));
    assert_eq!(fs::read(&side).unwrap(), torn);
    assert_eq!(journal_bytes(&dir), good);

    let nothing = FileJournal::repair(&dir).unwrap();
    assert_eq!(
        nothing,
        RepairReport {
            torn_offset: None,
            torn_bytes: 0,
            saved_to: None
        }
    );
    assert!(nothing.to_string().contains("nothing to repair"));

    let mut j = FileJournal::open(&dir).unwrap();
    assert_eq!(j.read("a", 0).unwrap(), entries("a", 0, 2, true));
    assert_eq!(j.read("b", 0).unwrap(), entries("b", 0, 1, false));
    assert_eq!(j.open_streams(), ["a"]);
    j.append("a", 2, &entries("a", 2, 1, true), true, true)
        .unwrap();
    drop(j);

    // A second torn tail at the same offset never overwrites the first side file.
    let mut again = journal_bytes(&dir);
    let offset = again.len();
    again.extend_from_slice(b"xyz");
    fs::write(dir.join(JOURNAL_FILE), &again).unwrap();
    fs::write(dir.join(format!("{TORN_PREFIX}{offset}")), b"older").unwrap();
    let report = FileJournal::repair(&dir).unwrap();
    let side2 = dir.join(format!("{TORN_PREFIX}{offset}.1"));
    assert_eq!(report.saved_to, Some(side2.clone()));
    assert_eq!(fs::read(&side2).unwrap(), b"xyz");
    assert_eq!(
        fs::read(dir.join(format!("{TORN_PREFIX}{offset}"))).unwrap(),
        b"older"
    );
    assert_eq!(FileJournal::open(&dir).unwrap().length("a"), 3);
}

#[test]
fn torn_tail_without_any_complete_line() {
    let (_tmp, dir) = setup();
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(JOURNAL_FILE), b"{\"open\"").unwrap();
    assert!(matches!(
        FileJournal::open(&dir),
        Err(Error::TornTail {
            offset: 0,
            bytes: 7
        })
    ));
    let report = FileJournal::repair(&dir).unwrap();
    assert_eq!(report.torn_offset, Some(0));
    assert_eq!(report.torn_bytes, 7);
    assert!(journal_bytes(&dir).is_empty());
    assert!(FileJournal::open(&dir).unwrap().streams().is_empty());
}

#[test]
fn repair_of_a_directory_without_journal_does_nothing() {
    let (_tmp, dir) = setup();
    fs::create_dir_all(&dir).unwrap();
    let report = FileJournal::repair(&dir).unwrap();
    assert_eq!(report.torn_offset, None);
    assert!(!dir.join(JOURNAL_FILE).exists());
}

/// Writes a journal of two good lines followed by `bad` (a complete line) and checks that
/// open reports it as corrupt at line 3.
fn assert_corrupt_line_3(bad: &str, detail_contains: &str) {
    let (_tmp, dir) = setup();
    fs::create_dir_all(&dir).unwrap();
    let text = format!("{}\n{}\n{bad}\n", entry("a", 0, true), entry("b", 0, true));
    fs::write(dir.join(JOURNAL_FILE), text).unwrap();
    let err = FileJournal::open(&dir).unwrap_err();
    match &err {
        Error::Corrupt { line: 3, detail } => assert!(
            detail.contains(detail_contains),
            "detail {detail:?} should mention {detail_contains:?}"
        ),
        other => panic!("expected Corrupt at line 3 for {bad:?}, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("journal.jsonl line 3"), "{msg}");
}

#[test]
fn corrupt_lines_are_reported_with_their_line_number() {
    assert_corrupt_line_3(
        r#"{"open":true,"seq":1,"stream":"a""#,
        "not a journal entry",
    );
    assert_corrupt_line_3("not json at all", "not a JSON object");
    assert_corrupt_line_3("", "not a JSON object");
    assert_corrupt_line_3(r#"["a",1,true]"#, "not a JSON object");
    assert_corrupt_line_3(r#"{"open":true,"stream":"a"}"#, "seq");
    assert_corrupt_line_3(r#"{"open":true,"seq":1}"#, "stream");
    assert_corrupt_line_3(r#"{"seq":1,"stream":"a"}"#, "open");
    assert_corrupt_line_3(r#"{"open":"yes","seq":1,"stream":"a"}"#, "invalid type");
    assert_corrupt_line_3(r#"{"open":true,"seq":"1","stream":"a"}"#, "invalid type");
    assert_corrupt_line_3(r#"{"open":true,"seq":-1,"stream":"a"}"#, "invalid");
    assert_corrupt_line_3(r#"{"open":true,"seq":1,"stream":7}"#, "invalid type");
    assert_corrupt_line_3(r#"{"open":true,"seq":1,"stream":"a"} x"#, "trailing");
    // seq not equal to the stream position: a gap, a repeat, and a new stream not at 0
    assert_corrupt_line_3(&entry("a", 2, true), "seq is 2");
    assert_corrupt_line_3(&entry("a", 0, true), "seq is 0");
    assert_corrupt_line_3(&entry("c", 1, true), "has 0 entries");
}

#[test]
fn corrupt_non_utf8_line() {
    let (_tmp, dir) = setup();
    fs::create_dir_all(&dir).unwrap();
    let mut bytes = format!("{}\n", entry("a", 0, true)).into_bytes();
    bytes.extend_from_slice(b"{\"stream\":\"\xff\"}\n");
    fs::write(dir.join(JOURNAL_FILE), bytes).unwrap();
    assert!(matches!(
        FileJournal::open(&dir),
        Err(Error::Corrupt { line: 2, .. })
    ));
}

#[test]
fn invalid_entries_write_nothing() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    j.append("a", 0, &entries("a", 0, 1, true), true, true)
        .unwrap();
    let bytes = journal_bytes(&dir);

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
    ];
    for (why, batch) in bad_batches {
        match j.append("a", 1, &batch, true, true) {
            Err(Error::InvalidEntry { detail }) => {
                assert!(detail.contains(why), "{detail:?} should mention {why:?}")
            }
            other => panic!("expected InvalidEntry ({why}), got {other:?}"),
        }
        assert_eq!(journal_bytes(&dir), bytes, "{why}: nothing written");
        assert_eq!(j.length("a"), 1);
    }
    assert_eq!(j.streams(), ["a"]);
    assert_eq!(j.fsyncs(), 1);
    // the handle is still usable
    j.append("a", 1, &entries("a", 1, 1, true), true, true)
        .unwrap();
    assert_eq!(j.length("a"), 2);
}

#[test]
fn bytes_on_disk_are_the_entries_joined_with_newlines() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    let mut written = Vec::new();
    let a = entries("a", 0, 2, true);
    let b =
        vec![r#"{"nested":{"k":[1,2,"é"]},"open":false,"seq":0,"stream":"b \"q\""}"#.to_owned()];
    let a2 = entries("a", 2, 1, false);
    j.append("a", 0, &a, false, true).unwrap();
    j.append("b \"q\"", 0, &b, true, false).unwrap();
    j.append("a", 2, &a2, false, false).unwrap();
    written.extend(a);
    written.extend(b.clone());
    written.extend(a2);
    let expected = format!("{}\n", written.join("\n"));
    assert_eq!(journal_bytes(&dir), expected.as_bytes());
    assert_eq!(j.read("b \"q\"", 0).unwrap(), b);
    drop(j);
    // reopening and scanning does not change a byte
    let j = FileJournal::open(&dir).unwrap();
    assert_eq!(journal_bytes(&dir), expected.as_bytes());
    assert_eq!(j.streams(), ["a", "b \"q\""]);
}

#[test]
fn debug_and_error_messages_are_informative() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    j.append("a", 0, &entries("a", 0, 2, true), false, true)
        .unwrap();
    let debug = format!("{j:?}");
    assert!(debug.contains("FileJournal"), "{debug}");
    assert!(debug.contains("entries: 2"), "{debug}");
    assert!(debug.contains("pending: true"), "{debug}");
    let conflict = j
        .append("a", 0, &entries("a", 0, 1, true), false, true)
        .unwrap_err()
        .to_string();
    assert!(conflict.contains("2 entries"), "{conflict}");
    let invalid = j
        .append("a", 2, &entries("a", 3, 1, true), false, true)
        .unwrap_err()
        .to_string();
    assert!(
        invalid.contains("seq member is 3 but should be 2"),
        "{invalid}"
    );
}

/// Every stream's name, length and entries, the open streams and the stream order.
type Snapshot = (Vec<String>, Vec<String>, Vec<(u64, Vec<String>)>);

fn snapshot(j: &FileJournal) -> Snapshot {
    let streams = j.streams();
    let contents = streams
        .iter()
        .map(|s| (j.length(s), j.read(s, 0).unwrap()))
        .collect();
    (streams, j.open_streams(), contents)
}

/// 40 streams, every third left open, some with several appends.
fn fill(j: &mut FileJournal, prefix: &str) {
    for i in 0..40u64 {
        let s = format!("{prefix}{i}");
        let open = i % 3 == 0;
        j.append(&s, 0, &entries(&s, 0, 2, true), false, true)
            .unwrap();
        j.append(&s, 2, &entries(&s, 2, 1 + i % 2, open), false, open)
            .unwrap();
    }
}

#[test]
fn a_checkpoint_reopens_to_the_same_index_and_reads_only_the_tail() {
    let (_tmp, dir) = setup();
    let before = {
        let mut j = FileJournal::open(&dir).unwrap();
        fill(&mut j, "s");
        j.checkpoint().unwrap();
        assert_eq!(
            j.checkpoint_covers(),
            Some(journal_bytes(&dir).len() as u64)
        );
        snapshot(&j)
    };
    let bytes = journal_bytes(&dir);
    let mut j = FileJournal::open(&dir).unwrap();
    assert_eq!(j.scanned_bytes(), 0, "nothing after the checkpoint to scan");
    assert_eq!(snapshot(&j), before);
    // Appends after the checkpoint: to an open stream, a closed one, and new streams.
    j.append("s0", 3, &entries("s0", 3, 1, false), false, false)
        .unwrap();
    j.append("s1", 4, &entries("s1", 4, 1, true), false, true)
        .unwrap();
    fill(&mut j, "t");
    assert_eq!(
        j.append("s2", 0, &entries("s2", 0, 1, true), false, true)
            .unwrap_err()
            .to_string(),
        Error::Conflict { actual: 3 }.to_string(),
        "a checkpointed stream keeps its length"
    );
    let after = snapshot(&j);
    drop(j);
    assert!(
        journal_bytes(&dir).starts_with(&bytes),
        "the journal is only appended to"
    );

    let j = FileJournal::open(&dir).unwrap();
    assert!(j.scanned_bytes() > 0);
    assert_eq!(snapshot(&j), after, "checkpoint + tail");
    drop(j);
    fs::remove_file(dir.join(INDEX_FILE)).unwrap();
    let j = FileJournal::open(&dir).unwrap();
    assert_eq!(j.checkpoint_covers(), None);
    assert_eq!(
        snapshot(&j),
        after,
        "the whole file, without the checkpoint"
    );
}

#[test]
fn a_second_checkpoint_merges_the_first_and_the_tail() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    fill(&mut j, "a");
    j.checkpoint().unwrap();
    j.append("a0", 3, &entries("a0", 3, 1, false), false, false)
        .unwrap();
    fill(&mut j, "b");
    j.checkpoint().unwrap();
    let want = snapshot(&j);
    drop(j);
    let j = FileJournal::open(&dir).unwrap();
    assert_eq!(j.scanned_bytes(), 0);
    assert_eq!(snapshot(&j), want);
    assert_eq!(j.open_streams().len(), 2 * 14 - 1);
}

#[test]
fn a_checkpoint_that_does_not_match_the_journal_is_ignored() {
    let (_tmp, dir) = setup();
    let mut j = FileJournal::open(&dir).unwrap();
    fill(&mut j, "s");
    j.checkpoint().unwrap();
    let want = snapshot(&j);
    drop(j);
    let index = fs::read(dir.join(INDEX_FILE)).unwrap();
    let journal = journal_bytes(&dir);

    // A flipped byte in the header, or in a stream record.
    for at in [20, 200] {
        let mut bad = index.clone();
        bad[at] ^= 1;
        fs::write(dir.join(INDEX_FILE), &bad).unwrap();
        let j = FileJournal::open(&dir).unwrap();
        match j.checkpoint_covers() {
            None => assert_eq!(snapshot(&j), want, "ignored, byte {at}"),
            // Records are checked when read: a bad one is an error, never a wrong answer.
            Some(_) => assert!(j.try_streams().is_err(), "byte {at}"),
        }
    }
    // The journal rewritten below the checkpoint: same length, another last entry.
    fs::write(dir.join(INDEX_FILE), &index).unwrap();
    let mut other = journal.clone();
    let n = other.len();
    other[n - 3] = b'X';
    fs::write(dir.join(JOURNAL_FILE), &other).unwrap();
    let j = FileJournal::open(&dir);
    assert!(
        matches!(j, Err(Error::Corrupt { .. })),
        "ignored, so the full scan finds the bad line"
    );
    // The journal truncated below the checkpoint (a repaired torn tail).
    fs::write(dir.join(JOURNAL_FILE), &journal[..journal.len() / 2]).unwrap();
    FileJournal::repair(&dir).unwrap();
    let j = FileJournal::open(&dir).unwrap();
    assert_eq!(j.checkpoint_covers(), None);
    assert!(j.streams().len() < 40);
}

#[test]
fn threads_share_fsyncs_and_lose_nothing() {
    let (_tmp, dir) = setup();
    let shared = SharedFileJournal::open(&dir).unwrap();
    const THREADS: u64 = 16;
    const EACH: u64 = 20;
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let shared = shared.clone();
            scope.spawn(move || {
                let s = format!("t{t}");
                for i in 0..EACH {
                    shared
                        .append(&s, i, &entries(&s, i, 1, true), true, true)
                        .unwrap();
                }
            });
        }
    });
    let fsyncs = shared.fsyncs();
    assert!(
        (1..=THREADS * EACH).contains(&fsyncs),
        "{fsyncs} fsyncs for {} durable appends",
        THREADS * EACH
    );
    assert_eq!(
        shared
            .append("t0", 0, &entries("t0", 0, 1, true), true, true)
            .unwrap_err()
            .to_string(),
        Error::Conflict { actual: EACH }.to_string()
    );
    shared.sync().unwrap();
    assert_eq!(
        shared.fsyncs(),
        fsyncs,
        "nothing pending after durable appends"
    );
    drop(shared);
    let j = FileJournal::open(&dir).unwrap();
    for t in 0..THREADS {
        let s = format!("t{t}");
        assert_eq!(j.read(&s, 0).unwrap(), entries(&s, 0, EACH, true));
    }
}

/// Issue 11: a journal holds customers' orders and amounts; every host creates it owner-only.
#[cfg(unix)]
#[test]
fn the_journal_is_created_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let (_tmp, dir) = setup();
    let nested = dir.join("a").join("b");
    let mut j = FileJournal::open(&nested).unwrap();
    j.append("a", 0, &entries("a", 0, 2, true), true, true)
        .unwrap();
    j.checkpoint().unwrap();
    drop(j);
    assert_eq!(mode(&dir), 0o700, "a created parent");
    assert_eq!(mode(&nested), 0o700);
    for f in [JOURNAL_FILE, LOCK_FILE, INDEX_FILE, FORMAT_FILE] {
        assert_eq!(mode(&nested.join(f)), 0o600, "{f}");
    }
    // The side file a repair saves torn bytes to.
    let mut f = OpenOptions::new()
        .append(true)
        .open(nested.join(JOURNAL_FILE))
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"torn").unwrap();
    let saved = FileJournal::repair(&nested).unwrap().saved_to.unwrap();
    assert_eq!(mode(&saved), 0o600);
}

/// Issue 12: a new journal records its format version; a journal made before versions
/// (journal.jsonl, no journal.format) is version 1 and is left as it is.
#[test]
fn a_new_journal_records_its_format_version_and_an_old_one_is_version_1() {
    let (_tmp, dir) = setup();
    drop(FileJournal::open(&dir).unwrap());
    assert_eq!(
        fs::read_to_string(dir.join(FORMAT_FILE)).unwrap(),
        "interlock-journal 1\n"
    );
    assert!(!dir.join(format!("{FORMAT_FILE}.tmp")).exists());

    let (_tmp2, old) = setup();
    fs::create_dir_all(&old).unwrap();
    fs::write(old.join(JOURNAL_FILE), format!("{}\n", entry("a", 0, true))).unwrap();
    let j = FileJournal::open(&old).unwrap();
    assert_eq!(j.length("a"), 1);
    assert!(!old.join(FORMAT_FILE).exists());
}

/// Issue 12: a newer format is refused with a clear error, never guessed at, and nothing
/// in the directory changes (no journal.jsonl is created beside it).
#[test]
fn a_newer_or_unknown_format_version_is_refused() {
    for (text, want) in [
        (
            "interlock-journal 2\n",
            "journal format version 2 is newer than this reader understands (1); upgrade Interlock",
        ),
        (
            "interlock-journal one\n",
            "journal format file journal.format is not valid",
        ),
    ] {
        let (_tmp, dir) = setup();
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(FORMAT_FILE), text).unwrap();
        let e = FileJournal::open(&dir).unwrap_err();
        assert!(matches!(e, Error::Format(_)), "{e:?}");
        assert!(e.to_string().starts_with(want), "{e}");
        assert!(!dir.join(JOURNAL_FILE).exists());
        assert_eq!(fs::read_to_string(dir.join(FORMAT_FILE)).unwrap(), text);
        // Nor does repair cut a newer journal by this version's rules.
        fs::write(dir.join(JOURNAL_FILE), "not lines").unwrap();
        assert!(matches!(FileJournal::repair(&dir), Err(Error::Format(_))));
        assert_eq!(
            fs::read_to_string(dir.join(JOURNAL_FILE)).unwrap(),
            "not lines"
        );
    }
}

#[test]
fn a_second_writer_waits_for_the_lock_and_gets_it_when_the_first_lets_go() {
    let (_tmp, dir) = setup();
    let first = FileJournal::open(&dir).unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        drop(first);
    });
    let start = std::time::Instant::now();
    let second = FileJournal::open_waiting(&dir, Duration::from_secs(10)).unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "it did not wait"
    );
    release.join().unwrap();
    drop(second);
}
