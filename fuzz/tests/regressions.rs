//! Replays every input kept in regressions/<target>/ (crashes the fuzzers found, kept after
//! the fix) and seeds/<target>/ (the starting corpus) through the harnesses: a plain
//! `cargo test --manifest-path fuzz/Cargo.toml` on stable, no fuzzer needed.
use std::path::Path;

/// Inputs that still crash, for bugs reported but not fixed yet (the core is not this
/// folder's to change). Each must still panic; once it is fixed the replay says so, and the
/// name comes off this list so the input guards the fix like every other regression.
/// Inputs that still crash, each with where and why; empty when every finding is fixed.
/// (check-receipt-head-length-0: `check_receipt` indexed `entries[head.length - 1]` for a
/// signed receipt with head.length 0; fixed in the core, now a plain regression input.)
const KNOWN_OPEN: &[&str] = &[];

fn replay(target: &str, run: fn(&[u8])) {
    let mut n = 0;
    for kind in ["regressions", "seeds"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(kind)
            .join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.file_name().is_some_and(|f| f != ".keep"))
            .collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).unwrap();
            eprintln!("{target}: {}", f.display());
            let name = f.file_name().unwrap().to_str().unwrap();
            if KNOWN_OPEN.contains(&name) {
                let crashed = std::panic::catch_unwind(|| run(&data)).is_err();
                assert!(
                    crashed,
                    "{}: this known crash is fixed; take {name:?} off KNOWN_OPEN",
                    f.display()
                );
            } else {
                run(&data);
            }
            n += 1;
        }
    }
    assert!(n > 0, "no inputs for {target}: the seeds are missing");
}

#[test]
fn journal() {
    replay("journal", interlock_fuzz::journal);
}

#[test]
fn proposal() {
    replay("proposal", interlock_fuzz::proposal);
}

#[test]
fn file_journal() {
    replay("file_journal", interlock_fuzz::file_journal);
}

/// Writes the seed corpus: real journals from the gate at every tier and ending (a sent
/// refund, an open DISPATCHED, a refusal, a lookup), and a few call sequences.
/// `cargo test --manifest-path fuzz/Cargo.toml -- --ignored write_seeds`
#[test]
#[ignore]
fn write_seeds() {
    use interlock_core::{Ask, Gate, MemJournal, Reply};
    use interlock_fuzz::{case_proposal, LEASE, T0_MS};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let mut k = 0;
    for (dedupes, lookup) in [(true, false), (false, true), (false, false), (true, true)] {
        for ending in ["applied", "unknown", "changed", "rejected"] {
            let mut gate = Gate::new();
            let mut j = MemJournal::new();
            gate.grant_lease(&mut j, T0_MS, LEASE, T0_MS + 3_600_000)
                .unwrap();
            let mut step = gate
                .submit(&mut j, T0_MS, &case_proposal(dedupes, lookup))
                .unwrap();
            while !matches!(step.ask, Ask::Done(_)) {
                let reply = match (&step.ask, ending) {
                    (Ask::Capture { .. }, "changed") => {
                        Reply::Captured(r#"{"eligible":false,"refunded_by_others_cents":0}"#.into())
                    }
                    (Ask::Capture { .. }, _) => {
                        Reply::Captured(r#"{"eligible":true,"refunded_by_others_cents":0}"#.into())
                    }
                    (Ask::Authorize { .. }, _) => Reply::Allowed(true),
                    (Ask::Apply { .. }, "unknown") => Reply::Unknown("timeout".into()),
                    (Ask::Apply { .. }, "rejected") => Reply::Rejected("no".into()),
                    (Ask::Apply { .. }, _) => Reply::Applied(r#"{"refund_id":"re_0001"}"#.into()),
                    (Ask::Query { .. }, _) => Reply::NotFound,
                    (Ask::Sleep(_), _) => Reply::Slept,
                    (Ask::Crash(_), _) => unreachable!(),
                    (Ask::Done(_), _) => unreachable!(),
                };
                step = gate.resume(&mut j, T0_MS, step.op, reply).unwrap();
            }
            let jsonl = j.to_jsonl();
            // The journal target's first byte picks its replies; the rest is the journal.
            let mut data = vec![k as u8];
            data.extend_from_slice(jsonl.as_bytes());
            std::fs::write(root.join("journal").join(format!("seed-{k:02}")), &data).unwrap();
            std::fs::write(
                root.join("file_journal").join(format!("seed-{k:02}")),
                jsonl.as_bytes(),
            )
            .unwrap();
            k += 1;
        }
    }
    // Call sequences: bytes the `Arbitrary` decoder turns into calls; a few fixed patterns.
    for (i, bytes) in [
        vec![0u8; 64],
        (0..=255u8).collect::<Vec<_>>(),
        [1u8, 2, 3, 4, 5, 6, 7, 8].repeat(16),
        b"\x00\x01{\"agent\":\"a\"}\x04\x02\x00\x05".to_vec(),
    ]
    .iter()
    .enumerate()
    {
        std::fs::write(root.join("proposal").join(format!("seed-{i:02}")), bytes).unwrap();
    }
}

/// What the Rust file journal makes of every input of the file_journal corpus, opened as a
/// journal.jsonl: its streams (name, length, open) or its refusal (kind and text). The Node
/// and Python hosts replay the same inputs against this table
/// (hosts/node/test/fuzz-replay.test.js, hosts/python/tests/test_fuzz_replay.py), so the
/// three hosts accept and refuse exactly the same files. The table is checked in; this test
/// fails when it is stale. `INTERLOCK_BLESS=1 cargo test --manifest-path fuzz/Cargo.toml
/// file_journal_table` rewrites it.
#[test]
fn file_journal_table() {
    use interlock_file_journal::{Error, FileJournal};
    use serde_json::{json, Map, Value};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut table = Map::new();
    for kind in ["regressions", "seeds"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(kind).join("file_journal"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().is_some_and(|f| f != ".keep"))
            .collect();
        files.sort();
        for f in files {
            let tmp = std::env::temp_dir().join(format!(
                "interlock-fuzz-table-{}-{}",
                std::process::id(),
                table.len()
            ));
            std::fs::create_dir_all(&tmp).unwrap();
            std::fs::copy(&f, tmp.join("journal.jsonl")).unwrap();
            let result = match FileJournal::open(&tmp) {
                Ok(j) => {
                    let open = j.open_streams();
                    let streams: Vec<Value> = j
                        .streams()
                        .into_iter()
                        .map(|s| json!([s, j.length(&s), open.contains(&s)]))
                        .collect();
                    json!({ "streams": streams })
                }
                Err(e) => {
                    let kind = match e {
                        Error::TornTail { .. } => "torn-tail",
                        Error::Corrupt { .. } => "corrupt",
                        ref other => panic!("{}: unexpected error {other}", f.display()),
                    };
                    json!({ "error": kind, "message": e.to_string() })
                }
            };
            std::fs::remove_dir_all(&tmp).unwrap();
            let name = format!(
                "{kind}/file_journal/{}",
                f.file_name().unwrap().to_str().unwrap()
            );
            table.insert(name, result);
        }
    }
    let text = serde_json::to_string_pretty(&Value::Object(table)).unwrap() + "\n";
    let path = root.join("file_journal_expected.json");
    if std::env::var_os("INTERLOCK_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == text,
        "{} is stale: rerun with INTERLOCK_BLESS=1",
        path.display()
    );
}
