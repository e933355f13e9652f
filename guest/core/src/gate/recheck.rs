//! The re-check before any send: authority from the journal, then the host's own check if
//! the proposal asks for one, then fresh premises, judged against what was decided.
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::{Map, Value};

use super::op::{Ctx, Op, Refusal, Waiting};
use super::Gate;
use crate::authority::{self, approval_stream, lease_stream};
use crate::canon::canonical;
use crate::journal::Journal;
use crate::proposal::Authority;
use crate::recovery::Recheck;
use crate::types::{Ask, GateError, Reason, Reply, Step};

impl Gate {
    /// The lease or approval, read from the journal now (no host I/O): the names of any
    /// extra premises an approval carries, or why authority is gone. Records what held.
    pub(super) fn check_authority(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &mut Ctx,
    ) -> Result<Result<Vec<String>, Reason>, GateError> {
        Ok(match ctx.proposal.authority.clone() {
            Authority::Lease(name) => {
                match authority::check_lease(
                    &self.load(j, &lease_stream(&name))?,
                    ctx.latest(now_ms),
                ) {
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
            Authority::Approval(aid) => authority::check_approval(
                &self.load(j, &approval_stream(&aid))?,
                &ctx.id,
                &ctx.proposal.effect,
                ctx.latest(now_ms),
            )
            .map(|a| a.premises_seen.keys().cloned().collect()),
        })
    }

    /// Authority first (it needs no I/O), then the host's own check if asked, then fresh
    /// premises last, so nothing but the send itself follows the premise read.
    pub(super) fn start_recheck(
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

    pub(super) fn ask_capture(
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

    pub(super) fn fail_recheck(
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
    pub(super) fn judge_premises(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &mut Ctx,
        fresh: &Map<String, Value>,
    ) -> Result<(), GateError> {
        if let Authority::Approval(aid) = &ctx.proposal.authority {
            if let Ok(a) = authority::check_approval(
                &self.load(j, &approval_stream(aid))?,
                &ctx.id,
                &ctx.proposal.effect,
                ctx.latest(now_ms),
            ) {
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
}
