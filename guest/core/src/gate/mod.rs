//! The gate: submit, the steps of one operation, recovery, and the authority records.
//!
//! One operation walks one effect forward. A fresh submit and a recovery walk the same
//! path: the recovery table ([`crate::recovery::decide`]) picks each next action from what
//! the operation knows so far, so there is exactly one place where "may I send?" is
//! answered. Everything that must precede a send goes to the journal in one durable batch.
//!
//! This file holds the entry points and takes the host's replies. An operation then meets,
//! in order: `advance` (the table), `recheck` (authority, the host check, the premises),
//! `caps` (a share of the cap), `send` (the durable batch, and the close), and `race` when
//! another worker wrote first. `grants` records leases and approvals, `receipts` confirms
//! effects and builds and checks receipts, `streams` reads and appends the journal.
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::Value;

use crate::authority::effect_stream;
use crate::canon::canonical;
use crate::entry::Stream;
use crate::fields;
use crate::journal::Journal;
use crate::proposal::{check_effect_id, parse_input, parse_json, Proposal};
use crate::recovery::{Lookup, Recheck};
use crate::schema::Obj;
use crate::types::*;

mod advance;
mod caps;
mod grants;
mod op;
mod outcome;
pub(crate) mod people;
pub(crate) mod proofs;
mod race;
mod receipts;
mod recheck;
mod send;
mod streams;

pub use receipts::pinned_streams;

use op::{is_closed, Ctx, Op, Refusal, Waiting};
use outcome::{done, open_outcome, outcome_of};

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
    /// Strict authority: a proposal must name its lease or approval. Otherwise one that
    /// names none runs under its agent's standing lease, granted (recorded) at first use.
    strict: bool,
    /// Recoveries that wait out a live claim (`recover_waiting`), by the operation that
    /// carries them now: a gate step in progress, or a sleep.
    settling: BTreeMap<u64, Settling>,
    /// For tests: where this gate's host is to die (`crash_at`).
    crash: Option<CrashPoint>,
    /// The transparency log as this instance last read it: its leaves, checkpoints and
    /// tree, extended by what was appended since (`proofs`).
    log: Option<proofs::KeptLog>,
}

/// A recovery that waits out another worker's live claim.
#[derive(Clone, Debug)]
struct Settling {
    effect: String,
    polls: u64,
    wait: ClaimWait,
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

    /// Strict authority (`true`): a proposal that names no lease or approval is refused
    /// (`invalid-field` at `/authority`), as deployments that want named authority only
    /// ask. Off by default: such a proposal runs under its agent's standing lease.
    pub fn set_strict_authority(&mut self, strict: bool) {
        self.strict = strict;
    }

    pub fn strict_authority(&self) -> bool {
        self.strict
    }

    /// For tests, the one crash injection of every host: at `point` the gate asks the host
    /// to die ([`Ask::Crash`]) instead of asking the send (`BeforeSend`, the intent durable)
    /// or instead of recording its reply (`AfterSend`, the reply lost; `InRecovery`, after
    /// a recovery's send or lookup). The host then stops as a killed process would.
    pub fn crash_at(&mut self, point: Option<CrashPoint>) {
        self.crash = point;
    }

    fn routes(&self, target: &str) -> bool {
        self.routes.as_ref().is_none_or(|r| r.contains(target))
    }

    pub fn effect_id_of(&self, proposal: &str) -> Result<String, GateError> {
        // Under strict authority a proposal naming none is refused here too, before a host
        // reads premises for it.
        match Proposal::parse_input(proposal)? {
            (_, true) if self.strict => Err(crate::proposal::authority_required()),
            (p, _) => Ok(p.effect_id()),
        }
    }

    /// How long the host waits on a send of `effect_id` before answering `unknown`: the
    /// recorded proposal's `target.timeout_ms`, the default filled in (the claim's length).
    pub fn send_timeout_ms(
        &mut self,
        j: &mut dyn Journal,
        effect_id: &str,
    ) -> Result<u64, GateError> {
        Ok(self.proposal_of(j, effect_id)?.target.timeout_ms)
    }

    /// The target named by the recorded proposal of `effect_id`.
    pub fn effect_target(
        &mut self,
        j: &mut dyn Journal,
        effect_id: &str,
    ) -> Result<String, GateError> {
        Ok(self.proposal_of(j, effect_id)?.target.name)
    }

    /// The recorded proposal of `effect_id`.
    fn proposal_of(&mut self, j: &mut dyn Journal, effect_id: &str) -> Result<Proposal, GateError> {
        check_effect_id(effect_id)?;
        let stream = self.load(j, &effect_stream(effect_id))?;
        if stream.entries.is_empty() {
            return Err(GateError::UnknownEffect(effect_id.into()));
        }
        recorded_proposal(&stream)
    }

    pub fn submit(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        proposal: &str,
    ) -> Result<Step, GateError> {
        let (p, standing) = Proposal::parse_input(proposal)?;
        if standing && self.strict {
            return Err(crate::proposal::authority_required());
        }
        let id = p.effect_id();
        let stream = self.load(j, &effect_stream(&id))?;
        let op = self.take_op_id();
        if !stream.entries.is_empty() {
            let recorded = recorded_proposal(&stream)?;
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
        // The approval rules, before anything of the effect is recorded: a person may need
        // to decide first.
        if let people::Gatekeeping::Answer(o) = self.gatekeep(j, now_ms, &p, &id)? {
            return Ok(done(op, o));
        }
        if standing {
            // Named no authority: the agent's standing lease, granted (durably) at its first
            // use and never again, so a revoked one stays revoked and the effect is refused.
            self.grant_standing_lease(j, now_ms, &p.agent)?;
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
        assert!(
            !is_closed(&ctx.stream),
            "a closed effect is replayed, never walked"
        );
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
        check_effect_id(effect_id)?;
        let stream = self.load(j, &effect_stream(effect_id))?;
        if stream.entries.is_empty() {
            return Err(GateError::UnknownEffect(effect_id.into()));
        }
        let op = self.take_op_id();
        if is_closed(&stream) {
            return Ok(done(op, self.replay(j, effect_id, &stream)?));
        }
        let p = recorded_proposal(&stream)?;
        let mut ctx = Ctx::new(effect_id.into(), p, stream);
        ctx.recovering = true;
        self.start(j, now_ms, op, ctx)
    }

    /// [`Gate::recover`], waiting out another worker's live claim: while the effect's claim
    /// is live the gate asks the host to sleep ([`Ask::Sleep`], the claim's remaining time
    /// plus 1 ms, since a claim is live until strictly after its deadline) and then
    /// recovers again, at most `wait.max_polls` times; then it reports the effect open
    /// (`claim_live`). A host only sleeps when told: the rule lives here.
    pub fn recover_waiting(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        effect_id: &str,
        wait: ClaimWait,
    ) -> Result<Step, GateError> {
        let step = self.recover(j, now_ms, effect_id)?;
        Ok(self.settle(
            step,
            Settling {
                effect: effect_id.into(),
                polls: 0,
                wait,
            },
        ))
    }

    /// The next step of a waiting recovery: a sleep instead of a `claim_live` outcome while
    /// polls remain; any other step is followed.
    fn settle(&mut self, step: Step, s: Settling) -> Step {
        match &step.ask {
            Ask::Done(o)
                if o.state == State::Dispatched
                    && o.reason == Some(Reason::ClaimLive)
                    && s.polls < s.wait.max_polls =>
            {
                let ms = o.retry_after_ms.map_or(s.wait.poll_ms, |ms| ms + 1);
                let op = self.take_op_id();
                self.settling.insert(
                    op,
                    Settling {
                        polls: s.polls + 1,
                        ..s
                    },
                );
                Step {
                    op,
                    ask: Ask::Sleep(ms),
                }
            }
            Ask::Done(_) => step,
            _ => {
                self.settling.insert(step.op, s);
                step
            }
        }
    }

    pub fn open_effects(&self, j: &mut dyn Journal) -> Result<Vec<String>, GateError> {
        Ok(j.open_streams()?
            .into_iter()
            .filter_map(|s| s.strip_prefix("effect:").map(String::from))
            .collect())
    }

    pub fn cancel(&mut self, op: u64) {
        self.ops.remove(&op);
        self.settling.remove(&op);
    }

    pub fn resume(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        op: u64,
        reply: Reply,
    ) -> Result<Step, GateError> {
        let Some(s) = self.settling.remove(&op) else {
            return self.resume_op(j, now_ms, op, reply);
        };
        if self.ops.contains_key(&op) {
            // A step of a waiting recovery: followed, and its end settled again.
            return match self.resume_op(j, now_ms, op, reply) {
                Ok(step) => Ok(self.settle(step, s)),
                Err(e) => {
                    if self.ops.contains_key(&op) {
                        self.settling.insert(op, s); // the step still waits for its reply
                    }
                    Err(e)
                }
            };
        }
        // A sleep: once slept, recover again.
        if reply != Reply::Slept {
            let got = reply.kind();
            self.settling.insert(op, s);
            return Err(GateError::UnexpectedReply(format!(
                "operation {op} waits for slept, got {got}"
            )));
        }
        let step = self.recover(j, now_ms, &s.effect)?;
        Ok(self.settle(step, s))
    }

    fn resume_op(
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
        // A test's crash: the reply of a send (or a recovery's lookup) never arrives.
        let dies = matches!(
            (self.crash, waiting, ctx.recovering),
            (Some(CrashPoint::AfterSend), Waiting::Apply { .. }, false)
                | (
                    Some(CrashPoint::InRecovery),
                    Waiting::Apply { .. } | Waiting::Query { .. },
                    true
                )
        );
        if dies {
            return Ok(Step {
                op,
                ask: Ask::Crash(self.crash.expect("matched")),
            });
        }
        let expected = match waiting {
            Waiting::Capture => "captured or failed",
            Waiting::Authorize => "allowed or failed",
            Waiting::Apply { .. } => "applied, rejected or unknown",
            Waiting::Query { .. } => "found, not-found or failed",
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
                let fresh = match parse_input(&text, "/captured").and_then(|v| {
                    Obj::any(&v, "/captured", "captured premises").map(|o| o.map().clone())
                }) {
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
                    State::Committed,
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
                    (State::Refused, Executed::No)
                } else {
                    (State::Ambiguous, Executed::Unknown)
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
                    outcome_of(&ctx, state, Some(Reason::TargetRejected), executed),
                ))
            }
            (Waiting::Apply { .. }, Reply::Unknown(_)) => {
                // The send may still land: the claim stands until its deadline, then recovery decides.
                Ok(done(
                    op,
                    open_outcome(&ctx, Reason::TargetUnavailable, now_ms),
                ))
            }
            (Waiting::Query { .. }, Reply::Found(text)) => {
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
            (Waiting::Query { under_claim }, Reply::NotFound) => {
                ctx.lookup = if under_claim {
                    Lookup::NotFoundUnderClaim
                } else {
                    Lookup::NotFound
                };
                self.advance(j, now_ms, op, ctx)
            }
            (Waiting::Query { .. }, Reply::Failed(_)) => {
                ctx.lookup = Lookup::Failed;
                self.advance(j, now_ms, op, ctx)
            }
            (waiting, reply) => unexpected(ctx, waiting, self, &reply),
        }
    }

    fn take_op_id(&mut self) -> u64 {
        self.next_op += 1;
        self.next_op
    }
}

/// The decision an effect's stream recorded in its first entry (PROPOSED); the caller has
/// checked that the stream has one. One that no longer parses is a corrupt journal.
fn recorded_proposal(stream: &Stream) -> Result<Proposal, GateError> {
    let recorded = stream.entries.first().and_then(|e| e.get("proposal"));
    Proposal::from_recorded(recorded.unwrap_or(&Value::Null))
        .map_err(|e| GateError::CorruptJournal(format!("{} entry 0: {e}", stream.name)))
}
