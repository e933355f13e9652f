//! The operator's commands (leases, approvals), `--json` on every command, typed errors and
//! exit codes, run as the real binary on real journal folders. Where the CLI has no command
//! for it (submitting a proposal), the test acts as the agent through the library on the same
//! folder, so the gate itself shows what a grant, a revoke or an approval recorded.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};

use common::*;
use interlock_cli::gate::CrashAction;
use interlock_cli::{Clock, CrashPoint, Error, GateHost, Outcome, PaymentsTarget, Reason, State};
use interlock_file_journal::StdFiles;
use interlock_payments_sim::{Payments, Tier};
use serde_json::{json, Value};

fn command(args: &[&str]) -> Command {
    // Fail (never skip) when the component is missing, with the fix in the message.
    common::runtime();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_interlock"));
    cmd.arg("--clock-ms").arg(T0_MS.to_string()).args(args);
    cmd
}

/// Held while a test holds a journal's lock in this process, and while a test forks. A
/// journal lock belongs to the open file, which a fork shares until the child execs: a CLI
/// run right after another test dropped its in-process host could find the journal locked.
static FORK: Mutex<()> = Mutex::new(());

fn fork_guard() -> MutexGuard<'static, ()> {
    FORK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn run(cmd: &mut Command, input: Option<&[u8]>) -> Output {
    let stdin = if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut child = {
        let _g = fork_guard();
        cmd.stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run interlock")
    };
    if let Some(input) = input {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn interlock(args: &[&str]) -> Output {
    run(&mut command(args), None)
}

fn interlock_stdin(args: &[&str], input: &[u8]) -> Output {
    run(&mut command(args), Some(input))
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Stdout as one JSON document, after checking the exit code.
fn json_of(o: &Output, code: i32) -> Value {
    assert_eq!(o.status.code(), Some(code), "{}", text(o));
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(o)))
}

/// A failure under --json: exit `code`, the error object on stdout, nothing on stderr.
fn json_error(o: &Output, code: i32, kind: &str) -> Value {
    let v = json_of(o, code);
    assert_eq!(v["error"]["kind"], kind, "{}", text(o));
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    assert!(o.stderr.is_empty(), "{}", text(o));
    v["error"].clone()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn journal_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("journal.jsonl")).unwrap_or_default()
}

/// The states recorded in one stream of the journal, in order.
fn stream_states(dir: &Path, stream: &str) -> Vec<String> {
    String::from_utf8(journal_bytes(dir))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["stream"] == stream)
        .map(|e| e["state"].as_str().unwrap().to_string())
        .collect()
}

fn new_payments(dir: &Path, tier: Tier) -> Payments {
    let mut p = Payments::create(&dir.join("payments.json"), tier).unwrap();
    p.add_order(ORDER, PAID_CENTS).unwrap();
    p
}

/// An agent's process on the journal folder (the CLI has no submit command); it holds the
/// journal's lock while `act` runs.
fn as_agent<T>(dir: &Path, act: impl FnOnce(&mut GateHost, &mut PaymentsTarget) -> T) -> T {
    let _g = fork_guard();
    let journal = StdFiles::at(dir).unwrap();
    let mut host = GateHost::new(runtime(), journal, Clock::fake(T0_MS)).unwrap();
    let payments = Payments::open(&dir.join("payments.json")).unwrap();
    act(
        &mut host,
        &mut PaymentsTarget::new(payments, Clock::fake(T0_MS)),
    )
}

/// The agent submits `proposal` and its process dies at `point`.
fn crash_at(dir: &Path, proposal: &str, point: CrashPoint) {
    let crashed = as_agent(dir, |host, target| {
        host.crash_at(point, CrashAction::Error);
        host.submit(proposal, target)
    });
    assert!(matches!(crashed, Err(Error::Crashed(_))), "{crashed:?}");
}

/// The support case's proposal under another key and authority.
fn proposal_with(key: &str, authority: Value, premises: Value) -> String {
    let mut p: Value = serde_json::from_str(&proposal(Tier::TWO, REFUND_CENTS, premises)).unwrap();
    p["key"] = json!(key);
    p["authority"] = authority;
    p.to_string()
}

fn submit(dir: &Path, proposal: &str) -> Outcome {
    as_agent(dir, |host, target| host.submit(proposal, target).unwrap())
}

fn refunds(dir: &Path) -> usize {
    Payments::open(&dir.join("payments.json"))
        .unwrap()
        .refunds(ORDER)
        .len()
}

#[test]
fn a_revoked_lease_refuses_the_recovery_of_an_effect_under_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("j");

    // The first grant sets the journal up.
    let out = interlock(&["--json", "lease", "grant", s(&dir), LEASE, "--for", "1h"]);
    let v = json_of(&out, 0);
    assert_eq!(
        v,
        json!({"ok": true, "lease": LEASE, "expires_at_ms": T0_MS + HOUR_MS, "created_journal": true})
    );
    assert_eq!(stream_states(&dir, &format!("lease:{LEASE}")), ["GRANTED"]);

    // The agent's process records its intent under the lease and dies before the send.
    let payments = new_payments(&dir, Tier::TWO);
    let premises = payments.premises(ORDER, None).unwrap();
    drop(payments);
    let refund = proposal(Tier::TWO, REFUND_CENTS, premises);
    crash_at(&dir, &refund, CrashPoint::BeforeSend);

    let out = interlock(&["lease", "revoke", s(&dir), LEASE]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("lease {LEASE} revoked")
    );
    assert_eq!(
        stream_states(&dir, &format!("lease:{LEASE}")),
        ["GRANTED", "REVOKED"]
    );

    // Recovery waits out the claim, finds nothing sent, re-checks the lease: refused.
    let out = interlock(&["--json", "recover", s(&dir)]);
    let list = json_of(&out, 0);
    let list = list.as_array().expect("a list of outcomes");
    assert_eq!(list.len(), 1, "{list:?}");
    let o = &list[0];
    assert_eq!(o["state"], "REFUSED", "{o}");
    assert_eq!(o["reason"], "lease_revoked", "{o}");
    assert_eq!(o["executed"], "no", "{o}");
    assert_eq!(o["replayed"], false, "{o}");
    assert!(
        o["effect_id"].as_str().is_some_and(|id| id.len() == 32),
        "{o}"
    );
    for key in ["retry_after_ms", "result", "changed", "return_to"] {
        assert!(o.get(key).is_some(), "{key} missing in {o}");
    }
    assert_eq!(refunds(&dir), 0);
}

#[test]
fn a_grant_the_gate_refuses_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("new");
    let out = interlock(&["lease", "grant", s(&dir), "", "--for", "1h"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/lease"),
        "{}",
        text(&out)
    );
    assert!(!dir.exists(), "a refused grant created {}", dir.display());

    let out = interlock(&["--json", "lease", "grant", s(&dir), "", "--until-ms", "1"]);
    let e = json_error(&out, 2, "invalid_field");
    assert_eq!(e["field"], "/lease");
    assert!(e["problem"].as_str().is_some(), "{e}");
    assert!(!dir.exists());

    // A refused grant makes no parent folders either.
    let deep = tmp.path().join("refused/j");
    let out = interlock(&["--json", "lease", "grant", s(&deep), "", "--for", "1h"]);
    json_error(&out, 2, "invalid_field");
    assert!(!tmp.path().join("refused").exists());
}

#[test]
fn a_grant_makes_the_journal_folder_and_its_parents_owner_only() {
    // The README's proxy quickstart grants into `.interlock/mcp` before anything made
    // `.interlock` (issue 23: this once failed with "No such file or directory").
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let deep = tmp.path().join(".interlock/mcp");
    let out = interlock(&["lease", "grant", s(&deep), LEASE, "--for", "48h"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for d in [tmp.path().join(".interlock"), deep.clone()] {
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is {mode:o}", d.display());
    }
    let out = interlock(&["verify", s(&deep)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn approve_from_a_file_and_from_stdin_then_revoke_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("j");
    std::fs::create_dir(&dir).unwrap();
    let payments = new_payments(&dir, Tier::TWO);
    let premises = payments.premises(ORDER, None).unwrap();
    drop(payments);
    let effect = json!({"order": ORDER, "amount_cents": REFUND_CENTS});
    let approval = |id: &str, key: &str| {
        json!({
            "approval": id, "approver": "manager@shop",
            "request": {"key": key, "effect": effect},
            "premises_seen": premises, "expires_at_ms": T0_MS + HOUR_MS,
        })
        .to_string()
    };

    let file = tmp.path().join("apr-7.json");
    std::fs::write(&file, approval("apr-7", "refund:a")).unwrap();
    let out = interlock(&["--json", "approve", s(&dir), s(&file)]);
    assert_eq!(json_of(&out, 0), json!({"ok": true, "approval": "apr-7"}));

    let out = interlock_stdin(
        &["approve", s(&dir), "-"],
        approval("apr-8", "refund:b").as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "approval apr-8 recorded"
    );

    // Recording the same approval again is harmless and records nothing.
    let before = journal_bytes(&dir);
    let out = interlock(&["approve", s(&dir), s(&file)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(journal_bytes(&dir), before);

    let out = interlock(&["--json", "revoke-approval", s(&dir), "apr-7"]);
    assert_eq!(
        json_of(&out, 0),
        json!({"ok": true, "approval": "apr-7", "revoked": true})
    );
    assert_eq!(
        stream_states(&dir, "approval:apr-7"),
        ["APPROVED", "REVOKED"]
    );
    assert_eq!(stream_states(&dir, "approval:apr-8"), ["APPROVED"]);

    // The agent under each: the revoked one is refused, the other goes through.
    let o = submit(
        &dir,
        &proposal_with("refund:a", json!({"approval": "apr-7"}), premises.clone()),
    );
    assert_eq!(
        (o.state, o.reason),
        (State::Refused, Some(Reason::ApprovalRevoked))
    );
    let o = submit(
        &dir,
        &proposal_with("refund:b", json!({"approval": "apr-8"}), premises.clone()),
    );
    assert_eq!((o.state, o.reason), (State::Committed, None));
    assert_eq!(refunds(&dir), 1);
}

#[test]
fn bad_input_is_a_typed_error_and_records_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("j");
    let out = interlock(&[
        "lease",
        "grant",
        s(&dir),
        LEASE,
        "--until-ms",
        &(T0_MS + HOUR_MS).to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let before = journal_bytes(&dir);
    assert!(!before.is_empty());
    let d = s(&dir);

    let not_json = tmp.path().join("not.json");
    std::fs::write(&not_json, "{\"approval\": ").unwrap();
    let out = interlock(&["--json", "approve", d, s(&not_json)]);
    json_error(&out, 2, "invalid_json");

    let bad_field = tmp.path().join("bad.json");
    std::fs::write(
        &bad_field,
        json!({"approval": "apr-1", "approver": "", "request": {"effect": {}}}).to_string(),
    )
    .unwrap();
    let out = interlock(&["--json", "approve", d, s(&bad_field)]);
    let e = json_error(&out, 2, "invalid_field");
    assert_eq!(e["field"], "/approver", "{e}");
    // Without --json: one line on stderr with the field and the problem, nothing on stdout.
    let out = interlock(&["approve", d, s(&bad_field)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("/approver"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out));

    let out = interlock_stdin(&["--json", "approve", d, "-"], b"[1, 2");
    json_error(&out, 2, "invalid_json");

    let missing = tmp.path().join("missing.json");
    let out = interlock(&["--json", "approve", d, s(&missing)]);
    let e = json_error(&out, 2, "not_found");
    assert!(
        e["message"].as_str().unwrap().contains("missing.json"),
        "{e}"
    );

    let out = interlock(&["--json", "lease", "revoke", d, ""]);
    assert_eq!(json_error(&out, 2, "invalid_field")["field"], "/lease");
    let out = interlock(&["--json", "revoke-approval", d, "apr-none"]);
    assert_eq!(json_error(&out, 2, "invalid_field")["field"], "/approval");

    // Usage errors: both expiries, neither, a duration without a unit.
    for args in [
        vec!["lease", "grant", d, LEASE, "--for", "1h", "--until-ms", "5"],
        vec!["lease", "grant", d, LEASE],
        vec!["lease", "grant", d, LEASE, "--for", "48"],
    ] {
        let out = interlock(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let mut with_json = vec!["--json"];
        with_json.extend(&args);
        json_error(&interlock(&with_json), 2, "usage");
    }

    // Commands that act on an existing journal refuse a missing folder and create none.
    let gone = tmp.path().join("gone");
    let file = s(&bad_field);
    for args in [
        vec!["lease", "revoke", s(&gone), LEASE],
        vec!["approve", s(&gone), file],
        vec!["revoke-approval", s(&gone), "apr-1"],
        vec!["recover", s(&gone)],
        vec!["verify", s(&gone)],
        vec!["receipt", s(&gone), "00000000000000000000000000000000"],
        vec!["repair", s(&gone)],
    ] {
        let mut with_json = vec!["--json"];
        with_json.extend(&args);
        json_error(&interlock(&with_json), 2, "no_journal");
        assert!(!gone.exists(), "{args:?} created {}", gone.display());
    }

    assert_eq!(journal_bytes(&dir), before, "bad input changed the journal");
    assert_eq!(stream_states(&dir, &format!("lease:{LEASE}")), ["GRANTED"]);
}

#[test]
fn a_url_that_names_no_journal_is_refused_by_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let approval = tmp.path().join("a.json");
    std::fs::write(&approval, "{}").unwrap();
    let work = tmp.path().join("cwd");
    std::fs::create_dir(&work).unwrap();
    for url in [
        "file://j",
        "mysql://interlock@db/journal",
        "s3://bucket/key",
    ] {
        for args in [
            vec!["recover", url],
            vec!["verify", url],
            vec!["receipt", url, "00000000000000000000000000000000"],
            vec!["repair", url],
            vec!["lease", "grant", url, LEASE, "--for", "1h"],
            vec!["lease", "revoke", url, LEASE],
            vec!["approve", url, s(&approval)],
            vec!["revoke-approval", url, "apr-1"],
            vec!["demo", "2", "--dir", url],
        ] {
            // Relative to an empty folder, so anything created would show.
            let out = run(command(&args).current_dir(&work), None);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("names no journal") && stderr.contains("sqlite:///"),
                "{args:?}: {stderr}"
            );
            let mut with_json = vec!["--json"];
            with_json.extend(&args);
            let out = run(command(&with_json).current_dir(&work), None);
            json_error(&out, 2, "unsupported_journal");
            let left: Vec<_> = std::fs::read_dir(&work).unwrap().collect();
            assert!(left.is_empty(), "{args:?} created {left:?}");
        }
    }
}

#[test]
fn verify_exits_1_on_any_problem_a_torn_line_included_and_2_when_it_cannot_check() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("j");
    let d = s(&dir);
    let out = interlock(&["lease", "grant", d, LEASE, "--for", "1h"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let help = interlock(&["verify", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("exit 1 on any problem, a torn last line included"),
        "{help}"
    );

    let v = json_of(&interlock(&["--json", "verify", d]), 0);
    assert_eq!(
        v,
        json!({"ok": true, "streams": 1, "entries": 1, "problems": []})
    );

    // A torn last line: a problem (1), with the repair named; repaired, it verifies again.
    let path = dir.join("journal.jsonl");
    let good = std::fs::read(&path).unwrap();
    let mut torn = good.clone();
    torn.extend_from_slice(b"{\"stream\":\"x\",\"se");
    std::fs::write(&path, &torn).unwrap();
    let out = interlock(&["verify", d]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("interlock repair"),
        "{}",
        text(&out)
    );
    json_error(&interlock(&["--json", "verify", d]), 1, "torn_journal");
    let v = json_of(&interlock(&["--json", "repair", d]), 0);
    assert_eq!(v["ok"], true);
    assert_eq!(v["repaired"], true);
    assert_eq!(v["torn_offset"], good.len());
    assert_eq!(std::fs::read(&path).unwrap(), good);
    let v = json_of(&interlock(&["--json", "repair", d]), 0);
    assert_eq!(v["repaired"], false, "{v}");
    assert_eq!(interlock(&["verify", d]).status.code(), Some(0));

    // An edited entry: 1, the problem located.
    let edited = String::from_utf8(good.clone()).unwrap().replacen(
        &(T0_MS + HOUR_MS).to_string(),
        &(T0_MS + 1000 * HOUR_MS).to_string(),
        1,
    );
    assert_ne!(edited.as_bytes(), &good[..]);
    std::fs::write(&path, &edited).unwrap();
    let v = json_of(&interlock(&["--json", "verify", d]), 1);
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"][0]["stream"], format!("lease:{LEASE}"), "{v}");
    assert_eq!(v["problems"][0]["kind"], "hash-mismatch", "{v}");
    assert_eq!(interlock(&["verify", d]).status.code(), Some(1));

    // A line that is not an entry: 1.
    std::fs::write(&path, b"not an entry\n").unwrap();
    json_error(&interlock(&["--json", "verify", d]), 1, "corrupt_journal");

    // Cannot check: no folder, an unreadable receipt.
    std::fs::write(&path, &good).unwrap();
    let out = interlock(&["verify", s(&tmp.path().join("none"))]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = interlock(&[
        "--json",
        "verify",
        d,
        "--receipt",
        s(&tmp.path().join("r.json")),
    ]);
    json_error(&out, 2, "not_found");
}

#[test]
fn recover_json_lists_outcomes_in_the_journal_spelling() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("j");
    let out = interlock(&["lease", "grant", s(&dir), LEASE, "--for", "1h"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Recovery needs the service it recovers against.
    json_error(&interlock(&["--json", "recover", s(&dir)]), 2, "payments");
    let payments = new_payments(&dir, Tier::THREE);
    assert_eq!(
        json_of(&interlock(&["--json", "recover", s(&dir)]), 0),
        json!([])
    );

    // Tier 3: the send landed, the reply was lost; nobody can tell: AMBIGUOUS, exit 1.
    let premises = payments.premises(ORDER, None).unwrap();
    drop(payments);
    let refund = proposal(Tier::THREE, REFUND_CENTS, premises);
    crash_at(&dir, &refund, CrashPoint::AfterSend);
    assert_eq!(refunds(&dir), 1);

    let list = json_of(&interlock(&["--json", "recover", s(&dir)]), 1);
    let o = &list[0];
    assert_eq!(o["state"], "AMBIGUOUS", "{o}");
    assert_eq!(o["reason"], "no_dedupe_no_lookup", "{o}");
    assert_eq!(o["executed"], "unknown", "{o}");
    let effect = o["effect_id"].as_str().unwrap().to_string();

    // The receipt under --json is the receipt itself.
    let receipt = json_of(&interlock(&["--json", "receipt", s(&dir), &effect]), 0);
    assert_eq!(receipt["effect_id"], effect.as_str());
    assert_eq!(receipt["final"], "AMBIGUOUS");
    let out = interlock(&[
        "--json",
        "receipt",
        s(&dir),
        "00000000000000000000000000000000",
    ]);
    json_error(&out, 2, "unknown_effect");
}

#[test]
fn demo_and_usage_errors_speak_json_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let v = json_of(&interlock(&["--json", "demo", "2", "--dir", s(&dir)]), 0);
    assert_eq!(v["final"], "COMMITTED", "{v}");
    assert_eq!(v["via"], "recovery-query", "{v}");
    assert_eq!(v["journal_before"], "DISPATCHED", "{v}");
    assert_eq!(v["refunded_cents"], REFUND_CENTS, "{v}");
    assert_eq!(v["refund_records"], 1, "{v}");
    assert_eq!(
        json_of(&interlock(&["--json", "recover", s(&dir)]), 0),
        json!([])
    );

    let out = interlock(&["--json", "lease", "grant"]);
    json_error(&out, 2, "usage");
    let out = interlock(&["--json", "no-such-command"]);
    json_error(&out, 2, "usage");
    // Help is not an error, with or without --json.
    let out = interlock(&["--json", "--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    for want in [
        "lease grant",
        "approve",
        "--json",
        "Exit codes",
        "a shared journal's URL works too",
    ] {
        assert!(help.contains(want), "{want:?} not in --help:\n{help}");
    }
    let grant_help = interlock(&["lease", "grant", "--help"]);
    let grant_help = String::from_utf8_lossy(&grant_help.stdout);
    assert!(
        grant_help.contains("created when it does not exist"),
        "{grant_help}"
    );
}

/// A shared journal's URL works wherever a folder does, except where a folder is the point
/// (the demo's, repair's torn tail, recover's default payments file): those say why.
#[test]
fn a_sqlite_url_is_a_journal_for_every_command_that_takes_one() {
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/shared/journal.db", tmp.path().display());
    let u = url.as_str();
    let approval = tmp.path().join("a.json");
    std::fs::write(
        &approval,
        r#"{"approval": "apr-1", "approver": "m@shop", "request": {"key": "k", "effect": {"order": "o"}}, "premises_seen": {}}"#,
    )
    .unwrap();
    for (args, code) in [
        (vec!["lease", "grant", u, LEASE, "--for", "1h"], 0),
        (vec!["approve", u, s(&approval)], 0),
        (vec!["revoke-approval", u, "apr-1"], 0),
        (vec!["lease", "revoke", u, LEASE], 0),
        (vec!["verify", u], 0),
        (vec!["receipt", u, "00000000000000000000000000000000"], 2),
        (vec!["recover", u], 2),
        (vec!["repair", u], 2),
        (vec!["demo", "2", "--dir", u], 2),
    ] {
        let out = interlock(&args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", text(&out));
    }
    let out = interlock(&["--json", "verify", u]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (report["streams"].as_u64(), report["entries"].as_u64()),
        (Some(2), Some(4)),
        "{report}"
    );
    // A relative path is not a SQLite URL: a usage error saying what one is.
    let out = interlock(&["verify", "sqlite://j.db"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("absolute path"), "{}", text(&out));
}

/// The people's commands: a rule sends a large refund to two approvers; the inbox lists
/// it; each approves from the command line; only then does the agent's submit go out.
#[test]
fn a_large_refund_waits_in_the_inbox_until_two_people_approve_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("j");
    for who in [LEASE, "alice@shop", "bob@shop"] {
        json_of(
            &interlock(&["--json", "lease", "grant", s(&dir), who, "--for", "1h"]),
            0,
        );
    }
    let rules = json!({
        "rules": [{"name": "large", "target": "payments",
                   "when": [{"field": "/effect/amount_cents", "over": 1500}],
                   "then": "person", "route": "finance", "approvers_needed": 2}],
        "routes": {"finance": {"primary_approvers": ["alice@shop", "bob@shop"]}}});
    let out = interlock_stdin(&["rules", s(&dir), "-"], rules.to_string().as_bytes());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(json_of(&interlock(&["--json", "rules", s(&dir)]), 0), rules);

    let payments = new_payments(&dir, Tier::TWO);
    let premises = payments.premises(ORDER, None).unwrap();
    drop(payments);
    let refund = proposal(Tier::TWO, REFUND_CENTS, premises);
    let o = submit(&dir, &refund);
    assert_eq!(
        (o.state, o.reason),
        (State::Proposed, Some(Reason::ApprovalPending)),
        "{o:?}"
    );
    assert_eq!(refunds(&dir), 0);

    let items = json_of(&interlock(&["--json", "inbox", s(&dir)]), 0);
    assert_eq!(items.as_array().map(Vec::len), Some(1), "{items}");
    assert_eq!(items[0]["item"], o.effect_id.as_str());
    assert_eq!(items[0]["kind"], "approval");
    let listed = interlock(&["inbox", s(&dir)]);
    let shown = String::from_utf8_lossy(&listed.stdout);
    assert!(shown.starts_with("1 item for a person"), "{shown}");
    assert!(shown.contains("actions: approve, reject"), "{shown}");

    let id = o.effect_id.as_str();
    let out = interlock(&[
        "approve",
        s(&dir),
        id,
        "--as",
        "alice@shop",
        "--why",
        "verified",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // The same person again is not a second approval: refused, saying why.
    let out = interlock(&["approve", s(&dir), id, "--as", "alice@shop"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already approved"),
        "{}",
        text(&out)
    );
    assert_eq!(submit(&dir, &refund).reason, Some(Reason::ApprovalPending));

    let out = interlock(&["--json", "approve", s(&dir), id, "--as", "bob@shop"]);
    assert_eq!(
        json_of(&out, 0)["item"]["approved_by"],
        json!(["alice@shop", "bob@shop"])
    );
    assert_eq!(submit(&dir, &refund).state, State::Committed);
    assert_eq!(refunds(&dir), 1);
    assert_eq!(
        json_of(&interlock(&["--json", "inbox", s(&dir)]), 0),
        json!([])
    );
}

/// An AMBIGUOUS refund (tier 3, the demo's) is settled from the inbox by a person with a
/// lease of their own; without one they are refused.
#[test]
fn an_ambiguous_refund_is_settled_from_the_inbox() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = interlock(&["demo", "3", "--dir", s(&dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let items = json_of(&interlock(&["--json", "inbox", s(&dir)]), 0);
    assert_eq!(items[0]["kind"], "ambiguous", "{items}");
    let id = items[0]["item"].as_str().unwrap().to_string();
    let evidence = r#"{"statement": "re_1 on order_881"}"#;
    let settle = [
        "resolve",
        s(&dir),
        &id,
        "--verdict",
        "happened",
        "--as",
        "ops@shop",
        "--evidence",
        evidence,
    ];
    let out = interlock(&settle);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("lease"),
        "{}",
        text(&out)
    );
    json_of(
        &interlock(&[
            "--json",
            "lease",
            "grant",
            s(&dir),
            "ops@shop",
            "--for",
            "8h",
        ]),
        0,
    );
    let out = interlock(&settle);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        json_of(&interlock(&["--json", "inbox", s(&dir)]), 0),
        json!([])
    );
    let receipt = json_of(&interlock(&["receipt", s(&dir), &id]), 0);
    assert_eq!(
        (receipt["final"].as_str(), receipt["executed"].as_str()),
        (Some("CONFIRMED"), Some("yes"))
    );
}
