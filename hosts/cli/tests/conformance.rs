//! Every vector in tests/conformance/ through the real component, a file journal and the
//! simulated service. Fails on any difference, on any vector neither run nor skipped with
//! a written reason, and on a journal whose bytes differ from its pin.
//! `INTERLOCK_BLESS=1` rewrites the pins (only for an intended change of the journal format).
mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use interlock_cli::conformance::{self, PINS};

const HOST: &str = "cli";

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
    let bless = std::env::var_os("INTERLOCK_BLESS").is_some();
    let pins = conformance::load_pins(&dir).unwrap();
    let mut new_pins = BTreeMap::new();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut problems = Vec::new();
    for (path, v) in &vectors {
        if let Some(reason) = v.skip.get(HOST) {
            assert!(
                !reason.trim().is_empty(),
                "{} skips {HOST} without a reason",
                path.display()
            );
            skipped += 1;
            continue;
        }
        let work = tempfile::tempdir().unwrap();
        let mut report = match conformance::run(common::runtime(), v, work.path()) {
            Ok(r) => r,
            Err(e) => {
                failed += 1;
                problems.push(format!("{}: the runner failed: {e:#}", v.id));
                continue;
            }
        };
        match pins.get(&v.id) {
            _ if bless => {}
            Some(pin) if *pin != report.journal_sha256 => report.failures.push(format!(
                "journal sha256 {} differs from the pin {pin}",
                report.journal_sha256
            )),
            Some(_) => {}
            None => report.failures.push(format!(
                "no journal pin in {PINS} (run with INTERLOCK_BLESS=1)"
            )),
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
    let stale: Vec<&String> = pins
        .keys()
        .filter(|id| !vectors.iter().any(|(_, v)| &v.id == *id))
        .collect();
    assert!(
        bless || stale.is_empty(),
        "pins for vectors that no longer exist: {stale:?}"
    );
    println!("conformance ({HOST}): {passed} passed, {failed} failed, {skipped} skipped");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert_eq!(passed + skipped, vectors.len());
}
