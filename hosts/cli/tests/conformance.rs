//! Every vector in tests/conformance/ through the conformance runner (the one interpreter
//! every host runs), this host's gate instances and a file journal. Fails on any
//! difference, on any vector neither run nor skipped with a written reason, and on a
//! journal whose bytes differ from its pin (the runner compares them).
//! `INTERLOCK_BLESS=1` rewrites the pins (only for an intended change of the journal format).
mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use interlock_cli::conformance::{self, Runner, PINS};

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
