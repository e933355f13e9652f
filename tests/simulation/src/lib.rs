//! Deterministic simulation of the gate under faults.
//!
//! One seed builds one world: a payments service of one tier (1, 2, 3 or 1+lookup), a few
//! orders, leases, decided refund requests (some under approvals, caps, bounds or a host
//! check), several workers (each a [`Gate`]; a crash drops it mid-operation) and one shared
//! journal that injects faults ([`SimJournal`]). A seeded scheduler interleaves the workers'
//! steps with the world's events: a person refunding by hand, eligibility changing, leases
//! revoked, re-granted or expiring, approvals revoked, the clock jumping (past claims, hours,
//! past the 24 h dedupe window), lost requests, lost replies, late landings, power loss.
//!
//! The host loop here is test harness, but it keeps the host contract: a target call is
//! abandoned by the claim deadline, and a request in flight lands (if ever) strictly before
//! the claim it was sent under expires.
//!
//! Invariants are checked after every step (see [`World::check_step`]) and at each send
//! (see [`World::check_send`]); at the end the world settles (faults stop, the clock passes
//! every claim, agents resubmit and recovery runs) and every effect must be terminal, every
//! receipt must check and the journal must verify against every receipt handed out.
//!
//! `GATE_SEED=<n> cargo test -p interlock-simulation` replays one seed and prints its trace.
mod journal;

pub use journal::{CrashKind, Fault, SimJournal, View};

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use interlock_core::{
    effect_id_for, Ask, Executed, Gate, GateError, Journal, JournalError, Outcome, Reason, Reply,
    State, Step,
};
use interlock_payments_sim::{Payments, Tier};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};

pub const T0: u64 = 1_800_000_000_000;
const HOUR: u64 = 3_600_000;
pub const RECEIPT_KEY: &[u8] = b"simulation-receipt-key";

/// Invariants that currently fail because of known core bugs (reported to the lead, see
/// results/simulation.md). A seed that hits one records it (first hit of each kind, with
/// the step) and runs on, so the sweep keeps hunting other bugs; `GATE_STRICT=1` (or
/// [`run_seed_strict`]) makes it a failure. Empty this list when the core is fixed.
pub const KNOWN_CORE_BUGS: &[&str] = &[];
// Found and fixed in the core (their seeds stay in tests/simulation.rs as regressions):
// A authority_died_between_check_and_send: authority is read again at the durable DISPATCHED.
// B premises_changed_during_host_check: the host check is asked before the premise read.
// C receipt_pins_unsynced_entry: `receipt` syncs the journal before pinning it.
// D cap_released_while_executed_unknown: a REFUSED whose send may have landed keeps its cap share.
// E torn_close_hides_open_effect: PROPOSED is appended alone (open) before a fresh effect's end.
// F outcome_reported_from_unsynced_entry: replays sync the journal before reporting.
// G cap_reservation_of_another_payload: cap shares are keyed by effect id and payload hash, so
//   another payload under the same key neither reuses nor replaces a share; a share whose
//   effect is recorded with another payload is stale and no longer counts.

#[derive(Clone, Debug)]
pub struct Violation {
    pub invariant: &'static str,
    pub detail: String,
}

#[derive(Debug)]
pub struct SeedReport {
    pub seed: u64,
    pub tier: String,
    pub steps: u64,
    pub events: BTreeMap<&'static str, u64>,
    pub violation: Option<Violation>,
    /// Known core bugs this seed hit (the first hit of each kind); the seed ran on.
    pub known: Vec<Violation>,
    pub trace: Vec<String>,
}

impl SeedReport {
    pub fn ok(&self) -> bool {
        self.violation.is_none()
    }

    pub fn describe(&self) -> String {
        let mut s = format!(
            "seed {} (tier {}, {} steps)\n",
            self.seed, self.tier, self.steps
        );
        if let Some(v) = &self.violation {
            s.push_str(&format!("VIOLATION {}: {}\n", v.invariant, v.detail));
        }
        for v in &self.known {
            s.push_str(&format!("known core bug {}: {}\n", v.invariant, v.detail));
        }
        s.push_str(&format!(
            "replay: GATE_SEED={} cargo test -p interlock-simulation -- --nocapture\ntrace:\n",
            self.seed
        ));
        for line in &self.trace {
            s.push_str("  ");
            s.push_str(line);
            s.push('\n');
        }
        s
    }
}

/// Run one seed to the end (or its first violation). A panic in the core is a violation.
/// Known core bugs are recorded and the seed runs on, unless `GATE_STRICT=1`.
pub fn run_seed(seed: u64) -> SeedReport {
    run_seed_with(seed, std::env::var("GATE_STRICT").is_ok_and(|v| v == "1"))
}

/// Like [`run_seed`], but a known core bug is a failure too.
pub fn run_seed_strict(seed: u64) -> SeedReport {
    run_seed_with(seed, true)
}

fn run_seed_with(seed: u64, strict: bool) -> SeedReport {
    let mut w = World::new(seed);
    w.strict = strict;
    let r = catch_unwind(AssertUnwindSafe(|| w.run()));
    let violation = match r {
        Ok(Ok(())) => None,
        Ok(Err(v)) => Some(v),
        Err(p) => Some(Violation {
            invariant: "panic",
            detail: p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        }),
    };
    SeedReport {
        seed,
        tier: w.tier.label(),
        steps: w.steps,
        events: std::mem::take(&mut w.events),
        violation,
        known: std::mem::take(&mut w.known),
        trace: std::mem::take(&mut w.trace),
    }
}

fn fail<T>(invariant: &'static str, detail: impl Into<String>) -> Result<T, Violation> {
    Err(Violation {
        invariant,
        detail: detail.into(),
    })
}

#[derive(Clone, Debug)]
enum Auth {
    Lease(String),
    Approval(String),
}

/// A refund request an agent decided (identity from the approved key).
#[derive(Clone, Debug)]
struct Request {
    key: String,
    order: String,
    amount: u64,
    auth: Auth,
    cap: Option<(String, u64)>,
    /// `refunded_by_others_cents` as a bound: at most this many cents above the decision's.
    slack: Option<u64>,
    host_check: bool,
    /// Approval authority: the proposal declares only `eligible` (the approval sees the rest).
    narrow_premises: bool,
    id: String,
    /// The proposal text, fixed when the agent decides (premises read then).
    text: Option<String>,
    /// The same key, another amount: the model changing its mind on a retry (F4/F5).
    alt: Option<String>,
}

#[derive(Clone, Debug)]
enum Pend {
    Ask(Ask),
    /// Waiting for the reply of the request `msgs[i]`.
    Await(usize),
}

#[derive(Clone, Debug)]
struct OpState {
    op: u64,
    effect: String,
    pend: Pend,
    lookup_not_found: bool,
    captured: bool,
    allowed: Option<bool>,
    /// Whether the lease or approval was live when the gate asked for the premises (the
    /// moment it checked authority), and whether a host check came after the capture.
    live_at_recheck: Option<bool>,
    asked_authorize_after_capture: bool,
    /// The claim deadline of this operation's send.
    deadline: u64,
}

#[derive(Debug, Default)]
struct Worker {
    gate: Gate,
    op: Option<OpState>,
}

/// A request sent to the service.
#[derive(Clone, Debug)]
struct Msg {
    effect: String,
    order: String,
    amount: u64,
    key: String,
    deadline: u64,
    /// When it reaches the service (strictly before `deadline`), or never.
    land_at: Option<u64>,
    /// What the service did, once it landed.
    result: Option<Result<String, String>>,
    reply_lost: bool,
}

#[derive(Clone, Copy, Debug)]
struct Send {
    at: u64,
    deadline: u64,
}

#[derive(Clone, Copy, Debug)]
enum Action {
    Submit(usize),
    Recover(usize),
    TwoRecover,
    Perform(usize),
    Resolve(usize),
    CrashWorker(usize),
    HandRefund,
    Eligibility,
    RevokeLease,
    GrantLease,
    RevokeApproval,
    Jump,
    PowerLoss,
    Receipt,
}

pub struct World {
    rng: ChaCha8Rng,
    now: u64,
    tier: Tier,
    timeout_ms: u64,
    j: SimJournal,
    pay: Payments,
    workers: Vec<Worker>,
    admin: Gate,
    orders: Vec<String>,
    leases: Vec<String>,
    requests: Vec<Request>,
    sends: BTreeMap<String, Vec<Send>>,
    msgs: Vec<Msg>,
    /// Receipts handed out, with whether they pinned entries no fsync covered yet.
    anchors: Vec<(String, bool)>,
    /// Recorded proposals by effect id (PROPOSED is durable before any send).
    proposals: BTreeMap<String, Value>,
    /// Effects the gate said were REFUSED with `executed: no`: no refund may ever carry them.
    /// The value: whether that outcome was read from an entry no fsync covered yet.
    declared_unsent: BTreeMap<String, bool>,
    faults_on: bool,
    /// Caps already found over their limit by a known bug (not counted again).
    caps_over: Vec<String>,
    strict: bool,
    known: Vec<Violation>,
    max_steps: u64,
    pub steps: u64,
    pub events: BTreeMap<&'static str, u64>,
    pub trace: Vec<String>,
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("the gate and the harness write JSON")
}

fn state_of(e: &Value) -> &str {
    e.get("state").and_then(Value::as_str).unwrap_or("")
}

impl World {
    pub fn new(seed: u64) -> World {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let tier = [
            Tier::ONE,
            Tier::TWO,
            Tier::THREE,
            Tier {
                dedupes: true,
                lookup: true,
            },
        ][rng.random_range(0..4)];
        let timeout_ms = [1_000, 30_000, 120_000][rng.random_range(0..3)];
        let mut pay = Payments::in_memory(tier);
        let n_orders = rng.random_range(1..=2);
        let orders: Vec<String> = (0..n_orders)
            .map(|i| format!("order_{}", 881 + i))
            .collect();
        for o in &orders {
            pay.add_order(o, [6_000, 10_000][rng.random_range(0..2)])
                .expect("orders are added");
        }
        let n_leases = rng.random_range(1..=2);
        let leases: Vec<String> = (0..n_leases)
            .map(|i| format!("case-{}", 4471 + i))
            .collect();
        let n_workers = rng.random_range(2..=3);
        let mut w = World {
            rng,
            now: T0,
            tier,
            timeout_ms,
            j: SimJournal::new(),
            pay,
            workers: (0..n_workers).map(|_| Worker::default()).collect(),
            admin: Gate::new(),
            orders,
            leases,
            requests: Vec::new(),
            sends: BTreeMap::new(),
            msgs: Vec::new(),
            anchors: Vec::new(),
            proposals: BTreeMap::new(),
            declared_unsent: BTreeMap::new(),
            faults_on: true,
            caps_over: Vec::new(),
            strict: false,
            known: Vec::new(),
            max_steps: 0,
            steps: 0,
            events: BTreeMap::new(),
            trace: Vec::new(),
        };
        w.max_steps = w.rng.random_range(40..=160);
        for l in w.leases.clone() {
            let until = T0 + w.rng.random_range(1..=72) * HOUR;
            w.admin
                .grant_lease(&mut w.j, T0, &l, until)
                .expect("the first grant writes");
            w.log(format!("lease {l} granted until +{}h", (until - T0) / HOUR));
        }
        let cap_limits: Vec<u64> = (0..w.orders.len())
            .map(|_| [2_000, 3_000, 5_000][w.rng.random_range(0..3)])
            .collect();
        let n_requests = w.rng.random_range(1..=4);
        for i in 0..n_requests {
            let order = w.orders[w.rng.random_range(0..w.orders.len())].clone();
            let amount = [1_000, 2_000, 3_000][w.rng.random_range(0..3)];
            let auth = if w.rng.random_bool(0.2) {
                Auth::Approval(format!("apr-{i}"))
            } else {
                Auth::Lease(w.leases[w.rng.random_range(0..w.leases.len())].clone())
            };
            // One limit per cap: the orders' caps are fixed when the world is made.
            let cap = w.rng.random_bool(0.35).then(|| {
                let o = w.orders.iter().position(|x| *x == order).unwrap_or(0);
                (format!("{order}-cap"), cap_limits[o])
            });
            let slack = w
                .rng
                .random_bool(0.3)
                .then(|| [0, 500, 1_000, 3_000][w.rng.random_range(0..4)]);
            let key = format!("refund:{order}:{i}");
            let id = effect_id_for(Some(&json!(key)), &json!({}));
            let r = Request {
                key,
                order,
                amount,
                auth,
                cap,
                slack,
                host_check: w.rng.random_bool(0.1),
                narrow_premises: w.rng.random_bool(0.5),
                id,
                text: None,
                alt: None,
            };
            w.log(format!(
                "request {i}: {} {} cents on {}, {:?}, cap {:?}, slack {:?}, host_check {}, effect {}",
                r.key, r.amount, r.order, r.auth, r.cap, r.slack, r.host_check, &r.id[..8]
            ));
            w.requests.push(r);
        }
        w.log(format!(
            "world: tier {}, timeout {} ms, {} workers, {} steps",
            tier.label(),
            timeout_ms,
            n_workers,
            w.max_steps
        ));
        w
    }

    /// A known core bug is recorded and the run goes on (unless strict); anything else stops it.
    fn soft(&mut self, r: Result<(), Violation>) -> Result<(), Violation> {
        match r {
            Err(v) if !self.strict && KNOWN_CORE_BUGS.contains(&v.invariant) => {
                self.log(format!("KNOWN CORE BUG {}: {}", v.invariant, v.detail));
                if !self.known.iter().any(|k| k.invariant == v.invariant) {
                    self.known.push(Violation {
                        invariant: v.invariant,
                        detail: format!("step {}: {}", self.steps, v.detail),
                    });
                }
                Ok(())
            }
            r => r,
        }
    }

    fn log(&mut self, s: String) {
        let t = self.now - T0;
        self.trace
            .push(format!("[{:>5}.{:03}s] {s}", t / 1000, t % 1000));
    }

    fn ev(&mut self, kind: &'static str) {
        *self.events.entry(kind).or_default() += 1;
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    pub fn run(&mut self) -> Result<(), Violation> {
        while self.steps < self.max_steps {
            self.steps += 1;
            let dt = self.rng.random_range(0..=self.timeout_ms / 4);
            self.advance(dt)?;
            let a = self.pick();
            self.act(a)?;
            self.check_step()?;
        }
        self.settle()
    }

    fn pick(&mut self) -> Action {
        let mut c: Vec<(u32, Action)> = Vec::new();
        let mut idle = 0;
        for (i, w) in self.workers.iter().enumerate() {
            match &w.op {
                None => {
                    idle += 1;
                    c.push((4, Action::Submit(i)));
                    c.push((3, Action::Recover(i)));
                }
                Some(OpState {
                    pend: Pend::Ask(_), ..
                }) => c.push((10, Action::Perform(i))),
                Some(OpState {
                    pend: Pend::Await(_),
                    ..
                }) => c.push((6, Action::Resolve(i))),
            }
            c.push((1, Action::CrashWorker(i)));
        }
        if idle >= 2 {
            c.push((2, Action::TwoRecover));
        }
        c.extend([
            (1, Action::HandRefund),
            (1, Action::Eligibility),
            (1, Action::RevokeLease),
            (1, Action::GrantLease),
            (1, Action::RevokeApproval),
            (2, Action::Jump),
            (1, Action::PowerLoss),
            (1, Action::Receipt),
        ]);
        let total: u32 = c.iter().map(|x| x.0).sum();
        let mut r = self.rng.random_range(0..total);
        for (wgt, a) in c {
            if r < wgt {
                return a;
            }
            r -= wgt;
        }
        unreachable!("the weights cover the range")
    }

    fn act(&mut self, a: Action) -> Result<(), Violation> {
        match a {
            Action::Submit(w) => self.submit(w),
            Action::Recover(w) => {
                let open = self.open_effects();
                if open.is_empty() {
                    return Ok(());
                }
                let id = open[self.rng.random_range(0..open.len())].clone();
                self.recover(w, &id)
            }
            Action::TwoRecover => {
                let open = self.open_effects();
                if open.is_empty() {
                    return Ok(());
                }
                let id = open[self.rng.random_range(0..open.len())].clone();
                let idle: Vec<usize> = (0..self.workers.len())
                    .filter(|i| self.workers[*i].op.is_none())
                    .collect();
                self.ev("two_workers_recover_one_effect");
                self.recover(idle[0], &id)?;
                // A power loss inside the first recovery can take the effect's only
                // (unsynced) line with it: then there is nothing left to race over.
                if !self.open_effects().contains(&id) {
                    return Ok(());
                }
                self.recover(idle[1], &id)
            }
            Action::Perform(w) => self.perform(w),
            Action::Resolve(w) => self.resolve(w),
            Action::CrashWorker(w) => {
                let what = match &self.workers[w].op {
                    None => "idle".to_string(),
                    Some(o) => format!("{:?}", o.pend)
                        .split(['{', '('])
                        .take(2)
                        .collect::<Vec<_>>()
                        .join(" "),
                };
                self.ev("crash_worker");
                self.log(format!("CRASH worker {w} (was {what})"));
                self.workers[w] = Worker::default();
                Ok(())
            }
            Action::HandRefund => {
                let order = self.orders[self.rng.random_range(0..self.orders.len())].clone();
                let amount = [500, 1_000, 2_000][self.rng.random_range(0..3)];
                if self.pay.refund_by_hand(&order, amount, self.now).is_ok() {
                    self.ev("hand_refund");
                    self.log(format!(
                        "a person refunds {amount} cents on {order} by hand"
                    ));
                }
                Ok(())
            }
            Action::Eligibility => {
                let order = self.orders[self.rng.random_range(0..self.orders.len())].clone();
                let now_eligible = self.premises(&order, None)["eligible"] == json!(true);
                self.pay
                    .set_eligible(&order, !now_eligible)
                    .expect("the order exists");
                self.ev("eligibility_changed");
                self.log(format!("{order} eligible: {}", !now_eligible));
                Ok(())
            }
            Action::RevokeLease => {
                let l = self.leases[self.rng.random_range(0..self.leases.len())].clone();
                self.admin_call("revoke_lease", |g, j, now| g.revoke_lease(j, now, &l))
            }
            Action::GrantLease => {
                let l = self.leases[self.rng.random_range(0..self.leases.len())].clone();
                let until = self.now + self.rng.random_range(1..=48) * HOUR;
                self.admin_call("grant_lease", |g, j, now| g.grant_lease(j, now, &l, until))
            }
            Action::RevokeApproval => {
                let aprs: Vec<String> = self
                    .requests
                    .iter()
                    .filter(|r| r.text.is_some())
                    .filter_map(|r| match &r.auth {
                        Auth::Approval(a) => Some(a.clone()),
                        _ => None,
                    })
                    .collect();
                if aprs.is_empty() {
                    return Ok(());
                }
                let a = aprs[self.rng.random_range(0..aprs.len())].clone();
                self.admin_call("revoke_approval", |g, j, now| g.revoke_approval(j, now, &a))
            }
            Action::Jump => {
                let (kind, dt) = match self.rng.random_range(0..10) {
                    0..=4 => (
                        "clock_jump_claim",
                        self.timeout_ms + self.rng.random_range(0..self.timeout_ms),
                    ),
                    5..=7 => ("clock_jump_hours", self.rng.random_range(1..=6) * HOUR),
                    _ => (
                        "clock_jump_past_dedupe_window",
                        25 * HOUR + self.rng.random_range(0..HOUR),
                    ),
                };
                self.ev(kind);
                self.log(format!("clock jumps {} ms ({kind})", dt));
                self.advance(dt)
            }
            Action::PowerLoss => {
                self.ev("power_loss");
                let keep = self.rng.random_range(self.j.synced..=self.j.len());
                let lost = self.j.power_cut(keep);
                if lost > 0 {
                    self.ev("power_loss_lost_lines");
                }
                self.log(format!(
                    "POWER LOSS: every worker dies, {lost} unsynced journal lines lost"
                ));
                for w in &mut self.workers {
                    *w = Worker::default();
                }
                // The admin's process dies too (its gate keeps verified streams in memory,
                // which assume no line it saw is ever lost while it lives).
                self.admin = Gate::new();
                self.proposals.clear();
                Ok(())
            }
            Action::Receipt => self.take_receipt(),
        }
    }

    // ----- the world's ground truth -----

    fn premises(&self, order: &str, excluding: Option<&str>) -> Value {
        self.pay
            .premises(order, excluding)
            .expect("the order exists")
    }

    fn raw_stream(&mut self, name: &str) -> Vec<Value> {
        self.j
            .raw()
            .read(name, 0)
            .expect("memory reads")
            .iter()
            .map(|l| parse(l))
            .collect()
    }

    fn open_effects(&mut self) -> Vec<String> {
        self.j
            .raw()
            .open_streams()
            .expect("memory reads")
            .into_iter()
            .filter_map(|s| s.strip_prefix("effect:").map(String::from))
            .collect()
    }

    fn effect_ids(&mut self) -> Vec<String> {
        self.j
            .raw()
            .streams()
            .expect("memory reads")
            .into_iter()
            .filter_map(|s| s.strip_prefix("effect:").map(String::from))
            .collect()
    }

    /// The proposal as recorded in PROPOSED (the decision that stands).
    fn recorded_proposal(&mut self, id: &str) -> Option<Value> {
        if let Some(p) = self.proposals.get(id) {
            return Some(p.clone());
        }
        let first = self.j.raw().read(&format!("effect:{id}"), 0).ok()?;
        let p = parse(first.first()?)["proposal"].clone();
        self.proposals.insert(id.to_string(), p.clone());
        Some(p)
    }

    fn refunds_with(&self, id: &str) -> usize {
        self.orders
            .iter()
            .flat_map(|o| self.pay.refunds(o))
            .filter(|r| r.reference.as_deref() == Some(id))
            .count()
    }

    /// Move the clock, landing every request in flight at its landing time on the way.
    fn advance(&mut self, dt: u64) -> Result<(), Violation> {
        let target = self.now + dt;
        loop {
            let next = self
                .msgs
                .iter()
                .enumerate()
                .filter(|(_, m)| m.result.is_none() && m.land_at.is_some_and(|t| t <= target))
                .min_by_key(|(i, m)| (m.land_at, *i))
                .map(|(i, _)| i);
            let Some(i) = next else { break };
            let at = self.msgs[i].land_at.expect("filtered");
            self.now = self.now.max(at);
            self.land(i)?;
        }
        self.now = target;
        Ok(())
    }

    fn land(&mut self, i: usize) -> Result<(), Violation> {
        let m = self.msgs[i].clone();
        let at = m.land_at.expect("only requests that land");
        if at >= m.deadline {
            return fail(
                "harness_lands_after_claim",
                format!("request {i} would land at {at}, claim until {}", m.deadline),
            );
        }
        let r = self
            .pay
            .refund(&m.order, m.amount, Some(&m.key), Some(&m.effect), at);
        let res = match r {
            Ok(r) => {
                self.ev("service_applied");
                Ok(json!({"refund_id": r.id}).to_string())
            }
            Err(e) => {
                self.ev("service_rejected");
                Err(e.to_string())
            }
        };
        self.log(format!(
            "request {i} lands at the service for {}: {:?}",
            &m.effect[..8],
            res
        ));
        self.msgs[i].result = Some(res);
        Ok(())
    }

    // ----- gate calls -----

    /// Maybe arm a journal fault for the next gate call of a worker.
    fn arm_fault(&mut self) {
        if !self.faults_on || !self.chance(0.12) {
            return;
        }
        let f = match self.rng.random_range(0..20) {
            0..=7 => Fault::WriteError,
            8..=10 => Fault::ReadError,
            n => Fault::Crash {
                at: self.rng.random_range(0..6),
                after: self.rng.random_bool(0.5),
                kind: if n < 17 {
                    CrashKind::Process
                } else {
                    CrashKind::Power
                },
            },
        };
        self.j.arm(f);
    }

    /// One gate call by worker `w`; `Ok(None)` when an injected fault ended the operation.
    fn call(
        &mut self,
        w: usize,
        what: &str,
        f: impl FnOnce(&mut Gate, &mut SimJournal, u64) -> Result<Step, GateError>,
    ) -> Result<Option<Step>, Violation> {
        self.arm_fault();
        let before = self.j.len();
        let r = f(&mut self.workers[w].gate, &mut self.j, self.now);
        self.j.disarm();
        let injected = self.j.injected.take();
        if let Some(kind) = injected {
            self.ev(kind);
        }
        if let Some(kind) = self.j.crashed {
            let keep = match kind {
                CrashKind::Process => self.j.len(),
                CrashKind::Power => self.rng.random_range(self.j.synced..=self.j.len()),
            };
            let lost = self.j.recover_from_crash(keep);
            self.log(format!(
                "CRASH ({kind:?}) of worker {w} inside {what} ({}), {} journal lines written by it, {lost} lines lost",
                injected.unwrap_or("?"),
                (self.j.len() + lost).saturating_sub(before),
            ));
            if lost > 0 {
                self.ev("power_loss_lost_lines");
            }
            match kind {
                CrashKind::Process => self.workers[w] = Worker::default(),
                CrashKind::Power => {
                    for w in &mut self.workers {
                        *w = Worker::default();
                    }
                    self.admin = Gate::new();
                    self.proposals.clear();
                }
            }
            return Ok(None);
        }
        match r {
            Ok(s) => Ok(Some(s)),
            Err(GateError::Journal(JournalError::Io(m))) if injected.is_some() => {
                self.log(format!("worker {w}: {what} failed: {m}"));
                if let Some(o) = self.workers[w].op.take() {
                    self.workers[w].gate.cancel(o.op);
                }
                Ok(None)
            }
            Err(e) => fail(
                "unexpected_gate_error",
                format!("worker {w} {what}: {e} ({e:?})"),
            ),
        }
    }

    fn admin_call(
        &mut self,
        what: &'static str,
        f: impl FnOnce(&mut Gate, &mut SimJournal, u64) -> Result<(), GateError>,
    ) -> Result<(), Violation> {
        if self.faults_on && self.chance(0.1) {
            self.j.arm(Fault::WriteError);
        }
        let r = f(&mut self.admin, &mut self.j, self.now);
        self.j.disarm();
        let injected = self.j.injected.take();
        match r {
            Ok(()) => {
                self.ev(what);
                self.log(format!("admin: {what} recorded"));
                Ok(())
            }
            Err(e) if injected.is_some() => {
                self.ev("write_error");
                self.log(format!("admin: {what} failed: {e}"));
                Ok(())
            }
            Err(GateError::InvalidField { .. }) => Ok(()),
            Err(e) => fail("unexpected_gate_error", format!("admin {what}: {e:?}")),
        }
    }

    fn decide(&mut self, i: usize) -> Result<(), Violation> {
        if self.requests[i].text.is_some() {
            return Ok(());
        }
        let r = self.requests[i].clone();
        let premises = self.premises(&r.order, None);
        let declared = if r.narrow_premises && matches!(r.auth, Auth::Approval(_)) {
            json!({"eligible": premises["eligible"]})
        } else {
            premises.clone()
        };
        let mk = |amount: u64| {
            let mut p = json!({
                "agent": "refund-agent",
                "target": {"name": "payments", "dedupes": self.tier.dedupes,
                           "lookup": self.tier.lookup, "timeout_ms": self.timeout_ms},
                "key": r.key,
                "effect": {"order": r.order, "amount_cents": amount},
                "premises": declared,
            });
            p["authority"] = match &r.auth {
                Auth::Lease(l) => json!({"lease": l, "host_check": r.host_check}),
                Auth::Approval(a) => json!({"approval": a, "host_check": r.host_check}),
            };
            if let (Some(slack), Some(n)) = (r.slack, declared["refunded_by_others_cents"].as_u64())
            {
                p["bounds"] = json!({"refunded_by_others_cents": {"at_most": n + slack}});
            }
            if let Some((name, limit)) = &r.cap {
                p["cap"] = json!({"name": name, "limit_cents": limit, "amount_cents": amount});
            }
            p.to_string()
        };
        let text = mk(r.amount);
        let alt = mk(r.amount + 500);
        if let Auth::Approval(a) = &r.auth {
            let approval = json!({
                "approval": a, "approver": "manager@shop",
                "request": {"key": r.key, "effect": {"order": r.order, "amount_cents": r.amount}},
                "premises_seen": premises,
                "expires_at_ms": self.now + self.rng.random_range(1..=30) * HOUR,
            })
            .to_string();
            self.admin
                .approve(&mut self.j, self.now, &approval)
                .map_err(|e| Violation {
                    invariant: "unexpected_gate_error",
                    detail: format!("approve: {e:?}"),
                })?;
            self.log(format!("manager approves {a} seeing {premises}"));
        }
        self.log(format!(
            "agent decides request {i} ({}) with premises {declared}",
            &r.id[..8]
        ));
        self.requests[i].text = Some(text);
        self.requests[i].alt = Some(alt);
        Ok(())
    }

    fn submit(&mut self, w: usize) -> Result<(), Violation> {
        let i = self.rng.random_range(0..self.requests.len());
        self.decide(i)?;
        let (text, label) = if self.chance(0.08) {
            self.ev("submit_changed_amount");
            (
                self.requests[i].alt.clone().expect("decided"),
                "changed amount",
            )
        } else {
            (
                self.requests[i].text.clone().expect("decided"),
                "as decided",
            )
        };
        self.ev("submit");
        let id = self.requests[i].id.clone();
        self.log(format!("worker {w} submits request {i} ({label})"));
        let before = self.j.len();
        let step = self.call(w, "submit", |g, j, now| g.submit(j, now, &text))?;
        self.on_step(w, &id, step, before)
    }

    fn recover(&mut self, w: usize, id: &str) -> Result<(), Violation> {
        self.ev("recover");
        self.log(format!("worker {w} recovers {}", &id[..8]));
        let before = self.j.len();
        let step = self.call(w, "recover", |g, j, now| g.recover(j, now, id))?;
        self.on_step(w, id, step, before)
    }

    fn resume(&mut self, w: usize, reply: Reply) -> Result<(), Violation> {
        let Some(o) = self.workers[w].op.clone() else {
            return Ok(());
        };
        self.log(format!(
            "worker {w} resumes {} with {}",
            &o.effect[..8],
            short(&format!("{reply:?}"))
        ));
        let before = self.j.len();
        let step = self.call(w, "resume", |g, j, now| g.resume(j, now, o.op, reply))?;
        self.on_step(w, &o.effect, step, before)
    }

    /// Take the step the gate returned: check it, and remember what the host must do.
    fn on_step(
        &mut self,
        w: usize,
        id: &str,
        step: Option<Step>,
        before: usize,
    ) -> Result<(), Violation> {
        let Some(step) = step else {
            self.workers[w].op = None;
            return Ok(());
        };
        let prev = self.workers[w].op.take();
        let mut o = match prev {
            Some(p) if p.op == step.op => p,
            _ => OpState {
                op: step.op,
                effect: id.to_string(),
                pend: Pend::Ask(step.ask.clone()),
                lookup_not_found: false,
                captured: false,
                allowed: None,
                live_at_recheck: None,
                asked_authorize_after_capture: false,
                deadline: 0,
            },
        };
        match &step.ask {
            Ask::Done(out) => {
                self.log(format!(
                    "worker {w}: {} {} reason {:?} executed {:?}{}",
                    &id[..8],
                    out.state.as_str(),
                    out.reason.map(Reason::as_str),
                    out.executed.as_str(),
                    if out.replayed { " (replayed)" } else { "" }
                ));
                return self.check_outcome(w, id, out, before);
            }
            Ask::Apply { attempt, .. } => {
                o.deadline = self.now + self.timeout_ms;
                self.log(format!(
                    "worker {w}: DISPATCHED {} attempt {attempt}, claim until +{} ms",
                    &id[..8],
                    self.timeout_ms
                ));
                let checked = self.check_send(&o, *attempt);
                self.soft(checked)?;
                self.sends.entry(id.to_string()).or_default().push(Send {
                    at: self.now,
                    deadline: o.deadline,
                });
                self.ev("send");
                if *attempt > 0 {
                    self.ev("resend");
                }
            }
            Ask::Capture { .. } => {
                o.live_at_recheck = Some(self.authority_live(id).is_ok());
                self.log(format!("worker {w}: asked {}", ask_name(&step.ask)));
            }
            Ask::Authorize { .. } => {
                o.asked_authorize_after_capture = o.captured;
                self.log(format!("worker {w}: asked {}", ask_name(&step.ask)));
            }
            Ask::Query { .. } => self.log(format!("worker {w}: asked query")),
        }
        o.pend = Pend::Ask(step.ask);
        self.workers[w].op = Some(o);
        Ok(())
    }

    /// The host performs the step its worker was asked.
    fn perform(&mut self, w: usize) -> Result<(), Violation> {
        let Some(o) = self.workers[w].op.clone() else {
            return Ok(());
        };
        let Pend::Ask(ask) = o.pend.clone() else {
            return Ok(());
        };
        let faults = self.faults_on;
        match ask {
            Ask::Capture {
                effect_id,
                effect,
                names,
                ..
            } => {
                if faults && self.chance(0.07) {
                    self.ev("premise_read_failed");
                    return self.resume(w, Reply::Failed("order system unreachable".into()));
                }
                let order = parse(&effect)["order"].as_str().unwrap_or("").to_string();
                let p = self.premises(&order, Some(&effect_id));
                let picked: Map<String, Value> = names
                    .iter()
                    .filter_map(|n| p.get(n).map(|v| (n.clone(), v.clone())))
                    .collect();
                if let Some(op) = &mut self.workers[w].op {
                    op.captured = true;
                }
                self.resume(w, Reply::Captured(Value::Object(picked).to_string()))
            }
            Ask::Authorize { .. } => {
                let yes = !faults || self.chance(0.85);
                if let Some(op) = &mut self.workers[w].op {
                    op.allowed = Some(yes);
                }
                self.resume(w, Reply::Allowed(yes))
            }
            Ask::Query { effect_id, .. } => {
                if faults && self.chance(0.07) {
                    self.ev("lookup_failed");
                    return self.resume(w, Reply::Failed("lookup timed out".into()));
                }
                let found = match self.pay.find_by_reference(&effect_id) {
                    Ok(f) => f,
                    Err(e) => return fail("query_without_lookup", e.to_string()),
                };
                match found {
                    Some(r) => self.resume(w, Reply::Found(json!({"refund_id": r.id}).to_string())),
                    None => {
                        if let Some(op) = &mut self.workers[w].op {
                            op.lookup_not_found = true;
                        }
                        self.resume(w, Reply::NotFound)
                    }
                }
            }
            Ask::Apply {
                effect_id,
                effect,
                idempotency_key,
                ..
            } => {
                if self.now >= o.deadline {
                    // The claim ran out before the host got to send: it must not send now.
                    self.ev("send_abandoned_claim_expired");
                    return self.resume(w, Reply::Unknown("claim expired before the send".into()));
                }
                let e = parse(&effect);
                let mut m = Msg {
                    effect: effect_id,
                    order: e["order"].as_str().unwrap_or("").into(),
                    amount: e["amount_cents"].as_u64().unwrap_or(0),
                    key: idempotency_key,
                    deadline: o.deadline,
                    land_at: Some(self.now),
                    result: None,
                    reply_lost: false,
                };
                let fate = if faults {
                    self.rng.random_range(0..20)
                } else {
                    0
                };
                match fate {
                    0..=11 => {}
                    12..=13 => {
                        m.reply_lost = true;
                        self.ev("reply_lost");
                    }
                    14..=15 => {
                        m.land_at = None;
                        self.ev("request_lost");
                    }
                    _ => {
                        m.land_at = Some(self.rng.random_range(self.now..o.deadline));
                        m.reply_lost = self.chance(0.3);
                        self.ev("request_delayed");
                    }
                }
                let i = self.msgs.len();
                self.log(format!(
                    "worker {w} sends request {i} for {}: lands {}, reply {}",
                    &m.effect[..8],
                    match m.land_at {
                        None => "never".to_string(),
                        Some(t) => format!("+{} ms", t - self.now),
                    },
                    if m.reply_lost { "lost" } else { "kept" }
                ));
                let now_landing = m.land_at == Some(self.now);
                self.msgs.push(m);
                if now_landing {
                    self.land(i)?;
                }
                if let Some(op) = &mut self.workers[w].op {
                    op.pend = Pend::Await(i);
                }
                if !faults {
                    return self.resolve(w);
                }
                Ok(())
            }
            Ask::Done(_) => Ok(()),
        }
    }

    /// The host hands its worker the reply, or gives up (by the deadline at the latest).
    fn resolve(&mut self, w: usize) -> Result<(), Violation> {
        let Some(o) = self.workers[w].op.clone() else {
            return Ok(());
        };
        let Pend::Await(i) = o.pend else {
            return Ok(());
        };
        let m = self.msgs[i].clone();
        if let (Some(res), false) = (&m.result, m.reply_lost) {
            if self.now < m.deadline && (!self.faults_on || self.chance(0.95)) {
                let reply = match res {
                    Ok(t) => Reply::Applied(t.clone()),
                    Err(e) => Reply::Rejected(e.clone()),
                };
                return self.resume(w, reply);
            }
        }
        let mut waited = false;
        if self.faults_on && self.chance(0.5) {
            // The host waits up to the whole timeout; the reply may come in meanwhile.
            let wait = self
                .rng
                .random_range(0..=m.deadline.saturating_sub(self.now));
            self.advance(wait)?;
            waited = true;
            self.ev("host_waits");
        } else {
            self.ev("host_gives_up_early");
        }
        if let (Some(res), true) = (&self.msgs[i].result, waited) {
            if !m.reply_lost && self.now < m.deadline {
                let reply = match res {
                    Ok(t) => Reply::Applied(t.clone()),
                    Err(e) => Reply::Rejected(e.clone()),
                };
                return self.resume(w, reply);
            }
        }
        self.resume(w, Reply::Unknown("no reply before the timeout".into()))
    }

    fn take_receipt(&mut self) -> Result<(), Violation> {
        let ids = self.effect_ids();
        if ids.is_empty() {
            return Ok(());
        }
        let id = ids[self.rng.random_range(0..ids.len())].clone();
        let r = self
            .admin
            .receipt(&mut journal::Admin(&mut self.j), &id, Some(RECEIPT_KEY))
            .map_err(|e| Violation {
                invariant: "unexpected_gate_error",
                detail: format!("receipt: {e:?}"),
            })?;
        let rep = self
            .admin
            .check_receipt(
                &mut View {
                    inner: self.j.raw(),
                    names: vec![format!("effect:{id}")],
                },
                &r,
                RECEIPT_KEY,
            )
            .map_err(|e| Violation {
                invariant: "unexpected_gate_error",
                detail: format!("check_receipt: {e:?}"),
            })?;
        if !rep.problems.is_empty() {
            return fail("receipt_check", format!("{:?}", rep.problems));
        }
        let head = parse(&r)["head"]["length"].as_u64().unwrap_or(0);
        let unsynced = head > self.j.durable_len(&format!("effect:{id}"));
        self.ev("receipt_taken");
        if unsynced {
            self.ev("receipt_over_unsynced_entries");
        }
        self.log(format!(
            "receipt for {} handed out (pins {head} entries{})",
            &id[..8],
            if unsynced { ", not all synced" } else { "" }
        ));
        self.anchors.push((r, unsynced));
        Ok(())
    }

    // ----- invariants -----

    /// At every send, right after its durable DISPATCHED: the intent is durable, the
    /// authority is live now, the premises hold now, no other send of this effect can be in
    /// flight, and a resend is one the tier allows.
    fn check_send(&mut self, o: &OpState, attempt: u32) -> Result<(), Violation> {
        let id = o.effect.clone();
        let stream = self.raw_stream(&format!("effect:{id}"));
        let Some(last) = stream.last() else {
            return fail("send_without_intent", "no entries");
        };
        if state_of(last) != "DISPATCHED"
            || last["attempt"].as_u64() != Some(attempt as u64)
            || last["at_ms"].as_u64() != Some(self.now)
            || last["claim_until_ms"].as_u64() != Some(self.now + self.timeout_ms)
        {
            return fail("send_without_intent", format!("last entry {last}"));
        }
        if self.j.synced < self.j.len() {
            return fail(
                "send_before_intent_durable",
                format!("{} of {} lines synced", self.j.synced, self.j.len()),
            );
        }
        let p = stream[0]["proposal"].clone();
        // One send in flight at most: every earlier send's claim is over.
        let prior = self.sends.get(&id).cloned().unwrap_or_default();
        if let Some(s) = prior.iter().find(|s| s.deadline > self.now) {
            return fail(
                "send_under_live_claim",
                format!("an earlier send's claim runs until {}", s.deadline - T0),
            );
        }
        if let Some(first) = prior.first() {
            let t = &p["target"];
            let (dedupes, lookup) = (t["dedupes"] == json!(true), t["lookup"] == json!(true));
            let window = t["dedupe_window_ms"].as_u64().unwrap_or(0);
            let inside = self.now + self.timeout_ms < first.at + window;
            let ok = match (dedupes, lookup) {
                (false, false) => false,
                (false, true) => o.lookup_not_found,
                (true, false) => inside,
                (true, true) => inside || o.lookup_not_found,
            };
            if !ok {
                let inv = match (dedupes, lookup) {
                    (false, false) => "tier3_resend_after_unknown",
                    (false, true) => "resend_without_lookup_not_found",
                    _ => "resend_past_dedupe_window",
                };
                return fail(
                    inv,
                    format!(
                        "attempt {attempt}, first send at +{} ms, now +{} ms, lookup not found: {}",
                        first.at - T0,
                        self.now - T0,
                        o.lookup_not_found
                    ),
                );
            }
        }
        self.check_send_checks(o, &p)
    }

    /// The checks made right before the send: authority live at the DISPATCHED, premises
    /// as the world has them then, the host check. Checked last in [`World::check_send`]
    /// because two known core bugs show here.
    fn check_send_checks(&mut self, o: &OpState, p: &Value) -> Result<(), Violation> {
        let id = o.effect.clone();
        // Authority, from the journal as it stands at the DISPATCHED.
        if let Err((inv, detail)) = self.authority_live(&id) {
            // Known core bug A: authority is checked when the premises are asked for, and
            // not again at the DISPATCHED; a host round trip lies between the two.
            let inv = if o.live_at_recheck == Some(true) {
                "authority_died_between_check_and_send"
            } else {
                inv
            };
            return fail(inv, detail);
        }
        let mut seen = Map::new();
        if let Some(a) = p["authority"]["approval"].as_str() {
            let s = self.raw_stream(&format!("approval:{a}"));
            seen = s[0]["premises_seen"]
                .as_object()
                .cloned()
                .unwrap_or_default();
        }
        // Premises, as the world has them at the DISPATCHED.
        let order = p["effect"]["order"].as_str().unwrap_or("").to_string();
        let fresh = self.premises(&order, Some(&id));
        let declared = p["premises"].as_object().cloned().unwrap_or_default();
        for (k, was) in &declared {
            let now = fresh.get(k).cloned().unwrap_or(Value::Null);
            let holds = match p["bounds"][k].as_object() {
                Some(b) => match (b.get("at_most"), b.get("at_least"), now.as_i64()) {
                    (Some(x), _, Some(n)) => x.as_i64().is_some_and(|x| n <= x),
                    (_, Some(x), Some(n)) => x.as_i64().is_some_and(|x| n >= x),
                    _ => false,
                },
                None => *was == now,
            };
            if !holds {
                // Known core bug B: the host check is asked after the premises were read.
                return fail(
                    if o.asked_authorize_after_capture {
                        "premises_changed_during_host_check"
                    } else {
                        "send_with_changed_premise"
                    },
                    format!(
                        "{k} was {was}, is {now} at the send (bounds {})",
                        p["bounds"]
                    ),
                );
            }
        }
        for (k, was) in &seen {
            if fresh.get(k) != Some(was) {
                return fail(
                    if o.asked_authorize_after_capture {
                        "premises_changed_during_host_check"
                    } else {
                        "send_with_stale_approval"
                    },
                    format!("approver saw {k} = {was}, is {:?}", fresh.get(k)),
                );
            }
        }
        if (!declared.is_empty() || !seen.is_empty()) && !o.captured {
            return fail("send_without_fresh_read", "no capture in this operation");
        }
        if p["authority"]["host_check"] == json!(true) && o.allowed != Some(true) {
            return fail("send_without_host_check", format!("{:?}", o.allowed));
        }
        Ok(())
    }

    /// Effects that released their reservation of cap `name` while the journal says their
    /// send may have landed (REFUSED or AMBIGUOUS with `executed: unknown`).
    fn released_while_unknown(&mut self, name: &str) -> Vec<String> {
        let cap = self.raw_stream(&format!("cap:{name}"));
        let mut out = Vec::new();
        for e in cap.iter().filter(|e| state_of(e) == "RELEASED") {
            let id = e["effect_id"].as_str().unwrap_or("").to_string();
            let s = self.raw_stream(&format!("effect:{id}"));
            // Known bug D only: the releasing effect itself ended saying its send may have
            // landed. A release by an effect whose stream ends otherwise is another bug.
            let unknown = s.last().is_some_and(|x| {
                state_of(x) == "REFUSED" && x["executed"].as_str() == Some("unknown")
            });
            if unknown {
                out.push(id[..8].to_string());
            }
        }
        out
    }

    /// Effects refunded under cap `name` whose reservation holds another amount than the
    /// decision recorded (a reservation left by a payload that was never recorded).
    fn reserved_for_another_amount(&mut self, name: &str) -> Vec<String> {
        let cap = self.raw_stream(&format!("cap:{name}"));
        let mut held: BTreeMap<String, u64> = BTreeMap::new();
        for e in &cap {
            let id = e["effect_id"].as_str().unwrap_or("").to_string();
            match state_of(e) {
                "RESERVED" => {
                    held.insert(id, e["amount_cents"].as_u64().unwrap_or(0));
                }
                "RELEASED" => {
                    held.remove(&id);
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        for (id, amount) in held {
            if self.refunds_with(&id) == 0 {
                continue;
            }
            let recorded = self
                .recorded_proposal(&id)
                .and_then(|p| p["cap"]["amount_cents"].as_u64());
            if recorded.is_some_and(|r| r != amount) {
                out.push(format!(
                    "{} reserved {amount}, sent {:?}",
                    &id[..8],
                    recorded
                ));
            }
        }
        out
    }

    /// Whether the effect's lease or approval is live now, by the journal.
    fn authority_live(&mut self, id: &str) -> Result<(), (&'static str, String)> {
        let Some(p) = self.recorded_proposal(id) else {
            return Ok(());
        };
        if let Some(l) = p["authority"]["lease"].as_str() {
            let ls = self.raw_stream(&format!("lease:{l}"));
            let live = ls.last().is_some_and(|e| {
                state_of(e) == "GRANTED" && e["expires_at_ms"].as_u64().unwrap_or(0) > self.now
            });
            if !live {
                return Err((
                    "send_under_dead_lease",
                    format!(
                        "lease {l} at the send: {}",
                        ls.last().map(|e| e.to_string()).unwrap_or_default()
                    ),
                ));
            }
        }
        if let Some(a) = p["authority"]["approval"].as_str() {
            let s = self.raw_stream(&format!("approval:{a}"));
            let first = s.first().cloned().unwrap_or(Value::Null);
            let revoked = s.iter().any(|e| state_of(e) == "REVOKED");
            let expired = first["expires_at_ms"]
                .as_u64()
                .is_some_and(|t| t <= self.now);
            if first["effect_id"].as_str() != Some(id) || revoked || expired {
                return Err((
                    "send_under_dead_approval",
                    format!("approval {a}: revoked {revoked}, expired {expired}"),
                ));
            }
        }
        Ok(())
    }

    fn check_outcome(
        &mut self,
        w: usize,
        id: &str,
        out: &Outcome,
        before: usize,
    ) -> Result<(), Violation> {
        self.ev(match out.state {
            State::Committed => "outcome_committed",
            State::Refused => "outcome_refused",
            State::Ambiguous => "outcome_ambiguous",
            _ => "outcome_open",
        });
        if out.reason == Some(Reason::ConflictingPayload) {
            if self.j.len() != before {
                return fail(
                    "conflicting_payload_recorded",
                    "a refused conflicting payload wrote to the journal",
                );
            }
            return Ok(());
        }
        let stream = self.raw_stream(&format!("effect:{id}"));
        if out.state.is_terminal() && !out.replayed {
            let last = stream.last().map(state_of).unwrap_or("");
            if last != out.state.as_str() {
                return fail(
                    "outcome_disagrees_with_journal",
                    format!(
                        "worker {w} was told {} for {}, the journal ends {last}",
                        out.state.as_str(),
                        &id[..8]
                    ),
                );
            }
        }
        if matches!(out.state, State::Committed) && self.refunds_with(id) == 0 {
            return fail("committed_without_refund", id.to_string());
        }
        if out.state == State::Refused && out.executed == Executed::No {
            let unsynced = (stream.len() as u64) > self.j.durable_len(&format!("effect:{id}"));
            if unsynced {
                self.ev("outcome_read_from_unsynced_entry");
            }
            let e = self.declared_unsent.entry(id.to_string()).or_insert(true);
            *e = *e && unsynced;
        }
        Ok(())
    }

    /// After every step: money, caps, declared outcomes, and the journal's chains.
    fn check_step(&mut self) -> Result<(), Violation> {
        let mut per_ref: BTreeMap<String, Vec<(String, u64, u64)>> = BTreeMap::new();
        for o in self.orders.clone() {
            for r in self.pay.refunds(&o) {
                if let Some(x) = r.reference {
                    per_ref
                        .entry(x)
                        .or_default()
                        .push((r.id, r.amount_cents, r.created_ms));
                }
            }
        }
        let mut caps: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (id, refunds) in &per_ref {
            if refunds.len() > 1 {
                return fail(
                    "two_refunds_of_one_effect",
                    format!("{}: {:?}", &id[..8], refunds),
                );
            }
            let Some(p) = self.recorded_proposal(id) else {
                return fail("refund_without_intent", id.clone());
            };
            let amount = p["effect"]["amount_cents"].as_u64().unwrap_or(0);
            if refunds[0].1 != amount {
                return fail(
                    "refund_of_another_amount",
                    format!("recorded {amount}, refunded {}", refunds[0].1),
                );
            }
            if let Some(name) = p["cap"]["name"]
                .as_str()
                .filter(|n| !self.caps_over.iter().any(|c| c == n))
            {
                let c = caps.entry(name.to_string()).or_default();
                c.0 += amount;
                c.1 = p["cap"]["limit_cents"].as_u64().unwrap_or(0);
            }
            if let Some(&unsynced) = self.declared_unsent.get(id) {
                let r = fail(
                    if unsynced {
                        "outcome_reported_from_unsynced_entry"
                    } else {
                        "refused_unsent_but_refunded"
                    },
                    format!(
                        "{} was told REFUSED executed no{}, the service has it",
                        &id[..8],
                        if unsynced {
                            " (read from an entry no fsync covered, lost in a power cut)"
                        } else {
                            ""
                        }
                    ),
                );
                self.soft(r)?;
                self.declared_unsent.remove(id);
            }
        }
        for (name, (sum, limit)) in caps {
            if sum > limit {
                let released_unknown = self.released_while_unknown(&name);
                let other_payload = self.reserved_for_another_amount(&name);
                let r = fail(
                    if !released_unknown.is_empty() {
                        "cap_released_while_executed_unknown"
                    } else if !other_payload.is_empty() {
                        "cap_reservation_of_another_payload"
                    } else {
                        "cap_exceeded"
                    },
                    format!(
                        "{name}: {sum} > {limit}; released by effects whose send may have landed: {:?}; sent under a reservation of another amount: {:?}",
                        released_unknown, other_payload
                    ),
                );
                self.soft(r)?;
                // Known and recorded: stop counting this cap against the seed.
                self.caps_over.push(name);
            }
        }
        self.verify_journal(false)
    }

    /// `gate.verify` over the streams changed since the last clean verify (each stream is
    /// verified on its own, so this is the same check, done incrementally), or all of them.
    fn verify_journal(&mut self, all: bool) -> Result<(), Violation> {
        let dirty = self.j.take_dirty();
        if dirty.is_empty() && !all {
            return Ok(());
        }
        let names: Vec<String> = if all {
            self.j.raw().streams().expect("memory reads")
        } else {
            dirty.into_iter().collect()
        };
        let anchors: Vec<String> = self
            .anchors
            .iter()
            .filter(|a| {
                names
                    .iter()
                    .any(|n| a.0.contains(&format!("\"stream\":\"{n}\"")))
            })
            .map(|a| a.0.clone())
            .collect();
        let mut view = View {
            inner: self.j.raw(),
            names,
        };
        let rep = self
            .admin
            .verify(&mut view, &anchors)
            .map_err(|e| Violation {
                invariant: "unexpected_gate_error",
                detail: format!("verify: {e:?}"),
            })?;
        if rep.problems.is_empty() {
            return Ok(());
        }
        // A receipt that pinned entries no fsync covered, broken by a power loss.
        let unsynced_pin = rep.problems.iter().all(|p| {
            p.kind == interlock_core::ProblemKind::Truncated
                && self.anchors.iter().any(|a| a.1 && a.0.contains(&p.stream))
        });
        if unsynced_pin {
            // Drop the receipts that pinned lost entries, so later verifies check the rest.
            let streams: Vec<String> = rep.problems.iter().map(|p| p.stream.clone()).collect();
            self.anchors
                .retain(|a| !(a.1 && streams.iter().any(|s| a.0.contains(s.as_str()))));
            return self.soft(fail(
                "receipt_pins_unsynced_entry",
                format!("{:?}", rep.problems),
            ));
        }
        fail("journal_verify", format!("{:?}", rep.problems))
    }

    /// Faults stop; the clock passes every claim; every agent resubmits its request and
    /// recovery runs on whatever is open. Then everything must be terminal and check.
    fn settle(&mut self) -> Result<(), Violation> {
        self.log("SETTLE: faults stop, workers restart, the clock passes every claim".into());
        self.faults_on = false;
        for w in &mut self.workers {
            *w = Worker::default();
        }
        let last_deadline = self.msgs.iter().map(|m| m.deadline).max().unwrap_or(0);
        let wait = last_deadline.saturating_sub(self.now) + 1;
        self.advance(wait)?;
        for round in 0..4 {
            for i in 0..self.requests.len() {
                self.decide(i)?;
                let text = self.requests[i].text.clone().expect("decided");
                let id = self.requests[i].id.clone();
                self.log(format!("settle round {round}: agent resubmits request {i}"));
                let before = self.j.len();
                let step = self.call(0, "submit", |g, j, now| g.submit(j, now, &text))?;
                self.on_step(0, &id, step, before)?;
                self.drive(0)?;
            }
            for id in self.open_effects() {
                self.recover(0, &id)?;
                self.drive(0)?;
            }
            self.check_step()?;
            if self.open_effects().is_empty() {
                break;
            }
            self.advance(self.timeout_ms + 1)?;
        }
        let open = self.open_effects();
        if !open.is_empty() {
            return fail(
                "effect_left_open",
                format!("open after settling: {:?}", open),
            );
        }
        // Every effect is terminal; its receipt checks; the journal verifies under every
        // receipt handed out, then and now.
        for id in self.effect_ids() {
            let s = self.raw_stream(&format!("effect:{id}"));
            let last = s.last().map(state_of).unwrap_or("").to_string();
            if !State::parse(&last).is_some_and(State::is_terminal) {
                let closed = s.last().is_some_and(|e| e["open"] == json!(false));
                let r = fail(
                    if closed {
                        "torn_close_hides_open_effect"
                    } else {
                        "effect_not_terminal"
                    },
                    format!(
                        "{} ends {last} with open={}, not listed by open_effects",
                        &id[..8],
                        !closed
                    ),
                );
                self.soft(r)?;
                continue;
            }
            let executed = s.last().and_then(|e| e["executed"].as_str()).unwrap_or("");
            let refunds = self.refunds_with(&id);
            if last == "COMMITTED" && refunds == 0 {
                return fail("committed_without_refund", id);
            }
            if last == "REFUSED" && executed == "no" && refunds > 0 {
                return fail("refused_unsent_but_refunded", id);
            }
            let r = self
                .admin
                .receipt(&mut journal::Admin(&mut self.j), &id, Some(RECEIPT_KEY))
                .map_err(|e| Violation {
                    invariant: "unexpected_gate_error",
                    detail: format!("receipt: {e:?}"),
                })?;
            let rep = self
                .admin
                .check_receipt(
                    &mut View {
                        inner: self.j.raw(),
                        names: vec![format!("effect:{id}")],
                    },
                    &r,
                    RECEIPT_KEY,
                )
                .map_err(|e| Violation {
                    invariant: "unexpected_gate_error",
                    detail: format!("check_receipt: {e:?}"),
                })?;
            if !rep.problems.is_empty() {
                return fail("receipt_check", format!("{id}: {:?}", rep.problems));
            }
            self.anchors.push((r, false));
        }
        self.ev("settled");
        self.verify_journal(true)
    }

    /// Drive worker `w`'s operation to its end with a perfect host (no faults).
    fn drive(&mut self, w: usize) -> Result<(), Violation> {
        for _ in 0..32 {
            match &self.workers[w].op {
                None => return Ok(()),
                Some(OpState {
                    pend: Pend::Ask(_), ..
                }) => self.perform(w)?,
                Some(OpState {
                    pend: Pend::Await(_),
                    ..
                }) => self.resolve(w)?,
            }
        }
        fail("operation_never_ends", "32 steps without an outcome")
    }
}

fn ask_name(a: &Ask) -> String {
    match a {
        Ask::Capture { names, .. } => format!("capture {names:?}"),
        Ask::Authorize { .. } => "authorize".into(),
        Ask::Apply { attempt, .. } => format!("apply attempt {attempt}"),
        Ask::Query { .. } => "query".into(),
        Ask::Done(_) => "done".into(),
    }
}

fn short(s: &str) -> String {
    if s.len() > 90 {
        format!("{}...", &s[..90])
    } else {
        s.to_string()
    }
}
