//! What one operation knows about its effect, kept between its steps.
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::{Map, Value};

use crate::entry::Stream;
use crate::fields;
use crate::proposal::Proposal;
use crate::recovery::{Claim, Dedupe, Inputs, Lookup, Recheck};
use crate::types::{Executed, PremiseChange, Reason, State};

/// Everything one operation knows about its effect.
#[derive(Clone, Debug)]
pub(super) struct Ctx {
    pub(super) id: String,
    pub(super) proposal: Proposal,
    pub(super) stream: Stream,
    pub(super) lookup: Lookup,
    pub(super) found: Option<String>,
    pub(super) recheck: Recheck,
    pub(super) refusal: Option<Refusal>,
    /// What held at the re-check, recorded in AUTHORIZED.
    pub(super) checks: Map<String, Value>,
    /// The premises to read at the re-check: the proposal's, and an approval's.
    pub(super) capture_names: Vec<String>,
    /// The operation is a recovery (`recover`), not a submit.
    pub(super) recovering: bool,
}

#[derive(Clone, Debug)]
pub(super) struct Refusal {
    pub(super) reason: Reason,
    pub(super) changed: Vec<PremiseChange>,
    pub(super) return_to: Option<String>,
}

impl Refusal {
    pub(super) fn of(reason: Reason) -> Refusal {
        Refusal {
            reason,
            changed: Vec::new(),
            return_to: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Waiting {
    Capture,
    Authorize,
    Apply {
        attempt: u32,
    },
    /// `under_claim`: asked while a claim was live, so a "not found" proves nothing.
    Query {
        under_claim: bool,
    },
}

#[derive(Clone, Debug)]
pub(super) struct Op {
    pub(super) ctx: Ctx,
    pub(super) waiting: Waiting,
}

pub(super) fn dispatches(s: &Stream) -> impl Iterator<Item = &Map<String, Value>> {
    s.entries
        .iter()
        .filter(|e| Stream::state_of(e) == Some(State::Dispatched))
        .map(|e| &**e)
}

pub(super) fn is_closed(s: &Stream) -> bool {
    s.last()
        .and_then(Stream::state_of)
        .is_some_and(State::is_terminal)
}

impl Ctx {
    pub(super) fn new(id: String, proposal: Proposal, stream: Stream) -> Ctx {
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
            recovering: false,
        }
    }

    pub(super) fn proposed_fields(&self) -> Map<String, Value> {
        fields!("effect_id" => self.id.clone(), "payload_hash" => self.proposal.payload_hash(), "proposal" => self.proposal.to_json())
    }

    /// The latest time it may be now on the clock of whoever set a deadline this effect is
    /// held to (the lease's granter, the first sender): this clock plus the skew the
    /// proposal allows. Expiries and the dedupe window are judged by it, so that with clocks
    /// apart by up to `clock_skew_ms` nothing acts after a deadline on any of them.
    pub(super) fn latest(&self, now_ms: u64) -> u64 {
        now_ms.saturating_add(self.proposal.target.clock_skew_ms)
    }

    pub(super) fn inputs(&self, now_ms: u64) -> Inputs {
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
                if self.latest(now_ms).saturating_add(t.timeout_ms)
                    < first.saturating_add(t.dedupe_window_ms)
                {
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

    pub(super) fn executed_if_stopped_now(&self) -> Executed {
        if dispatches(&self.stream).next().is_none() || self.lookup == Lookup::NotFound {
            Executed::No
        } else {
            Executed::Unknown
        }
    }
}
