//! Plays one vector through the host's gate: the step language of
//! tests/conformance/README.md, the loop that drives the gate's steps (with the crash
//! points), and the comparison with what the vector expects.

use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use interlock_payments_sim::{Payments, Tier};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::exports::interlock::conformance::runner::{Options, Report};
use crate::interlock::conformance::driver;
use crate::interlock::gate::gate::{self, GateError};
use crate::interlock::gate::target::{Ask, CrashPoint, Reply, Step};
use crate::interlock::gate::tools::ToolDone;
use crate::interlock::gate::types::JournalError;
use crate::interlock::gate::types::{Executed, Outcome, Reason, State};
use crate::world::{ask_json, note, World};
use crate::{
    bool_field, field, str_field, u64_field, Res, Vector, DEFAULT_KEY, LEASE, LEASE_MS, ORDER,
    PAID_CENTS, PAYMENTS, T0_MS,
};

mod tools;
use tools::Played;
pub use tools::ToolWorld;

/// The ops that act on the journal file (a journal that is not a file cannot run them).
const FILE_OPS: [&str; 3] = ["tear_journal", "reopen", "repair"];

/// Where a worker dies, as the vectors spell it: the gate's one crash injection
/// (`gate.crash-at`), which every host's tests use.
fn crash_point(at: &str) -> Res<CrashPoint> {
    match at {
        // Asked to apply, before calling the service (the intent is durable).
        "after_intent" => Ok(CrashPoint::BeforeSend),
        // The service applied; the worker dies before the reply reaches it.
        "after_commit" => Ok(CrashPoint::AfterSend),
        // During recovery, right after its first send or lookup.
        "in_recovery" => Ok(CrashPoint::InRecovery),
        other => Err(format!("unknown crash point {other:?}")),
    }
}

/// Why driving the gate stopped short of an outcome.
enum Stop {
    /// The worker died at its crash point.
    Crashed,
    Failed(String),
}

impl From<String> for Stop {
    fn from(s: String) -> Stop {
        Stop::Failed(s)
    }
}

/// One agent decision: its proposal, and the last outcome the agent saw for it.
struct Task {
    proposal: Value,
    finished: bool,
    last: Option<Value>,
    /// A tool-gating vector's task: the model's call `(tool, arguments)`.
    call: Option<(String, Value)>,
}

struct Run {
    world: World,
    dedupes: bool,
    lookup: bool,
    /// The current worker process, if one is alive.
    worker: Option<u32>,
    tasks: BTreeMap<String, Task>,
    /// Decision order: a restart re-sends unfinished tasks in this order.
    order: Vec<String>,
    failures: Vec<String>,
    /// The host's authority for gated tools whose configuration names none.
    host_authority: Option<Value>,
    /// Strict authority (`strict` op): every gate instance from here on is told so.
    strict: bool,
}

fn gate_error_case(e: &GateError) -> &'static str {
    match e {
        GateError::InvalidJson(_) => "invalid-json",
        GateError::InvalidField(_) => "invalid-field",
        GateError::TooLarge(_) => "too-large",
        GateError::UnknownEffect(_) => "unknown-effect",
        GateError::UnknownOperation(_) => "unknown-operation",
        GateError::UnexpectedReply(_) => "unexpected-reply",
        GateError::Journal(_) => "journal",
        GateError::CorruptJournal(_) => "corrupt-journal",
        GateError::Contention(_) => "contention",
    }
}

fn state_name(s: State) -> &'static str {
    match s {
        State::Proposed => "PROPOSED",
        State::Authorized => "AUTHORIZED",
        State::Dispatched => "DISPATCHED",
        State::Committed => "COMMITTED",
        State::Refused => "REFUSED",
        State::Ambiguous => "AMBIGUOUS",
        State::Confirmed => "CONFIRMED",
    }
}

/// The journal's spelling of a reason (wit/types.wit `reason`, with underscores).
fn reason_name(r: Reason) -> &'static str {
    match r {
        Reason::ConflictingPayload => "conflicting_payload",
        Reason::LeaseMissing => "lease_missing",
        Reason::LeaseExpired => "lease_expired",
        Reason::LeaseRevoked => "lease_revoked",
        Reason::NotAllowed => "not_allowed",
        Reason::PremiseChanged => "premise_changed",
        Reason::ApprovalMissing => "approval_missing",
        Reason::ApprovalExpired => "approval_expired",
        Reason::ApprovalRevoked => "approval_revoked",
        Reason::ApprovalStale => "approval_stale",
        Reason::CapExceeded => "cap_exceeded",
        Reason::TargetRejected => "target_rejected",
        Reason::NoDedupeNoLookup => "no_dedupe_no_lookup",
        Reason::DedupeWindowPassed => "dedupe_window_passed",
        Reason::ClaimLive => "claim_live",
        Reason::ReadFailed => "read_failed",
        Reason::TargetUnavailable => "target_unavailable",
        Reason::TargetUnroutable => "target_unroutable",
        Reason::ApprovalPending => "approval_pending",
        Reason::ApprovalRejected => "approval_rejected",
    }
}

fn executed_name(e: Executed) -> &'static str {
    match e {
        Executed::Yes => "yes",
        Executed::No => "no",
        Executed::Unknown => "unknown",
    }
}

fn is_final(o: &Outcome) -> bool {
    matches!(
        o.state,
        State::Committed | State::Refused | State::Ambiguous | State::Confirmed
    )
}

/// The outcome as the vectors spell it (without `via`, which comes from the receipt).
fn outcome_json(o: &Outcome) -> Value {
    let mut v = json!({
        "effect_id": o.effect_id,
        "state": state_name(o.state),
        "executed": executed_name(o.executed),
        "replayed": o.replayed,
        "changed": o.changed.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
    });
    if let Some(r) = o.reason {
        v["reason"] = json!(reason_name(r));
    }
    if let Some(to) = &o.return_to {
        v["return_to"] = json!(to);
    }
    v
}

/// Every field `want` names must be equal in `got`; the differences, for a person.
fn check(what: &str, got: &Value, want: &Value) -> Vec<String> {
    let Some(want) = want.as_object() else {
        return alloc::vec![format!("{what}: expectation {want} is not an object")];
    };
    want.iter()
        .filter(|(k, w)| got.get(k.as_str()).unwrap_or(&Value::Null) != *w)
        .map(|(k, w)| {
            format!(
                "{what}: {k} is {}, expected {w} (outcome {got})",
                got.get(k.as_str()).unwrap_or(&Value::Null)
            )
        })
        .collect()
}

fn gate_err(what: &str, e: GateError) -> String {
    format!("{what}: {e:?}")
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Run {
    /// The current worker, started if none is alive.
    fn host(&mut self) -> u32 {
        match self.worker {
            Some(w) => w,
            None => self.new_worker(),
        }
    }

    /// A new worker process, made current, told the targets this process routes.
    fn new_worker(&mut self) -> u32 {
        let w = driver::new_worker();
        note(json!({"kind": "worker", "worker": w}));
        self.worker = Some(w);
        // Each worker is a fresh gate instance: its tool gating is started again (the
        // configuration was checked when the vector started).
        self.start_worker_tools()
            .expect("the vector's tool configuration starts");
        gate::set_routes(&self.world.routes());
        if self.strict {
            self.call("setStrictAuthority", json!([true]));
            gate::set_strict_authority(true);
        }
        w
    }

    /// Every worker process dies.
    fn die(&mut self) {
        driver::end_workers();
        self.worker = None;
    }

    fn call(&self, name: &str, args: Value) {
        note(json!({"kind": "gate", "worker": self.worker, "name": name, "args": args}));
    }

    fn asked(&self, step: &Step) {
        let (tag, request) = ask_json(&step.ask);
        match &step.ask {
            Ask::Done(o) => {
                // For a person: the premise changes with their values, and the claim's wait.
                let mut outcome = outcome_json(o);
                outcome["changed"] = o
                    .changed
                    .iter()
                    .map(|c| {
                        let value =
                            |t: &str| serde_json::from_str::<Value>(t).unwrap_or(Value::Null);
                        json!({"name": c.name, "was": value(&c.was), "now": value(&c.now)})
                    })
                    .collect();
                if let Some(ms) = o.retry_after_ms {
                    outcome["retry_after_ms"] = json!(ms);
                }
                note(json!({"kind": "outcome", "worker": self.worker, "outcome": outcome}))
            }
            _ => {
                note(json!({"kind": "ask", "worker": self.worker, "tag": tag, "request": request}))
            }
        }
    }

    fn submit_step(&mut self, proposal: &str) -> Result<Step, GateError> {
        self.host();
        self.call("submit", json!([proposal]));
        let step = gate::submit(proposal)?;
        self.asked(&step);
        Ok(step)
    }

    /// The current worker dies at `point` (the gate asks it to), or at none.
    fn crash_at(&mut self, point: Option<CrashPoint>) {
        self.call("crashAt", json!([point.map(|p| format!("{p:?}"))]));
        gate::crash_at(point);
    }

    /// Answers `step` and every step after it until the gate is done: a sleep is waited on
    /// the fake clock; at the gate's crash point the worker dies.
    fn drive(&mut self, first: Step) -> Result<Outcome, Stop> {
        let mut step = first;
        loop {
            let now = driver::now_ms();
            let reply = match &step.ask {
                Ask::Done(outcome) => return Ok(outcome.clone()),
                Ask::Crash(_) => {
                    note(json!({"kind": "crash", "worker": self.worker}));
                    return Err(Stop::Crashed);
                }
                Ask::Sleep(ms) => {
                    driver::advance_ms(*ms);
                    Reply::Slept
                }
                ask => self.world.answer(ask, now),
            };
            self.call("resume", json!([step.op]));
            step = gate::resume(step.op, &reply).map_err(|e| gate_err("resume", e))?;
            self.asked(&step);
        }
    }

    /// Recovers one effect, waiting out another worker's live claim as the gate asks
    /// (`recover-waiting`: the fake clock advances by each sleep). A tool-gating vector's
    /// effect is recovered through the tool-gating machine, which gives the model's reply.
    fn recover(&mut self, effect: &str) -> Result<(Outcome, Option<ToolDone>), Stop> {
        if self.world.tools.is_some() {
            let done = self.recover_tool(effect)?;
            let o = done
                .outcome
                .clone()
                .ok_or_else(|| format!("recovering {effect} asked the gate nothing"))?;
            return Ok((o, Some(done)));
        }
        self.call("recoverWaiting", json!([effect]));
        let first = gate::recover_waiting(effect, None).map_err(|e| gate_err("recover", e))?;
        self.asked(&first);
        Ok((self.drive(first)?, None))
    }

    /// The outcome as the vectors spell it, with `via` from the receipt.
    fn seen(&mut self, o: &Outcome, done: Option<&ToolDone>) -> Res<Value> {
        let mut v = outcome_json(o);
        if let Some(m) = v.as_object_mut() {
            m.remove("effect_id");
        }
        if let Some(done) = done {
            self.add_reply(done, &mut v);
        }
        if o.state == State::Committed || o.state == State::Confirmed {
            let receipt = gate::receipt(&o.effect_id, None).map_err(|e| gate_err("receipt", e))?;
            let r: Value = serde_json::from_str(&receipt).map_err(|e| format!("receipt: {e}"))?;
            if let Some(via) = r.get("via") {
                v["via"] = via.clone();
            }
        }
        Ok(v)
    }

    fn record(&mut self, task: &str, o: &Outcome, done: Option<&ToolDone>) -> Res<Value> {
        let v = self.seen(o, done)?;
        let t = self.tasks.get_mut(task).expect("a known task");
        t.finished = is_final(o);
        t.last = Some(v.clone());
        Ok(v)
    }

    fn task(&self, step: &Value) -> Res<String> {
        let name = str_field(step, "task")?;
        if !self.tasks.contains_key(name) {
            return Err(format!("task {name:?} was never decided"));
        }
        Ok(name.to_string())
    }

    fn premises_now(&self) -> Res<Value> {
        let p = self
            .world
            .payments
            .premises(ORDER, None)
            .map_err(|e| e.to_string())?;
        note(
            json!({"kind": "service", "name": "premises", "args": [ORDER, null], "result": p,
                    "refunded_cents": self.world.refunded_cents()}),
        );
        Ok(p)
    }

    fn send(&mut self, step: &Value) -> Res<()> {
        let name = self.task(step)?;
        let crash = match step.get("crash").and_then(Value::as_str) {
            None => None,
            Some("before_intent") => {
                // The worker dies before it writes anything: the task stays on the list.
                self.die();
                return Ok(());
            }
            Some(point) => Some(crash_point(point)?),
        };
        let proposal = self.tasks[&name].proposal.to_string();
        self.host();
        self.crash_at(crash);
        let first = self
            .submit_step(&proposal)
            .map_err(|e| gate_err(&format!("send {name}"), e))?;
        let driven = self.drive(first);
        if crash.is_some() && self.worker.is_some() {
            self.crash_at(None);
        }
        match driven {
            Err(Stop::Crashed) => {
                self.die();
                Ok(())
            }
            Err(Stop::Failed(e)) => Err(format!("send {name}: {e}")),
            Ok(o) => {
                if crash.is_some() {
                    self.failures
                        .push(format!("send {name}: the crash point was never reached"));
                }
                let got = self.record(&name, &o, None)?;
                if let Some(want) = step.get("expect") {
                    self.failures
                        .extend(check(&format!("send {name}"), &got, want));
                }
                Ok(())
            }
        }
    }

    fn restart(&mut self, step: &Value) -> Res<()> {
        self.world.routes = match step.get("routes") {
            None => None,
            Some(r) => Some(
                serde_json::from_value(r.clone()).map_err(|e| format!("restart.routes: {e}"))?,
            ),
        };
        self.die();
        self.new_worker();
        let crash = match step.get("crash").and_then(Value::as_str) {
            None => None,
            Some("in_recovery") => Some(CrashPoint::InRecovery),
            Some(other) => return Err(format!("unknown restart crash point {other:?}")),
        };
        if crash.is_some() {
            self.crash_at(crash);
        }
        let open = gate::open_effects().map_err(|e| gate_err("open-effects", e))?;
        note(
            json!({"kind": "gate", "worker": self.worker, "name": "openEffects", "args": [], "out": open}),
        );
        let mut got = Vec::new();
        for effect in open {
            match self.recover(&effect) {
                Err(Stop::Crashed) => {
                    // Recovery itself died: the next restart must finish its work.
                    self.die();
                    return Ok(());
                }
                Err(Stop::Failed(e)) => return Err(format!("recover {effect}: {e}")),
                Ok((o, done)) => got.push(self.seen(&o, done.as_ref())?),
            }
        }
        if crash.is_some() {
            self.failures
                .push("restart: the recovery crash point was never reached".into());
        }
        if let Some(want) = step.get("expect").and_then(Value::as_array) {
            if want.len() != got.len() {
                self.failures.push(format!(
                    "restart: recovered {} effects, expected {}: {got:?}",
                    got.len(),
                    want.len()
                ));
            }
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                self.failures
                    .extend(check(&format!("restart, effect {i}"), g, w));
            }
        }
        // The agent's own restart: every unfinished task is sent again.
        for name in self.order.clone() {
            if self.tasks[&name].finished {
                continue;
            }
            if self.tasks[&name].call.is_some() {
                // The model calls the tool again.
                match self.play_call(&name) {
                    Ok(Played::Outcome(o, done)) => {
                        self.record(&name, &o, Some(&done))?;
                    }
                    Ok(Played::Before(v)) => self.record_before(&name, &v),
                    Err(Stop::Failed(e)) => return Err(format!("call {name} again: {e}")),
                    Err(Stop::Crashed) => unreachable!("no crash point is set"),
                }
                continue;
            }
            let proposal = self.tasks[&name].proposal.to_string();
            let first = self
                .submit_step(&proposal)
                .map_err(|e| gate_err(&format!("resend {name}"), e))?;
            let o = match self.drive(first) {
                Ok(o) => o,
                Err(Stop::Failed(e)) => return Err(format!("resend {name}: {e}")),
                Err(Stop::Crashed) => unreachable!("no crash point is set"),
            };
            self.record(&name, &o, None)?;
        }
        Ok(())
    }

    /// Two workers submit at once; both read premises before either writes its intent.
    fn race(&mut self, step: &Value) -> Res<()> {
        let names: Vec<String> = serde_json::from_value(field(step, "tasks")?.clone())
            .map_err(|_| "race.tasks must be a list of task names".to_string())?;
        let mut firsts = Vec::new();
        for name in &names {
            let proposal = match self.tasks.get(name) {
                Some(t) => t.proposal.to_string(),
                None => return Err(format!("task {name:?} was never decided")),
            };
            let w = self.new_worker();
            let first = self
                .submit_step(&proposal)
                .map_err(|e| gate_err(&format!("race {name}"), e))?;
            firsts.push((w, first));
        }
        for (w, first) in firsts.iter_mut() {
            if let Ask::Capture(_) = &first.ask {
                driver::use_worker(*w);
                self.worker = Some(*w);
                let reply = self.world.answer(&first.ask, driver::now_ms());
                self.call("resume", json!([first.op]));
                *first = gate::resume(first.op, &reply).map_err(|e| gate_err("race", e))?;
                self.asked(first);
            }
        }
        let want = step
            .get("expect")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, ((w, first), name)) in firsts.into_iter().zip(&names).enumerate() {
            driver::use_worker(w);
            self.worker = Some(w);
            let o = match self.drive(first) {
                Ok(o) => o,
                Err(Stop::Failed(e)) => return Err(format!("race {name}: {e}")),
                Err(Stop::Crashed) => unreachable!("no crash point is set"),
            };
            let got = self.record(name, &o, None)?;
            if let Some(w) = want.get(i) {
                self.failures
                    .extend(check(&format!("race {name}"), &got, w));
            }
        }
        Ok(())
    }

    fn decide(&mut self, step: &Value) -> Res<()> {
        let name = str_field(step, "task")?.to_string();
        let key = step
            .get("key")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_KEY);
        let mut authority = match step.get("approval").and_then(Value::as_str) {
            Some(a) => json!({"approval": a}),
            None => json!({"lease": LEASE}),
        };
        if step.get("host_check") == Some(&Value::Bool(true)) {
            authority["host_check"] = json!(true);
        }
        // `standing`: the proposal names no authority (the agent's standing lease, granted by
        // the gate at first use; refused under strict authority).
        let standing = step.get("standing") == Some(&Value::Bool(true));
        let mut p = json!({
            "agent": "refund-agent",
            "target": {"name": PAYMENTS, "dedupes": self.dedupes, "lookup": self.lookup,
                       "dedupe_window_ms": 86_400_000u64, "timeout_ms": 1000},
            "key": key,
            "effect": {"order": ORDER, "amount_cents": u64_field(step, "amount_cents")?},
            "authority": authority,
            "premises": self.premises_now()?,
        });
        for extra in ["bounds", "cap"] {
            if let Some(v) = step.get(extra) {
                p[extra] = v.clone();
            }
        }
        if standing {
            p.as_object_mut().expect("an object").remove("authority");
        }
        let task = Task {
            proposal: p,
            finished: false,
            last: None,
            call: None,
        };
        if self.tasks.insert(name.clone(), task).is_some() {
            return Err(format!("task {name:?} decided twice"));
        }
        self.order.push(name);
        Ok(())
    }

    /// The effect id of a decided task: its inbox item.
    fn item_of(&self, step: &Value) -> Res<String> {
        let name = self.task(step)?;
        let p = self.tasks[&name].proposal.to_string();
        gate::effect_id_of(&p).map_err(|e| gate_err("effect-id-of", e))
    }

    /// A person's decision on a task's inbox item (`gate.decide`); with `expect_error` it
    /// must be refused (an `invalid-field` whose pointer and problem contain that text), the journal
    /// unchanged.
    fn decide_item(&mut self, step: &Value) -> Res<()> {
        let item = self.item_of(step)?;
        let mut d = json!({"item": item, "decider": str_field(step, "decider")?,
                           "verdict": str_field(step, "verdict")?});
        for k in ["why", "evidence"] {
            if let Some(v) = step.get(k) {
                d[k] = v.clone();
            }
        }
        self.host();
        let before = self.journal_sha256();
        self.call("decide", json!([d.to_string()]));
        let got = gate::decide(&d.to_string());
        match (got, step.get("expect_error").and_then(Value::as_str)) {
            (Ok(_), None) => {}
            (Err(GateError::InvalidField(f)), Some(want))
                if format!("{} {}", f.field, f.problem).contains(want) =>
            {
                if self.journal_sha256() != before {
                    self.failures
                        .push("decide_item: a refused decision changed the journal".into());
                }
            }
            (got, want) => self
                .failures
                .push(format!("decide_item: expected {want:?}, got {got:?}")),
        }
        Ok(())
    }

    /// The inbox (`gate.inbox`) must list exactly `expect`: each `{task, kind, status?}`.
    fn inbox(&mut self, step: &Value) -> Res<()> {
        self.host();
        self.call("inbox", json!([]));
        let text = gate::inbox().map_err(|e| gate_err("inbox", e))?;
        let items: Vec<Value> = serde_json::from_str(&text).map_err(|e| format!("inbox: {e}"))?;
        note(
            json!({"kind": "gate", "worker": self.worker, "name": "inbox", "args": [], "out": items}),
        );
        let want = step
            .get("expect")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if want.len() != items.len() {
            self.failures.push(format!(
                "inbox: {} items, expected {}: {items:?}",
                items.len(),
                want.len()
            ));
            return Ok(());
        }
        for (w, got) in want.iter().zip(&items) {
            let item = self.item_of(w)?;
            let mut checked = json!({"item": item});
            for k in ["kind", "status"] {
                if let Some(v) = w.get(k) {
                    checked[k] = v.clone();
                }
            }
            for (k, v) in checked.as_object().expect("an object") {
                if got.get(k) != Some(v) {
                    self.failures
                        .push(format!("inbox: {k} is {:?}, expected {v}", got.get(k)));
                }
            }
        }
        Ok(())
    }

    fn journal_sha256(&self) -> String {
        sha256_hex(&driver::journal_bytes())
    }

    fn step(&mut self, step: &Value) -> Res<()> {
        let op = str_field(step, "op")?;
        match op {
            "decide" => self.decide(step)?,
            "redecide" => {
                let name = self.task(step)?;
                let amount = u64_field(step, "amount_cents")?;
                self.tasks.get_mut(&name).expect("known").proposal["effect"]["amount_cents"] =
                    json!(amount);
            }
            "send" => self.send(step)?,
            "call" => self.tool_call(step)?,
            "check_config" => self.check_config(step)?,
            "restart" => self.restart(step)?,
            "race" => self.race(step)?,
            "approve" => {
                let name = self.task(step)?;
                let p = &self.tasks[&name].proposal;
                let request = json!({"key": p["key"], "effect": p["effect"]});
                let mut a = json!({
                    "approval": str_field(step, "approval")?,
                    "approver": str_field(step, "approver")?,
                    "request": request,
                    "premises_seen": self.premises_now()?,
                });
                if let Some(ms) = step.get("expires_in_ms").and_then(Value::as_u64) {
                    a["expires_at_ms"] = json!(driver::now_ms() + ms);
                }
                self.host();
                self.call("approve", json!([a.to_string()]));
                gate::approve(&a.to_string()).map_err(|e| gate_err("approve", e))?;
            }
            "rules" => {
                let rules = field(step, "rules")?.to_string();
                self.host();
                self.call("setApprovalRules", json!([rules]));
                gate::set_approval_rules(&rules).map_err(|e| gate_err("rules", e))?;
            }
            "decide_item" => self.decide_item(step)?,
            "inbox" => self.inbox(step)?,
            "lease" => {
                let until = driver::now_ms() + u64_field(step, "expires_in_ms")?;
                let lease = str_field(step, "lease")?;
                self.host();
                self.call("grantLease", json!([lease, until]));
                gate::grant_lease(lease, until).map_err(|e| gate_err("lease", e))?;
            }
            "revoke_lease" => {
                let lease = str_field(step, "lease")?;
                self.host();
                self.call("revokeLease", json!([lease]));
                gate::revoke_lease(lease).map_err(|e| gate_err("revoke_lease", e))?;
            }
            "hand_refund" => {
                let amount = u64_field(step, "amount_cents")?;
                let r = self
                    .world
                    .payments
                    .refund_by_hand(ORDER, amount, driver::now_ms())
                    .map_err(|e| e.to_string())?;
                note(
                    json!({"kind": "service", "name": "refund_by_hand", "args": [ORDER, amount],
                            "result": {"id": r.id, "amount_cents": r.amount_cents},
                            "refunded_cents": self.world.refunded_cents()}),
                );
            }
            "set_eligible" => {
                let eligible = bool_field(step, "eligible")?;
                self.world
                    .payments
                    .set_eligible(ORDER, eligible)
                    .map_err(|e| e.to_string())?;
                note(
                    json!({"kind": "service", "name": "set_eligible", "args": [ORDER, eligible],
                            "refunded_cents": self.world.refunded_cents()}),
                );
            }
            "advance" => driver::advance_ms(u64_field(step, "ms")?),
            "fail_reads" => self.world.failing_reads = u64_field(step, "count")?,
            "fail_checks" => self.world.failing_checks = u64_field(step, "count")?,
            "strict" => {
                self.strict = step.get("on") != Some(&Value::Bool(false));
                if self.worker.is_some() {
                    self.call("setStrictAuthority", json!([self.strict]));
                    gate::set_strict_authority(self.strict);
                }
            }
            "submit_raw" => {
                let before = self.journal_sha256();
                let want = str_field(step, "expect_error")?;
                let want_field = step.get("expect_field").and_then(Value::as_str);
                let text = match (step.get("text"), step.get("repeat")) {
                    (Some(Value::String(t)), None) => t.clone(),
                    (Some(Value::String(t)), Some(n)) => {
                        t.repeat(n.as_u64().ok_or("repeat must be a count")? as usize)
                    }
                    _ => return Err("submit_raw needs a text".into()),
                };
                match self.submit_step(&text) {
                    Err(GateError::InvalidField(f))
                        if want == "invalid-field" && want_field.is_some_and(|w| w != f.field) =>
                    {
                        self.failures.push(format!(
                            "submit_raw: expected invalid-field at {want_field:?}, got it at {:?}",
                            f.field
                        ))
                    }
                    Err(e) if gate_error_case(&e) == want => {}
                    other => self
                        .failures
                        .push(format!("submit_raw: expected {want}, got {other:?}")),
                }
                if self.journal_sha256() != before {
                    self.failures.push("submit_raw: the journal changed".into());
                }
            }
            "tear_journal" => driver::tear_journal(u64_field(step, "bytes")?)?,
            "reopen" => {
                self.die();
                match (
                    driver::reopen_journal(),
                    step.get("expect_error").and_then(Value::as_str),
                ) {
                    (Ok(()), None) | (Err(JournalError::TornTail(_)), Some("torn-tail")) => {}
                    (Ok(()), Some(want)) => self
                        .failures
                        .push(format!("reopen: expected {want}, the journal opened")),
                    (Err(e), want) => self
                        .failures
                        .push(format!("reopen: got {e:?}, expected {want:?}")),
                }
            }
            "repair" => driver::repair_journal()?,
            "verify" => {
                self.host();
                let report = gate::verify(&[]).map_err(|e| gate_err("verify", e))?;
                let problems: Vec<String> =
                    report.problems.iter().map(|p| format!("{p:?}")).collect();
                note(
                    json!({"kind": "gate", "worker": self.worker, "name": "verify", "args": [],
                            "out": {"streams": report.streams, "entries": report.entries, "problems": problems}}),
                );
                let want = step
                    .get("expect_problems")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                if report.problems.len() as u64 != want {
                    self.failures.push(format!(
                        "verify: {} problems, expected {want}: {:?}",
                        report.problems.len(),
                        report.problems
                    ));
                }
            }
            other => return Err(format!("unknown op {other:?}")),
        }
        Ok(())
    }
}

/// Why this host does not run `v`, if it does not.
fn skipped(v: &Vector, options: &Options) -> Option<String> {
    if let Some(reason) = v.skip.get(&options.host) {
        return Some(reason.clone());
    }
    let file_op = v.steps.iter().find_map(|s| {
        s.get("op")
            .and_then(Value::as_str)
            .filter(|op| FILE_OPS.contains(op))
    });
    match file_op {
        Some(op) if !options.file_journal => Some(format!(
            "needs a file journal ({op} acts on journal.jsonl; this host's journal is not a file)"
        )),
        _ => None,
    }
}

/// The most workers a run of `v` starts: the first, one for each restart, one for each
/// worker of a race, and one after each death (a crash, a reopen) for the steps after it.
pub fn workers(v: &Vector) -> u32 {
    let started = |s: &Value| match s.get("op").and_then(Value::as_str) {
        Some("restart") => 1 + u32::from(s.get("crash").is_some()),
        Some("race") => s
            .get("tasks")
            .and_then(Value::as_array)
            .map_or(0, |t| t.len() as u32),
        Some("send" | "call") => u32::from(s.get("crash").is_some()),
        Some("reopen") => 1,
        _ => 0,
    };
    1 + v.steps.iter().map(started).sum::<u32>()
}

/// Plays `v` through the host's gate and journal, the fake clock at [`T0_MS`].
pub fn run(v: &Vector, pins: &BTreeMap<String, String>, options: &Options) -> Res<Report> {
    if let Some(reason) = skipped(v, options) {
        return Ok(Report {
            id: v.id.clone(),
            skipped: Some(reason),
            failures: Vec::new(),
            journal_sha256: String::new(),
            refunded_cents: 0,
            refund_records: 0,
            tasks: "{}".to_owned(),
        });
    }
    let tier = Tier::parse(&v.tier).map_err(|e| e.to_string())?;
    if driver::now_ms() != T0_MS {
        return Err(format!(
            "the host's clock starts at {}, not at {T0_MS}",
            driver::now_ms()
        ));
    }
    let mut payments = Payments::in_memory(tier);
    payments
        .add_order(ORDER, v.paid_cents.unwrap_or(PAID_CENTS))
        .map_err(|e| e.to_string())?;
    let mut run = Run {
        world: World::new(payments),
        dedupes: tier.dedupes,
        lookup: tier.lookup,
        worker: None,
        tasks: BTreeMap::new(),
        order: Vec::new(),
        failures: Vec::new(),
        host_authority: v.host_authority.clone(),
        strict: false,
    };
    run.host();
    if let Some(config) = &v.config {
        run.start_tools(config)?;
    }
    gate::grant_lease(LEASE, T0_MS + LEASE_MS).map_err(|e| gate_err("the first lease", e))?;
    for (i, step) in v.steps.iter().enumerate() {
        note(json!({"kind": "step", "index": i, "step": step}));
        run.step(step)
            .map_err(|e| format!("step {i} ({step}): {e}"))?;
        if let Some(at) = step.get("crash") {
            note(json!({"kind": "crash", "index": i, "at": at}));
        }
    }

    let journal_sha256 = run.journal_sha256();
    let mut failures = core::mem::take(&mut run.failures);
    let refunded_cents = run.world.refunded_cents();
    let refund_records = run.world.payments.refunds(ORDER).len() as u64;
    let tasks: Map<String, Value> = run
        .tasks
        .iter()
        .filter_map(|(k, t)| t.last.clone().map(|o| (k.clone(), o)))
        .collect();
    for (k, got) in [
        ("refunded_cents", json!(refunded_cents)),
        ("refund_records", json!(refund_records)),
    ] {
        match v.expect.get(k) {
            Some(want) if *want != got => failures.push(format!("{k} is {got}, expected {want}")),
            Some(_) => {}
            None => failures.push(format!("the vector does not say {k}")),
        }
    }
    let want_tasks = v
        .expect
        .get("tasks")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (name, want) in &want_tasks {
        match tasks.get(name) {
            Some(got) => failures.extend(check(&format!("task {name}"), got, want)),
            None => failures.push(format!("task {name} never got an outcome")),
        }
    }
    if let Some(want) = v.expect.get("tool_calls") {
        let got = Value::Array(
            run.world
                .tools
                .as_ref()
                .map(|t| t.calls.clone())
                .unwrap_or_default(),
        );
        if got != *want {
            failures.push(format!("tool_calls are {got}, expected {want}"));
        }
    }
    if options.check_pin {
        match pins.get(&v.id) {
            None => failures.push(format!("no pin for {} in journal-pins.json", v.id)),
            Some(pin) if *pin != journal_sha256 => failures.push(format!(
                "journal sha256 {journal_sha256}, pinned {pin} (the bytes every host must write)"
            )),
            Some(_) => {}
        }
    }
    Ok(Report {
        id: v.id.clone(),
        skipped: None,
        failures,
        journal_sha256,
        refunded_cents,
        refund_records,
        tasks: Value::Object(tasks).to_string(),
    })
}
