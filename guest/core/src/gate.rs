//! The gate: submit, the steps of one operation, recovery, and the authority records.
//!
//! One operation walks one effect forward. A fresh submit and a recovery walk the same
//! path: the recovery table ([`crate::recovery::decide`]) picks each next action from what
//! the operation knows so far, so there is exactly one place where "may I send?" is
//! answered. Everything that must precede a send goes to the journal in one durable batch.
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::{Map, Value};

use crate::authority::{self, approval_stream, cap_stream, effect_stream, lease_stream};
use crate::canon::{canonical, effect_id_for, is_effect_id};
use crate::entry::Stream;
use crate::fields;
use crate::journal::{Journal, JournalError};
use crate::proposal::{self, field_err, object, parse_input, parse_json, Authority, Proposal};
use crate::receipt::{self, VerifyReport};
use crate::recovery::{decide, Action, Claim, Dedupe, Inputs, Lookup, Recheck};
use crate::types::*;

/// How often a compare-and-append is retried against other workers before giving up.
const CAS_RETRIES: usize = 16;
/// Verified streams kept per instance; past this the cache starts over.
const CACHED_STREAMS: usize = 4096;

/// Everything one operation knows about its effect.
#[derive(Clone, Debug)]
struct Ctx {
    id: String,
    proposal: Proposal,
    stream: Stream,
    lookup: Lookup,
    found: Option<String>,
    recheck: Recheck,
    refusal: Option<Refusal>,
    /// What held at the re-check, recorded in AUTHORIZED.
    checks: Map<String, Value>,
    /// The premises to read at the re-check: the proposal's, and an approval's.
    capture_names: Vec<String>,
}

#[derive(Clone, Debug)]
struct Refusal {
    reason: Reason,
    changed: Vec<PremiseChange>,
    return_to: Option<String>,
}

impl Refusal {
    fn of(reason: Reason) -> Refusal {
        Refusal {
            reason,
            changed: Vec::new(),
            return_to: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waiting {
    Capture,
    Authorize,
    Apply { attempt: u32 },
    Query,
}

#[derive(Clone, Debug)]
struct Op {
    ctx: Ctx,
    waiting: Waiting,
}

/// The gate's state between calls: only the operations in progress. Everything durable is
/// in the journal, so a gate dropped at any point (a crash, a trap) loses nothing.
#[derive(Debug, Default)]
pub struct Gate {
    ops: BTreeMap<u64, Op>,
    next_op: u64,
    /// Streams this instance has read and verified. A later read asks the journal only for
    /// the length and for what was appended since, and verifies just that against the kept
    /// head: the gate acts on entries it verified, without re-hashing history per call.
    /// `verify` and receipts always re-read storage in full.
    streams: BTreeMap<String, Stream>,
    /// The targets the host can perform steps for; `None` until it says (every target).
    routes: Option<BTreeSet<String>>,
}

fn done(op: u64, o: Outcome) -> Step {
    Step {
        op,
        ask: Ask::Done(o),
    }
}

fn dispatches(s: &Stream) -> impl Iterator<Item = &Map<String, Value>> {
    s.entries
        .iter()
        .filter(|e| Stream::state_of(e) == "DISPATCHED")
}

fn changes_json(changed: &[PremiseChange]) -> Value {
    Value::Array(
        changed
            .iter()
            .map(|c| {
                let mut o = Map::new();
                o.insert("name".into(), c.name.clone().into());
                o.insert(
                    "was".into(),
                    serde_json::from_str(&c.was).unwrap_or(Value::Null),
                );
                o.insert(
                    "now".into(),
                    serde_json::from_str(&c.now).unwrap_or(Value::Null),
                );
                Value::Object(o)
            })
            .collect(),
    )
}

/// The outcome recorded by a stream's last entry (for a replay, or a recovery of a closed effect).
fn recorded_outcome(id: &str, s: &Stream, replayed: bool) -> Outcome {
    let last = s.last().expect("a recorded effect has entries");
    let state = State::parse(Stream::state_of(last)).unwrap_or(State::Proposed);
    let committed = s
        .entries
        .iter()
        .rev()
        .find(|e| Stream::state_of(e) == "COMMITTED");
    let str_of = |k: &str| last.get(k).and_then(Value::as_str);
    let executed = match state {
        State::Committed | State::Confirmed => Executed::Yes,
        _ => str_of("executed")
            .and_then(Executed::parse)
            .unwrap_or(Executed::Unknown),
    };
    let changed = last
        .get("changed")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| PremiseChange {
                    name: c.get("name").and_then(Value::as_str).unwrap_or("").into(),
                    was: canonical(c.get("was").unwrap_or(&Value::Null)),
                    now: canonical(c.get("now").unwrap_or(&Value::Null)),
                })
                .collect()
        })
        .unwrap_or_default();
    Outcome {
        effect_id: id.into(),
        state,
        reason: str_of("reason").and_then(Reason::parse),
        executed,
        result: committed.and_then(|c| c.get("result")).map(canonical),
        changed,
        return_to: str_of("return_to").map(String::from),
        replayed,
        retry_after_ms: None,
    }
}

fn open_outcome(ctx: &Ctx, reason: Reason, now_ms: u64) -> Outcome {
    let dispatched = dispatches(&ctx.stream).next().is_some();
    let claim_until = dispatches(&ctx.stream)
        .last()
        .and_then(|d| d.get("claim_until_ms"))
        .and_then(Value::as_u64);
    Outcome {
        effect_id: ctx.id.clone(),
        state: if ctx.stream.entries.is_empty() {
            State::Proposed
        } else {
            State::Dispatched
        },
        reason: Some(reason),
        executed: if dispatched {
            Executed::Unknown
        } else {
            Executed::No
        },
        result: None,
        changed: Vec::new(),
        return_to: None,
        replayed: false,
        retry_after_ms: claim_until.filter(|c| *c > now_ms).map(|c| c - now_ms),
    }
}

impl Gate {
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Operations in progress (a host that never finishes them can `cancel`).
    pub fn operations(&self) -> usize {
        self.ops.len()
    }

    /// The targets this host can reach. An operation on an effect of another target asks
    /// nothing and writes nothing (`target_unroutable`): a host that cannot reach a target
    /// must not answer for it, or an effect whose send landed could be closed as refused.
    pub fn set_routes(&mut self, targets: impl IntoIterator<Item = String>) {
        self.routes = Some(targets.into_iter().collect());
    }

    fn routes(&self, target: &str) -> bool {
        self.routes.as_ref().is_none_or(|r| r.contains(target))
    }

    pub fn effect_id_of(&self, proposal: &str) -> Result<String, GateError> {
        Ok(Proposal::parse(proposal)?.effect_id())
    }

    pub fn submit(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        proposal: &str,
    ) -> Result<Step, GateError> {
        let p = Proposal::parse(proposal)?;
        let id = p.effect_id();
        let stream = self.load(j, &effect_stream(&id))?;
        let op = self.take_op_id();
        if let Some(first) = stream.entries.first() {
            let recorded =
                Proposal::parse(&canonical(first.get("proposal").unwrap_or(&Value::Null)))
                    .map_err(|e| {
                        GateError::CorruptJournal(format!("{} entry 0: {e}", stream.name))
                    })?;
            if recorded.payload_hash() != p.payload_hash() {
                // Nothing is recorded: the journal keeps the first decision only.
                let ctx = Ctx::new(id, p, Stream::empty(""));
                let o = outcome_of(
                    &ctx,
                    State::Refused,
                    Some(Reason::ConflictingPayload),
                    Executed::No,
                );
                return Ok(done(op, o));
            }
            if is_closed(&stream) {
                return Ok(done(op, self.replay(j, &id, &stream)?));
            }
            // Left open by a crash: this submit recovers it, under the recorded decision.
            return self.start(j, now_ms, op, Ctx::new(id, recorded, stream));
        }
        self.start(j, now_ms, op, Ctx::new(id, p, stream))
    }

    /// The first step of an operation on an effect that is not closed.
    fn start(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        op: u64,
        ctx: Ctx,
    ) -> Result<Step, GateError> {
        if !self.routes(&ctx.proposal.target.name) {
            return Ok(done(
                op,
                open_outcome(&ctx, Reason::TargetUnroutable, now_ms),
            ));
        }
        self.advance(j, now_ms, op, ctx)
    }

    pub fn recover(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        effect_id: &str,
    ) -> Result<Step, GateError> {
        if !is_effect_id(effect_id) {
            return Err(field_err(
                "/effect",
                "an effect id is 32 lowercase hex digits",
            ));
        }
        let stream = self.load(j, &effect_stream(effect_id))?;
        let first = stream
            .entries
            .first()
            .ok_or_else(|| GateError::UnknownEffect(effect_id.into()))?;
        let op = self.take_op_id();
        if is_closed(&stream) {
            return Ok(done(op, self.replay(j, effect_id, &stream)?));
        }
        let p = Proposal::parse(&canonical(first.get("proposal").unwrap_or(&Value::Null)))
            .map_err(|e| GateError::CorruptJournal(format!("{} entry 0: {e}", stream.name)))?;
        self.start(j, now_ms, op, Ctx::new(effect_id.into(), p, stream))
    }

    pub fn open_effects(&self, j: &mut dyn Journal) -> Result<Vec<String>, GateError> {
        Ok(j.open_streams()?
            .into_iter()
            .filter_map(|s| s.strip_prefix("effect:").map(String::from))
            .collect())
    }

    pub fn cancel(&mut self, op: u64) {
        self.ops.remove(&op);
    }

    pub fn resume(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        op: u64,
        reply: Reply,
    ) -> Result<Step, GateError> {
        let Op { mut ctx, waiting } = self
            .ops
            .remove(&op)
            .ok_or(GateError::UnknownOperation(op))?;
        let expected = match waiting {
            Waiting::Capture => "captured or failed",
            Waiting::Authorize => "allowed or failed",
            Waiting::Apply { .. } => "applied, rejected or unknown",
            Waiting::Query => "found, not-found or failed",
        };
        let unexpected = |ctx, waiting, this: &mut Gate, reply: &Reply| {
            this.ops.insert(op, Op { ctx, waiting });
            Err(GateError::UnexpectedReply(format!(
                "operation {op} waits for {expected}, got {}",
                reply.kind()
            )))
        };
        match (waiting, reply) {
            (Waiting::Capture, Reply::Captured(text)) => {
                let fresh = match parse_input(&text, "/captured")
                    .and_then(|v| object(&v, "/captured").cloned())
                {
                    Ok(m) => m,
                    Err(e) => {
                        self.ops.insert(op, Op { ctx, waiting });
                        return Err(e);
                    }
                };
                self.judge_premises(j, now_ms, &mut ctx, &fresh)?;
                if ctx.recheck == Recheck::NotDone {
                    ctx.recheck = Recheck::Holds;
                }
                self.advance(j, now_ms, op, ctx)
            }
            (Waiting::Capture, Reply::Failed(_)) => {
                ctx.recheck = Recheck::ReadFailed;
                self.advance(j, now_ms, op, ctx)
            }
            (Waiting::Authorize, Reply::Failed(_)) => {
                // A check that could not be made is not a "no": an effect whose send may
                // have landed must not be closed on it.
                ctx.recheck = Recheck::ReadFailed;
                self.advance(j, now_ms, op, ctx)
            }
            (Waiting::Authorize, Reply::Allowed(yes)) => {
                if yes {
                    ctx.checks.insert("host_check".into(), "allowed".into());
                    return self.ask_capture(j, now_ms, op, ctx);
                }
                ctx.recheck = Recheck::Fails;
                ctx.refusal = Some(Refusal::of(Reason::NotAllowed));
                self.advance(j, now_ms, op, ctx)
            }
            (Waiting::Apply { attempt }, Reply::Applied(text)) => {
                let result = match parse_json(&text) {
                    Ok(v) => v,
                    Err(e) => {
                        self.ops.insert(op, Op { ctx, waiting });
                        return Err(e);
                    }
                };
                let via = if attempt == 0 {
                    "send"
                } else {
                    "recovery-retry"
                };
                if let Some(theirs) = self.close(
                    j,
                    now_ms,
                    &mut ctx,
                    "COMMITTED",
                    fields!("via" => via, "result" => result.clone()),
                    false,
                )? {
                    return Ok(done(op, theirs));
                }
                Ok(done(
                    op,
                    Outcome {
                        result: Some(canonical(&result)),
                        ..outcome_of(&ctx, State::Committed, None, Executed::Yes)
                    },
                ))
            }
            (Waiting::Apply { attempt }, Reply::Rejected(msg)) => {
                // A refusal of a resend does not undo an earlier send that may have landed.
                let proven_unsent = attempt == 0 || ctx.lookup == Lookup::NotFound;
                let (state, executed) = if proven_unsent {
                    ("REFUSED", Executed::No)
                } else {
                    ("AMBIGUOUS", Executed::Unknown)
                };
                let f = fields!("reason" => Reason::TargetRejected.as_str(), "executed" => executed.as_str(), "detail" => msg);
                if let Some(theirs) = self.close(j, now_ms, &mut ctx, state, f, true)? {
                    return Ok(done(op, theirs));
                }
                if proven_unsent {
                    self.release_cap(j, now_ms, &ctx)?;
                }
                Ok(done(
                    op,
                    outcome_of(
                        &ctx,
                        State::parse(state).expect("known"),
                        Some(Reason::TargetRejected),
                        executed,
                    ),
                ))
            }
            (Waiting::Apply { .. }, Reply::Unknown(_)) => {
                // The send may still land: the claim stands until its deadline, then recovery decides.
                Ok(done(
                    op,
                    open_outcome(&ctx, Reason::TargetUnavailable, now_ms),
                ))
            }
            (Waiting::Query, Reply::Found(text)) => {
                match parse_json(&text) {
                    Ok(v) => ctx.found = Some(canonical(&v)),
                    Err(e) => {
                        self.ops.insert(op, Op { ctx, waiting });
                        return Err(e);
                    }
                }
                ctx.lookup = Lookup::Found;
                self.advance(j, now_ms, op, ctx)
            }
            (Waiting::Query, Reply::NotFound) => {
                ctx.lookup = Lookup::NotFound;
                self.advance(j, now_ms, op, ctx)
            }
            (Waiting::Query, Reply::Failed(_)) => {
                ctx.lookup = Lookup::Failed;
                self.advance(j, now_ms, op, ctx)
            }
            (waiting, reply) => unexpected(ctx, waiting, self, &reply),
        }
    }

    /// A stream as stored now, verified, served from this instance's cache where it can be.
    fn load(&mut self, j: &mut dyn Journal, name: &str) -> Result<Stream, GateError> {
        let mut s = self
            .streams
            .remove(name)
            .unwrap_or_else(|| Stream::empty(name));
        s.catch_up(j)?;
        if self.streams.len() >= CACHED_STREAMS {
            self.streams.clear();
        }
        self.streams.insert(name.into(), s.clone());
        Ok(s)
    }

    /// An earlier decision, read from the journal, reported again. Another worker may have
    /// written it without its fsync having returned (and then died): make the journal
    /// durable before anyone acts on what it says.
    fn replay(&mut self, j: &mut dyn Journal, id: &str, s: &Stream) -> Result<Outcome, GateError> {
        j.sync()?;
        Ok(recorded_outcome(id, s, true))
    }

    /// Keep a stream this instance just appended to, so its next read costs nothing.
    fn remember(&mut self, s: &Stream) {
        if let Some(kept) = self.streams.get_mut(&s.name) {
            kept.clone_from(s);
        }
    }

    fn take_op_id(&mut self) -> u64 {
        self.next_op += 1;
        self.next_op
    }

    /// Consult the recovery table until it asks for I/O or reaches an end.
    fn advance(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        op: u64,
        mut ctx: Ctx,
    ) -> Result<Step, GateError> {
        let action = decide(ctx.inputs(now_ms));
        match action {
            Action::Wait => Ok(done(op, open_outcome(&ctx, Reason::ClaimLive, now_ms))),
            Action::StayOpen => Ok(done(op, open_outcome(&ctx, Reason::ReadFailed, now_ms))),
            Action::Query => {
                let ask = Ask::Query {
                    effect_id: ctx.id.clone(),
                    target: ctx.proposal.target.name.clone(),
                    effect: canonical(&ctx.proposal.effect),
                };
                self.ops.insert(
                    op,
                    Op {
                        ctx,
                        waiting: Waiting::Query,
                    },
                );
                Ok(Step { op, ask })
            }
            Action::CommitFound => {
                let result: Value = serde_json::from_str(ctx.found.as_deref().unwrap_or("null"))
                    .unwrap_or(Value::Null);
                if let Some(theirs) = self.close(
                    j,
                    now_ms,
                    &mut ctx,
                    "COMMITTED",
                    fields!("via" => "recovery-query", "result" => result),
                    false,
                )? {
                    return Ok(done(op, theirs));
                }
                Ok(done(
                    op,
                    Outcome {
                        result: ctx.found.clone(),
                        ..outcome_of(&ctx, State::Committed, None, Executed::Yes)
                    },
                ))
            }
            Action::Recheck => self.start_recheck(j, now_ms, op, ctx),
            Action::Refuse => {
                let r = ctx
                    .refusal
                    .clone()
                    .unwrap_or(Refusal::of(Reason::PremiseChanged));
                let executed = ctx.executed_if_stopped_now();
                let mut f = fields!("reason" => r.reason.as_str(), "executed" => executed.as_str());
                if !r.changed.is_empty() {
                    f.insert("changed".into(), changes_json(&r.changed));
                }
                if let Some(to) = &r.return_to {
                    f.insert("return_to".into(), to.clone().into());
                }
                if let Some(theirs) = self.close(j, now_ms, &mut ctx, "REFUSED", f, true)? {
                    return Ok(done(op, theirs));
                }
                // A send that may have landed keeps its share of the cap.
                if executed == Executed::No {
                    self.release_cap(j, now_ms, &ctx)?;
                }
                Ok(done(
                    op,
                    Outcome {
                        changed: r.changed,
                        return_to: r.return_to,
                        ..outcome_of(&ctx, State::Refused, Some(r.reason), executed)
                    },
                ))
            }
            Action::Ambiguous => {
                let reason = if ctx.proposal.target.dedupes {
                    Reason::DedupeWindowPassed
                } else {
                    Reason::NoDedupeNoLookup
                };
                let f =
                    fields!("reason" => reason.as_str(), "executed" => Executed::Unknown.as_str());
                if let Some(theirs) = self.close(j, now_ms, &mut ctx, "AMBIGUOUS", f, true)? {
                    return Ok(done(op, theirs));
                }
                Ok(done(
                    op,
                    outcome_of(&ctx, State::Ambiguous, Some(reason), Executed::Unknown),
                ))
            }
            Action::Send => self.send(j, now_ms, op, ctx),
        }
    }

    /// Authority first (it needs no I/O), then ask the host for fresh premises.
    /// The lease or approval, read from the journal now (no host I/O): the names of any
    /// extra premises an approval carries, or why authority is gone. Records what held.
    fn check_authority(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &mut Ctx,
    ) -> Result<Result<Vec<String>, Reason>, GateError> {
        Ok(match ctx.proposal.authority.clone() {
            Authority::Lease(name) => {
                match authority::check_lease(&self.load(j, &lease_stream(&name))?, now_ms) {
                    Ok(until) => {
                        let mut l = Map::new();
                        l.insert("name".into(), name.into());
                        l.insert("live_until_ms".into(), until.into());
                        ctx.checks.insert("lease".into(), Value::Object(l));
                        Ok(Vec::new())
                    }
                    Err(reason) => Err(reason),
                }
            }
            Authority::Approval(aid) => {
                authority::check_approval(&self.load(j, &approval_stream(&aid))?, &ctx.id, now_ms)
                    .map(|a| a.premises_seen.keys().cloned().collect())
            }
        })
    }

    /// Authority first (it needs no I/O), then the host's own check if asked, then fresh
    /// premises last, so nothing but the send itself follows the premise read.
    fn start_recheck(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        op: u64,
        mut ctx: Ctx,
    ) -> Result<Step, GateError> {
        match self.check_authority(j, now_ms, &mut ctx)? {
            Ok(extra) => ctx.capture_names = ctx.proposal.premise_names(&extra),
            Err(reason) => return self.fail_recheck(j, now_ms, op, ctx, Refusal::of(reason)),
        }
        if ctx.proposal.host_check {
            return Ok(self.ask_authorize(op, ctx));
        }
        self.ask_capture(j, now_ms, op, ctx)
    }

    fn ask_capture(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        op: u64,
        ctx: Ctx,
    ) -> Result<Step, GateError> {
        if ctx.capture_names.is_empty() {
            // Nothing to read: judge at once against an empty capture.
            return self.resume_with(
                j,
                now_ms,
                op,
                ctx,
                Waiting::Capture,
                Reply::Captured("{}".into()),
            );
        }
        let ask = Ask::Capture {
            effect_id: ctx.id.clone(),
            target: ctx.proposal.target.name.clone(),
            effect: canonical(&ctx.proposal.effect),
            names: ctx.capture_names.clone(),
        };
        self.ops.insert(
            op,
            Op {
                ctx,
                waiting: Waiting::Capture,
            },
        );
        Ok(Step { op, ask })
    }

    fn resume_with(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        op: u64,
        ctx: Ctx,
        waiting: Waiting,
        reply: Reply,
    ) -> Result<Step, GateError> {
        self.ops.insert(op, Op { ctx, waiting });
        self.resume(j, now_ms, op, reply)
    }

    fn fail_recheck(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        op: u64,
        mut ctx: Ctx,
        r: Refusal,
    ) -> Result<Step, GateError> {
        ctx.recheck = Recheck::Fails;
        ctx.refusal = Some(r);
        self.advance(j, now_ms, op, ctx)
    }

    fn ask_authorize(&mut self, op: u64, ctx: Ctx) -> Step {
        let ask = Ask::Authorize {
            effect_id: ctx.id.clone(),
            target: ctx.proposal.target.name.clone(),
            effect: canonical(&ctx.proposal.effect),
            agent: ctx.proposal.agent.clone(),
        };
        self.ops.insert(
            op,
            Op {
                ctx,
                waiting: Waiting::Authorize,
            },
        );
        Step { op, ask }
    }

    /// Compare fresh premises with the approver's and the proposal's; a stale approval goes
    /// back to its approver. Sets `recheck` to Fails, or leaves NotDone for the caller.
    fn judge_premises(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &mut Ctx,
        fresh: &Map<String, Value>,
    ) -> Result<(), GateError> {
        if let Authority::Approval(aid) = &ctx.proposal.authority {
            if let Ok(a) =
                authority::check_approval(&self.load(j, &approval_stream(aid))?, &ctx.id, now_ms)
            {
                let changed =
                    authority::compare_premises(&a.premises_seen, &BTreeMap::new(), fresh);
                if !changed.is_empty() {
                    ctx.recheck = Recheck::Fails;
                    ctx.refusal = Some(Refusal {
                        reason: Reason::ApprovalStale,
                        changed,
                        return_to: Some(a.approver),
                    });
                    return Ok(());
                }
                let mut o = Map::new();
                o.insert("id".into(), aid.clone().into());
                o.insert("approver".into(), a.approver.into());
                ctx.checks.insert("approval".into(), Value::Object(o));
            }
        }
        let changed =
            authority::compare_premises(&ctx.proposal.premises, &ctx.proposal.bounds, fresh);
        if !changed.is_empty() {
            ctx.recheck = Recheck::Fails;
            ctx.refusal = Some(Refusal {
                reason: Reason::PremiseChanged,
                changed,
                return_to: None,
            });
            return Ok(());
        }
        let now: Map<String, Value> = ctx
            .proposal
            .premises
            .keys()
            .filter_map(|k| fresh.get(k).map(|v| (k.clone(), v.clone())))
            .collect();
        ctx.checks
            .insert("premises_held".into(), Value::Object(now));
        Ok(())
    }

    /// Reserve the cap (if any), then write everything that precedes the send in one
    /// durable batch, then ask the host to apply.
    fn send(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        op: u64,
        mut ctx: Ctx,
    ) -> Result<Step, GateError> {
        // Authority is read again at the moment of the send: the host's capture (and check)
        // took time, and a lease revoked meanwhile must stop this send.
        if let Err(reason) = self.check_authority(j, now_ms, &mut ctx)? {
            ctx.recheck = Recheck::Fails;
            ctx.refusal = Some(Refusal::of(reason));
            return self.advance(j, now_ms, op, ctx);
        }
        if let Some(cap) = ctx.proposal.cap.clone() {
            match self.reserve_cap(j, now_ms, &ctx, &cap)? {
                Some(reserved_by_others) => {
                    let mut c = Map::new();
                    c.insert("name".into(), cap.name.into());
                    c.insert("limit_cents".into(), cap.limit_cents.into());
                    c.insert("reserved_by_others_cents".into(), reserved_by_others.into());
                    ctx.checks.insert("cap".into(), Value::Object(c));
                }
                None => {
                    ctx.recheck = Recheck::Fails;
                    ctx.refusal = Some(Refusal::of(Reason::CapExceeded));
                    return self.advance(j, now_ms, op, ctx);
                }
            }
        }
        let attempt = dispatches(&ctx.stream).count() as u32;
        let mut batch = Vec::new();
        if ctx.stream.entries.is_empty() {
            batch.push(("PROPOSED", ctx.proposed_fields()));
        }
        batch.push((
            "AUTHORIZED",
            fields!("checks" => Value::Object(ctx.checks.clone())),
        ));
        let claim_until = now_ms.saturating_add(ctx.proposal.target.timeout_ms);
        batch.push(("DISPATCHED", fields!("attempt" => attempt, "claim_until_ms" => claim_until, "idempotency_key" => ctx.id.clone())));
        match ctx.stream.append(j, batch, now_ms, true, true) {
            Ok(()) => self.remember(&ctx.stream),
            // A share this worker reserved stays: the same payload's winner holds the same
            // share, and another payload's is found stale once that payload is recorded.
            Err(JournalError::Conflict(_)) => return self.lost_race(j, now_ms, op, &ctx),
            Err(e) => return Err(e.into()),
        }
        let ask = Ask::Apply {
            effect_id: ctx.id.clone(),
            target: ctx.proposal.target.name.clone(),
            effect: canonical(&ctx.proposal.effect),
            idempotency_key: ctx.id.clone(),
            attempt,
        };
        self.ops.insert(
            op,
            Op {
                ctx,
                waiting: Waiting::Apply { attempt },
            },
        );
        Ok(Step { op, ask })
    }

    /// Another worker advanced this effect first: report where it stands, never act on it.
    fn lost_race(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        op: u64,
        ctx: &Ctx,
    ) -> Result<Step, GateError> {
        Ok(done(op, self.where_it_stands(j, now_ms, ctx)?))
    }

    /// Where an effect stands after another worker wrote to it first: its recorded outcome,
    /// or open under their claim. Never acted on by this worker.
    fn where_it_stands(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &Ctx,
    ) -> Result<Outcome, GateError> {
        let s = self.load(j, &ctx.stream.name)?;
        if is_closed(&s) {
            return self.replay(j, &ctx.id, &s);
        }
        let theirs = Ctx {
            stream: s,
            ..ctx.clone()
        };
        Ok(open_outcome(&theirs, Reason::ClaimLive, now_ms))
    }

    /// Some(cents reserved by others) when the cap holds this effect too, None when it would
    /// be exceeded. Compare-and-append makes two racing reservations see each other.
    fn reserve_cap(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &Ctx,
        cap: &proposal::Cap,
    ) -> Result<Option<u64>, GateError> {
        let name = cap_stream(&cap.name);
        let payload = ctx.proposal.payload_hash();
        for _ in 0..CAS_RETRIES {
            let mut s = self.load(j, &name)?;
            let mut shares = authority::cap_shares(&s);
            self.drop_stale_shares(j, &mut shares)?;
            let mine = shares.remove(&(ctx.id.clone(), payload.clone()));
            let others: u64 = shares.values().sum();
            if mine.is_some() {
                return Ok(Some(others));
            }
            if !authority::cap_fits(cap, others) {
                return Ok(None);
            }
            let f = fields!("effect_id" => ctx.id.clone(), "payload_hash" => payload.clone(), "amount_cents" => cap.amount_cents, "limit_cents" => cap.limit_cents);
            // Not durable by itself: the effect's durable batch right after covers it.
            match s.append(j, vec![("RESERVED", f)], now_ms, false, false) {
                Ok(()) => {
                    self.remember(&s);
                    return Ok(Some(others));
                }
                Err(JournalError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(GateError::Contention(format!(
            "cap {} kept changing under this reservation",
            cap.name
        )))
    }

    /// A share whose effect is recorded with another payload can never be sent (that key
    /// now refuses it as a conflicting payload): it no longer counts. Only effects holding
    /// shares under two payloads are looked up, which is rare.
    fn drop_stale_shares(
        &mut self,
        j: &mut dyn Journal,
        shares: &mut BTreeMap<(String, String), u64>,
    ) -> Result<(), GateError> {
        let mut ids: Vec<&String> = shares.keys().map(|(id, _)| id).collect();
        ids.sort();
        let contested: Vec<String> = ids
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0].clone())
            .collect();
        for id in contested {
            let stream = self.load(j, &effect_stream(&id))?;
            if let Some(recorded) = stream
                .entries
                .first()
                .and_then(|e| e.get("payload_hash"))
                .and_then(Value::as_str)
            {
                shares.retain(|(sid, p), _| *sid != id || p == recorded);
            }
        }
        Ok(())
    }

    fn release_cap(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &Ctx,
    ) -> Result<(), GateError> {
        let Some(cap) = &ctx.proposal.cap else {
            return Ok(());
        };
        let name = cap_stream(&cap.name);
        let payload = ctx.proposal.payload_hash();
        for _ in 0..CAS_RETRIES {
            let mut s = self.load(j, &name)?;
            if !authority::cap_shares(&s).contains_key(&(ctx.id.clone(), payload.clone())) {
                return Ok(());
            }
            let f = fields!("effect_id" => ctx.id.clone(), "payload_hash" => payload.clone());
            match s.append(j, vec![("RELEASED", f)], now_ms, false, false) {
                Ok(()) => {
                    self.remember(&s);
                    return Ok(());
                }
                Err(JournalError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(GateError::Contention(format!(
            "cap {} kept changing under this release",
            cap.name
        )))
    }

    /// Append a terminal entry (with PROPOSED first if nothing was recorded yet).
    /// Append a terminal entry (with PROPOSED first if nothing was recorded yet). When
    /// another worker advanced the stream first, this worker's decision is dropped and the
    /// returned outcome is where the effect really stands; the caller reports that instead.
    fn close(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &mut Ctx,
        state: &str,
        f: Map<String, Value>,
        durable: bool,
    ) -> Result<Option<Outcome>, GateError> {
        if ctx.stream.entries.is_empty() {
            // PROPOSED goes first on its own, the stream still open: should the ending be
            // lost in a torn write, the effect is listed for recovery instead of hidden.
            let proposed = vec![("PROPOSED", ctx.proposed_fields())];
            match ctx.stream.append(j, proposed, now_ms, false, true) {
                Ok(()) => {}
                Err(JournalError::Conflict(_)) => {
                    return self.where_it_stands(j, now_ms, ctx).map(Some)
                }
                Err(e) => return Err(e.into()),
            }
        }
        let f_again = f.clone();
        match ctx
            .stream
            .append(j, vec![(state, f)], now_ms, durable, false)
        {
            Ok(()) => {
                self.remember(&ctx.stream);
                Ok(None)
            }
            Err(JournalError::Conflict(_)) => {
                ctx.stream = self.load(j, &ctx.stream.name)?;
                if state == "COMMITTED" {
                    return self.record_late_proof(j, now_ms, ctx, f_again).map(Some);
                }
                Ok(Some(if is_closed(&ctx.stream) {
                    let s = ctx.stream.clone();
                    self.replay(j, &ctx.id, &s)?
                } else {
                    open_outcome(ctx, Reason::ClaimLive, now_ms)
                }))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// This worker holds proof the target applied the effect (its reply), but another
    /// worker wrote first: the proof is never dropped. If the stream is still open (say a
    /// deduped resend is in flight) COMMITTED goes after it; if another worker closed it
    /// without that proof (AMBIGUOUS, or REFUSED while the send had in fact landed), the
    /// proof is appended as CONFIRMED.
    fn record_late_proof(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &mut Ctx,
        committed: Map<String, Value>,
    ) -> Result<Outcome, GateError> {
        for _ in 0..CAS_RETRIES {
            let last = Stream::state_of(ctx.stream.last().expect("a stream we lost a race on"));
            let entry = match last {
                "COMMITTED" | "CONFIRMED" => {
                    let s = ctx.stream.clone();
                    return self.replay(j, &ctx.id, &s);
                }
                "REFUSED" | "AMBIGUOUS" => {
                    let mut evidence = Map::new();
                    evidence.insert("via".into(), "late-reply".into());
                    evidence.insert(
                        "result".into(),
                        committed.get("result").cloned().unwrap_or(Value::Null),
                    );
                    (
                        "CONFIRMED",
                        fields!("evidence" => Value::Object(evidence), "executed" => "yes"),
                    )
                }
                _ => ("COMMITTED", committed.clone()),
            };
            match ctx.stream.append(j, vec![entry], now_ms, false, false) {
                Ok(()) => {
                    self.remember(&ctx.stream);
                    return Ok(recorded_outcome(&ctx.id, &ctx.stream, false));
                }
                Err(JournalError::Conflict(_)) => ctx.stream = self.load(j, &ctx.stream.name)?,
                Err(e) => return Err(e.into()),
            }
        }
        Err(GateError::Contention(format!(
            "effect {} kept changing while its proof of application was recorded",
            ctx.id
        )))
    }

    pub fn grant_lease(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        lease: &str,
        expires_at_ms: u64,
    ) -> Result<(), GateError> {
        proposal::check_name(lease, "/lease")?;
        self.append_authority(
            j,
            now_ms,
            &lease_stream(lease),
            "GRANTED",
            fields!("lease" => lease, "expires_at_ms" => expires_at_ms),
        )
    }

    pub fn revoke_lease(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        lease: &str,
    ) -> Result<(), GateError> {
        proposal::check_name(lease, "/lease")?;
        self.append_authority(
            j,
            now_ms,
            &lease_stream(lease),
            "REVOKED",
            fields!("lease" => lease),
        )
    }

    pub fn approve(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        approval: &str,
    ) -> Result<(), GateError> {
        let v = parse_input(approval, "")?;
        let m = object(&v, "")?;
        let id = proposal::name(m.get("approval"), "/approval")?;
        let approver = proposal::name(m.get("approver"), "/approver")?;
        let request = object(
            m.get("request")
                .ok_or_else(|| field_err("/request", "is required"))?,
            "/request",
        )?;
        let effect = request
            .get("effect")
            .ok_or_else(|| field_err("/request/effect", "is required"))?;
        object(effect, "/request/effect")?;
        let effect_id = effect_id_for(request.get("key").filter(|k| !k.is_null()), effect);
        let seen = match m.get("premises_seen") {
            None => Value::Object(Map::new()),
            Some(p) => Value::Object(object(p, "/premises_seen")?.clone()),
        };
        let mut f = fields!("approval" => id.clone(), "approver" => approver, "effect_id" => effect_id, "premises_seen" => seen);
        if let Some(x) = proposal::opt_u64(m, "expires_at_ms", "/expires_at_ms")? {
            f.insert("expires_at_ms".into(), x.into());
        }
        let name = approval_stream(&id);
        let mut s = self.load(j, &name)?;
        if let Some(first) = s.entries.first() {
            // Approving the same thing twice is harmless; approving something else under an
            // existing id would silently widen authority.
            let same = ["approver", "effect_id", "premises_seen", "expires_at_ms"]
                .iter()
                .all(|k| first.get(*k) == f.get(*k));
            return if same {
                Ok(())
            } else {
                Err(field_err(
                    "/approval",
                    "this approval id already approves another request",
                ))
            };
        }
        match s.append(j, vec![("APPROVED", f)], now_ms, true, false) {
            Ok(()) => Ok(()),
            Err(JournalError::Conflict(_)) => Err(GateError::Contention(format!(
                "approval {id} was recorded concurrently"
            ))),
            Err(e) => Err(e.into()),
        }
    }

    pub fn revoke_approval(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        approval: &str,
    ) -> Result<(), GateError> {
        proposal::check_name(approval, "/approval")?;
        let name = approval_stream(approval);
        if j.length(&name)? == 0 {
            return Err(field_err("/approval", "no such approval"));
        }
        self.append_authority(j, now_ms, &name, "REVOKED", fields!("approval" => approval))
    }

    fn append_authority(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        name: &str,
        state: &str,
        f: Map<String, Value>,
    ) -> Result<(), GateError> {
        for _ in 0..CAS_RETRIES {
            let mut s = self.load(j, name)?;
            match s.append(j, vec![(state, f.clone())], now_ms, true, false) {
                Ok(()) => return Ok(()),
                Err(JournalError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(GateError::Contention(format!("{name} kept changing")))
    }

    pub fn confirm(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        effect_id: &str,
        evidence: &str,
    ) -> Result<Outcome, GateError> {
        let ev = parse_json(evidence)?;
        if !is_effect_id(effect_id) {
            return Err(field_err(
                "/effect",
                "an effect id is 32 lowercase hex digits",
            ));
        }
        let mut s = self.load(j, &effect_stream(effect_id))?;
        let last = s
            .last()
            .ok_or_else(|| GateError::UnknownEffect(effect_id.into()))?;
        match Stream::state_of(last) {
            "CONFIRMED" => return self.replay(j, effect_id, &s),
            "COMMITTED" | "AMBIGUOUS" => {}
            other => {
                return Err(field_err(
                    "/effect",
                    format!(
                    "only a committed or ambiguous effect can be confirmed; this one is {other}"
                ),
                ))
            }
        }
        s.append(
            j,
            vec![("CONFIRMED", fields!("evidence" => ev, "executed" => "yes"))],
            now_ms,
            true,
            false,
        )?;
        Ok(recorded_outcome(effect_id, &s, false))
    }

    pub fn receipt(
        &mut self,
        j: &mut dyn Journal,
        effect_id: &str,
        key: Option<&[u8]>,
    ) -> Result<String, GateError> {
        if !is_effect_id(effect_id) {
            return Err(field_err(
                "/effect",
                "an effect id is 32 lowercase hex digits",
            ));
        }
        // A receipt pins what it shows: make it durable first, or a power loss could take
        // a lazily written COMMITTED away from under it.
        j.sync()?;
        let s = Stream::load(j, &effect_stream(effect_id))?;
        if s.entries.is_empty() {
            return Err(GateError::UnknownEffect(effect_id.into()));
        }
        let r = receipt::build(effect_id, &s);
        Ok(canonical(&match key {
            Some(k) => receipt::sign(r, k),
            None => r,
        }))
    }

    pub fn check_receipt(
        &mut self,
        j: &mut dyn Journal,
        receipt_text: &str,
        key: &[u8],
    ) -> Result<VerifyReport, GateError> {
        let r = parse_json(receipt_text)?;
        let stream = proposal::name(r.get("stream"), "/stream")?;
        let mut report = receipt::verify_all(j, core::slice::from_ref(&r))?;
        report.problems.retain(|p| p.stream == stream);
        if !receipt::signature_holds(&r, key) {
            report.problems.push(receipt::Problem {
                stream: stream.clone(),
                seq: 0,
                kind: receipt::ProblemKind::HashMismatch,
                detail: "the receipt's signature does not match its content".into(),
            });
        }
        // The receipt must also say what the journal says.
        let id = stream.strip_prefix("effect:").unwrap_or("");
        if let Ok(s) = Stream::load(j, &stream) {
            if !s.entries.is_empty() && report.problems.is_empty() {
                let mut body = r.clone();
                body.as_object_mut().map(|o| o.remove("signature"));
                // A receipt pins 1..=len entries; anything else cannot match this journal.
                let pinned = r
                    .pointer("/head/length")
                    .and_then(Value::as_u64)
                    .filter(|l| (1..=s.len()).contains(l))
                    .map(|l| Stream {
                        entries: s.entries[..l as usize].to_vec(),
                        head: s.entries[l as usize - 1]["hash"]
                            .as_str()
                            .unwrap_or("")
                            .into(),
                        ..s.clone()
                    });
                let matches =
                    pinned.is_some_and(|p| canonical(&receipt::build(id, &p)) == canonical(&body));
                if !matches {
                    report.problems.push(receipt::Problem {
                        stream,
                        seq: 0,
                        kind: receipt::ProblemKind::HashMismatch,
                        detail: "the receipt does not match the journal it pins".into(),
                    });
                }
            }
        }
        Ok(report)
    }

    pub fn verify(
        &mut self,
        j: &mut dyn Journal,
        anchors: &[String],
    ) -> Result<VerifyReport, GateError> {
        let parsed = anchors
            .iter()
            .map(|a| parse_json(a))
            .collect::<Result<Vec<_>, _>>()?;
        receipt::verify_all(j, &parsed)
    }
}

fn is_closed(s: &Stream) -> bool {
    s.last()
        .and_then(|e| State::parse(Stream::state_of(e)))
        .is_some_and(State::is_terminal)
}

fn outcome_of(ctx: &Ctx, state: State, reason: Option<Reason>, executed: Executed) -> Outcome {
    Outcome {
        effect_id: ctx.id.clone(),
        state,
        reason,
        executed,
        result: None,
        changed: Vec::new(),
        return_to: None,
        replayed: false,
        retry_after_ms: None,
    }
}

impl Ctx {
    fn new(id: String, proposal: Proposal, stream: Stream) -> Ctx {
        Ctx {
            id,
            proposal,
            stream,
            lookup: Lookup::NotAsked,
            found: None,
            recheck: Recheck::NotDone,
            refusal: None,
            checks: Map::new(),
            capture_names: Vec::new(),
        }
    }

    fn proposed_fields(&self) -> Map<String, Value> {
        fields!("effect_id" => self.id.clone(), "payload_hash" => self.proposal.payload_hash(), "proposal" => self.proposal.to_json())
    }

    fn inputs(&self, now_ms: u64) -> Inputs {
        let last_claim = dispatches(&self.stream)
            .last()
            .and_then(|d| d.get("claim_until_ms"))
            .and_then(Value::as_u64);
        let first_send = dispatches(&self.stream)
            .next()
            .and_then(|d| d.get("at_ms"))
            .and_then(Value::as_u64);
        let t = &self.proposal.target;
        let dedupe = match (t.dedupes, first_send) {
            (false, _) => Dedupe::No,
            (true, None) => Dedupe::InsideWindow,
            // The resend must land inside the window even if it takes its whole timeout.
            (true, Some(first)) => {
                if now_ms.saturating_add(t.timeout_ms) < first.saturating_add(t.dedupe_window_ms) {
                    Dedupe::InsideWindow
                } else {
                    Dedupe::WindowPassed
                }
            }
        };
        Inputs {
            claim: if last_claim.is_some_and(|c| now_ms < c) {
                Claim::Live
            } else {
                Claim::Over
            },
            dispatched: last_claim.is_some(),
            lookup: if t.lookup {
                self.lookup
            } else {
                Lookup::Unavailable
            },
            recheck: self.recheck,
            dedupe,
        }
    }

    fn executed_if_stopped_now(&self) -> Executed {
        if dispatches(&self.stream).next().is_none() || self.lookup == Lookup::NotFound {
            Executed::No
        } else {
            Executed::Unknown
        }
    }
}
