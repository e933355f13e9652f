//! Approval rules and routes: which proposals need a person, which are approved by rule,
//! who decides, by when, and what a missed deadline does. Pure: the gate records the rules
//! in the journal (`rules:approval`) and evaluates them here.
//!
//! ```json
//! {"rules": [
//!    {"name": "large", "target": "payments", "when": [{"field": "/effect/amount_cents", "over": 5000}],
//!     "then": "person", "route": "finance", "approvers_needed": 2},
//!    {"name": "small", "when": [{"field": "/effect/amount_cents", "at_most": 2000}], "then": "approve"}],
//!  "routes": {"finance": {"primary_approvers": ["alice@shop", "bob@shop"],
//!     "duration_before_escalation_ms": 3600000, "escalation_approvers": ["cfo@shop"],
//!     "duration_before_expiry_ms": 86400000, "justification_required": true}}}
//! ```
//!
//! The first rule whose target and conditions all hold decides; no rule: the proposal goes
//! on under its own authority. A route's fields follow Microsoft Graph's approval stages
//! (`primaryApprovers`, `escalationApprovers`, `durationBeforeEscalation`,
//! `durationBeforeAutomaticDenial`, `isApproverJustificationRequired`), except that a
//! missed deadline is an expiry, never a denial: a timeout is not a person's "no".
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::Value;

use crate::schema::{field_err, kind, Obj};
use crate::types::GateError;

/// What a rule does with a proposal it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Then {
    /// A person decides (`approvers_needed` distinct approvers on `route`).
    Person { route: String, needed: u32 },
    /// Approved by the rule itself, recorded as such.
    Approve,
}

#[derive(Clone, Debug, PartialEq)]
enum Test {
    Equals(Value),
    In(Vec<Value>),
    Over(f64),
    AtLeast(f64),
    Under(f64),
    AtMost(f64),
}

#[derive(Clone, Debug, PartialEq)]
struct Condition {
    /// A JSON pointer into the proposal (`/effect/amount_cents`, `/premises/flagged`).
    field: String,
    test: Test,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub name: String,
    target: Option<String>,
    when: Vec<Condition>,
    pub then: Then,
}

/// Who decides on a route, and by when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub primary_approvers: Vec<String>,
    pub escalation_approvers: Vec<String>,
    pub duration_before_escalation_ms: Option<u64>,
    pub duration_before_expiry_ms: Option<u64>,
    pub justification_required: bool,
    /// Where a signed notice (Standard Webhooks) goes when an item enters the route,
    /// escalates or expires.
    pub notify_url: Option<String>,
}

impl Route {
    /// Who may decide `elapsed_ms` after the request: the primary approvers, and the
    /// escalation approvers once the escalation time has passed.
    pub fn approvers_at(&self, elapsed_ms: u64) -> Vec<String> {
        let mut v = self.primary_approvers.clone();
        if self.escalated(elapsed_ms) {
            v.extend(self.escalation_approvers.iter().cloned());
        }
        v
    }

    pub fn escalated(&self, elapsed_ms: u64) -> bool {
        self.duration_before_escalation_ms
            .is_some_and(|d| elapsed_ms >= d)
    }

    pub fn expired(&self, elapsed_ms: u64) -> bool {
        self.duration_before_expiry_ms
            .is_some_and(|d| elapsed_ms >= d)
    }
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Rules {
    pub rules: Vec<Rule>,
    pub routes: BTreeMap<String, Route>,
}

/// What the rules say of one proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    /// No rule matched.
    Nothing,
    /// Rule `rule` approves it.
    ByRule { rule: String },
    /// Rule `rule` sends it to a person.
    Person {
        rule: String,
        route: String,
        needed: u32,
    },
}

const CONDITION_TESTS: &[&str] = &["equals", "in", "over", "at_least", "under", "at_most"];

impl Rules {
    pub fn parse(v: &Value) -> Result<Rules, GateError> {
        let top = Obj::strict(v, "", "the approval rules", &["rules", "routes"])?;
        let mut routes = BTreeMap::new();
        if let Some(r) = top.get_some("routes") {
            let r = Obj::any(r, "/routes", "the routes (name -> route)")?;
            for (name, route) in r.map() {
                crate::schema::check_name(name, &r.at(name))?;
                routes.insert(name.clone(), parse_route(route, &r.at(name))?);
            }
        }
        let mut rules = Vec::new();
        match top.get_some("rules") {
            None => {}
            Some(Value::Array(list)) => {
                for (i, rule) in list.iter().enumerate() {
                    rules.push(parse_rule(rule, &format!("/rules/{i}"), &routes)?);
                }
            }
            Some(other) => {
                return Err(field_err(
                    "/rules",
                    format!("must be a list of rules, not {}", kind(other)),
                ))
            }
        }
        let mut seen = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            if seen.contains(&&r.name) {
                return Err(field_err(
                    &format!("/rules/{i}/name"),
                    "another rule has this name",
                ));
            }
            seen.push(&r.name);
        }
        Ok(Rules { rules, routes })
    }

    /// What the first matching rule says of `proposal` (its JSON, as recorded).
    pub fn evaluate(&self, target: &str, proposal: &Value) -> Need {
        for rule in &self.rules {
            if rule.target.as_deref().is_some_and(|t| t != target) {
                continue;
            }
            let person = matches!(rule.then, Then::Person { .. });
            if rule.when.iter().all(|c| c.holds(proposal, person)) {
                return match &rule.then {
                    Then::Approve => Need::ByRule {
                        rule: rule.name.clone(),
                    },
                    Then::Person { route, needed } => Need::Person {
                        rule: rule.name.clone(),
                        route: route.clone(),
                        needed: *needed,
                    },
                };
            }
        }
        Need::Nothing
    }
}

impl Condition {
    /// Whether the condition holds. A field that is missing, or not a number, where a
    /// number is compared holds for a rule that sends to a person and fails for one that
    /// approves: in doubt, a person looks; nothing is approved by a rule on a guess. An
    /// `equals` or `in` holds only for a value that is there.
    fn holds(&self, proposal: &Value, person: bool) -> bool {
        let v = proposal.pointer(&self.field);
        let num = |f: fn(f64, f64) -> bool, b: f64| match v.and_then(Value::as_f64) {
            Some(a) => f(a, b),
            None => person,
        };
        match &self.test {
            Test::Equals(x) => v == Some(x),
            Test::In(xs) => v.is_some_and(|v| xs.contains(v)),
            Test::Over(b) => num(|a, b| a > b, *b),
            Test::AtLeast(b) => num(|a, b| a >= b, *b),
            Test::Under(b) => num(|a, b| a < b, *b),
            Test::AtMost(b) => num(|a, b| a <= b, *b),
        }
    }
}

fn parse_route(v: &Value, at: &str) -> Result<Route, GateError> {
    let r = Obj::strict(
        v,
        at,
        "a route",
        &[
            "primary_approvers",
            "escalation_approvers",
            "duration_before_escalation_ms",
            "duration_before_expiry_ms",
            "justification_required",
            "notify_url",
        ],
    )?;
    let primary = r.names("primary_approvers", "who decides first")?;
    let escalation = match r.get_some("escalation_approvers") {
        None => Vec::new(),
        Some(_) => r.names("escalation_approvers", "who decides once escalated")?,
    };
    let escalate = r.opt_u64("duration_before_escalation_ms")?;
    if escalate.is_some() == escalation.is_empty() {
        return Err(field_err(
            &r.at("escalation_approvers"),
            "escalation_approvers and duration_before_escalation_ms go together",
        ));
    }
    let expire = r.opt_u64("duration_before_expiry_ms")?;
    if let (Some(e), Some(x)) = (escalate, expire) {
        if e >= x {
            return Err(field_err(
                &r.at("duration_before_escalation_ms"),
                "must be shorter than duration_before_expiry_ms, or it never escalates",
            ));
        }
    }
    Ok(Route {
        primary_approvers: primary,
        escalation_approvers: escalation,
        duration_before_escalation_ms: escalate,
        duration_before_expiry_ms: expire,
        justification_required: r.bool_or("justification_required", false)?,
        notify_url: match r.get_some("notify_url") {
            None => None,
            Some(Value::String(u)) if u.starts_with("http://") || u.starts_with("https://") => {
                Some(u.clone())
            }
            Some(_) => {
                return Err(field_err(
                    &r.at("notify_url"),
                    "must be an http:// or https:// URL: where notices of this route go",
                ))
            }
        },
    })
}

fn parse_rule(v: &Value, at: &str, routes: &BTreeMap<String, Route>) -> Result<Rule, GateError> {
    let r = Obj::strict(
        v,
        at,
        "a rule",
        &[
            "name",
            "target",
            "when",
            "then",
            "route",
            "approvers_needed",
        ],
    )?;
    let name = r.name("name", "the rule's name, recorded with what it decides")?;
    let target = r.opt_name("target", "")?;
    let when = match r.required("when", "the conditions, all of which must hold")? {
        Value::Array(list) => list
            .iter()
            .enumerate()
            .map(|(i, c)| parse_condition(c, &format!("{at}/when/{i}")))
            .collect::<Result<Vec<_>, _>>()?,
        other => {
            return Err(field_err(
                &r.at("when"),
                format!("must be a list of conditions, not {}", kind(other)),
            ))
        }
    };
    let then = match r.name("then", "person or approve")?.as_str() {
        "person" => {
            let route = r.name("route", "the route that decides")?;
            let Some(known) = routes.get(&route) else {
                return Err(field_err(
                    &r.at("route"),
                    format!("no route {route} in /routes"),
                ));
            };
            let needed = r.opt_u64("approvers_needed")?.unwrap_or(1);
            let mut people: Vec<&String> = known
                .primary_approvers
                .iter()
                .chain(&known.escalation_approvers)
                .collect();
            people.sort();
            people.dedup();
            if needed == 0 || needed > people.len() as u64 {
                return Err(field_err(
                    &r.at("approvers_needed"),
                    format!(
                        "must be 1 to {} (the distinct approvers of route {route})",
                        people.len()
                    ),
                ));
            }
            Then::Person {
                route,
                needed: needed as u32,
            }
        }
        "approve" => {
            for k in ["route", "approvers_needed"] {
                if r.get(k).is_some() {
                    return Err(field_err(
                        &r.at(k),
                        "only a rule that sends to a person has it",
                    ));
                }
            }
            Then::Approve
        }
        other => {
            return Err(field_err(
                &r.at("then"),
                format!("is {other:?}: person (a person decides) or approve (the rule does)"),
            ))
        }
    };
    Ok(Rule {
        name,
        target,
        when,
        then,
    })
}

fn parse_condition(v: &Value, at: &str) -> Result<Condition, GateError> {
    let mut fields = Vec::from(CONDITION_TESTS);
    fields.push("field");
    let c = Obj::strict(v, at, "a condition", &fields)?;
    let field = c.name(
        "field",
        "a JSON pointer into the proposal, e.g. /effect/amount_cents",
    )?;
    if !field.starts_with('/') {
        return Err(field_err(
            &c.at("field"),
            "must be a JSON pointer into the proposal, e.g. /effect/amount_cents",
        ));
    }
    let tests: Vec<&str> = CONDITION_TESTS
        .iter()
        .copied()
        .filter(|t| c.get(t).is_some())
        .collect();
    let [t] = tests.as_slice() else {
        return Err(field_err(
            at,
            "give exactly one test: equals, in, over, at_least, under or at_most",
        ));
    };
    let x = c.get(t).expect("present");
    let number = || {
        x.as_f64()
            .ok_or_else(|| field_err(&c.at(t), format!("must be a number, not {}", kind(x))))
    };
    let test = match *t {
        "equals" => Test::Equals(x.clone()),
        "in" => match x {
            Value::Array(a) => Test::In(a.clone()),
            other => {
                return Err(field_err(
                    &c.at(t),
                    format!("must be a list, not {}", kind(other)),
                ))
            }
        },
        "over" => Test::Over(number()?),
        "at_least" => Test::AtLeast(number()?),
        "under" => Test::Under(number()?),
        _ => Test::AtMost(number()?),
    };
    Ok(Condition { field, test })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules() -> Rules {
        Rules::parse(&json!({
            "rules": [
                {"name": "flagged", "when": [{"field": "/effect/flagged", "equals": true}],
                 "then": "person", "route": "risk"},
                {"name": "large", "target": "payments",
                 "when": [{"field": "/effect/amount_cents", "over": 5000}],
                 "then": "person", "route": "finance", "approvers_needed": 2},
                {"name": "small", "when": [{"field": "/effect/amount_cents", "at_most": 2000}],
                 "then": "approve"}],
            "routes": {
                "finance": {"primary_approvers": ["alice", "bob"],
                            "duration_before_escalation_ms": 1000,
                            "escalation_approvers": ["cfo"],
                            "duration_before_expiry_ms": 5000},
                "risk": {"primary_approvers": ["carol"]}}}))
        .unwrap()
    }

    fn p(effect: Value) -> Value {
        json!({"effect": effect})
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let r = rules();
        let need = |target, e| r.evaluate(target, &p(e));
        assert_eq!(
            need("payments", json!({"amount_cents": 9000})),
            Need::Person {
                rule: "large".into(),
                route: "finance".into(),
                needed: 2
            }
        );
        assert_eq!(
            need("payments", json!({"amount_cents": 1500})),
            Need::ByRule {
                rule: "small".into()
            }
        );
        assert_eq!(
            need("payments", json!({"amount_cents": 3000})),
            Need::Nothing
        );
        // The target filter: a large amount elsewhere is not this rule's.
        assert_eq!(need("mail", json!({"amount_cents": 9000})), Need::Nothing);
        assert_eq!(
            need("payments", json!({"amount_cents": 100, "flagged": true})),
            Need::Person {
                rule: "flagged".into(),
                route: "risk".into(),
                needed: 1
            }
        );
    }

    #[test]
    fn in_doubt_a_person_looks_and_no_rule_approves() {
        let r = rules();
        // No amount at all: "large" (person) holds, "small" (approve) would not.
        assert!(matches!(
            r.evaluate("payments", &p(json!({"order": "o1"}))),
            Need::Person { .. }
        ));
        let approve_only = Rules::parse(&json!({"rules": [
            {"name": "small", "when": [{"field": "/effect/amount_cents", "at_most": 2000}], "then": "approve"}]}))
        .unwrap();
        assert_eq!(
            approve_only.evaluate("payments", &p(json!({"amount_cents": "1500"}))),
            Need::Nothing
        );
    }

    #[test]
    fn deadlines_escalate_then_expire() {
        let r = rules();
        let f = &r.routes["finance"];
        assert_eq!(f.approvers_at(999), ["alice", "bob"]);
        assert_eq!(f.approvers_at(1000), ["alice", "bob", "cfo"]);
        assert!(!f.expired(4999) && f.expired(5000));
        assert!(!r.routes["risk"].expired(u64::MAX));
    }

    #[test]
    fn bad_rules_are_refused_at_their_pointer() {
        let bad = |v: Value, field: &str| match Rules::parse(&v) {
            Err(GateError::InvalidField { field: f, .. }) => assert_eq!(f, field, "{v}"),
            other => panic!("{v}: {other:?}"),
        };
        bad(json!({"rule": []}), "/rule");
        bad(
            json!({"rules": [{"name": "x", "when": [], "then": "person", "route": "nowhere"}]}),
            "/rules/0/route",
        );
        bad(
            json!({"rules": [{"name": "x", "when": [{"field": "/effect/a", "ovr": 1}], "then": "approve"}]}),
            "/rules/0/when/0/ovr",
        );
        bad(
            json!({"rules": [{"name": "x", "when": [{"field": "/effect/a"}], "then": "approve"}]}),
            "/rules/0/when/0",
        );
        bad(
            json!({"rules": [{"name": "x", "when": [{"field": "effect/a", "over": 1}], "then": "approve"}]}),
            "/rules/0/when/0/field",
        );
        bad(
            json!({"rules": [{"name": "x", "when": [], "then": "person", "route": "r", "approvers_needed": 2}],
                   "routes": {"r": {"primary_approvers": ["a"]}}}),
            "/rules/0/approvers_needed",
        );
        bad(
            json!({"routes": {"r": {"primary_approvers": ["a"], "duration_before_escalation_ms": 5}}}),
            "/routes/r/escalation_approvers",
        );
        bad(
            json!({"rules": [{"name": "x", "when": [], "then": "deny"}]}),
            "/rules/0/then",
        );
        bad(
            json!({"rules": [{"name": "x", "when": [], "then": "approve"},
                             {"name": "x", "when": [], "then": "approve"}]}),
            "/rules/1/name",
        );
    }
}
