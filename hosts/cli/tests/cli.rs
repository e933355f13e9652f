//! The real binary, in real processes: the demo's child really aborts, a new process
//! recovers from the journal on disk.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::T0_MS;

fn interlock(args: &[&str]) -> Output {
    // Fail (never skip) when the component is missing, with the fix in the message.
    common::runtime();
    Command::new(env!("CARGO_BIN_EXE_interlock"))
        .arg("--clock-ms")
        .arg(T0_MS.to_string())
        .args(args)
        .output()
        .expect("run interlock")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn demo(mode: &str, dir: &Path) -> String {
    let out = interlock(&["demo", mode, "--dir", dir.to_str().unwrap()]);
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "demo {mode} failed: {}\n{text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn assert_has(text: &str, want: &str) {
    assert!(text.contains(want), "expected {want:?} in:\n{text}");
}

#[test]
fn demo_tier2_commits_once_via_query() {
    let dir = tempfile::tempdir().unwrap();
    let text = demo("2", &dir.path().join("d"));
    assert_has(&text, "💥 crash");
    assert_has(
        &text,
        "journal says DISPATCHED with no COMMITTED → recovery: COMMITTED (via recovery-query)",
    );
    assert_has(&text, "refunded on order #881: $20 (1 refund record(s))");
    assert!(text.trim_end().ends_with("final COMMITTED"), "{text}");
}

#[test]
fn demo_tier1_commits_once_deduped() {
    let dir = tempfile::tempdir().unwrap();
    let text = demo("1", &dir.path().join("d"));
    assert_has(&text, "refunded on order #881: $20 (1 refund record(s))");
    assert!(text.trim_end().ends_with("final COMMITTED"), "{text}");
}

#[test]
fn demo_tier3_is_ambiguous_and_resends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let text = demo("3", &dir.path().join("d"));
    assert_has(&text, "refunded on order #881: $20 (1 refund record(s))");
    assert!(text.trim_end().ends_with("final AMBIGUOUS"), "{text}");
}

#[test]
fn demo_naive_pays_twice() {
    let dir = tempfile::tempdir().unwrap();
    let text = demo("naive", &dir.path().join("d"));
    assert_has(&text, "💥 crash");
    assert_has(&text, "refunded on order #881: $40 (2 refund record(s))");
    assert_has(&text, "Paid twice");
}

/// The demo's folders are owner-only (0700), as every journal folder is, under the usual
/// umask 022: the default `.interlock-demo/2` and its parent (even one an earlier demo made
/// open), and a `--dir` with the parents it makes.
#[cfg(unix)]
#[test]
fn the_demo_folders_are_owner_only_under_umask_022() {
    use std::os::unix::fs::PermissionsExt;
    common::runtime();
    let tmp = tempfile::tempdir().unwrap();
    let at = |p: &str| tmp.path().join(p);
    let mode = |p: &str| std::fs::metadata(at(p)).unwrap().permissions().mode() & 0o777;
    std::fs::create_dir(at(".interlock-demo")).unwrap();
    std::fs::set_permissions(
        at(".interlock-demo"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let demo = |args: &[&str]| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(r#"umask 022 && exec "$0" "$@""#)
            .arg(env!("CARGO_BIN_EXE_interlock"))
            .arg("--clock-ms")
            .arg(T0_MS.to_string())
            .args(args)
            .current_dir(tmp.path())
            .output()
            .expect("run interlock");
        assert!(
            out.status.success(),
            "{}\n{}{}",
            out.status,
            stdout(&out),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    demo(&["demo", "2"]);
    demo(&["demo", "2", "--dir", "a/b/d"]);
    for dir in [".interlock-demo", ".interlock-demo/2", "a", "a/b", "a/b/d"] {
        assert_eq!(mode(dir), 0o700, "{dir}");
    }
    assert_eq!(mode(".interlock-demo/2/journal.jsonl"), 0o600);
}

#[test]
fn verify_catches_an_edited_amount() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    demo("2", &dir);
    let d = dir.to_str().unwrap();

    let ok = interlock(&["verify", d]);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    assert!(stdout(&ok).starts_with("ok: "), "{}", stdout(&ok));

    // Change $20 to $2,000 in the first entry that records the amount.
    let path = dir.join("journal.jsonl");
    let journal = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = journal.lines().map(str::to_string).collect();
    let i = lines
        .iter()
        .position(|l| l.contains("\"amount_cents\":2000"))
        .expect("an entry with the amount");
    lines[i] = lines[i].replacen("\"amount_cents\":2000", "\"amount_cents\":200000", 1);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let stream: serde_json::Value = serde_json::from_str(&lines[i]).unwrap();
    let stream = stream["stream"].as_str().unwrap();

    let bad = interlock(&["verify", d]);
    assert_eq!(bad.status.code(), Some(1), "{}", stdout(&bad));
    assert_has(&stdout(&bad), stream);
}

#[test]
fn errors_are_clear_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let out = interlock(&["verify", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_has(&String::from_utf8_lossy(&out.stderr), "no journal there");

    let dir = tmp.path().join("d");
    demo("2", &dir);
    let d = dir.to_str().unwrap();
    let out = interlock(&["receipt", d, "00000000000000000000000000000000"]);
    assert_eq!(out.status.code(), Some(2));

    // A torn last line: the journal will not open until repaired.
    let path = dir.join("journal.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"stream\":\"x\",\"se");
    std::fs::write(&path, bytes).unwrap();
    // A torn line is a problem the journal has (exit 1, as `--help` says), not a usage error.
    let out = interlock(&["verify", d]);
    assert_eq!(out.status.code(), Some(1));
    assert_has(&String::from_utf8_lossy(&out.stderr), "interlock repair");
    let out = interlock(&["repair", d]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = interlock(&["verify", d]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// `interlock serve` refuses to start, exit 2, saying why, rather than serve a gate that
/// is open or answers 500 to everything: no token, bad targets, a bad journal name.
#[test]
fn serve_refuses_to_start_without_a_token_or_with_bad_targets() {
    let dir = tempfile::tempdir().unwrap();
    let journals = dir.path().join("journals");
    let serve = |env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_interlock"));
        cmd.env_remove("INTERLOCK_TOKEN")
            .env_remove("INTERLOCK_TARGETS");
        cmd.args([
            "serve",
            journals.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ]);
        cmd.envs(env.iter().copied());
        cmd.output().expect("run interlock serve")
    };
    let out = serve(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert_has(&String::from_utf8_lossy(&out.stderr), "set INTERLOCK_TOKEN");
    let bad = r#"{"payments": {"lookup": {"url": "http://x/"}}}"#;
    let out = serve(&[("INTERLOCK_TOKEN", "t"), ("INTERLOCK_TARGETS", bad)]);
    assert_eq!(out.status.code(), Some(2));
    assert_has(
        &String::from_utf8_lossy(&out.stderr),
        "INTERLOCK_TARGETS: /payments/apply is required",
    );
    let db = format!("sqlite://{}", dir.path().join("shared.db").display());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_interlock"));
    cmd.args(["serve", &db, "--name", "../x", "--listen", "127.0.0.1:0"]);
    let out = cmd.env("INTERLOCK_TOKEN", "t").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_has(
        &String::from_utf8_lossy(&out.stderr),
        "is not a journal name",
    );
    assert!(!journals.exists(), "nothing made");
}
