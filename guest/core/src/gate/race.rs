//! When another worker wrote to an effect first: report where it stands, never act on it,
//! and never drop a proof that the target applied it.
use alloc::format;
use alloc::string::String;
use alloc::vec;
use serde_json::{Map, Value};

use super::op::{is_closed, Ctx};
use super::outcome::{done, open_outcome, recorded_outcome};
use super::streams::Plan;
use super::Gate;
use crate::entry::Stream;
use crate::fields;
use crate::journal::Journal;
use crate::types::{GateError, Outcome, Reason, State, Step};

impl Gate {
    /// Another worker advanced this effect first: report where it stands, never act on it.
    pub(super) fn lost_race(
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
    pub(super) fn where_it_stands(
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

    /// This worker holds proof the target applied the effect (its reply), but another
    /// worker wrote first: the proof is never dropped. If the stream is still open (say a
    /// deduped resend is in flight) COMMITTED goes after it; if another worker closed it
    /// without that proof (AMBIGUOUS, or REFUSED while the send had in fact landed), the
    /// proof is appended as CONFIRMED.
    pub(super) fn record_late_proof(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        ctx: &Ctx,
        committed: Map<String, Value>,
    ) -> Result<Outcome, GateError> {
        let (replayed, s) = self.compare_and_append(
            j,
            &ctx.stream.name,
            now_ms,
            false,
            |gate, j, s| {
                let last = Stream::state_of(s.last().expect("a stream we lost a race on"));
                Ok(match last {
                    Some(State::Committed | State::Confirmed) => {
                        Plan::Done(Some(gate.replay(j, &ctx.id, s)?))
                    }
                    Some(State::Refused | State::Ambiguous) => {
                        let mut evidence = Map::new();
                        evidence.insert("via".into(), "late-reply".into());
                        evidence.insert(
                            "result".into(),
                            committed.get("result").cloned().unwrap_or(Value::Null),
                        );
                        let confirmed =
                            fields!("evidence" => Value::Object(evidence), "executed" => "yes");
                        Plan::Append(vec![(State::Confirmed, confirmed)], None)
                    }
                    _ => Plan::Append(vec![(State::Committed, committed.clone())], None),
                })
            },
            || {
                format!(
                    "effect {} kept changing while its proof of application was recorded",
                    ctx.id
                )
            },
        )?;
        self.remember(&s);
        Ok(replayed.unwrap_or_else(|| recorded_outcome(&ctx.id, &s, false)))
    }
}
