//! The conformance runner: plays the vectors in tests/conformance/ (format in its
//! README.md) through the gate component, a file journal and the simulated payments
//! service, and reports every difference from what the vector expects.
//!
//! The runner interprets the world's script (who crashes when, what changes during the
//! outage); every decision about the effect is the component's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use interlock_file_journal::FileJournal;
use interlock_payments_sim::{Payments, Tier};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::bindings::exports::interlock::gate::gate::GateError;
use crate::bindings::interlock::gate::target::{
    ApplyRequest, Ask, AuthorizeRequest, CaptureRequest, QueryRequest, Reply,
};
use crate::bindings::interlock::gate::types::{Executed, Outcome, Reason, State};
use crate::case::{LEASE, ORDER};
use crate::clock::Clock;
use crate::gate::{CrashAction, CrashPoint, Error, GateHost};
use crate::journal::SharedJournal;
use crate::runtime::Runtime;
use crate::targets::{PaymentsTarget, Targets};

/// Every vector starts at this fake time (2027-01-15T08:00:00Z).
pub const T0_MS: u64 = 1_800_000_000_000;
const LEASE_MS: u64 = 48 * 3_600_000;
const DEFAULT_KEY: &str = "refund:order_881";
/// The file beside the vectors that pins each vector's journal bytes.
pub const PINS: &str = "journal-pins.json";

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vector {
    pub id: String,
    pub fault: String,
    pub title: String,
    pub tier: String,
    #[serde(default)]
    pub paid_cents: Option<u64>,
    pub steps: Vec<Value>,
    pub expect: Value,
    /// Host name -> why that host cannot run this vector.
    #[serde(default)]
    pub skip: BTreeMap<String, String>,
}

/// What a run produced, and every way it differed from the vector.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    pub refunded_cents: u64,
    pub refund_records: usize,
    pub tasks: BTreeMap<String, Value>,
    pub journal_sha256: String,
    pub failures: Vec<String>,
}

/// Every `*.json` vector in `dir` (sorted by file name), except the pins file.
pub fn load_dir(dir: &Path) -> Result<Vec<(PathBuf, Vector)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with(PINS));
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p)?;
            let v: Vector = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a vector", p.display()))?;
            Ok((p, v))
        })
        .collect()
}

/// The pinned journal hashes, by vector id.
pub fn load_pins(dir: &Path) -> Result<BTreeMap<String, String>> {
    let path = dir.join(PINS);
    if !path.exists() {
        return Ok(BTreeMap::new());
    }
    let text = std::fs::read_to_string(&path)?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a map of pins", path.display()))
}

/// One agent decision: its proposal, and the last outcome the agent saw for it.
struct Task {
    proposal: Value,
    finished: bool,
    last: Option<Value>,
}

/// The payments target with switches that make the next premise reads or host checks
/// fail, and the targets the current process routes (`None`: all of them).
struct World {
    target: PaymentsTarget,
    failing_reads: u32,
    failing_checks: u32,
    routes: Option<Vec<String>>,
}

impl Targets for World {
    fn routes(&self) -> Vec<String> {
        self.routes.clone().unwrap_or_else(|| self.target.routes())
    }
    fn capture(&mut self, req: &CaptureRequest) -> Reply {
        if self.failing_reads > 0 {
            self.failing_reads -= 1;
            return Reply::Failed("the order system did not answer".into());
        }
        self.target.capture(req)
    }
    fn authorize(&mut self, _: &AuthorizeRequest) -> Reply {
        if self.failing_checks > 0 {
            self.failing_checks -= 1;
            return Reply::Failed("check unavailable".into());
        }
        Reply::Allowed(true)
    }
    fn apply(&mut self, req: &ApplyRequest) -> Reply {
        self.target.apply(req)
    }
    fn query(&mut self, req: &QueryRequest) -> Reply {
        self.target.query(req)
    }
}

struct Run<'a> {
    runtime: &'a Runtime,
    clock: Clock,
    tier: Tier,
    dir: PathBuf,
    journal: SharedJournal,
    world: World,
    worker: Option<GateHost>,
    tasks: BTreeMap<String, Task>,
    order: Vec<String>,
    failures: Vec<String>,
}

fn field<'v>(step: &'v Value, name: &str) -> Result<&'v Value> {
    step.get(name)
        .ok_or_else(|| anyhow!("step {step} lacks {name:?}"))
}

fn str_field<'v>(step: &'v Value, name: &str) -> Result<&'v str> {
    field(step, name)?
        .as_str()
        .ok_or_else(|| anyhow!("{name:?} must be a string in {step}"))
}

fn u64_field(step: &Value, name: &str) -> Result<u64> {
    field(step, name)?
        .as_u64()
        .ok_or_else(|| anyhow!("{name:?} must be an integer in {step}"))
}

fn journal_err_case(e: &GateError) -> &'static str {
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
    }
}

fn executed_name(e: Executed) -> &'static str {
    match e {
        Executed::Yes => "yes",
        Executed::No => "no",
        Executed::Unknown => "unknown",
    }
}

/// Every field `want` names must be equal in `got`; the differences, for a person.
fn check(what: &str, got: &Value, want: &Value) -> Vec<String> {
    let Some(want) = want.as_object() else {
        return vec![format!("{what}: expectation {want} is not an object")];
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

fn is_final(o: &Outcome) -> bool {
    matches!(
        o.state,
        State::Committed | State::Refused | State::Ambiguous | State::Confirmed
    )
}

impl Run<'_> {
    fn host(&mut self) -> Result<&mut GateHost> {
        if self.worker.is_none() {
            self.worker = Some(self.fresh_host()?);
        }
        Ok(self.worker.as_mut().expect("just set"))
    }

    fn fresh_host(&self) -> Result<GateHost> {
        GateHost::new(
            self.runtime,
            Box::new(self.journal.clone()),
            self.clock.clone(),
        )
        .map_err(|e| anyhow!("cannot start a gate instance: {e}"))
    }

    fn premises_now(&self) -> Result<Value> {
        Ok(self.world.target.payments.premises(ORDER, None)?)
    }

    /// The outcome as the vectors spell it, with `via` from the receipt.
    fn outcome_json(&mut self, o: &Outcome) -> Result<Value> {
        let mut v = json!({
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
        if o.state == State::Committed || o.state == State::Confirmed {
            let receipt = self.host()?.receipt(&o.effect_id, None)?;
            let r: Value = serde_json::from_str(&receipt)?;
            if let Some(via) = r.get("via") {
                v["via"] = via.clone();
            }
        }
        Ok(v)
    }

    fn record(&mut self, task: &str, o: &Outcome) -> Result<Value> {
        let v = self.outcome_json(o)?;
        let t = self.tasks.get_mut(task).expect("a known task");
        t.finished = is_final(o);
        t.last = Some(v.clone());
        Ok(v)
    }

    fn task(&self, step: &Value) -> Result<String> {
        let name = str_field(step, "task")?;
        if !self.tasks.contains_key(name) {
            bail!("task {name:?} was never decided");
        }
        Ok(name.to_string())
    }

    fn send(&mut self, step: &Value) -> Result<()> {
        let name = self.task(step)?;
        let crash = match step.get("crash").and_then(Value::as_str) {
            None => None,
            Some("before_intent") => {
                // The worker dies before it writes anything: the task stays on the list.
                self.worker = None;
                return Ok(());
            }
            Some("after_intent") => Some(CrashPoint::AfterIntent),
            Some("after_commit") => Some(CrashPoint::AfterCommit),
            Some(other) => bail!("unknown crash point {other:?}"),
        };
        let proposal = self.tasks[&name].proposal.to_string();
        let host = self.host()?;
        if let Some(point) = crash {
            host.crash_at(point, CrashAction::Error);
        }
        let host = self.worker.as_mut().expect("host exists");
        match host.submit(&proposal, &mut self.world) {
            Err(Error::Crashed(_)) => {
                self.worker = None;
                Ok(())
            }
            Err(e) => Err(anyhow!("send {name}: {e}")),
            Ok(o) => {
                if crash.is_some() {
                    self.failures
                        .push(format!("send {name}: the crash point was never reached"));
                }
                let got = self.record(&name, &o)?;
                if let Some(want) = step.get("expect") {
                    self.failures
                        .extend(check(&format!("send {name}"), &got, want));
                }
                Ok(())
            }
        }
    }

    fn restart(&mut self, step: &Value) -> Result<()> {
        self.world.routes = match step.get("routes") {
            None => None,
            Some(r) => Some(serde_json::from_value(r.clone()).context("restart.routes")?),
        };
        self.worker = Some(self.fresh_host()?);
        let host = self.worker.as_mut().expect("just set");
        let crash = match step.get("crash").and_then(Value::as_str) {
            None => false,
            Some("in_recovery") => true,
            Some(other) => bail!("unknown restart crash point {other:?}"),
        };
        if crash {
            host.crash_at(CrashPoint::InRecovery, CrashAction::Error);
        }
        let recovered = match host.recover_all(&mut self.world) {
            Err(Error::Crashed(_)) if crash => {
                // Recovery itself died: the next restart must finish its work.
                self.worker = None;
                return Ok(());
            }
            other => other?,
        };
        if crash {
            self.failures
                .push("restart: the recovery crash point was never reached".into());
        }
        let mut got = Vec::new();
        for (effect, result) in recovered {
            let o = result.map_err(|e| anyhow!("recover {effect}: {e}"))?;
            got.push(self.outcome_json(&o)?);
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
            let proposal = self.tasks[&name].proposal.to_string();
            let host = self.worker.as_mut().expect("set above");
            let o = host
                .submit(&proposal, &mut self.world)
                .map_err(|e| anyhow!("resend {name}: {e}"))?;
            self.record(&name, &o)?;
        }
        Ok(())
    }

    /// Two workers submit at once; both read premises before either writes its intent.
    fn race(&mut self, step: &Value) -> Result<()> {
        let names: Vec<String> = field(step, "tasks")?
            .as_array()
            .ok_or_else(|| anyhow!("race.tasks must be a list"))?
            .iter()
            .map(|t| {
                t.as_str()
                    .map(String::from)
                    .ok_or_else(|| anyhow!("race.tasks holds names"))
            })
            .collect::<Result<_>>()?;
        let mut workers = Vec::new();
        let mut steps = Vec::new();
        for name in &names {
            let t = self
                .tasks
                .get(name)
                .ok_or_else(|| anyhow!("task {name:?} was never decided"))?;
            let proposal = t.proposal.to_string();
            let mut host = self.fresh_host()?;
            let first = host.submit_step(&proposal)?;
            workers.push(host);
            steps.push(first);
        }
        for (host, step) in workers.iter_mut().zip(steps.iter_mut()) {
            if let Ask::Capture(req) = &step.ask {
                let reply = self.world.capture(req);
                *step = host.resume(step.op, &reply)?;
            }
        }
        let want = step
            .get("expect")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, ((mut host, first), name)) in workers.into_iter().zip(steps).zip(&names).enumerate()
        {
            let o = host.drive(first, &mut self.world)?;
            self.worker = Some(host);
            let got = self.record(name, &o)?;
            if let Some(w) = want.get(i) {
                self.failures
                    .extend(check(&format!("race {name}"), &got, w));
            }
        }
        Ok(())
    }

    fn decide(&mut self, step: &Value) -> Result<()> {
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
        let mut p = json!({
            "agent": "refund-agent",
            "target": {"name": "payments", "dedupes": self.tier.dedupes, "lookup": self.tier.lookup,
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
        if self
            .tasks
            .insert(
                name.clone(),
                Task {
                    proposal: p,
                    finished: false,
                    last: None,
                },
            )
            .is_some()
        {
            bail!("task {name:?} decided twice");
        }
        self.order.push(name);
        Ok(())
    }

    fn journal_file(&self) -> PathBuf {
        self.dir.join(interlock_file_journal::JOURNAL_FILE)
    }

    fn journal_sha256(&self) -> Result<String> {
        let bytes = std::fs::read(self.journal_file()).unwrap_or_default();
        Ok(format!("{:x}", Sha256::digest(&bytes)))
    }

    fn step(&mut self, step: &Value) -> Result<()> {
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
            "restart" => self.restart(step)?,
            "race" => self.race(step)?,
            "approve" => {
                let name = self.task(step)?;
                let p = &self.tasks[&name].proposal;
                let mut a = json!({
                    "approval": str_field(step, "approval")?,
                    "approver": str_field(step, "approver")?,
                    "request": {"key": p["key"], "effect": p["effect"]},
                    "premises_seen": self.premises_now()?,
                });
                if let Some(ms) = step.get("expires_in_ms").and_then(Value::as_u64) {
                    a["expires_at_ms"] = json!(self.clock.now_ms() + ms);
                }
                self.host()?.approve(&a.to_string())?;
            }
            "lease" => {
                let until = self.clock.now_ms() + u64_field(step, "expires_in_ms")?;
                let lease = str_field(step, "lease")?.to_string();
                self.host()?.grant_lease(&lease, until)?;
            }
            "revoke_lease" => {
                let lease = str_field(step, "lease")?.to_string();
                self.host()?.revoke_lease(&lease)?;
            }
            "hand_refund" => {
                let now = self.clock.now_ms();
                self.world.target.payments.refund_by_hand(
                    ORDER,
                    u64_field(step, "amount_cents")?,
                    now,
                )?;
            }
            "set_eligible" => {
                let eligible = field(step, "eligible")?
                    .as_bool()
                    .ok_or_else(|| anyhow!("eligible is a bool"))?;
                self.world.target.payments.set_eligible(ORDER, eligible)?;
            }
            "advance" => self.clock.advance(u64_field(step, "ms")?),
            "fail_reads" => self.world.failing_reads = u64_field(step, "count")? as u32,
            "fail_checks" => self.world.failing_checks = u64_field(step, "count")? as u32,
            "submit_raw" => {
                let before = self.journal_sha256()?;
                let want = str_field(step, "expect_error")?;
                let text = match (step.get("text"), step.get("repeat")) {
                    (Some(Value::String(t)), None) => t.clone(),
                    (Some(Value::String(t)), Some(n)) => t.repeat(n.as_u64().unwrap_or(1) as usize),
                    _ => bail!("submit_raw needs a text"),
                };
                match self.host()?.submit_step(&text) {
                    Err(Error::Gate(e)) if journal_err_case(&e) == want => {}
                    other => self
                        .failures
                        .push(format!("submit_raw: expected {want}, got {other:?}")),
                }
                if self.journal_sha256()? != before {
                    self.failures.push("submit_raw: the journal changed".into());
                }
            }
            "tear_journal" => {
                let path = self.journal_file();
                let len = std::fs::metadata(&path)?.len();
                let cut = u64_field(step, "bytes")?;
                let f = std::fs::OpenOptions::new().write(true).open(&path)?;
                f.set_len(len.saturating_sub(cut))?;
            }
            "reopen" => {
                self.worker = None;
                self.journal.close();
                match (
                    FileJournal::open(&self.dir),
                    step.get("expect_error").and_then(Value::as_str),
                ) {
                    (Ok(j), None) => self.journal.replace(Box::new(j)),
                    (Err(interlock_file_journal::Error::TornTail { .. }), Some("torn-tail")) => {}
                    (Ok(j), Some(want)) => {
                        self.failures
                            .push(format!("reopen: expected {want}, the journal opened"));
                        self.journal.replace(Box::new(j));
                    }
                    (Err(e), want) => self
                        .failures
                        .push(format!("reopen: got {e}, expected {want:?}")),
                }
            }
            "repair" => {
                FileJournal::repair(&self.dir)?;
            }
            "verify" => {
                let report = self.host()?.verify(&[])?;
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
            other => bail!("unknown op {other:?}"),
        }
        Ok(())
    }
}

/// Plays one vector in `workdir` (an empty folder: the journal goes there).
pub fn run(runtime: &Runtime, v: &Vector, workdir: &Path) -> Result<RunReport> {
    let tier = Tier::parse(&v.tier).map_err(|e| anyhow!("{}: {e}", v.id))?;
    let clock = Clock::fake(T0_MS);
    let mut payments = Payments::in_memory(tier);
    payments.add_order(ORDER, v.paid_cents.unwrap_or(crate::case::PAID_CENTS))?;
    let journal = SharedJournal::new(Box::new(FileJournal::open(workdir)?));
    let mut run = Run {
        runtime,
        clock: clock.clone(),
        tier,
        dir: workdir.to_path_buf(),
        journal,
        world: World {
            target: PaymentsTarget::new(payments, clock.clone()),
            failing_reads: 0,
            failing_checks: 0,
            routes: None,
        },
        worker: None,
        tasks: BTreeMap::new(),
        order: Vec::new(),
        failures: Vec::new(),
    };
    run.host()?.grant_lease(LEASE, T0_MS + LEASE_MS)?;
    for (i, step) in v.steps.iter().enumerate() {
        run.step(step)
            .with_context(|| format!("{} step {i} ({step})", v.id))?;
    }

    let mut report = RunReport {
        refunded_cents: run.world.target.payments.refunded_cents(ORDER),
        refund_records: run.world.target.payments.refunds(ORDER).len(),
        tasks: run
            .tasks
            .iter()
            .filter_map(|(k, t)| t.last.clone().map(|o| (k.clone(), o)))
            .collect(),
        journal_sha256: run.journal_sha256()?,
        failures: std::mem::take(&mut run.failures),
    };
    let e = &v.expect;
    for (k, got) in [
        ("refunded_cents", json!(report.refunded_cents)),
        ("refund_records", json!(report.refund_records)),
    ] {
        match e.get(k) {
            Some(want) if *want != got => report
                .failures
                .push(format!("{k} is {got}, expected {want}")),
            Some(_) => {}
            None => report.failures.push(format!("the vector does not say {k}")),
        }
    }
    let want_tasks: Map<String, Value> = e
        .get("tasks")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (name, want) in &want_tasks {
        match report.tasks.get(name).cloned() {
            Some(got) => report
                .failures
                .extend(check(&format!("task {name}"), &got, want)),
            None => report
                .failures
                .push(format!("task {name} never got an outcome")),
        }
    }
    Ok(report)
}
