//! What an operation reports: the outcome it decided, an effect it leaves open, or the
//! outcome the journal already records.
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::Value;

use super::op::{dispatches, Ctx};
use super::Gate;
use crate::canon::canonical;
use crate::entry::Stream;
use crate::journal::Journal;
use crate::types::{Ask, Executed, GateError, Outcome, PremiseChange, Reason, State, Step};

pub(super) fn done(op: u64, o: Outcome) -> Step {
    Step {
        op,
        ask: Ask::Done(o),
    }
}

pub(super) fn outcome_of(
    ctx: &Ctx,
    state: State,
    reason: Option<Reason>,
    executed: Executed,
) -> Outcome {
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

/// The outcome recorded by a stream's last entry (for a replay, or a recovery of a closed effect).
pub(super) fn recorded_outcome(id: &str, s: &Stream, replayed: bool) -> Outcome {
    let last = s.last().expect("a recorded effect has entries");
    let state = Stream::state_of(last).unwrap_or(State::Proposed);
    let committed = s
        .entries
        .iter()
        .rev()
        .find(|e| Stream::state_of(e) == Some(State::Committed));
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

pub(super) fn open_outcome(ctx: &Ctx, reason: Reason, now_ms: u64) -> Outcome {
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
    /// An earlier decision, read from the journal, reported again. Another worker may have
    /// written it without its fsync having returned (and then died): make the journal
    /// durable before anyone acts on what it says.
    pub(super) fn replay(
        &mut self,
        j: &mut dyn Journal,
        id: &str,
        s: &Stream,
    ) -> Result<Outcome, GateError> {
        j.sync()?;
        Ok(recorded_outcome(id, s, true))
    }
}
