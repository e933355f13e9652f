//! The writes of an effect's own stream: the durable batch before a send, and the close.
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::{Map, Value};

use super::op::{dispatches, is_closed, Ctx, Op, Refusal, Waiting};
use super::outcome::open_outcome;
use super::Gate;
use crate::canon::canonical;
use crate::fields;
use crate::journal::{Journal, JournalError};
use crate::recovery::Recheck;
use crate::types::{Ask, CrashPoint, GateError, Outcome, Reason, State, Step};

impl Gate {
    /// Reserve the cap (if any), then write everything that precedes the send in one
    /// durable batch, then ask the host to apply.
    pub(super) fn send(
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
            batch.push((State::Proposed, ctx.proposed_fields()));
        }
        batch.push((
            State::Authorized,
            fields!("checks" => Value::Object(ctx.checks.clone())),
        ));
        // The claim covers the send's whole timeout on this clock, plus the skew another
        // worker's clock may have: it is live on every clock until this one gave up.
        let target = &ctx.proposal.target;
        let claim_until = now_ms
            .saturating_add(target.timeout_ms)
            .saturating_add(target.clock_skew_ms);
        batch.push((State::Dispatched, fields!("attempt" => attempt, "claim_until_ms" => claim_until, "idempotency_key" => ctx.id.clone())));
        match ctx.stream.append(j, batch, now_ms, true, true) {
            Ok(()) => self.remember(&ctx.stream),
            // A share this worker reserved stays: the same payload's winner holds the same
            // share, and another payload's is found stale once that payload is recorded.
            Err(JournalError::Conflict(_)) => return self.lost_race(j, now_ms, op, &ctx),
            Err(e) => return Err(e.into()),
        }
        // Never send blind: in this very operation authority and premises were read again
        // and held, and so did the host's own check when the proposal asks for one.
        assert_eq!(
            ctx.recheck,
            Recheck::Holds,
            "{}: send without re-check",
            ctx.id
        );
        assert!(
            ctx.checks.contains_key("premises_held"),
            "{}: send without a premise read",
            ctx.id
        );
        assert!(
            !ctx.proposal.host_check || ctx.checks.contains_key("host_check"),
            "{}: send without the host check",
            ctx.id
        );
        if self.crash == Some(CrashPoint::BeforeSend) && !ctx.recovering {
            // A test's crash: the intent is durable, the send never leaves.
            return Ok(Step {
                op,
                ask: Ask::Crash(CrashPoint::BeforeSend),
            });
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

    /// Append a terminal entry (with PROPOSED first if nothing was recorded yet). When
    /// another worker advanced the stream first, this worker's decision is dropped and the
    /// returned outcome is where the effect really stands; the caller reports that instead.
    pub(super) fn close(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &mut Ctx,
        state: State,
        f: Map<String, Value>,
        durable: bool,
    ) -> Result<Option<Outcome>, GateError> {
        assert!(state.is_terminal(), "{}: close to {state:?}", ctx.id);
        assert!(
            !is_closed(&ctx.stream),
            "{}: an operation closes its effect once",
            ctx.id
        );
        if ctx.stream.entries.is_empty() {
            // PROPOSED goes first on its own, the stream still open: should the ending be
            // lost in a torn write, the effect is listed for recovery instead of hidden.
            let proposed = vec![(State::Proposed, ctx.proposed_fields())];
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
            Err(JournalError::Conflict(_)) if state == State::Committed => {
                self.record_late_proof(j, now_ms, ctx, f_again).map(Some)
            }
            Err(JournalError::Conflict(_)) => {
                ctx.stream = self.load(j, &ctx.stream.name)?;
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
}
