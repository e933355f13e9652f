//! The gate component: WIT types in, core calls, WIT types out. No rule lives here; if
//! this file grows logic, that logic belongs in `interlock-core`.
//!
//! `no_std` keeps the component's imports to what the gate asks for (its storage and the
//! WASI wall clock): Rust std would add wasi:cli and wasi:io for printing and exiting.
//!
//! The journal's backends run here, over the host's primitive `storage` (`src/storage.rs`);
//! the loops around the gate are `src/loops.rs`; `--features api` builds world `gate-api`
//! (`src/api.rs`: the gate and its HTTP API, for the Worker) and `--features http` world
//! `http-gate` (`src/http.rs`: the same, also a wasi:http handler, for `interlock serve`).
#![no_std]
extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use interlock_core as core_;

// The gate (world gate-component), with its HTTP API (`--features api`, world gate-api), or
// also served over HTTP (`--features http`, world http-gate); scripts/build-wasm.sh builds
// all three.
#[cfg(not(feature = "api"))]
wit_bindgen::generate!({
    world: "gate-component",
    path: "../../wit",
    generate_all,
});
#[cfg(all(feature = "api", not(feature = "http")))]
wit_bindgen::generate!({
    world: "gate-api",
    path: "../../wit",
    generate_all,
});
#[cfg(feature = "http")]
wit_bindgen::generate!({
    world: "http-gate",
    path: "../../wit",
    generate_all,
});
#[cfg(feature = "api")]
mod api;
mod export;
#[cfg(feature = "http")]
mod http;
mod loops;
mod proof;
mod storage;
// wit/deps holds two versions of wasi:clocks (0.2.0 for the gate, 0.2.12 for wasi:http).
use wasi::clocks0_2_0::wall_clock;

use exports::interlock::gate::gate as g;
use interlock::gate::{target as t, types as ty};

// The allocator, panic handler and cabi_realloc std would give (see its docs).
use interlock_component_rt as _;

/// The component's one gate. Wasm components are single-threaded, so a RefCell suffices.
struct One(RefCell<Option<core_::Gate>>);
unsafe impl Sync for One {}
static GATE: One = One(RefCell::new(None));

fn with_gate<R>(f: impl FnOnce(&mut core_::Gate, &mut dyn core_::Journal, u64) -> R) -> R {
    let mut slot = GATE.0.borrow_mut();
    let gate = slot.get_or_insert_with(core_::Gate::new);
    with_journal(|j| f(gate, j, now_ms()))
}

pub(crate) use storage::with_journal;

pub(crate) fn now_ms() -> u64 {
    let t = wall_clock::now();
    t.seconds
        .saturating_mul(1000)
        .saturating_add(u64::from(t.nanoseconds / 1_000_000))
}

pub(crate) fn to_wit_journal_err(e: core_::JournalError) -> ty::JournalError {
    match e {
        core_::JournalError::Conflict(n) => ty::JournalError::Conflict(n),
        core_::JournalError::Io(m) => ty::JournalError::Io(m),
        core_::JournalError::Corrupt(m) => ty::JournalError::Corrupt(m),
        core_::JournalError::TornTail(m) => ty::JournalError::TornTail(m),
        core_::JournalError::Other(m) => ty::JournalError::Other(m),
    }
}

macro_rules! same_enum {
    ($from:ty => $to:ty { $($v:ident),+ $(,)? }) => {
        impl From<$from> for $to {
            fn from(x: $from) -> $to { match x { $(<$from>::$v => <$to>::$v),+ } }
        }
        impl From<$to> for $from {
            fn from(x: $to) -> $from { match x { $(<$to>::$v => <$from>::$v),+ } }
        }
    };
}
same_enum!(core_::State => ty::State { Proposed, Authorized, Dispatched, Committed, Refused, Ambiguous, Confirmed });
same_enum!(core_::Executed => ty::Executed { Yes, No, Unknown });
same_enum!(core_::Reason => ty::Reason {
    ConflictingPayload, LeaseMissing, LeaseExpired, LeaseRevoked, NotAllowed, PremiseChanged,
    ApprovalMissing, ApprovalExpired, ApprovalRevoked, ApprovalStale, CapExceeded, TargetRejected,
    NoDedupeNoLookup, DedupeWindowPassed, ClaimLive, ReadFailed, TargetUnavailable,
    TargetUnroutable, ApprovalPending, ApprovalRejected,
});
same_enum!(core_::ProblemKind => g::ProblemKind { HashMismatch, BrokenLink, BadSeq, Unparsable, Truncated });

fn outcome(o: core_::Outcome) -> ty::Outcome {
    ty::Outcome {
        effect_id: o.effect_id,
        state: o.state.into(),
        reason: o.reason.map(Into::into),
        executed: o.executed.into(),
        result: o.result,
        changed: o
            .changed
            .into_iter()
            .map(|c| ty::PremiseChange {
                name: c.name,
                was: c.was,
                now: c.now,
            })
            .collect(),
        return_to: o.return_to,
        replayed: o.replayed,
        retry_after_ms: o.retry_after_ms,
    }
}

fn crash_point(p: core_::CrashPoint) -> t::CrashPoint {
    match p {
        core_::CrashPoint::BeforeSend => t::CrashPoint::BeforeSend,
        core_::CrashPoint::AfterSend => t::CrashPoint::AfterSend,
        core_::CrashPoint::InRecovery => t::CrashPoint::InRecovery,
    }
}

fn step(s: core_::Step) -> t::Step {
    let ask = match s.ask {
        core_::Ask::Capture {
            effect_id,
            target,
            effect,
            names,
        } => t::Ask::Capture(t::CaptureRequest {
            effect_id,
            target,
            effect,
            names,
        }),
        core_::Ask::Authorize {
            effect_id,
            target,
            effect,
            agent,
        } => t::Ask::Authorize(t::AuthorizeRequest {
            effect_id,
            target,
            effect,
            agent,
        }),
        core_::Ask::Apply {
            effect_id,
            target,
            effect,
            idempotency_key,
            attempt,
        } => t::Ask::Apply(t::ApplyRequest {
            effect_id,
            target,
            effect,
            idempotency_key,
            attempt,
        }),
        core_::Ask::Query {
            effect_id,
            target,
            effect,
        } => t::Ask::Query(t::QueryRequest {
            effect_id,
            target,
            effect,
        }),
        core_::Ask::Sleep(ms) => t::Ask::Sleep(ms),
        core_::Ask::Crash(p) => t::Ask::Crash(crash_point(p)),
        core_::Ask::Done(o) => t::Ask::Done(outcome(o)),
    };
    t::Step { op: s.op, ask }
}

fn reply(r: t::Reply) -> core_::Reply {
    match r {
        t::Reply::Captured(j) => core_::Reply::Captured(j),
        t::Reply::Allowed(b) => core_::Reply::Allowed(b),
        t::Reply::Applied(j) => core_::Reply::Applied(j),
        t::Reply::Rejected(m) => core_::Reply::Rejected(m),
        t::Reply::Unknown(m) => core_::Reply::Unknown(m),
        t::Reply::Found(j) => core_::Reply::Found(j),
        t::Reply::NotFound => core_::Reply::NotFound,
        t::Reply::Failed(m) => core_::Reply::Failed(m),
        t::Reply::Slept => core_::Reply::Slept,
    }
}

pub(crate) fn err(e: core_::GateError) -> g::GateError {
    match e {
        core_::GateError::InvalidJson(m) => g::GateError::InvalidJson(m),
        core_::GateError::InvalidField { field, problem } => {
            g::GateError::InvalidField(g::FieldError { field, problem })
        }
        core_::GateError::TooLarge(n) => g::GateError::TooLarge(n),
        core_::GateError::UnknownEffect(id) => g::GateError::UnknownEffect(id),
        core_::GateError::UnknownOperation(op) => g::GateError::UnknownOperation(op),
        core_::GateError::UnexpectedReply(m) => g::GateError::UnexpectedReply(m),
        core_::GateError::Journal(j) => g::GateError::Journal(to_wit_journal_err(j)),
        core_::GateError::CorruptJournal(m) => g::GateError::CorruptJournal(m),
        core_::GateError::Contention(m) => g::GateError::Contention(m),
    }
}

pub(crate) fn report(r: core_::VerifyReport) -> g::VerifyReport {
    g::VerifyReport {
        streams: r.streams,
        entries: r.entries,
        problems: r
            .problems
            .into_iter()
            .map(|p| g::Problem {
                stream: p.stream,
                seq: p.seq,
                kind: p.kind.into(),
                detail: p.detail,
            })
            .collect(),
    }
}

struct Component;

impl g::Guest for Component {
    fn effect_id_of(proposal: String) -> Result<String, g::GateError> {
        with_gate(|gate, _, _| gate.effect_id_of(&proposal)).map_err(err)
    }
    fn submit(proposal: String) -> Result<t::Step, g::GateError> {
        with_gate(|gate, j, now| gate.submit(j, now, &proposal))
            .map(step)
            .map_err(err)
    }
    fn resume(op: u64, r: t::Reply) -> Result<t::Step, g::GateError> {
        with_gate(|gate, j, now| gate.resume(j, now, op, reply(r)))
            .map(step)
            .map_err(err)
    }
    fn cancel(op: u64) {
        with_gate(|gate, _, _| gate.cancel(op))
    }
    fn open_effects() -> Result<Vec<String>, g::GateError> {
        with_gate(|gate, j, _| gate.open_effects(j)).map_err(err)
    }
    fn recover(effect: String) -> Result<t::Step, g::GateError> {
        with_gate(|gate, j, now| gate.recover(j, now, &effect))
            .map(step)
            .map_err(err)
    }
    fn recover_waiting(
        effect: String,
        wait: Option<g::ClaimWait>,
    ) -> Result<t::Step, g::GateError> {
        let wait = wait.map_or_else(core_::ClaimWait::default, |w| core_::ClaimWait {
            poll_ms: w.poll_ms,
            max_polls: w.max_polls,
        });
        with_gate(|gate, j, now| gate.recover_waiting(j, now, &effect, wait))
            .map(step)
            .map_err(err)
    }
    fn crash_at(point: Option<t::CrashPoint>) {
        let point = point.map(|p| match p {
            t::CrashPoint::BeforeSend => core_::CrashPoint::BeforeSend,
            t::CrashPoint::AfterSend => core_::CrashPoint::AfterSend,
            t::CrashPoint::InRecovery => core_::CrashPoint::InRecovery,
        });
        with_gate(|gate, _, _| gate.crash_at(point))
    }
    fn set_routes(targets: Vec<String>) {
        with_gate(|gate, _, _| gate.set_routes(targets))
    }
    fn defaults() -> String {
        core_::defaults::defaults_json()
    }
    fn send_timeout_ms(effect: String) -> Result<u64, g::GateError> {
        with_gate(|gate, j, _| gate.send_timeout_ms(j, &effect)).map_err(err)
    }
    fn standing_lease_name(agent: String) -> Result<String, g::GateError> {
        core_::defaults::standing_lease_name(&agent).map_err(err)
    }
    fn grant_standing_lease(agent: String) -> Result<String, g::GateError> {
        with_gate(|gate, j, now| gate.grant_standing_lease(j, now, &agent)).map_err(err)
    }
    fn set_strict_authority(strict: bool) {
        with_gate(|gate, _, _| gate.set_strict_authority(strict))
    }
    fn standing_notice(agent: String) -> Result<String, g::GateError> {
        core_::defaults::standing_notice(&agent).map_err(err)
    }
    fn grant_lease(lease: String, expires_at_ms: u64) -> Result<(), g::GateError> {
        with_gate(|gate, j, now| gate.grant_lease(j, now, &lease, expires_at_ms)).map_err(err)
    }
    fn revoke_lease(lease: String) -> Result<(), g::GateError> {
        with_gate(|gate, j, now| gate.revoke_lease(j, now, &lease)).map_err(err)
    }
    fn approve(approval: String) -> Result<(), g::GateError> {
        with_gate(|gate, j, now| gate.approve(j, now, &approval)).map_err(err)
    }
    fn revoke_approval(approval: String) -> Result<(), g::GateError> {
        with_gate(|gate, j, now| gate.revoke_approval(j, now, &approval)).map_err(err)
    }
    fn confirm(effect: String, evidence: String) -> Result<ty::Outcome, g::GateError> {
        with_gate(|gate, j, now| gate.confirm(j, now, &effect, &evidence))
            .map(outcome)
            .map_err(err)
    }
    fn receipt(effect: String, key: Option<Vec<u8>>) -> Result<String, g::GateError> {
        with_gate(|gate, j, _| gate.receipt(j, &effect, key.as_deref())).map_err(err)
    }
    fn check_receipt(receipt: String, key: Vec<u8>) -> Result<g::VerifyReport, g::GateError> {
        with_gate(|gate, j, _| gate.check_receipt(j, &receipt, &key))
            .map(report)
            .map_err(err)
    }
    fn verify(anchors: Vec<String>) -> Result<g::VerifyReport, g::GateError> {
        with_gate(|gate, j, _| gate.verify(j, &anchors))
            .map(report)
            .map_err(err)
    }
    fn set_approval_rules(rules: String) -> Result<(), g::GateError> {
        with_gate(|gate, j, now| gate.set_approval_rules(j, now, &rules)).map_err(err)
    }
    fn approval_rules() -> Result<String, g::GateError> {
        with_gate(|gate, j, _| gate.approval_rules(j))
            .map(|v| core_::canonical(&v))
            .map_err(err)
    }
    fn inbox() -> Result<String, g::GateError> {
        with_gate(|gate, j, now| gate.inbox(j, now))
            .map(|v| core_::canonical(&v))
            .map_err(err)
    }
    fn scoreboard() -> Result<String, g::GateError> {
        with_gate(|gate, j, now| gate.scoreboard(j, now))
            .map(|v| core_::canonical(&v))
            .map_err(err)
    }
    fn decide(decision: String) -> Result<String, g::GateError> {
        with_gate(|gate, j, now| gate.decide(j, now, &decision))
            .map(|v| core_::canonical(&v))
            .map_err(err)
    }
    fn webhook(
        scheme: g::WebhookScheme,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        secret: String,
        tolerance_s: Option<u64>,
    ) -> Result<String, g::GateError> {
        let scheme = match scheme {
            g::WebhookScheme::Stripe => interlock_core::webhooks::Scheme::Stripe,
            g::WebhookScheme::StandardWebhooks => interlock_core::webhooks::Scheme::Standard,
        };
        let delivery = interlock_core::webhooks::Delivery {
            scheme,
            headers: &headers,
            body: &body,
        };
        with_gate(|gate, j, now| gate.webhook(j, now, delivery, &secret, tolerance_s))
            .map(|v| core_::canonical(&v))
            .map_err(err)
    }
}

export!(Component);
