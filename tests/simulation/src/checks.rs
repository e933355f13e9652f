//! The invariants: at each send, at each outcome, and after every step.
use std::collections::BTreeMap;

use interlock_core::{Executed, Journal, Outcome, Reason, State};
use serde_json::{json, Map, Value};

use crate::world::{state_of, Anchor, OpState, World};
use crate::{fail, View, Violation, KNOWN_CORE_BUGS, T0};

impl World {
    /// A known core bug is recorded and the run goes on (unless strict); anything else stops it.
    pub(crate) fn soft(&mut self, r: Result<(), Violation>) -> Result<(), Violation> {
        match r {
            Err(v) if !self.strict && KNOWN_CORE_BUGS.contains(&v.invariant) => {
                self.log(format!("KNOWN CORE BUG {}: {}", v.invariant, v.detail));
                if !self.known.iter().any(|k| k.invariant == v.invariant) {
                    self.known.push(Violation {
                        invariant: v.invariant,
                        detail: format!("step {}: {}", self.steps, v.detail),
                    });
                }
                Ok(())
            }
            r => r,
        }
    }

    /// At every send, right after its durable DISPATCHED: the intent is durable, the
    /// authority is live now, the premises hold now, no other send of this effect can be in
    /// flight, and a resend is one the tier allows.
    pub(crate) fn check_send(
        &mut self,
        w: usize,
        o: &OpState,
        attempt: u32,
    ) -> Result<(), Violation> {
        let id = o.effect.clone();
        let stream = self.raw_stream(&format!("effect:{id}"));
        let Some(last) = stream.last() else {
            return fail("send_without_intent", "no entries");
        };
        if state_of(last) != "DISPATCHED"
            || last["attempt"].as_u64() != Some(attempt as u64)
            || last["at_ms"].as_u64() != Some(self.clock_of(w))
            || last["claim_until_ms"].as_u64()
                != Some(self.clock_of(w) + self.timeout_ms + self.clocks.margin_ms)
        {
            return fail("send_without_intent", format!("last entry {last}"));
        }
        if self.j.synced < self.j.len() {
            return fail(
                "send_before_intent_durable",
                format!("{} of {} lines synced", self.j.synced, self.j.len()),
            );
        }
        let p = stream[0]["proposal"].clone();
        // One send in flight at most: every earlier send's claim is over.
        let prior = self.sends.get(&id).cloned().unwrap_or_default();
        if let Some(s) = prior.iter().find(|s| s.deadline > self.now) {
            return fail(
                "send_under_live_claim",
                format!("an earlier send's claim runs until {}", s.deadline - T0),
            );
        }
        if let Some(first) = prior.first() {
            let t = &p["target"];
            let (dedupes, lookup) = (t["dedupes"] == json!(true), t["lookup"] == json!(true));
            let window = t["dedupe_window_ms"].as_u64().unwrap_or(0);
            let inside = self.now + self.timeout_ms < first.at + window;
            let ok = match (dedupes, lookup) {
                (false, false) => false,
                (false, true) => o.lookup_not_found,
                (true, false) => inside,
                (true, true) => inside || o.lookup_not_found,
            };
            if !ok {
                let inv = match (dedupes, lookup) {
                    (false, false) => "tier3_resend_after_unknown",
                    (false, true) => "resend_without_lookup_not_found",
                    _ => "resend_past_dedupe_window",
                };
                return fail(
                    inv,
                    format!(
                        "attempt {attempt}, first send at +{} ms, now +{} ms, lookup not found: {}",
                        first.at - T0,
                        self.now - T0,
                        o.lookup_not_found
                    ),
                );
            }
        }
        self.check_send_checks(o, &p)
    }

    /// The checks made right before the send: authority live at the DISPATCHED, premises
    /// as the world has them then, the host check. Checked last in [`World::check_send`]
    /// because two known core bugs show here.
    fn check_send_checks(&mut self, o: &OpState, p: &Value) -> Result<(), Violation> {
        let id = o.effect.clone();
        // Authority, from the journal as it stands at the DISPATCHED.
        if let Err((inv, detail)) = self.authority_live(&id) {
            // Known core bug A: authority is checked when the premises are asked for, and
            // not again at the DISPATCHED; a host round trip lies between the two.
            let inv = if o.live_at_recheck == Some(true) {
                "authority_died_between_check_and_send"
            } else {
                inv
            };
            return fail(inv, detail);
        }
        let mut seen = Map::new();
        if let Some(a) = p["authority"]["approval"].as_str() {
            let s = self.raw_stream(&format!("approval:{a}"));
            seen = s[0]["premises_seen"]
                .as_object()
                .cloned()
                .unwrap_or_default();
        }
        // Premises, as the world has them at the DISPATCHED.
        let order = p["effect"]["order"].as_str().unwrap_or("").to_string();
        let fresh = self.premises(&order, Some(&id));
        let declared = p["premises"].as_object().cloned().unwrap_or_default();
        for (k, was) in &declared {
            let now = fresh.get(k).cloned().unwrap_or(Value::Null);
            let holds = match p["bounds"][k].as_object() {
                Some(b) => match (b.get("at_most"), b.get("at_least"), now.as_i64()) {
                    (Some(x), _, Some(n)) => x.as_i64().is_some_and(|x| n <= x),
                    (_, Some(x), Some(n)) => x.as_i64().is_some_and(|x| n >= x),
                    _ => false,
                },
                None => *was == now,
            };
            if !holds {
                // Known core bug B: the host check is asked after the premises were read.
                return fail(
                    if o.asked_authorize_after_capture {
                        "premises_changed_during_host_check"
                    } else {
                        "send_with_changed_premise"
                    },
                    format!(
                        "{k} was {was}, is {now} at the send (bounds {})",
                        p["bounds"]
                    ),
                );
            }
        }
        for (k, was) in &seen {
            if fresh.get(k) != Some(was) {
                return fail(
                    if o.asked_authorize_after_capture {
                        "premises_changed_during_host_check"
                    } else {
                        "send_with_stale_approval"
                    },
                    format!("approver saw {k} = {was}, is {:?}", fresh.get(k)),
                );
            }
        }
        if (!declared.is_empty() || !seen.is_empty()) && !o.captured {
            return fail("send_without_fresh_read", "no capture in this operation");
        }
        if p["authority"]["host_check"] == json!(true) && o.allowed != Some(true) {
            return fail("send_without_host_check", format!("{:?}", o.allowed));
        }
        Ok(())
    }

    /// Effects that released their reservation of cap `name` while the journal says their
    /// send may have landed (REFUSED or AMBIGUOUS with `executed: unknown`).
    fn released_while_unknown(&mut self, name: &str) -> Vec<String> {
        let cap = self.raw_stream(&format!("cap:{name}"));
        let mut out = Vec::new();
        for e in cap.iter().filter(|e| state_of(e) == "RELEASED") {
            let id = e["effect_id"].as_str().unwrap_or("").to_string();
            let s = self.raw_stream(&format!("effect:{id}"));
            // Known bug D only: the releasing effect itself ended saying its send may have
            // landed. A release by an effect whose stream ends otherwise is another bug.
            let unknown = s.last().is_some_and(|x| {
                state_of(x) == "REFUSED" && x["executed"].as_str() == Some("unknown")
            });
            if unknown {
                out.push(id[..8].to_string());
            }
        }
        out
    }

    /// Effects refunded under cap `name` whose reservation holds another amount than the
    /// decision recorded (a reservation left by a payload that was never recorded).
    fn reserved_for_another_amount(&mut self, name: &str) -> Vec<String> {
        let cap = self.raw_stream(&format!("cap:{name}"));
        let mut held: BTreeMap<String, u64> = BTreeMap::new();
        for e in &cap {
            let id = e["effect_id"].as_str().unwrap_or("").to_string();
            match state_of(e) {
                "RESERVED" => {
                    held.insert(id, e["amount_cents"].as_u64().unwrap_or(0));
                }
                "RELEASED" => {
                    held.remove(&id);
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        for (id, amount) in held {
            if self.refunds_with(&id) == 0 {
                continue;
            }
            let recorded = self
                .recorded_proposal(&id)
                .and_then(|p| p["cap"]["amount_cents"].as_u64());
            if recorded.is_some_and(|r| r != amount) {
                out.push(format!(
                    "{} reserved {amount}, sent {:?}",
                    &id[..8],
                    recorded
                ));
            }
        }
        out
    }

    /// Whether the effect's lease or approval is live now, by the journal.
    pub(crate) fn authority_live(&mut self, id: &str) -> Result<(), (&'static str, String)> {
        let Some(p) = self.recorded_proposal(id) else {
            return Ok(());
        };
        if let Some(l) = p["authority"]["lease"].as_str() {
            let ls = self.raw_stream(&format!("lease:{l}"));
            let live = ls.last().is_some_and(|e| {
                state_of(e) == "GRANTED" && e["expires_at_ms"].as_u64().unwrap_or(0) > self.now
            });
            if !live {
                return Err((
                    "send_under_dead_lease",
                    format!(
                        "lease {l} at the send: {}",
                        ls.last().map(|e| e.to_string()).unwrap_or_default()
                    ),
                ));
            }
        }
        if let Some(a) = p["authority"]["approval"].as_str() {
            let s = self.raw_stream(&format!("approval:{a}"));
            let first = s.first().map_or(&Value::Null, |e| &**e);
            let revoked = s.iter().any(|e| state_of(e) == "REVOKED");
            let expired = first["expires_at_ms"]
                .as_u64()
                .is_some_and(|t| t <= self.now);
            if first["effect_id"].as_str() != Some(id) || revoked || expired {
                return Err((
                    "send_under_dead_approval",
                    format!("approval {a}: revoked {revoked}, expired {expired}"),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn check_outcome(
        &mut self,
        w: usize,
        id: &str,
        out: &Outcome,
        before: usize,
    ) -> Result<(), Violation> {
        self.ev(match out.state {
            State::Committed => "outcome_committed",
            State::Refused => "outcome_refused",
            State::Ambiguous => "outcome_ambiguous",
            _ => "outcome_open",
        });
        if out.reason == Some(Reason::ConflictingPayload) {
            if self.j.len() != before {
                return fail(
                    "conflicting_payload_recorded",
                    "a refused conflicting payload wrote to the journal",
                );
            }
            return Ok(());
        }
        let stream = self.raw_stream(&format!("effect:{id}"));
        if out.state.is_terminal() && !out.replayed {
            let last = stream.last().map(|e| state_of(e)).unwrap_or("");
            if last != out.state.as_str() {
                return fail(
                    "outcome_disagrees_with_journal",
                    format!(
                        "worker {w} was told {} for {}, the journal ends {last}",
                        out.state.as_str(),
                        &id[..8]
                    ),
                );
            }
        }
        if matches!(out.state, State::Committed) && self.refunds_with(id) == 0 {
            return fail("committed_without_refund", id.to_string());
        }
        if out.state == State::Refused && out.executed == Executed::No {
            let unsynced = (stream.len() as u64) > self.j.durable_len(&format!("effect:{id}"));
            if unsynced {
                self.ev("outcome_read_from_unsynced_entry");
            }
            let e = self.declared_unsent.entry(id.to_string()).or_insert(true);
            *e = *e && unsynced;
        }
        Ok(())
    }

    /// After every step: money, caps, declared outcomes, and the journal's chains.
    pub(crate) fn check_step(&mut self) -> Result<(), Violation> {
        let mut per_ref: BTreeMap<String, Vec<(String, u64, u64)>> = BTreeMap::new();
        for o in self.orders.clone() {
            for r in self.pay.refunds(&o) {
                if let Some(x) = r.reference {
                    per_ref
                        .entry(x)
                        .or_default()
                        .push((r.id, r.amount_cents, r.created_ms));
                }
            }
        }
        let mut caps: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (id, refunds) in &per_ref {
            if refunds.len() > 1 {
                return fail(
                    "two_refunds_of_one_effect",
                    format!("{}: {:?}", &id[..8], refunds),
                );
            }
            let Some(p) = self.recorded_proposal(id) else {
                return fail("refund_without_intent", id.clone());
            };
            let amount = p["effect"]["amount_cents"].as_u64().unwrap_or(0);
            if refunds[0].1 != amount {
                return fail(
                    "refund_of_another_amount",
                    format!("recorded {amount}, refunded {}", refunds[0].1),
                );
            }
            if let Some(name) = p["cap"]["name"]
                .as_str()
                .filter(|n| !self.caps_over.iter().any(|c| c == n))
            {
                let c = caps.entry(name.to_string()).or_default();
                c.0 += amount;
                c.1 = p["cap"]["limit_cents"].as_u64().unwrap_or(0);
            }
            if let Some(&unsynced) = self.declared_unsent.get(id) {
                let r = fail(
                    if unsynced {
                        "outcome_reported_from_unsynced_entry"
                    } else {
                        "refused_unsent_but_refunded"
                    },
                    format!(
                        "{} was told REFUSED executed no{}, the service has it",
                        &id[..8],
                        if unsynced {
                            " (read from an entry no fsync covered, lost in a power cut)"
                        } else {
                            ""
                        }
                    ),
                );
                self.soft(r)?;
                self.declared_unsent.remove(id);
            }
        }
        for (name, (sum, limit)) in caps {
            if sum > limit {
                let released_unknown = self.released_while_unknown(&name);
                let other_payload = self.reserved_for_another_amount(&name);
                let r = fail(
                    if !released_unknown.is_empty() {
                        "cap_released_while_executed_unknown"
                    } else if !other_payload.is_empty() {
                        "cap_reservation_of_another_payload"
                    } else {
                        "cap_exceeded"
                    },
                    format!(
                        "{name}: {sum} > {limit}; released by effects whose send may have landed: {:?}; sent under a reservation of another amount: {:?}",
                        released_unknown, other_payload
                    ),
                );
                self.soft(r)?;
                // Known and recorded: stop counting this cap against the seed.
                self.caps_over.push(name);
            }
        }
        self.verify_journal(false)
    }

    /// `gate.verify` over the streams changed since the last clean verify (each stream is
    /// verified on its own, so this is the same check, done incrementally), or all of them.
    pub(crate) fn verify_journal(&mut self, all: bool) -> Result<(), Violation> {
        let dirty = self.j.take_dirty();
        if dirty.is_empty() && !all {
            return Ok(());
        }
        let mut names: Vec<String> = if all {
            self.j.raw().streams().expect("memory reads")
        } else {
            dirty.into_iter().collect()
        };
        // The receipts that pin a stream to be verified; verify reads every stream each of
        // them pins (a receipt anchors the authority streams its decision relied on, and the
        // effect's own when it was picked for one of those).
        let pinning: Vec<&Anchor> = self.anchors.iter().filter(|a| a.pins_any(&names)).collect();
        for stream in pinning.iter().flat_map(|a| &a.streams) {
            if !names.contains(stream) {
                names.push(stream.clone());
            }
        }
        let anchors: Vec<String> = pinning.iter().map(|a| a.receipt.clone()).collect();
        let mut view = View {
            inner: self.j.raw(),
            names,
        };
        let rep = self
            .admin
            .verify(&mut view, &anchors)
            .map_err(|e| Violation {
                invariant: "unexpected_gate_error",
                detail: format!("verify: {e:?}"),
            })?;
        if rep.problems.is_empty() {
            return Ok(());
        }
        // A receipt that pinned entries no fsync covered, broken by a power loss.
        let unsynced_pin = rep.problems.iter().all(|p| {
            p.kind == interlock_core::ProblemKind::Truncated
                && self
                    .anchors
                    .iter()
                    .any(|a| a.pins_unsynced_of(core::slice::from_ref(&p.stream)))
        });
        if unsynced_pin {
            // Drop the receipts that pinned lost entries, so later verifies check the rest.
            let streams: Vec<String> = rep.problems.iter().map(|p| p.stream.clone()).collect();
            self.anchors.retain(|a| !a.pins_unsynced_of(&streams));
            return self.soft(fail(
                "receipt_pins_unsynced_entry",
                format!("{:?}", rep.problems),
            ));
        }
        fail("journal_verify", format!("{:?}", rep.problems))
    }
}
