//! The operation loop: the recovery table picks the next action from what the operation
//! knows so far, for a fresh submit and a recovery alike.
use serde_json::{Map, Value};

use super::op::{Ctx, Op, Refusal, Waiting};
use super::outcome::{done, open_outcome, outcome_of};
use super::Gate;
use crate::canon::canonical;
use crate::fields;
use crate::journal::Journal;
use crate::recovery::{decide, Action, Claim};
use crate::types::{Ask, Executed, GateError, Outcome, PremiseChange, Reason, State, Step};

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

impl Gate {
    /// Consult the recovery table until it asks for I/O or reaches an end.
    pub(super) fn advance(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        op: u64,
        mut ctx: Ctx,
    ) -> Result<Step, GateError> {
        let inputs = ctx.inputs(now_ms);
        match decide(inputs) {
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
                        waiting: Waiting::Query {
                            under_claim: inputs.claim == Claim::Live,
                        },
                    },
                );
                Ok(Step { op, ask })
            }
            Action::CommitFound => {
                assert!(ctx.found.is_some(), "only a lookup that found it commits");
                let result: Value = serde_json::from_str(ctx.found.as_deref().unwrap_or("null"))
                    .unwrap_or(Value::Null);
                if let Some(theirs) = self.close(
                    j,
                    now_ms,
                    &mut ctx,
                    State::Committed,
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
                if let Some(theirs) = self.close(j, now_ms, &mut ctx, State::Refused, f, true)? {
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
                if let Some(theirs) = self.close(j, now_ms, &mut ctx, State::Ambiguous, f, true)? {
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
}
