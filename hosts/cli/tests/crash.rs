//! In-process crash tests: a host dies at each crash point on a real file journal; a fresh
//! host on the same folder recovers. The payments service lives on (it is another system),
//! so one `PaymentsTarget` spans the crash.

mod common;

use common::*;
use interlock_cli::gate::CrashAction;
use interlock_cli::{
    ApplyRequest, AuthorizeRequest, CaptureRequest, Clock, CrashPoint, Error, Executed, GateHost,
    Outcome, PaymentsTarget, QueryRequest, Reason, Reply, State, Targets,
};
use interlock_file_journal::StdFiles;
use interlock_payments_sim::{Payments, Tier};

/// The payments target, with a log of the steps the gate asked for, so a test can check
/// the path recovery took and not only where it ended.
struct Recording {
    payments: PaymentsTarget,
    log: Vec<String>,
}

impl Targets for Recording {
    fn routes(&self) -> Vec<String> {
        self.payments.routes()
    }
    fn capture(&mut self, req: &CaptureRequest) -> Reply {
        self.log.push("capture".into());
        self.payments.capture(req)
    }
    fn authorize(&mut self, req: &AuthorizeRequest) -> Reply {
        self.log.push("authorize".into());
        self.payments.authorize(req)
    }
    fn apply(&mut self, req: &ApplyRequest) -> Reply {
        self.log.push(format!("apply#{}", req.attempt));
        self.payments.apply(req)
    }
    fn query(&mut self, req: &QueryRequest) -> Reply {
        let reply = self.payments.query(req);
        let found = if matches!(reply, Reply::Found(_)) {
            "found"
        } else {
            "not-found"
        };
        self.log.push(format!("query:{found}"));
        reply
    }
}

struct Case {
    dir: tempfile::TempDir,
    clock: Clock,
    target: Recording,
    proposal: String,
}

impl Case {
    fn new(tier: Tier) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::fake(T0_MS);
        let mut payments = Payments::create(&dir.path().join("payments.json"), tier).unwrap();
        payments.add_order(ORDER, PAID_CENTS).unwrap();
        let premises = payments.premises(ORDER, None).unwrap();
        let proposal = proposal(tier, REFUND_CENTS, premises);
        let target = Recording {
            payments: PaymentsTarget::new(payments, clock.clone()),
            log: Vec::new(),
        };
        let case = Case {
            dir,
            clock,
            target,
            proposal,
        };
        case.host().grant_lease(LEASE, T0_MS + HOUR_MS).unwrap();
        case
    }

    /// A new process: a fresh instance on the journal folder.
    fn host(&self) -> GateHost {
        let journal = StdFiles::at(self.dir.path()).unwrap();
        GateHost::new(runtime(), journal, self.clock.clone()).unwrap()
    }

    /// Submits with a crash at `point`; the host is dropped, as a dead process is.
    fn submit_and_crash(&mut self, point: CrashPoint) {
        let mut host = self.host();
        host.crash_at(point, CrashAction::Error);
        match host.submit(&self.proposal, &mut self.target) {
            Err(Error::Crashed(p)) => assert_eq!(p, point),
            other => panic!("expected a crash {point:?}, got {other:?}"),
        }
    }

    /// The steps asked since the last call (capture and authorize left out: only the
    /// sends and lookups tell the recovery path apart).
    fn sends_and_lookups(&mut self) -> Vec<String> {
        let log = std::mem::take(&mut self.target.log);
        log.into_iter()
            .filter(|s| s.starts_with("apply") || s.starts_with("query"))
            .collect()
    }

    /// Recovers every open effect on a fresh host; there must be exactly one.
    fn recover(&mut self) -> Outcome {
        let mut host = self.host();
        let mut results = host.recover_all(&mut self.target).unwrap();
        assert_eq!(results.len(), 1, "one open effect expected: {results:?}");
        results.pop().unwrap().1.unwrap()
    }

    fn refunds(&self) -> usize {
        self.target.payments.payments.refunds(ORDER).len()
    }

    fn refunded_cents(&self) -> u64 {
        self.target.payments.payments.refunded_cents(ORDER)
    }
}

fn assert_committed_once(case: &Case, outcome: &Outcome) {
    assert_eq!(outcome.state, State::Committed, "{outcome:?}");
    assert_eq!(outcome.executed, Executed::Yes, "{outcome:?}");
    assert_eq!(case.refunds(), 1);
    assert_eq!(case.refunded_cents(), REFUND_CENTS);
}

fn assert_ambiguous_nothing_resent(case: &Case, outcome: &Outcome, refunds: usize) {
    assert_eq!(outcome.state, State::Ambiguous, "{outcome:?}");
    assert_eq!(
        outcome.reason,
        Some(Reason::NoDedupeNoLookup),
        "{outcome:?}"
    );
    assert_eq!(outcome.executed, Executed::Unknown, "{outcome:?}");
    assert_eq!(
        case.refunds(),
        refunds,
        "recovery must not resend at tier 3"
    );
}

// ---- F1: a crash before the intent is durable is a crash before submit: nothing to recover.

#[test]
fn crash_before_intent_sends_once() {
    let mut case = Case::new(Tier::TWO);
    let results = case.host().recover_all(&mut case.target).unwrap();
    assert!(results.is_empty(), "{results:?}");
    let outcome = case
        .host()
        .submit(&case.proposal.clone(), &mut case.target)
        .unwrap();
    assert_committed_once(&case, &outcome);
}

// ---- after the intent is durable, before the send

#[test]
fn tier1_crash_after_intent_retries_under_key() {
    let mut case = Case::new(Tier::ONE);
    case.submit_and_crash(CrashPoint::BeforeSend);
    assert_eq!(case.refunds(), 0);
    case.sends_and_lookups();
    let outcome = case.recover();
    assert_eq!(case.sends_and_lookups(), ["apply#1"]);
    assert_committed_once(&case, &outcome);
}

#[test]
fn tier2_crash_after_intent_queries_then_sends_once() {
    let mut case = Case::new(Tier::TWO);
    case.submit_and_crash(CrashPoint::BeforeSend);
    assert_eq!(case.refunds(), 0);
    case.sends_and_lookups();
    let outcome = case.recover();
    // Asked under the live claim first (a lookup only reads): not found proves nothing
    // then, so the claim is waited out and the lookup asked again before the send.
    assert_eq!(
        case.sends_and_lookups(),
        ["query:not-found", "query:not-found", "apply#1"]
    );
    assert_committed_once(&case, &outcome);
    // The send went out under the effect id, so a later lookup finds it.
    let effect = &outcome.effect_id;
    let refund = case
        .target
        .payments
        .payments
        .find_by_reference(effect)
        .unwrap();
    assert!(
        refund.is_some(),
        "the refund carries the effect id as reference"
    );
}

#[test]
fn tier3_crash_after_intent_is_ambiguous_and_sends_nothing() {
    // The intent was durable, so the send may have gone out: a tier-3 gate cannot tell.
    let mut case = Case::new(Tier::THREE);
    case.submit_and_crash(CrashPoint::BeforeSend);
    case.sends_and_lookups();
    let outcome = case.recover();
    assert!(case.sends_and_lookups().is_empty());
    assert_ambiguous_nothing_resent(&case, &outcome, 0);
}

// ---- F2: the service committed, the ack was lost

#[test]
fn tier1_crash_after_commit_is_deduped() {
    let mut case = Case::new(Tier::ONE);
    case.submit_and_crash(CrashPoint::AfterSend);
    assert_eq!(case.refunds(), 1);
    case.sends_and_lookups();
    let outcome = case.recover();
    assert_eq!(
        case.sends_and_lookups(),
        ["apply#1"],
        "a retry the service dedupes"
    );
    assert_committed_once(&case, &outcome);
}

#[test]
fn tier2_crash_after_commit_is_found_by_query() {
    let mut case = Case::new(Tier::TWO);
    case.submit_and_crash(CrashPoint::AfterSend);
    case.sends_and_lookups();
    let outcome = case.recover();
    assert_eq!(
        case.sends_and_lookups(),
        ["query:found"],
        "found, nothing resent"
    );
    assert_committed_once(&case, &outcome);
}

#[test]
fn tier3_crash_after_commit_is_ambiguous() {
    let mut case = Case::new(Tier::THREE);
    case.submit_and_crash(CrashPoint::AfterSend);
    case.sends_and_lookups();
    let outcome = case.recover();
    assert!(case.sends_and_lookups().is_empty());
    assert_ambiguous_nothing_resent(&case, &outcome, 1);
}

// ---- a second crash, during recovery

fn crash_in_recovery(tier: Tier) -> Case {
    let mut case = Case::new(tier);
    case.submit_and_crash(CrashPoint::AfterSend);
    let mut host = case.host();
    host.crash_at(CrashPoint::InRecovery, CrashAction::Error);
    match host.recover_all(&mut case.target) {
        Err(Error::Crashed(CrashPoint::InRecovery)) => {}
        other => panic!("expected a crash in recovery, got {other:?}"),
    }
    case
}

#[test]
fn tier1_crash_in_recovery_then_recovers() {
    let mut case = crash_in_recovery(Tier::ONE);
    let outcome = case.recover();
    assert_committed_once(&case, &outcome);
}

#[test]
fn tier2_crash_in_recovery_then_recovers() {
    let mut case = crash_in_recovery(Tier::TWO);
    let outcome = case.recover();
    assert_committed_once(&case, &outcome);
}

#[test]
fn tier3_recovery_has_no_send_to_crash_in() {
    // Tier 3 recovery neither resends nor looks up, so the crash point is never reached.
    let mut case = Case::new(Tier::THREE);
    case.submit_and_crash(CrashPoint::AfterSend);
    let mut host = case.host();
    host.crash_at(CrashPoint::InRecovery, CrashAction::Error);
    let mut results = host.recover_all(&mut case.target).unwrap();
    let outcome = results.pop().unwrap().1.unwrap();
    assert_ambiguous_nothing_resent(&case, &outcome, 1);
}

// ---- after recovery the effect is terminal: a resubmit replays, a second recovery is idle

#[test]
fn resubmit_after_recovery_replays_the_outcome() {
    let mut case = Case::new(Tier::TWO);
    case.submit_and_crash(CrashPoint::AfterSend);
    case.recover();
    let again = case
        .host()
        .submit(&case.proposal.clone(), &mut case.target)
        .unwrap();
    assert_eq!(again.state, State::Committed, "{again:?}");
    assert!(again.replayed, "{again:?}");
    assert_eq!(case.refunds(), 1);
    assert!(case
        .host()
        .recover_all(&mut case.target)
        .unwrap()
        .is_empty());
}
