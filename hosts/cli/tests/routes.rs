//! Issue 11: `interlock recover DIR` on a journal it cannot fully serve. An effect whose
//! target this host does not reach, and an effect that asks for a host check this host
//! does not have, both had their sends land before the crash. Recovery must leave both
//! open (exit 1, nothing written), never close them REFUSED or AMBIGUOUS.

mod common;

use std::process::Command;

use common::*;
use interlock_cli::gate::CrashAction;
use interlock_cli::{
    ApplyRequest, AuthorizeRequest, CaptureRequest, Clock, CrashPoint, Error, GateHost,
    PaymentsTarget, QueryRequest, Reply, Targets,
};
use interlock_file_journal::{StdFiles, JOURNAL_FILE};
use interlock_payments_sim::{Payments, Tier};
use serde_json::{json, Value};

/// Another host's mail target: it applies whatever it is asked.
struct Mail;

impl Targets for Mail {
    fn routes(&self) -> Vec<String> {
        vec!["email".into()]
    }
    fn capture(&mut self, _: &CaptureRequest) -> Reply {
        Reply::Captured("{}".into())
    }
    fn authorize(&mut self, _: &AuthorizeRequest) -> Reply {
        Reply::Allowed(true)
    }
    fn apply(&mut self, _: &ApplyRequest) -> Reply {
        Reply::Applied(r#"{"sent":true}"#.into())
    }
    fn query(&mut self, _: &QueryRequest) -> Reply {
        Reply::NotFound
    }
}

/// Submits `proposal` in a process that dies at `point`.
fn crash(
    dir: &std::path::Path,
    clock: &Clock,
    point: CrashPoint,
    proposal: &str,
    t: &mut dyn Targets,
) {
    let journal = StdFiles::at(dir).unwrap();
    let mut host = GateHost::new(runtime(), journal, clock.clone()).unwrap();
    host.crash_at(point, CrashAction::Error);
    match host.submit(proposal, t) {
        Err(Error::Crashed(_)) => {}
        other => panic!("expected the crash, got {other:?}"),
    }
}

#[test]
fn recover_leaves_what_it_cannot_serve_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("j");
    std::fs::create_dir(&dir).unwrap();
    let clock = Clock::fake(T0_MS);
    // Tier 3: neither dedupe nor lookup, so any made-up reply would close the effect.
    let mut payments = Payments::create(&dir.join("payments.json"), Tier::THREE).unwrap();
    payments.add_order(ORDER, PAID_CENTS).unwrap();
    let premises = payments.premises(ORDER, None).unwrap();
    {
        let journal = StdFiles::at(&dir).unwrap();
        let mut host = GateHost::new(runtime(), journal, clock.clone()).unwrap();
        host.grant_lease(LEASE, T0_MS + HOUR_MS).unwrap();
    }
    let mail = json!({"agent": "mailer", "target": {"name": "email", "timeout_ms": 1000},
                      "effect": {"to": "customer@example.com", "template": "refund"},
                      "authority": {"lease": LEASE}});
    crash(
        &dir,
        &clock,
        CrashPoint::AfterSend,
        &mail.to_string(),
        &mut Mail,
    );
    let mut checked: Value = serde_json::from_str(&proposal(Tier::THREE, 2000, premises)).unwrap();
    checked["authority"]["host_check"] = json!(true);
    let mut target = PaymentsTarget::new(payments, clock.clone())
        .with_authorizer(Box::new(|_: &AuthorizeRequest| true));
    crash(
        &dir,
        &clock,
        CrashPoint::AfterSend,
        &checked.to_string(),
        &mut target,
    );
    assert_eq!(target.payments.refunds(ORDER).len(), 1);
    drop(target);

    let before = std::fs::read(dir.join(JOURNAL_FILE)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_interlock"))
        .args([
            "--clock-ms",
            &(T0_MS + 60_000).to_string(),
            "--json",
            "recover",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outcomes: Vec<Value> = serde_json::from_str(&text).unwrap();
    let mut reasons: Vec<&str> = outcomes
        .iter()
        .map(|o| {
            assert_eq!(o["state"], "DISPATCHED", "{o}");
            o["reason"].as_str().unwrap()
        })
        .collect();
    reasons.sort();
    assert_eq!(reasons, ["read_failed", "target_unroutable"]);
    assert_eq!(
        std::fs::read(dir.join(JOURNAL_FILE)).unwrap(),
        before,
        "recovery wrote to effects it could not serve"
    );
}

/// `recover --no-wait`: one of many recovering workers leaves an effect another worker's
/// claim still covers to that worker (open, `claim_live`, nothing written), when the lookup
/// it may ask under that claim finds nothing (the worker died before its send: a lookup
/// under a live claim proves nothing); without it, recovery waits the claim out, asks
/// again and sends once.
#[test]
fn recover_no_wait_leaves_a_live_claim_to_its_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("j");
    std::fs::create_dir(&dir).unwrap();
    let clock = Clock::fake(T0_MS);
    let mut payments = Payments::create(&dir.join("payments.json"), Tier::TWO).unwrap();
    payments.add_order(ORDER, PAID_CENTS).unwrap();
    let premises = payments.premises(ORDER, None).unwrap();
    {
        let journal = StdFiles::at(&dir).unwrap();
        let mut host = GateHost::new(runtime(), journal, clock.clone()).unwrap();
        host.grant_lease(LEASE, T0_MS + HOUR_MS).unwrap();
    }
    let mut target = PaymentsTarget::new(payments, clock.clone());
    crash(
        &dir,
        &clock,
        CrashPoint::BeforeSend,
        &proposal(Tier::TWO, 2000, premises),
        &mut target,
    );
    drop(target);
    let recover = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_interlock"))
            .args(["--clock-ms", &T0_MS.to_string(), "--json", "recover"])
            .arg(&dir)
            .args(extra)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), v)
    };
    let before = std::fs::read(dir.join(JOURNAL_FILE)).unwrap();
    let (code, v) = recover(&["--no-wait"]);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(
        (v[0]["state"].as_str(), v[0]["reason"].as_str()),
        (Some("DISPATCHED"), Some("claim_live")),
        "{v}"
    );
    assert_eq!(
        std::fs::read(dir.join(JOURNAL_FILE)).unwrap(),
        before,
        "--no-wait wrote something"
    );
    let (code, v) = recover(&[]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v[0]["state"].as_str(), Some("COMMITTED"), "{v}");
}
