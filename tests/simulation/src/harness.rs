//! The host loop: the gate calls of workers and of the admin, and a host that performs
//! the steps the gate asks for (reading premises, checking, sending, querying), with the
//! faults a real host meets.
use interlock_core::{Ask, Gate, GateError, JournalError, Reason, Reply, Step};
use rand::Rng;
use serde_json::{json, Map, Value};

use crate::faults::pick_weighted;
use crate::journal;
use crate::world::{parse, Anchor, Auth, Msg, OpState, Pend, Send, Worker, World};
use crate::{fail, CrashKind, Fault, SimJournal, View, Violation, HOUR, RECEIPT_KEY};

impl World {
    /// One gate call by worker `w`; `Ok(None)` when an injected fault ended the operation.
    pub(crate) fn call(
        &mut self,
        w: usize,
        what: &str,
        f: impl FnOnce(&mut Gate, &mut SimJournal, u64) -> Result<Step, GateError>,
    ) -> Result<Option<Step>, Violation> {
        self.arm_fault();
        let before = self.j.len();
        let now = self.clock_of(w);
        let r = f(&mut self.workers[w].gate, &mut self.j, now);
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

    pub(crate) fn admin_call(
        &mut self,
        what: &'static str,
        f: impl FnOnce(&mut Gate, &mut SimJournal, u64) -> Result<(), GateError>,
    ) -> Result<(), Violation> {
        if self.faults_on && self.chance(self.rates.admin_write_error) {
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

    pub(crate) fn decide(&mut self, i: usize) -> Result<(), Violation> {
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
            if self.clocks.margin_ms > 0 {
                p["target"]["clock_skew_ms"] = json!(self.clocks.margin_ms);
            }
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

    pub(crate) fn submit(&mut self, w: usize) -> Result<(), Violation> {
        let i = self.rng.random_range(0..self.requests.len());
        self.decide(i)?;
        let (text, label) = if self.chance(self.rates.changed_amount) {
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

    pub(crate) fn recover(&mut self, w: usize, id: &str) -> Result<(), Violation> {
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
    pub(crate) fn on_step(
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
            Ask::Sleep(_) | Ask::Crash(_) => {
                unreachable!("the simulation's recoveries never wait, and it sets no crash point")
            }
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
                let checked = self.check_send(w, &o, *attempt);
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
    pub(crate) fn perform(&mut self, w: usize) -> Result<(), Violation> {
        let Some(o) = self.workers[w].op.clone() else {
            return Ok(());
        };
        let Pend::Ask(ask) = o.pend.clone() else {
            return Ok(());
        };
        let faults = self.faults_on;
        match ask {
            Ask::Sleep(_) | Ask::Crash(_) => {
                unreachable!("the simulation's recoveries never wait, and it sets no crash point")
            }
            Ask::Capture {
                effect_id,
                effect,
                names,
                ..
            } => {
                if faults && self.chance(self.rates.premise_read_fails) {
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
                let yes = !faults || self.chance(self.rates.host_check_allows);
                if let Some(op) = &mut self.workers[w].op {
                    op.allowed = Some(yes);
                }
                self.resume(w, Reply::Allowed(yes))
            }
            Ask::Query { effect_id, .. } => {
                if faults && self.chance(self.rates.lookup_fails) {
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
                    pick_weighted(&mut self.rng, &self.rates.send_fates)
                } else {
                    0
                };
                match fate {
                    0 => {}
                    1 => {
                        m.reply_lost = true;
                        self.ev("reply_lost");
                    }
                    2 => {
                        m.land_at = None;
                        self.ev("request_lost");
                    }
                    _ => {
                        m.land_at = Some(self.rng.random_range(self.now..o.deadline));
                        m.reply_lost = self.chance(self.rates.late_reply_lost);
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
    pub(crate) fn resolve(&mut self, w: usize) -> Result<(), Violation> {
        let Some(o) = self.workers[w].op.clone() else {
            return Ok(());
        };
        let Pend::Await(i) = o.pend else {
            return Ok(());
        };
        let m = self.msgs[i].clone();
        if let (Some(res), false) = (&m.result, m.reply_lost) {
            if self.now < m.deadline
                && (!self.faults_on || self.chance(self.rates.reply_handed_over))
            {
                let reply = match res {
                    Ok(t) => Reply::Applied(t.clone()),
                    Err(e) => Reply::Rejected(e.clone()),
                };
                return self.resume(w, reply);
            }
        }
        let mut waited = false;
        if self.faults_on && self.chance(self.rates.host_waits) {
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

    /// The effect's signed receipt, checked against the journal it pins (signature, and
    /// that it rebuilds from the stream as stored).
    pub(crate) fn checked_receipt(&mut self, id: &str) -> Result<String, Violation> {
        let r = self
            .admin
            .receipt(&mut journal::Admin(&mut self.j), id, Some(RECEIPT_KEY))
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
        Ok(r)
    }

    pub(crate) fn take_receipt(&mut self) -> Result<(), Violation> {
        let ids = self.effect_ids();
        if ids.is_empty() {
            return Ok(());
        }
        let id = ids[self.rng.random_range(0..ids.len())].clone();
        let r = self.checked_receipt(&id)?;
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
        self.anchors.push(Anchor::new(r, unsynced));
        Ok(())
    }
}

fn ask_name(a: &Ask) -> String {
    match a {
        Ask::Capture { names, .. } => format!("capture {names:?}"),
        Ask::Authorize { .. } => "authorize".into(),
        Ask::Apply { attempt, .. } => format!("apply attempt {attempt}"),
        Ask::Query { .. } => "query".into(),
        Ask::Sleep(ms) => format!("sleep {ms} ms"),
        Ask::Crash(p) => format!("crash {}", p.as_str()),
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
