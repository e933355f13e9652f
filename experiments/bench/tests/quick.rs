//! `interlock-bench --quick`: every benchmark still runs (a few samples each; no figure is
//! checked, since these are not timed tests).

use std::process::Command;

#[test]
fn every_benchmark_runs_in_quick_mode() {
    let out = tempfile::tempdir().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_interlock-bench"))
        .arg("--quick")
        .arg("--out")
        .arg(out.path())
        .status()
        .expect("run interlock-bench");
    assert!(status.success(), "interlock-bench --quick failed");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("bench.json")).unwrap())
            .unwrap();
    let ids: Vec<&str> = json["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    for want in [
        "send.fsyncs_per_effect",
        "send.submit_vs_raw_fsync",
        "overhead.component_vs_native",
        "overhead.native_submit",
        "concurrency.speedup_64",
        "concurrency.vs_cpu_bound",
        "cold.instantiate",
        "size.gzip",
        "recover.big_vs_small",
        "crash.to_closed",
    ] {
        assert!(ids.contains(&want), "{want} missing from {ids:?}");
    }
    // The one figure that is a count, not a timing: the send path's single durable write.
    let fsyncs = json["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "send.fsyncs_per_effect")
        .unwrap();
    assert_eq!(
        fsyncs["value"], 1.0,
        "one fdatasync per effect on the send path"
    );
}

/// `interlock-bench --shared --quick`: the shared journals' table still comes out, a row per
/// backend and worker count (PostgreSQL's only where it is installed, as in CI).
#[test]
fn the_shared_journal_table_runs_in_quick_mode() {
    let out = tempfile::tempdir().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_interlock-bench"))
        .args(["--shared", "--quick", "--out"])
        .arg(out.path())
        .status()
        .expect("run interlock-bench --shared");
    assert!(status.success(), "interlock-bench --shared --quick failed");
    let text = std::fs::read_to_string(out.path().join("shared-journal.md")).unwrap();
    for backend in ["file", "sqlite", "postgres"] {
        for workers in [1, 8, 32] {
            let row = format!("| {backend} | {workers} |");
            assert!(text.contains(&row), "{row} missing:\n{text}");
        }
    }
}

/// `interlock-evidence --quick`: every row of results/evidence.md still comes out.
#[test]
fn the_evidence_runs_in_quick_mode() {
    let out = tempfile::tempdir().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_interlock-evidence"))
        .arg("--quick")
        .arg("--out")
        .arg(out.path())
        .status()
        .expect("run interlock-evidence");
    assert!(status.success(), "interlock-evidence --quick failed");
    let md = std::fs::read_to_string(out.path().join("evidence.md")).unwrap();
    for row in [
        "receipt, Ed25519",
        "check-receipt-signature, Ed25519",
        "log append",
        "check-inclusion",
        "| 1000 |",
    ] {
        assert!(md.contains(row), "{row} missing from:\n{md}");
    }
}
