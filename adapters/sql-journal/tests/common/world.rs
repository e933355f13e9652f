//! A worker as a host runs it: a gate, its own connection to the journal, and the host
//! loop performing each step against the simulated payments service.

use std::sync::{Arc, Mutex};

use interlock_core::{Ask, Gate, GateError, Journal, Outcome, Reply, Step};
use interlock_payments_sim::{self as sim, Payments, Tier};
use serde_json::{json, Value};

use super::{Backend, Counted};

pub const T0: u64 = 1_800_000_000_000;
pub const HOUR: u64 = 3_600_000;
/// The proposals' `timeout_ms`: the length of a send's claim.
pub const CLAIM_MS: u64 = 1000;

/// Where a worker stops as if its process died.
#[derive(Clone, Copy, PartialEq)]
pub enum Crash {
    /// The intent is durable; the send is never made.
    BeforeSend,
    /// The service made the refund; the reply never reaches the gate.
    AfterSend,
}

/// One worker: a gate and its own connection to the journal.
pub struct Worker {
    pub gate: Gate,
    pub j: Box<dyn Counted>,
    pub pay: Arc<Mutex<Payments>>,
}

impl Worker {
    pub fn new(b: &Backend, url: &str, pay: &Arc<Mutex<Payments>>) -> Worker {
        Worker {
            gate: Gate::new(),
            j: b.open_counted(url),
            pay: pay.clone(),
        }
    }

    /// The host loop: each step the gate asks is performed against the service.
    pub fn drive(&mut self, now: u64, step: Step, crash: Option<Crash>) -> Option<Outcome> {
        self.try_drive(now, step, crash).unwrap()
    }

    /// [`Worker::drive`], returning the gate's error (a journal failure) instead.
    pub fn try_drive(
        &mut self,
        now: u64,
        mut step: Step,
        crash: Option<Crash>,
    ) -> Result<Option<Outcome>, GateError> {
        loop {
            let reply = match step.ask {
                Ask::Sleep(_) => Reply::Slept,
                Ask::Crash(_) => return Ok(None),
                Ask::Done(o) => return Ok(Some(o)),
                Ask::Capture {
                    effect_id,
                    effect,
                    names,
                    ..
                } => reply(
                    self.pay
                        .lock()
                        .unwrap()
                        .capture(&effect_id, &effect, &names),
                ),
                Ask::Authorize { .. } => Reply::Allowed(true),
                Ask::Apply {
                    effect_id,
                    effect,
                    idempotency_key,
                    ..
                } => {
                    if crash == Some(Crash::BeforeSend) {
                        return Ok(None);
                    }
                    let r =
                        self.pay
                            .lock()
                            .unwrap()
                            .apply(&effect_id, &effect, &idempotency_key, now);
                    if crash == Some(Crash::AfterSend) {
                        return Ok(None);
                    }
                    reply(r)
                }
                Ask::Query {
                    effect_id, effect, ..
                } => reply(self.pay.lock().unwrap().query(&effect_id, &effect)),
            };
            let j: &mut dyn Journal = &mut *self.j;
            step = self.gate.resume(j, now, step.op, reply)?;
        }
    }

    pub fn submit(&mut self, now: u64, proposal: &Value, crash: Option<Crash>) -> Option<Outcome> {
        self.try_submit(now, proposal, crash).unwrap()
    }

    pub fn try_submit(
        &mut self,
        now: u64,
        proposal: &Value,
        crash: Option<Crash>,
    ) -> Result<Option<Outcome>, GateError> {
        let j: &mut dyn Journal = &mut *self.j;
        let step = self.gate.submit(j, now, &proposal.to_string())?;
        self.try_drive(now, step, crash)
    }

    pub fn recover_all(&mut self, now: u64) -> Vec<Outcome> {
        let j: &mut dyn Journal = &mut *self.j;
        let ids = self.gate.open_effects(j).unwrap();
        ids.iter()
            .map(|id| {
                let j: &mut dyn Journal = &mut *self.j;
                let step = self.gate.recover(j, now, id).unwrap();
                self.drive(now, step, None).unwrap()
            })
            .collect()
    }

    pub fn verifies(&mut self) {
        let j: &mut dyn Journal = &mut *self.j;
        let report = self.gate.verify(j, &[]).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}

pub fn reply(r: sim::Reply) -> Reply {
    match r {
        sim::Reply::Captured(t) => Reply::Captured(t),
        sim::Reply::Applied(t) => Reply::Applied(t),
        sim::Reply::Rejected(t) => Reply::Rejected(t),
        sim::Reply::Unknown(t) => Reply::Unknown(t),
        sim::Reply::Found(t) => Reply::Found(t),
        sim::Reply::NotFound => Reply::NotFound,
        sim::Reply::Failed(t) => Reply::Failed(t),
    }
}

/// A service with `orders` paid orders, and a journal granting the lease the proposals use.
pub fn setup(b: &Backend, tier: Tier, orders: usize) -> (String, Arc<Mutex<Payments>>) {
    let mut pay = Payments::in_memory(tier);
    for i in 0..orders {
        pay.add_order(&format!("order_{i}"), 10_000).unwrap();
    }
    let url = b.fresh();
    let mut j = b.open(&url);
    Gate::new()
        .grant_lease(&mut *j, T0, "case-4471", T0 + 48 * HOUR)
        .unwrap();
    (url, Arc::new(Mutex::new(pay)))
}

pub fn proposal(pay: &Mutex<Payments>, order: usize, amount: u64) -> Value {
    let pay = pay.lock().unwrap();
    let t = pay.tier();
    let order = format!("order_{order}");
    json!({"agent": "refund-agent",
           "target": {"name": "payments", "dedupes": t.dedupes, "lookup": t.lookup, "timeout_ms": CLAIM_MS},
           "key": format!("refund:{order}"), "effect": {"order": order, "amount_cents": amount},
           "authority": {"lease": "case-4471"},
           "premises": pay.premises(&order, None).unwrap()})
}
