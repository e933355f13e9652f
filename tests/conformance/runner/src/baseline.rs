//! The fault table's three baselines: each plays a vector's steps itself, without
//! Interlock, against the same simulated payments service. Experiment code, not product:
//! nothing in the gate uses it; the fault table (experiments/fault-table) and the viewer's
//! side-by-side column show what it does.
//!
//! The world starts as the conformance runner's does: the clock at [`T0_MS`], `order_881`
//! paid 10000 cents (or the vector's `paid_cents`), eligible, no refunds. The agent keeps a
//! durable list of unfinished tasks. Leases, approvals, premises and caps mean nothing to a
//! baseline, so `lease`, `revoke_lease`, `approve` (and the journal's `verify`) are no-ops.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use interlock_payments_sim::{Payments, Tier};
use serde::Serialize;
use serde_json::Value;

use crate::{bool_field, str_field, u64_field, Res, Vector, DEFAULT_KEY, ORDER, PAID_CENTS, T0_MS};

/// A way of sending a refund without Interlock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// Re-run the step on restart; no idempotency key; the task's current decision.
    PlainRetry,
    /// One idempotency key per request (the task's key), reused on restart; the task's
    /// current decision.
    RequestIds,
    /// Temporal-style: the decision is recorded when the workflow starts (workflow id = the
    /// key); the activity is retried with its recorded arguments and key; starting an
    /// existing workflow id returns the existing result and sends nothing.
    DurableWorkflows,
}

impl Baseline {
    pub fn parse(name: &str) -> Res<Baseline> {
        match name {
            "plain-retry" => Ok(Baseline::PlainRetry),
            "request-ids" => Ok(Baseline::RequestIds),
            "durable-workflows" => Ok(Baseline::DurableWorkflows),
            other => Err(format!(
                "unknown baseline {other:?} (plain-retry, request-ids or durable-workflows)"
            )),
        }
    }
}

/// One agent decision.
#[derive(Clone, Debug)]
struct Task {
    amount_cents: u64,
    key: String,
    finished: bool,
}

/// A durable workflow, keyed by its id (the task's key).
#[derive(Clone, Debug)]
struct Workflow {
    /// The activity's arguments as recorded when the workflow started.
    amount_cents: u64,
    /// `Some` once the activity returned (a refund id or the service's error).
    result: Option<String>,
}

/// What a baseline did with one vector.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BaselineRun {
    pub refunded_cents: u64,
    pub refund_records: usize,
    /// Every call to the service and its answer, for a person reading the JSON.
    pub trace: Vec<String>,
    /// Per step played: the trace lines it added and the money refunded after it.
    pub steps: Vec<PlayedStep>,
    /// Why the baselines cannot play this vector (an op or a crash they do not model);
    /// the steps before it are played.
    pub not_modelled: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PlayedStep {
    pub lines: Vec<String>,
    pub refunded_cents: u64,
}

/// A step the baselines do not model, or a broken vector.
enum Stop {
    NotModelled(String),
    Broken(String),
}

impl From<String> for Stop {
    fn from(s: String) -> Stop {
        Stop::Broken(s)
    }
}

struct Sim {
    approach: Baseline,
    clock_ms: u64,
    payments: Payments,
    tasks: BTreeMap<String, Task>,
    /// Decision order: a restart re-runs unfinished tasks in this order.
    order: Vec<String>,
    workflows: BTreeMap<String, Workflow>,
    trace: Vec<String>,
}

/// Where a `send` dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Crash {
    /// `before_intent` or `after_intent`: the worker dies before the call to the service.
    BeforeSend,
    /// `after_commit`: the service applies it, the reply is lost.
    AfterCommit,
}

impl Sim {
    /// One call to the refund API. The service's errors refund nothing; the answer (a
    /// refund id or the error) is returned as text.
    fn call(&mut self, what: &str, amount_cents: u64, key: Option<&str>) -> String {
        let answer = match self
            .payments
            .refund(ORDER, amount_cents, key, None, self.clock_ms)
        {
            Ok(r) => r.id,
            Err(e) => format!("error: {e}"),
        };
        self.trace.push(format!(
            "{what}: refund {amount_cents} key {} -> {answer}",
            key.unwrap_or("none")
        ));
        answer
    }

    /// Runs task `name` once, as the approach does, crashing where told. `again` is true
    /// for the agent's restart (a re-run of an unfinished task).
    fn run_task(&mut self, name: &str, crash: Option<Crash>, again: bool) {
        let t = self.tasks[name].clone();
        let what = if again {
            format!("restart {name}")
        } else {
            format!("send {name}")
        };
        // What would go to the service, if anything.
        let call: Option<(u64, Option<String>)> = match self.approach {
            Baseline::PlainRetry => Some((t.amount_cents, None)),
            Baseline::RequestIds => Some((t.amount_cents, Some(t.key.clone()))),
            Baseline::DurableWorkflows => match self.workflows.get(&t.key) {
                // Starting a workflow whose id exists: the existing result, nothing sent.
                Some(w) if !again => {
                    self.trace.push(format!(
                        "{what}: workflow {} already exists ({}), nothing sent",
                        t.key,
                        w.result.as_deref().unwrap_or("still running")
                    ));
                    None
                }
                // The workflow's activity, retried with its recorded arguments and key.
                Some(w) => match &w.result {
                    Some(r) => {
                        self.trace.push(format!(
                            "{what}: workflow {} already completed ({r}), nothing sent",
                            t.key
                        ));
                        None
                    }
                    None => Some((w.amount_cents, Some(t.key.clone()))),
                },
                // First send of this key: the workflow starts and records the decision.
                None => {
                    self.workflows.insert(
                        t.key.clone(),
                        Workflow {
                            amount_cents: t.amount_cents,
                            result: None,
                        },
                    );
                    self.trace.push(format!(
                        "{what}: workflow {} started, recorded {} cents",
                        t.key, t.amount_cents
                    ));
                    Some((t.amount_cents, Some(t.key.clone())))
                }
            },
        };
        let Some((amount, key)) = call else {
            self.tasks.get_mut(name).expect("known").finished = true;
            return;
        };
        if crash == Some(Crash::BeforeSend) {
            self.trace
                .push(format!("{what}: the worker dies before the send"));
            return;
        }
        let answer = self.call(&what, amount, key.as_deref());
        if crash == Some(Crash::AfterCommit) {
            self.trace
                .push(format!("{what}: the reply is lost, the worker dies"));
            return;
        }
        if self.approach == Baseline::DurableWorkflows {
            if let Some(w) = self.workflows.get_mut(&t.key) {
                w.result = Some(answer);
            }
        }
        self.tasks.get_mut(name).expect("known").finished = true;
    }

    fn task_name(&self, step: &Value) -> Res<String> {
        let name = str_field(step, "task")?;
        if !self.tasks.contains_key(name) {
            return Err(format!("task {name:?} was never decided"));
        }
        Ok(name.to_string())
    }

    fn step(&mut self, step: &Value) -> Result<(), Stop> {
        match str_field(step, "op")? {
            "decide" => {
                let name = str_field(step, "task")?.to_string();
                let key = step
                    .get("key")
                    .and_then(Value::as_str)
                    .unwrap_or(DEFAULT_KEY)
                    .to_string();
                let task = Task {
                    amount_cents: u64_field(step, "amount_cents")?,
                    key,
                    finished: false,
                };
                if self.tasks.insert(name.clone(), task).is_some() {
                    return Err(Stop::Broken(format!("task {name:?} decided twice")));
                }
                self.order.push(name);
            }
            "redecide" => {
                let name = self.task_name(step)?;
                let amount = u64_field(step, "amount_cents")?;
                self.tasks.get_mut(&name).expect("known").amount_cents = amount;
            }
            "send" => {
                let name = self.task_name(step)?;
                let crash = match step.get("crash").and_then(Value::as_str) {
                    None => None,
                    Some("before_intent" | "after_intent") => Some(Crash::BeforeSend),
                    Some("after_commit") => Some(Crash::AfterCommit),
                    Some(other) => {
                        return Err(Stop::Broken(format!("unknown crash point {other:?}")))
                    }
                };
                // A send of a finished task is a new request under the same task.
                self.tasks.get_mut(&name).expect("known").finished = false;
                self.run_task(&name, crash, false);
            }
            "restart" => {
                if step.get("crash").is_some() {
                    return Err(Stop::NotModelled(
                        "the fault table’s baselines do not model a crash during recovery".into(),
                    ));
                }
                for name in self.order.clone() {
                    if !self.tasks[&name].finished {
                        self.run_task(&name, None, true);
                    }
                }
            }
            "hand_refund" => {
                let amount = u64_field(step, "amount_cents")?;
                let r = self
                    .payments
                    .refund_by_hand(ORDER, amount, self.clock_ms)
                    .map_err(|e| e.to_string())?;
                self.trace
                    .push(format!("a person refunds {amount} by hand -> {}", r.id));
            }
            "set_eligible" => {
                let eligible = bool_field(step, "eligible")?;
                self.payments
                    .set_eligible(ORDER, eligible)
                    .map_err(|e| e.to_string())?;
                self.trace
                    .push(format!("the order is marked eligible={eligible}"));
            }
            "advance" => {
                let ms = u64_field(step, "ms")?;
                self.clock_ms += ms;
                self.trace.push(format!("the clock moves {ms} ms"));
            }
            // Authority and the gate's journal mean nothing to a baseline.
            "lease" | "revoke_lease" | "approve" | "verify" => {}
            "race" => {
                return Err(Stop::NotModelled(
                    "the fault table’s baselines do not model two workers racing".into(),
                ))
            }
            other => {
                return Err(Stop::NotModelled(format!(
                    "the fault table’s baselines do not model {other}"
                )))
            }
        }
        Ok(())
    }
}

/// Plays `vector`'s steps with `approach` until one it does not model, and reports what
/// the service holds at the end.
pub fn run(approach: Baseline, vector: &Vector) -> Res<BaselineRun> {
    let tier = Tier::parse(&vector.tier).map_err(|e| e.to_string())?;
    let mut payments = Payments::in_memory(tier);
    payments
        .add_order(ORDER, vector.paid_cents.unwrap_or(PAID_CENTS))
        .map_err(|e| e.to_string())?;
    let mut sim = Sim {
        approach,
        clock_ms: T0_MS,
        payments,
        tasks: BTreeMap::new(),
        order: Vec::new(),
        workflows: BTreeMap::new(),
        trace: Vec::new(),
    };
    let mut steps = Vec::new();
    let mut not_modelled = None;
    for (i, step) in vector.steps.iter().enumerate() {
        let from = sim.trace.len();
        match sim.step(step) {
            Ok(()) => {}
            Err(Stop::NotModelled(why)) => {
                not_modelled = Some(why);
                break;
            }
            Err(Stop::Broken(e)) => return Err(format!("({approach:?}) step {i} ({step}): {e}")),
        }
        steps.push(PlayedStep {
            lines: sim.trace[from..].to_vec(),
            refunded_cents: sim.payments.refunded_cents(ORDER),
        });
    }
    Ok(BaselineRun {
        refunded_cents: sim.payments.refunded_cents(ORDER),
        refund_records: sim.payments.refunds(ORDER).len(),
        trace: sim.trace,
        steps,
        not_modelled,
    })
}
