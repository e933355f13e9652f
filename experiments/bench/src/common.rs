//! What every benchmark shares: the proposal, a target that costs nothing, the in-memory
//! journal both paths use, the native driver of the core, and timing helpers.

use std::time::{Duration, Instant};

use interlock_cli::{ApplyRequest, AuthorizeRequest, CaptureRequest, QueryRequest, Reply, Targets};
use interlock_core::{Ask, Gate, Journal};

pub const LEASE: &str = "case-4471";
/// 2027-01-15T08:00:00Z, as the tests use.
pub const T0_MS: u64 = 1_800_000_000_000;
/// Leases in the benchmarks outlive every run.
pub const LEASE_UNTIL_MS: u64 = T0_MS + 10 * 365 * 24 * 3_600_000;
pub const PREMISES: &str = r#"{"eligible":true,"refunded_by_others_cents":0}"#;
pub const RESULT: &str = r#"{"amount_cents":2000,"refund_id":"re_0001"}"#;

/// The support case's refund proposal (ARCHITECTURE.md, "Proposal") for order `n`: its own key,
/// so every `n` is a new effect. The target dedupes and can be queried; the 1 s timeout is
/// the claim recovery waits out.
pub fn proposal(n: u64) -> String {
    format!(
        concat!(
            r#"{{"agent":"refund-agent","#,
            r#""target":{{"name":"payments","dedupes":true,"dedupe_window_ms":86400000,"lookup":true,"timeout_ms":1000}},"#,
            r#""key":"refund:order_{n}","effect":{{"order":"order_{n}","amount_cents":2000}},"#,
            r#""authority":{{"lease":"{lease}"}},"#,
            r#""premises":{{"eligible":true,"refunded_by_others_cents":0}}}}"#
        ),
        n = n,
        lease = LEASE
    )
}

/// A target that answers at once: the premises still hold, the refund is applied (or, for
/// a recovery's query, found). Its own time is zero, so what is measured is the gate.
#[derive(Clone, Copy, Default)]
pub struct NullTarget;

impl Targets for NullTarget {
    fn routes(&self) -> Vec<String> {
        vec!["payments".into()]
    }
    fn capture(&mut self, _: &CaptureRequest) -> Reply {
        Reply::Captured(PREMISES.into())
    }
    fn authorize(&mut self, _: &AuthorizeRequest) -> Reply {
        Reply::Allowed(true)
    }
    fn apply(&mut self, _: &ApplyRequest) -> Reply {
        Reply::Applied(RESULT.into())
    }
    fn query(&mut self, _: &QueryRequest) -> Reply {
        Reply::Found(RESULT.into())
    }
}

/// The core built natively, driven as a host drives the component: submit, then answer
/// each step as [`NullTarget`] does. `stop_at_apply` leaves the effect as a crash in the
/// middle of the send would (intent durable, nothing after).
pub fn native_submit(
    gate: &mut Gate,
    j: &mut dyn Journal,
    now_ms: u64,
    proposal: &str,
    stop_at_apply: bool,
) -> interlock_core::State {
    use interlock_core::Reply as R;
    let mut step = gate.submit(j, now_ms, proposal).expect("submit");
    loop {
        let reply = match &step.ask {
            Ask::Done(o) => return o.state,
            Ask::Capture { .. } => R::Captured(PREMISES.into()),
            Ask::Authorize { .. } => R::Allowed(true),
            Ask::Apply { .. } if stop_at_apply => {
                gate.cancel(step.op);
                return interlock_core::State::Dispatched;
            }
            Ask::Apply { .. } => R::Applied(RESULT.into()),
            Ask::Query { .. } => R::Found(RESULT.into()),
            Ask::Sleep(_) => R::Slept,
            Ask::Crash(_) => unreachable!("the bench sets no crash point"),
        };
        step = gate.resume(j, now_ms, step.op, reply).expect("resume");
    }
}

pub fn median(xs: &mut [Duration]) -> Duration {
    assert!(!xs.is_empty());
    xs.sort_unstable();
    xs[xs.len() / 2]
}

pub fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let out = f();
    (out, t.elapsed())
}

/// CPU time this process has used so far, every thread, user and system (getrusage).
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    assert_eq!(rc, 0, "getrusage");
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
