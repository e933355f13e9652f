//! Every vector in tests/conformance/ through the conformance runner (the one interpreter
//! every host runs), this host's gate instances and a file journal. Fails on any
//! difference, on any vector neither run nor skipped with a written reason, and on a
//! journal whose bytes differ from its pin (the runner compares them).
//! `INTERLOCK_BLESS=1` rewrites the pins (only for an intended change of the journal format).
mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use interlock_cli::conformance::{self, JournalAt, Runner, PINS};
use interlock_sql_journal::testing::Cluster;

#[test]
fn every_vector_passes_or_is_skipped_with_a_reason() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance");
    let vectors = conformance::load_dir(&dir).expect("the vectors load");
    assert!(
        vectors.len() >= 40,
        "only {} vectors in {}",
        vectors.len(),
        dir.display()
    );
    let runner = Runner::load(&conformance::locate(), common::runtime()).expect("the runner loads");
    let bless = std::env::var_os("INTERLOCK_BLESS").is_some();
    let pins = conformance::load_pins(&dir).unwrap();
    let mut new_pins = BTreeMap::new();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut problems = Vec::new();
    for (path, v) in &vectors {
        let work = tempfile::tempdir().unwrap();
        let report = match runner.run(v, &pins, !bless, work.path()) {
            Ok(r) => r,
            Err(e) => {
                failed += 1;
                problems.push(format!("{}: the runner failed: {e:#}", v.id));
                continue;
            }
        };
        if let Some(reason) = &report.skipped {
            assert!(
                !reason.trim().is_empty(),
                "{} is skipped without a reason",
                path.display()
            );
            skipped += 1;
            continue;
        }
        new_pins.insert(v.id.clone(), report.journal_sha256.clone());
        if report.failures.is_empty() {
            passed += 1;
        } else {
            failed += 1;
            problems.extend(report.failures.iter().map(|f| format!("{}: {f}", v.id)));
        }
    }
    if bless {
        let text = serde_json::to_string_pretty(&new_pins).unwrap() + "\n";
        std::fs::write(dir.join(PINS), text).unwrap();
    }
    let pinned: BTreeMap<String, String> = serde_json::from_str(&pins).unwrap();
    let stale: Vec<&String> = pinned
        .keys()
        .filter(|id| !vectors.iter().any(|(_, v)| &v.id == *id))
        .collect();
    assert!(
        bless || stale.is_empty(),
        "pins for vectors that no longer exist: {stale:?}"
    );
    println!("conformance (cli): {passed} passed, {failed} failed, {skipped} skipped");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert_eq!(passed + skipped, vectors.len());
}

/// Every vector on a shared journal (a new one per vector, made by `journal`): the same
/// outcomes and, in append order, the same bytes as the file journal's pins. The vectors
/// that tear and repair a file are skipped by the runner, with its reason.
fn every_vector_on(what: &str, journal: impl Fn(&str) -> String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance");
    let vectors = conformance::load_dir(&dir).expect("the vectors load");
    let runner = Runner::load(&conformance::locate(), common::runtime()).expect("the runner loads");
    let pins = conformance::load_pins(&dir).unwrap();
    let (mut passed, mut skipped, mut problems) = (0, 0, Vec::new());
    for (_, v) in &vectors {
        let at = JournalAt::Url(journal(&v.id));
        match runner.run_at(v, &pins, true, &at) {
            Ok(r) if r.skipped.is_some() => skipped += 1,
            Ok(r) if r.failures.is_empty() => passed += 1,
            Ok(r) => problems.extend(r.failures.iter().map(|f| format!("{}: {f}", v.id))),
            Err(e) => problems.push(format!("{}: the runner failed: {e:#}", v.id)),
        }
    }
    println!("conformance (cli, {what}): {passed} passed, {skipped} skipped");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert_eq!(
        skipped, 3,
        "only the three torn-journal vectors need a file"
    );
    assert_eq!(passed + skipped, vectors.len());
}

#[test]
fn every_vector_on_a_sqlite_journal() {
    let tmp = tempfile::tempdir().unwrap();
    every_vector_on("sqlite", |id| {
        format!("sqlite://{}/{id}.db", tmp.path().display())
    });
}

#[test]
fn every_vector_on_a_postgresql_journal() {
    let cluster = match Cluster::start() {
        Ok(c) => c,
        // Only when PostgreSQL is not installed (scripts/setup.sh installs it).
        Err(why) => return eprintln!("skipped: {why}"),
    };
    every_vector_on("postgres", |_| cluster.database());
}
