//! People in the loop, as journal entries: the approval rules (`rules:approval`), one item
//! per effect that a rule sent to a person (`request:<effect id>`: REQUESTED, DECIDED,
//! RETURNED, EXPIRED, CONTRADICTED), decisions checked against the decider's own lease, the
//! inbox as a view of the journal, and what a service's signed webhook confirms.
//!
//! An item is read, never kept: its status at a time (pending, escalated, approved,
//! rejected, expired, returned) follows from its entries, its recorded route and the clock,
//! so a restart or another process on the same journal sees the same inbox. A deadline
//! that passes is an expiry (recorded as EXPIRED when the gate next meets it), never a
//! person's "no".
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use serde_json::{json, Map, Value};

use super::streams::Plan;
use super::Gate;
use crate::authority::{check_lease, compare_premises, effect_stream, lease_stream};
use crate::canon::canonical;
use crate::entry::{Spelled, Stream};
use crate::fields;
use crate::journal::Journal;
use crate::proposal::{check_effect_id, field_err, parse_input, Authority, Proposal};
use crate::rules::{Need, Route, Rules};
use crate::schema::Obj;
use crate::types::{Executed, GateError, Outcome, PremiseChange, Reason, State};
use crate::webhooks::{self, Delivery, Scheme};

pub(crate) const RULES_STREAM: &str = "rules:approval";

/// What a receipt says of the people behind an effect: the rule, the route, every
/// decision (who, the verdict, why, evidence, when), pinned by the item stream's length and
/// head hash so an edit is caught; `None` when no person or rule was involved.
pub(crate) fn receipt_part(s: &Stream) -> Option<Value> {
    let id = s.name.strip_prefix("request:")?;
    let item = Item::read(id, s)?;
    let mut m = Map::new();
    m.insert("stream".into(), s.name.clone().into());
    if item.is_request() {
        m.insert("rule".into(), item.rule.clone().into());
        m.insert("by_rule".into(), item.by_rule.into());
        if !item.by_rule {
            m.insert("route".into(), item.route_name.clone().into());
        }
    }
    m.insert("decisions".into(), item.decisions.clone().into());
    m.insert("head".into(), json!({"length": s.len(), "hash": s.head}));
    Some(Value::Object(m))
}

pub(crate) fn request_stream(effect_id: &str) -> String {
    format!("request:{effect_id}")
}

fn webhook_stream(scheme: Scheme, id: &str) -> String {
    format!("webhook:{}:{id}", scheme.as_str())
}

/// What an entry of the rules, a request or a webhook stream records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Note {
    /// The approval rules in force from now on.
    Set,
    /// A rule sent the effect to a person (or approved it, `by_rule`).
    Requested,
    /// A person decided: approve, reject; for an AMBIGUOUS effect, happened or
    /// did_not_happen; for a refused one, dismiss.
    Decided,
    /// An approved effect came back with other premises than the approvers saw: a new
    /// round, on the new premises.
    Returned,
    /// The item's deadline passed with no decision: it expired (not a "no").
    Expired,
    /// A service's confirmation contradicts what the journal says.
    Contradicted,
    /// A webhook event recorded (a replay of it records nothing).
    Seen,
    /// A notice of the item was delivered to its route's `notify_url`.
    Notified,
}

impl Spelled for Note {
    fn spelling(self) -> &'static str {
        match self {
            Note::Set => "SET",
            Note::Requested => "REQUESTED",
            Note::Decided => "DECIDED",
            Note::Returned => "RETURNED",
            Note::Expired => "EXPIRED",
            Note::Contradicted => "CONTRADICTED",
            Note::Seen => "SEEN",
            Note::Notified => "NOTIFIED",
        }
    }
}

fn note_of(e: &Map<String, Value>) -> &str {
    Stream::spelling_of(e)
}

/// The verdicts a decision can give.
const VERDICTS: &[&str] = &["approve", "reject", "happened", "did_not_happen", "dismiss"];

/// Where an item stands at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Status {
    /// Waiting for a person (escalated: the escalation approvers may decide too).
    Pending {
        escalated: bool,
    },
    Approved {
        by: Vec<String>,
    },
    Rejected {
        by: String,
    },
    Expired,
    ByRule,
}

impl Status {
    fn name(&self) -> &'static str {
        match self {
            Status::Pending { escalated: false } => "pending",
            Status::Pending { escalated: true } => "escalated",
            Status::Approved { .. } => "approved",
            Status::Rejected { .. } => "rejected",
            Status::Expired => "expired",
            Status::ByRule => "approved_by_rule",
        }
    }
}

/// An effect a rule sent to a person, read from its request stream.
#[derive(Clone, Debug, Default)]
struct Item {
    effect_id: String,
    rule: String,
    by_rule: bool,
    route_name: String,
    route: Option<Route>,
    needed: u32,
    proposal: Value,
    /// The premises the current round's approvers decide on.
    premises_seen: Map<String, Value>,
    /// When the current round began (the request, or the last return).
    round_at_ms: u64,
    round: u64,
    approvals: Vec<(String, Value)>,
    rejection: Option<String>,
    expired: bool,
    /// The last return's changes (why the item came back).
    returned: Vec<Value>,
    contradiction: Option<Value>,
    /// A decision on the effect itself (happened, did_not_happen, dismiss), if any.
    resolution: Option<Map<String, Value>>,
    decisions: Vec<Value>,
    /// The ids of the notices delivered.
    notified: Vec<String>,
}

/// A notice for a route's `notify_url` (Standard Webhooks): an item entered, escalated or
/// expired. `id` is the message's `webhook-id`, the same on every delivery attempt, so a
/// receiver drops a repeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub id: String,
    pub item: String,
    pub url: String,
    /// `approval.entered`, `approval.escalated`, `approval.expired`.
    pub event: &'static str,
    /// The message: `{"type": "interlock.<event>", "timestamp", "data": <the inbox item>}`.
    pub body: String,
}

impl Item {
    fn read(effect_id: &str, s: &Stream) -> Option<Item> {
        let first = s.entries.first()?;
        let mut it = Item {
            effect_id: effect_id.into(),
            rule: str_of(first, "rule"),
            by_rule: first.get("by_rule").and_then(Value::as_bool) == Some(true),
            route_name: str_of(first, "route"),
            route: first
                .get("route_spec")
                .and_then(|r| Rules::parse(&json!({"routes": {"r": r}})).ok())
                .and_then(|mut r| r.routes.remove("r")),
            needed: first.get("needed").and_then(Value::as_u64).unwrap_or(1) as u32,
            proposal: first.get("proposal").cloned().unwrap_or(Value::Null),
            premises_seen: first
                .get("premises")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            round_at_ms: at_ms(first),
            ..Item::default()
        };
        if note_of(first) != Note::Requested.spelling() {
            // A stream that only records a contradiction or a resolution (an effect no rule
            // sent to a person).
            it.rule.clear();
        }
        for e in &s.entries {
            match note_of(e) {
                "DECIDED" => {
                    it.decisions.push(decision_json(e));
                    let decider = str_of(e, "decider");
                    match e.get("verdict").and_then(Value::as_str) {
                        Some("approve") => {
                            it.approvals.push((decider, Value::Object(Map::clone(e))))
                        }
                        Some("reject") => it.rejection = Some(decider),
                        Some(_) => {
                            it.resolution = Some(Map::clone(e));
                            it.contradiction = None;
                        }
                        None => {}
                    }
                }
                "RETURNED" => {
                    it.round += 1;
                    it.round_at_ms = at_ms(e);
                    it.approvals.clear();
                    it.premises_seen = e
                        .get("premises")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default();
                    it.returned = e
                        .get("changed")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                }
                "EXPIRED" => it.expired = true,
                "CONTRADICTED" => it.contradiction = Some(Value::Object(Map::clone(e))),
                "NOTIFIED" => it.notified.push(str_of(e, "id")),
                _ => {}
            }
        }
        Some(it)
    }

    fn is_request(&self) -> bool {
        !self.rule.is_empty()
    }

    fn status(&self, now_ms: u64) -> Status {
        if self.by_rule {
            return Status::ByRule;
        }
        if let Some(by) = &self.rejection {
            return Status::Rejected { by: by.clone() };
        }
        if self.approvals.len() as u32 >= self.needed {
            return Status::Approved {
                by: self.approvals.iter().map(|(d, _)| d.clone()).collect(),
            };
        }
        let elapsed = now_ms.saturating_sub(self.round_at_ms);
        let route = self.route.as_ref();
        if self.expired || route.is_some_and(|r| r.expired(elapsed)) {
            return Status::Expired;
        }
        Status::Pending {
            escalated: route.is_some_and(|r| r.escalated(elapsed)),
        }
    }

    fn approvers(&self, now_ms: u64) -> Vec<String> {
        let elapsed = now_ms.saturating_sub(self.round_at_ms);
        self.route
            .as_ref()
            .map(|r| r.approvers_at(elapsed))
            .unwrap_or_default()
    }

    /// The inbox's view of it.
    fn to_json(&self, kind: &str, now_ms: u64, actions: &[&str]) -> Value {
        let mut m = Map::new();
        m.insert("item".into(), self.effect_id.clone().into());
        m.insert("kind".into(), kind.into());
        m.insert("effect_id".into(), self.effect_id.clone().into());
        for k in ["agent", "target", "key", "effect"] {
            if let Some(v) = self.proposal.get(k) {
                m.insert(k.into(), v.clone());
            }
        }
        if self.is_request() {
            m.insert("status".into(), self.status(now_ms).name().into());
            m.insert("rule".into(), self.rule.clone().into());
            m.insert("route".into(), self.route_name.clone().into());
            m.insert("approvers".into(), self.approvers(now_ms).into());
            m.insert("approvals_needed".into(), self.needed.into());
            m.insert(
                "approved_by".into(),
                self.approvals
                    .iter()
                    .map(|(d, _)| d.clone())
                    .collect::<Vec<_>>()
                    .into(),
            );
            m.insert(
                "premises_seen".into(),
                Value::Object(self.premises_seen.clone()),
            );
            m.insert("round".into(), self.round.into());
            m.insert("requested_at_ms".into(), self.round_at_ms.into());
            if let Some(r) = &self.route {
                if let Some(d) = r.duration_before_escalation_ms {
                    m.insert("escalates_at_ms".into(), (self.round_at_ms + d).into());
                }
                if let Some(d) = r.duration_before_expiry_ms {
                    m.insert("expires_at_ms".into(), (self.round_at_ms + d).into());
                }
                m.insert(
                    "justification_required".into(),
                    r.justification_required.into(),
                );
            }
            if !self.returned.is_empty() {
                m.insert("changed".into(), self.returned.clone().into());
            }
        }
        if let Some(c) = &self.contradiction {
            m.insert("contradiction".into(), c.clone());
        }
        m.insert("decisions".into(), self.decisions.clone().into());
        m.insert("actions".into(), actions.to_vec().into());
        Value::Object(m)
    }
}

/// How a lease check failed, in a word.
fn lease_word(r: Reason) -> &'static str {
    match r {
        Reason::LeaseRevoked => "revoked",
        Reason::LeaseExpired => "expired",
        _ => "missing",
    }
}

fn str_of(e: &Map<String, Value>, k: &str) -> String {
    e.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

fn at_ms(e: &Map<String, Value>) -> u64 {
    e.get("at_ms").and_then(Value::as_u64).unwrap_or(0)
}

fn decision_json(e: &Map<String, Value>) -> Value {
    let mut m = Map::new();
    for k in ["decider", "verdict", "why", "evidence", "at_ms", "round"] {
        if let Some(v) = e.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    Value::Object(m)
}

fn changes_json(changed: &[PremiseChange]) -> Value {
    changed
        .iter()
        .map(|c| {
            json!({"name": c.name,
                   "was": serde_json::from_str::<Value>(&c.was).unwrap_or(Value::Null),
                   "now": serde_json::from_str::<Value>(&c.now).unwrap_or(Value::Null)})
        })
        .collect::<Vec<_>>()
        .into()
}

/// What the rules let a submit do.
pub(super) enum Gatekeeping {
    /// Go on under the proposal's own authority.
    Proceed,
    /// Answer this, sending nothing.
    Answer(Outcome),
}

fn outcome(
    id: &str,
    state: State,
    reason: Reason,
    return_to: Option<String>,
    changed: Vec<PremiseChange>,
) -> Outcome {
    Outcome {
        effect_id: id.into(),
        state,
        reason: Some(reason),
        executed: Executed::No,
        result: None,
        changed,
        return_to,
        replayed: false,
        retry_after_ms: None,
    }
}

impl Gate {
    /// Records the approval rules in force from now on (`crate::rules`: the schema). The
    /// same rules twice record nothing.
    pub fn set_approval_rules(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        rules: &str,
    ) -> Result<(), GateError> {
        let v = parse_input(rules, "")?;
        Rules::parse(&v)?;
        let text = canonical(&v);
        self.compare_and_append(
            j,
            RULES_STREAM,
            now_ms,
            true,
            |_, _, s| {
                let same = s
                    .last()
                    .and_then(|e| e.get("rules"))
                    .is_some_and(|r| canonical(r) == text);
                Ok(if same {
                    Plan::Done(())
                } else {
                    Plan::Append(vec![(Note::Set, fields!("rules" => v.clone()))], ())
                })
            },
            || "the approval rules kept changing".into(),
        )?;
        Ok(())
    }

    /// The approval rules in force (none recorded: `{}`).
    pub fn approval_rules(&mut self, j: &mut dyn Journal) -> Result<Value, GateError> {
        let s = self.load(j, RULES_STREAM)?;
        Ok(s.last()
            .and_then(|e| e.get("rules"))
            .cloned()
            .unwrap_or_else(|| json!({})))
    }

    /// A new effect meets the rules before anything is recorded of it: one that names an
    /// approval has a person's decision already; any other goes on, is approved by a rule
    /// (recorded), or waits for a person (its item recorded once; the submit answers
    /// PROPOSED `approval_pending` until the item is decided, and again after).
    pub(super) fn gatekeep(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        p: &Proposal,
        id: &str,
    ) -> Result<Gatekeeping, GateError> {
        if matches!(p.authority, Authority::Approval(_)) || j.length(RULES_STREAM)? == 0 {
            return Ok(Gatekeeping::Proceed);
        }
        let rules = Rules::parse(&self.approval_rules(j)?)?;
        let recorded = p.to_json();
        let need = rules.evaluate(&p.target.name, &recorded);
        if need == Need::Nothing {
            return Ok(Gatekeeping::Proceed);
        }
        let name = request_stream(id);
        let route_spec = match &need {
            Need::Person { route, .. } => self
                .approval_rules(j)?
                .pointer(&format!(
                    "/routes/{}",
                    route.replace('~', "~0").replace('/', "~1")
                ))
                .cloned(),
            _ => None,
        };
        let ((), s) = self.compare_and_append(
            j,
            &name,
            now_ms,
            true,
            |_, _, s| {
                if !s.entries.is_empty() {
                    return Ok(Plan::Done(()));
                }
                let mut f = fields!("proposal" => recorded.clone(), "premises" => Value::Object(p.premises.clone().into_iter().collect()));
                match &need {
                    Need::ByRule { rule } => {
                        f.insert("rule".into(), rule.clone().into());
                        f.insert("by_rule".into(), true.into());
                    }
                    Need::Person {
                        rule,
                        route,
                        needed,
                    } => {
                        f.insert("rule".into(), rule.clone().into());
                        f.insert("route".into(), route.clone().into());
                        f.insert("route_spec".into(), route_spec.clone().into());
                        f.insert("needed".into(), (*needed).into());
                    }
                    Need::Nothing => unreachable!("handled above"),
                }
                Ok(Plan::Append(vec![(Note::Requested, f)], ()))
            },
            || format!("request {id} kept changing"),
        )?;
        self.remember(&s);
        let item = Item::read(id, &s).expect("just read or written");
        // Another payload under the same key is another request, as for effects.
        let same_payload = item.proposal.get("effect") == recorded.get("effect")
            && item.proposal.pointer("/target/name") == recorded.pointer("/target/name");
        if !same_payload {
            return Ok(Gatekeeping::Answer(outcome(
                id,
                State::Refused,
                Reason::ConflictingPayload,
                None,
                Vec::new(),
            )));
        }
        match item.status(now_ms) {
            Status::ByRule => Ok(Gatekeeping::Proceed),
            Status::Pending { .. } => Ok(Gatekeeping::Answer(outcome(
                id,
                State::Proposed,
                Reason::ApprovalPending,
                Some(item.route_name.clone()),
                Vec::new(),
            ))),
            Status::Rejected { by } => Ok(Gatekeeping::Answer(outcome(
                id,
                State::Refused,
                Reason::ApprovalRejected,
                Some(by),
                Vec::new(),
            ))),
            Status::Expired => {
                if !item.expired {
                    self.append_note(
                        j,
                        now_ms,
                        &name,
                        Note::Expired,
                        fields!("reason" => "deadline passed with no decision"),
                    )?;
                }
                Ok(Gatekeeping::Answer(outcome(
                    id,
                    State::Refused,
                    Reason::ApprovalExpired,
                    Some(item.route_name.clone()),
                    Vec::new(),
                )))
            }
            Status::Approved { by } => {
                // An approval stops working the moment its approver loses access: back to
                // the route, a new round, every approval to be given again.
                let mut lost = Vec::new();
                for approver in &by {
                    if let Err(r) = check_lease(&self.load(j, &lease_stream(approver))?, now_ms) {
                        lost.push(PremiseChange {
                            name: format!("approver {approver}"),
                            was: "\"lease live\"".into(),
                            now: format!("\"{}\"", lease_word(r)),
                        });
                    }
                }
                if !lost.is_empty() {
                    self.append_note(
                        j,
                        now_ms,
                        &name,
                        Note::Returned,
                        fields!("changed" => changes_json(&lost), "premises" => Value::Object(item.premises_seen.clone()), "return_to" => item.route_name.clone()),
                    )?;
                    return Ok(Gatekeeping::Answer(outcome(
                        id,
                        State::Proposed,
                        Reason::ApprovalPending,
                        Some(item.route_name.clone()),
                        lost,
                    )));
                }
                let seen: BTreeMap<String, Value> =
                    item.premises_seen.clone().into_iter().collect();
                let changed = compare_premises(
                    &seen,
                    &BTreeMap::new(),
                    &p.premises.clone().into_iter().collect(),
                );
                if changed.is_empty() {
                    return Ok(Gatekeeping::Proceed);
                }
                // The approvers decided on other premises: back to them, on the new ones.
                self.append_note(
                    j,
                    now_ms,
                    &name,
                    Note::Returned,
                    fields!("changed" => changes_json(&changed), "premises" => Value::Object(p.premises.clone().into_iter().collect()), "return_to" => by.clone()),
                )?;
                Ok(Gatekeeping::Answer(outcome(
                    id,
                    State::Proposed,
                    Reason::ApprovalStale,
                    Some(by.join(", ")),
                    changed,
                )))
            }
        }
    }

    fn append_note(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        name: &str,
        note: Note,
        f: Map<String, Value>,
    ) -> Result<Stream, GateError> {
        let ((), s) = self.compare_and_append(
            j,
            name,
            now_ms,
            true,
            |_, _, _| Ok(Plan::Append(vec![(note, f.clone())], ())),
            || format!("{name} kept changing"),
        )?;
        self.remember(&s);
        Ok(s)
    }

    /// A person's decision on an inbox item (schema: ARCHITECTURE.md, "Decision"), checked
    /// against the decider's own lease and the item's route, recorded with who and why.
    /// Two people deciding at once: one wins by compare-and-append, the other is told what
    /// was decided. Answers the item as it stands after.
    pub fn decide(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        decision: &str,
    ) -> Result<Value, GateError> {
        let v = parse_input(decision, "")?;
        let d = Obj::strict(
            &v,
            "",
            "a decision",
            &["item", "decider", "verdict", "why", "evidence"],
        )?;
        let id = d.name("item", "the item's effect id (the inbox's `item`)")?;
        check_effect_id(&id).map_err(|_| field_err("/item", "is not an effect id"))?;
        let decider = d.name("decider", "who decides")?;
        let verdict = d.name(
            "verdict",
            "approve, reject, happened, did_not_happen or dismiss",
        )?;
        if !VERDICTS.contains(&verdict.as_str()) {
            return Err(field_err(
                "/verdict",
                format!("is {verdict:?}: approve, reject, happened, did_not_happen or dismiss"),
            ));
        }
        let why = match d.get_some("why") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(field_err("/why", "must be text: why you decide so")),
        };
        let evidence = d.get_some("evidence").cloned();
        // The decider's own authority: a live lease in their name. One who lost access
        // decides nothing from then on.
        let lease = self.load(j, &lease_stream(&decider))?;
        if let Err(r) = check_lease(&lease, now_ms) {
            return Err(field_err(
                "/decider",
                format!(
                    "{decider} may not decide: their lease is {} (grant it: interlock lease grant DIR {decider} --for 30d)",
                    lease_word(r)
                ),
            ));
        }
        let effect = self.load(j, &effect_stream(&id))?;
        let effect_state = effect.last().and_then(Stream::state_of);
        let name = request_stream(&id);
        let on_effect = matches!(verdict.as_str(), "happened" | "did_not_happen" | "dismiss");
        if on_effect && (verdict == "happened" || verdict == "did_not_happen") && evidence.is_none()
        {
            return Err(field_err(
                "/evidence",
                "is required: what shows it happened, or did not",
            ));
        }
        let mut f = fields!("decider" => decider.clone(), "verdict" => verdict.clone());
        if let Some(w) = &why {
            f.insert("why".into(), w.clone().into());
        }
        if let Some(e) = &evidence {
            f.insert("evidence".into(), e.clone());
        }
        let ((), s) = self.compare_and_append(
            j,
            &name,
            now_ms,
            true,
            |_, _, s| {
                let item = Item::read(&id, s);
                if on_effect {
                    check_effect_verdict(&id, &verdict, effect_state, &effect, item.as_ref())?;
                } else {
                    let item = item.filter(Item::is_request).ok_or_else(|| {
                        field_err("/item", format!("no approval request for effect {id}"))
                    })?;
                    check_approval_verdict(
                        &item,
                        &decider,
                        &verdict,
                        why.as_deref(),
                        now_ms,
                        !effect.entries.is_empty(),
                    )?;
                    let mut f = f.clone();
                    f.insert("round".into(), item.round.into());
                    return Ok(Plan::Append(vec![(Note::Decided, f)], ()));
                }
                Ok(Plan::Append(vec![(Note::Decided, f.clone())], ()))
            },
            || format!("the item {id} kept changing"),
        )?;
        self.remember(&s);
        if verdict == "happened" {
            let ev = json!({"decider": decider, "why": why, "evidence": evidence});
            self.confirm(j, now_ms, &id, &canonical(&ev))?;
        }
        self.item_json(j, now_ms, &id)
    }

    fn item_json(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        id: &str,
    ) -> Result<Value, GateError> {
        Ok(self.item(j, now_ms, id)?.expect("a decision was recorded"))
    }

    /// The item of effect `id` as the inbox shows it (`closed` when no person may act on
    /// it now), if the journal has one.
    pub fn item(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        id: &str,
    ) -> Result<Option<Value>, GateError> {
        let s = self.load(j, &request_stream(id))?;
        let effect = self.load(j, &effect_stream(id))?;
        Ok(Item::read(id, &s).map(|item| {
            view(&item, &effect, now_ms).unwrap_or_else(|| item.to_json("closed", now_ms, &[]))
        }))
    }

    /// The inbox: every item a person may act on now, from the journal (pending and
    /// escalated approvals, approvals returned with what changed, expired ones, AMBIGUOUS
    /// effects, refused effects a person may retry, contradictions from a service), each
    /// with what is known and the actions that are safe now.
    pub fn inbox(&mut self, j: &mut dyn Journal, now_ms: u64) -> Result<Value, GateError> {
        let mut items = Vec::new();
        for name in j.streams()? {
            let Some(id) = name.strip_prefix("effect:") else {
                continue;
            };
            let effect = self.load(j, &name)?;
            let req = self.load(j, &request_stream(id))?;
            let item = Item::read(id, &req).unwrap_or_else(|| Item::bare(id, &effect));
            if let Some(v) = view(&item, &effect, now_ms) {
                items.push(v);
            }
        }
        for name in j.streams()? {
            let Some(id) = name.strip_prefix("request:") else {
                continue;
            };
            if j.length(&effect_stream(id))? > 0 {
                continue; // listed above, with its effect
            }
            let req = self.load(j, &name)?;
            if let Some(v) = Item::read(id, &req).and_then(|i| view(&i, &Stream::empty(""), now_ms))
            {
                items.push(v);
            }
        }
        Ok(Value::Array(items))
    }

    /// The scoreboard, a view of the journal: items by route (pending, escalated, approved,
    /// rejected, expired), time to decision, deadlines missed (decided after the
    /// escalation time, or expired), the share approved by rule, and the effects a person
    /// settled (AMBIGUOUS, refused).
    pub fn scoreboard(&mut self, j: &mut dyn Journal, now_ms: u64) -> Result<Value, GateError> {
        let mut routes: BTreeMap<String, Board> = BTreeMap::new();
        let (mut requests, mut by_rule) = (0u64, 0u64);
        let (mut settled, mut open) = (0u64, 0u64);
        for name in j.streams()? {
            if let Some(id) = name.strip_prefix("effect:") {
                let effect = self.load(j, &name)?;
                let req = self.load(j, &request_stream(id))?;
                let item = Item::read(id, &req).unwrap_or_else(|| Item::bare(id, &effect));
                if item.resolution.is_some() {
                    settled += 1;
                } else if view(&item, &effect, now_ms).is_some_and(|v| v["kind"] != "approval") {
                    open += 1;
                }
                continue;
            }
            let Some(id) = name.strip_prefix("request:") else {
                continue;
            };
            let req = self.load(j, &name)?;
            let Some(item) = Item::read(id, &req).filter(Item::is_request) else {
                continue;
            };
            requests += 1;
            if item.by_rule {
                by_rule += 1;
                continue;
            }
            routes
                .entry(item.route_name.clone())
                .or_default()
                .count(&item, now_ms);
        }
        let share = if requests == 0 {
            Value::Null
        } else {
            json!((by_rule as f64) / (requests as f64))
        };
        Ok(json!({
            "requests": requests,
            "approved_by_rule": by_rule,
            "share_approved_by_rule": share,
            "routes": routes.iter().map(|(k, b)| (k.clone(), b.to_json())).collect::<Map<_, _>>(),
            "effects_settled_by_a_person": settled,
            "effects_waiting_for_a_person": open,
        }))
    }

    /// The notices due now (a route's `notify_url`, `Notice`): an item that entered its
    /// route and waits, one that escalated, one that expired, each once per round, until
    /// [`Gate::notice_delivered`] records it. A view of the journal, like the inbox.
    pub fn notices(&mut self, j: &mut dyn Journal, now_ms: u64) -> Result<Vec<Notice>, GateError> {
        let mut out = Vec::new();
        for name in j.streams()? {
            let Some(id) = name.strip_prefix("request:") else {
                continue;
            };
            let req = self.load(j, &name)?;
            let Some(item) = Item::read(id, &req).filter(Item::is_request) else {
                continue;
            };
            let Some(url) = item.route.as_ref().and_then(|r| r.notify_url.clone()) else {
                continue;
            };
            let due: &[&'static str] = match item.status(now_ms) {
                Status::Pending { escalated: false } => &["approval.entered"],
                Status::Pending { escalated: true } => &["approval.entered", "approval.escalated"],
                Status::Expired => &["approval.expired"],
                _ => &[],
            };
            for event in due {
                let nid = format!("{id}.{event}.{}", item.round);
                if item.notified.contains(&nid) {
                    continue;
                }
                let data = view(&item, &Stream::empty(""), now_ms)
                    .unwrap_or_else(|| item.to_json("approval", now_ms, &[]));
                let body = json!({"type": format!("interlock.{event}"),
                                  "timestamp": crate::export::rfc3339_ms(now_ms), "data": data});
                out.push(Notice {
                    id: nid,
                    item: id.into(),
                    url: url.clone(),
                    event,
                    body: canonical(&body),
                });
            }
        }
        Ok(out)
    }

    /// Records that notice `id` of `item` was delivered (its receiver answered 2xx); once.
    pub fn notice_delivered(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        item: &str,
        id: &str,
    ) -> Result<(), GateError> {
        check_effect_id(item).map_err(|_| field_err("/item", "is not an effect id"))?;
        let ((), s) = self.compare_and_append(
            j,
            &request_stream(item),
            now_ms,
            true,
            |_, _, s| {
                if Item::read(item, s).is_some_and(|i| i.notified.iter().any(|n| n == id)) {
                    return Ok(Plan::Done(()));
                }
                Ok(Plan::Append(
                    vec![(Note::Notified, fields!("id" => id))],
                    (),
                ))
            },
            || format!("the item {item} kept changing"),
        )?;
        self.remember(&s);
        Ok(())
    }

    /// A service's signed webhook: checked (`crate::webhooks`), then what it says of the
    /// effect it names is recorded: CONFIRMED when it happened and the journal agrees or
    /// does not know (AMBIGUOUS), a `did_not_happen` decision by the service for an
    /// AMBIGUOUS one it says failed, a contradiction for a person when it disagrees with
    /// the journal. A bad signature, a stale timestamp, a replayed event, an unknown effect:
    /// nothing recorded, an `invalid-field` that says which.
    pub fn webhook(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        delivery: Delivery<'_>,
        secret: &str,
        tolerance_s: Option<u64>,
    ) -> Result<Value, GateError> {
        let Delivery {
            scheme,
            headers,
            body,
        } = delivery;
        let tolerance = tolerance_s.unwrap_or(webhooks::DEFAULT_TOLERANCE_S);
        let now_s = now_ms / 1000;
        let header_id = match scheme {
            Scheme::Stripe => {
                webhooks::verify_stripe(headers, body, secret, now_s, tolerance).map(|()| None)
            }
            Scheme::Standard => {
                webhooks::verify_standard(headers, body, secret, now_s, tolerance).map(Some)
            }
        }
        .map_err(|e| field_err("/signature", e.to_string()))?;
        let text = core::str::from_utf8(body).map_err(|_| field_err("/body", "is not UTF-8"))?;
        let v = parse_input(text, "/body")?;
        let event = match (scheme, header_id) {
            (Scheme::Stripe, _) => webhooks::stripe_event(&v),
            (Scheme::Standard, Some(hid)) => webhooks::standard_event(&hid, &v),
            (Scheme::Standard, None) => unreachable!("a checked message has an id"),
        }
        .map_err(|m| field_err("/body", m))?;
        crate::schema::check_name(&event.id, "/body/id")?;
        let seen = webhook_stream(scheme, &event.id);
        if j.length(&seen)? > 0 {
            return Err(field_err(
                "/body/id",
                format!(
                    "event {} was already recorded (a replay): nothing recorded",
                    event.id
                ),
            ));
        }
        check_effect_id(&event.effect_id)
            .map_err(|_| field_err("/body", format!("{} is not an effect id", event.effect_id)))?;
        let effect = self.load(j, &effect_stream(&event.effect_id))?;
        let Some(state) = effect.last().and_then(Stream::state_of) else {
            return Err(field_err(
                "/body",
                format!(
                    "no effect {} in this journal: nothing recorded",
                    event.effect_id
                ),
            ));
        };
        let source = json!({"source": scheme.as_str(), "event": event.id, "type": event.kind});
        let recorded = match (event.happened, state) {
            (None, _) => "nothing: the service says neither yet",
            (Some(true), State::Committed | State::Ambiguous | State::Confirmed) => {
                self.confirm(j, now_ms, &event.effect_id, &canonical(&source))?;
                "confirmed"
            }
            (Some(false), State::Ambiguous) => {
                let mut f = fields!("decider" => format!("{} webhook", scheme.as_str()), "verdict" => "did_not_happen", "evidence" => source.clone());
                f.insert("why".into(), "the service reports the effect failed".into());
                self.append_note(
                    j,
                    now_ms,
                    &request_stream(&event.effect_id),
                    Note::Decided,
                    f,
                )?;
                "did_not_happen"
            }
            (Some(false), State::Refused) => "nothing: the journal agrees it did not happen",
            (Some(happened), _) => {
                let f = fields!("evidence" => source.clone(), "service_says" => if happened { "happened" } else { "did_not_happen" }, "journal_says" => state.as_str());
                self.append_note(
                    j,
                    now_ms,
                    &request_stream(&event.effect_id),
                    Note::Contradicted,
                    f,
                )?;
                "contradiction"
            }
        };
        self.append_note(
            j,
            now_ms,
            &seen,
            Note::Seen,
            fields!("effect_id" => event.effect_id.clone(), "recorded" => recorded),
        )?;
        Ok(json!({"effect_id": event.effect_id, "event": event.id, "recorded": recorded}))
    }
}

impl Item {
    /// An effect with no request stream.
    fn bare(id: &str, effect: &Stream) -> Item {
        let proposal = effect
            .entries
            .first()
            .and_then(|e| e.get("proposal"))
            .cloned()
            .unwrap_or(Value::Null);
        Item {
            effect_id: id.into(),
            proposal,
            ..Item::default()
        }
    }
}

/// One route's figures on the scoreboard.
#[derive(Default)]
struct Board {
    statuses: BTreeMap<&'static str, u64>,
    /// Time from a round's start to the decision that settled it, per decided item.
    decision_ms: Vec<u64>,
    deadlines_missed: u64,
}

impl Board {
    fn count(&mut self, item: &Item, now_ms: u64) {
        let status = item.status(now_ms);
        *self.statuses.entry(status.name()).or_default() += 1;
        let decided_at = match status {
            Status::Approved { .. } => item.approvals.last().map(|(_, e)| e["at_ms"].as_u64()),
            Status::Rejected { .. } => item
                .decisions
                .iter()
                .rev()
                .find(|d| d["verdict"] == "reject")
                .map(|d| d["at_ms"].as_u64()),
            _ => None,
        }
        .flatten();
        if let Some(at) = decided_at {
            self.decision_ms.push(at.saturating_sub(item.round_at_ms));
        }
        let route = item.route.as_ref();
        let escalation = route.and_then(|r| r.duration_before_escalation_ms);
        let late = match (decided_at, escalation) {
            (Some(at), Some(d)) => at.saturating_sub(item.round_at_ms) >= d,
            (None, _) => matches!(
                status,
                Status::Expired | Status::Pending { escalated: true }
            ),
            _ => false,
        };
        if late {
            self.deadlines_missed += 1;
        }
    }

    fn to_json(&self) -> Value {
        let mut sorted = self.decision_ms.clone();
        sorted.sort_unstable();
        let median = sorted.get(sorted.len() / 2).copied();
        let mut m: Map<String, Value> = ["pending", "escalated", "approved", "rejected", "expired"]
            .iter()
            .map(|k| {
                (
                    (*k).into(),
                    self.statuses.get(k).copied().unwrap_or(0).into(),
                )
            })
            .collect();
        m.insert("items".into(), self.statuses.values().sum::<u64>().into());
        m.insert("decided".into(), (sorted.len() as u64).into());
        m.insert("median_time_to_decision_ms".into(), json!(median));
        m.insert("max_time_to_decision_ms".into(), json!(sorted.last()));
        m.insert("deadlines_missed".into(), self.deadlines_missed.into());
        Value::Object(m)
    }
}

/// Refused effects a person may retry (under a new decision): what changed can change back.
const RETRYABLE: &[Reason] = &[
    Reason::PremiseChanged,
    Reason::LeaseMissing,
    Reason::LeaseExpired,
    Reason::LeaseRevoked,
    Reason::NotAllowed,
    Reason::ApprovalMissing,
    Reason::ApprovalExpired,
    Reason::ApprovalRevoked,
    Reason::ApprovalStale,
    Reason::CapExceeded,
    Reason::TargetUnavailable,
    Reason::DedupeWindowPassed,
];

/// The item as the inbox lists it, or none when no person need act on it.
fn view(item: &Item, effect: &Stream, now_ms: u64) -> Option<Value> {
    if let Some(c) = &item.contradiction {
        let _ = c;
        return Some(item.to_json("contradiction", now_ms, &["happened", "did_not_happen"]));
    }
    let last = effect.last();
    match last.and_then(Stream::state_of) {
        None if item.is_request() => match item.status(now_ms) {
            Status::Pending { .. } => {
                Some(item.to_json("approval", now_ms, &["approve", "reject"]))
            }
            Status::Expired => Some(item.to_json("approval", now_ms, &["dismiss"])),
            _ => None,
        },
        Some(State::Ambiguous) if item.resolution.is_none() => Some(with_outcome(
            item.to_json("ambiguous", now_ms, &["happened", "did_not_happen"]),
            last?,
        )),
        Some(State::Refused) if item.resolution.is_none() => {
            let l = last?;
            let reason = l
                .get("reason")
                .and_then(Value::as_str)
                .and_then(Reason::parse)?;
            let executed_no = l.get("executed").and_then(Value::as_str) == Some("no");
            if executed_no && RETRYABLE.contains(&reason) {
                Some(with_outcome(
                    item.to_json("refused", now_ms, &["dismiss"]),
                    l,
                ))
            } else if !executed_no {
                // Refused with the send's fate unknown: a person must find out.
                Some(with_outcome(
                    item.to_json("refused", now_ms, &["happened", "did_not_happen"]),
                    l,
                ))
            } else {
                None
            }
        }
        _ => None,
    }
}

fn with_outcome(mut v: Value, last: &Map<String, Value>) -> Value {
    if let Value::Object(m) = &mut v {
        for k in ["reason", "executed", "changed", "return_to"] {
            if let Some(x) = last.get(k) {
                m.insert(k.into(), x.clone());
            }
        }
        m.insert("state".into(), Stream::spelling_of(last).into());
    }
    v
}

fn check_approval_verdict(
    item: &Item,
    decider: &str,
    verdict: &str,
    why: Option<&str>,
    now_ms: u64,
    effect_started: bool,
) -> Result<(), GateError> {
    if verdict != "approve" && verdict != "reject" {
        return Err(field_err(
            "/verdict",
            "an approval request takes approve or reject",
        ));
    }
    if effect_started {
        return Err(field_err(
            "/item",
            "this effect was already sent under the decision",
        ));
    }
    match item.status(now_ms) {
        Status::Pending { .. } => {}
        Status::Approved { by } => {
            return Err(field_err(
                "/item",
                format!("already decided: approved by {}", by.join(" and ")),
            ))
        }
        Status::Rejected { by } => {
            return Err(field_err(
                "/item",
                format!("already decided: rejected by {by}"),
            ))
        }
        Status::Expired => {
            return Err(field_err(
                "/item",
                "expired: its deadline passed with no decision; the agent must ask again",
            ))
        }
        Status::ByRule => return Err(field_err("/item", "approved by a rule; nothing to decide")),
    }
    let approvers = item.approvers(now_ms);
    if !approvers.iter().any(|a| a == decider) {
        return Err(field_err(
            "/decider",
            format!(
                "{decider} is not an approver of route {} now (who may: {})",
                item.route_name,
                approvers.join(", ")
            ),
        ));
    }
    if verdict == "approve" && item.approvals.iter().any(|(d, _)| d == decider) {
        return Err(field_err(
            "/decider",
            format!(
                "{decider} already approved; {} more distinct approver(s) needed",
                item.needed as usize - item.approvals.len()
            ),
        ));
    }
    let justified = why.is_some_and(|w| !w.trim().is_empty());
    if item
        .route
        .as_ref()
        .is_some_and(|r| r.justification_required)
        && !justified
    {
        return Err(field_err("/why", "route requires a justification"));
    }
    Ok(())
}

fn check_effect_verdict(
    id: &str,
    verdict: &str,
    state: Option<State>,
    effect: &Stream,
    item: Option<&Item>,
) -> Result<(), GateError> {
    if let Some(done) = item.and_then(|i| i.resolution.as_ref()) {
        return Err(field_err(
            "/item",
            format!(
                "already decided: {} by {}",
                str_of(done, "verdict"),
                str_of(done, "decider")
            ),
        ));
    }
    let contradicted = item.is_some_and(|i| i.contradiction.is_some());
    let executed_unknown = effect
        .last()
        .and_then(|e| e.get("executed"))
        .and_then(Value::as_str)
        == Some("unknown");
    let ok = match verdict {
        "happened" | "did_not_happen" => {
            state == Some(State::Ambiguous)
                || contradicted
                || (state == Some(State::Refused) && executed_unknown)
        }
        _ => matches!(state, Some(State::Refused)) || contradicted,
    };
    if !ok {
        return Err(field_err(
            "/verdict",
            format!(
                "{verdict} does not apply to effect {id} ({}): happened / did_not_happen settle an AMBIGUOUS one, dismiss a refused one",
                state.map_or("not in the journal", State::as_str)
            ),
        ));
    }
    Ok(())
}
