//! The proposal schema (ARCHITECTURE.md, "Proposal"), parsed strictly: every problem is a
//! typed error naming the field, and nothing is recorded for a bad proposal.
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::Write as _;
use serde_json::{Map, Value};

use crate::canon::{canonical, effect_id_for, is_effect_id, sha256_hex};
use crate::types::GateError;

/// Inputs above this size are refused before parsing.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
pub const DEFAULT_DEDUPE_WINDOW_MS: u64 = 24 * 3600 * 1000;
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_CLOCK_SKEW_MS: u64 = 0;

#[derive(Clone, Debug, PartialEq)]
pub struct TargetSpec {
    pub name: String,
    pub dedupes: bool,
    pub dedupe_window_ms: u64,
    pub lookup: bool,
    /// How long a send may stay in flight: the claim recovery must wait out.
    pub timeout_ms: u64,
    /// The most the clocks of the workers sharing the journal may disagree: every claim on
    /// the effect lasts this much longer than `timeout_ms`, so a worker whose clock runs
    /// ahead by up to this much never takes over a send another still waits on. 0 (the
    /// default) when one machine's clock serves every worker.
    pub clock_skew_ms: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Authority {
    Lease(String),
    Approval(String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    AtMost(Value),
    AtLeast(Value),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Cap {
    pub name: String,
    pub limit_cents: u64,
    pub amount_cents: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub agent: String,
    pub target: TargetSpec,
    pub key: Option<Value>,
    pub effect: Value,
    pub authority: Authority,
    pub host_check: bool,
    pub premises: BTreeMap<String, Value>,
    pub bounds: BTreeMap<String, Bound>,
    pub cap: Option<Cap>,
}

pub fn parse_json(text: &str) -> Result<Value, GateError> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(GateError::TooLarge(MAX_INPUT_BYTES as u64));
    }
    serde_json::from_str(text).map_err(|e| GateError::InvalidJson(e.to_string()))
}

/// The largest integer every JSON reader carries exactly (I-JSON, RFC 7493: 2^53 - 1).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A decision input (a proposal, an approval, captured premises): JSON whose numbers all
/// round-trip exactly. A number past 2^53 - 1 would reach a JS or Python host, or a
/// JCS hasher, as a nearby float: a different amount than the one decided, and two
/// different amounts could compare equal. It is refused at `root` + the pointer to it.
pub fn parse_input(text: &str, root: &str) -> Result<Value, GateError> {
    let v = parse_json(text)?;
    check_safe_numbers(&v, &mut String::from(root))?;
    Ok(v)
}

pub(crate) fn check_safe_numbers(v: &Value, at: &mut String) -> Result<(), GateError> {
    match v {
        Value::Number(n) => {
            let safe = match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => u <= MAX_SAFE_INTEGER,
                (None, Some(i)) => i.unsigned_abs() <= MAX_SAFE_INTEGER,
                _ => n
                    .as_f64()
                    .is_some_and(|f| f.abs() <= MAX_SAFE_INTEGER as f64),
            };
            if !safe {
                return Err(field_err(
                    if at.is_empty() { "/" } else { at },
                    format!(
                        "{n} is outside the range JSON carries exactly (±{MAX_SAFE_INTEGER}); \
                         send a larger number as a string"
                    ),
                ));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = at.len();
                let _ = write!(at, "/{i}");
                check_safe_numbers(item, at)?;
                at.truncate(len);
            }
        }
        Value::Object(m) => {
            for (k, item) in m {
                let len = at.len();
                // JSON pointer escaping (RFC 6901).
                at.push('/');
                for c in k.chars() {
                    match c {
                        '~' => at.push_str("~0"),
                        '/' => at.push_str("~1"),
                        c => at.push(c),
                    }
                }
                check_safe_numbers(item, at)?;
                at.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

use crate::schema::Obj;
pub use crate::schema::{check_name, field_err};

/// An effect id given by the host (to recover, confirm, or take a receipt of an effect).
pub fn check_effect_id(s: &str) -> Result<(), GateError> {
    if !is_effect_id(s) {
        return Err(field_err(
            "/effect",
            "an effect id is 32 lowercase hex digits",
        ));
    }
    Ok(())
}

const FIELDS: &[&str] = &[
    "agent",
    "target",
    "key",
    "effect",
    "authority",
    "premises",
    "bounds",
    "cap",
];

/// The refusal of a proposal that names no authority where one must be named: a recorded
/// proposal, or any under strict authority (`Gate::set_strict_authority`).
pub fn authority_required() -> GateError {
    field_err(
        "/authority",
        "is required (strict authority: no standing lease): name a lease \
         ({\"lease\": \"case-4471\"}, granted first with `interlock lease grant JOURNAL \
         case-4471 --for 48h`) or an approval ({\"approval\": \"apr-7\"}, recorded with \
         `interlock approve JOURNAL FILE`)",
    )
}

const TARGET_FIELDS: &[&str] = &[
    "name",
    "dedupes",
    "dedupe_window_ms",
    "lookup",
    "timeout_ms",
    "clock_skew_ms",
];
const AUTHORITY_FIELDS: &[&str] = &["lease", "approval", "host_check"];
const CAP_FIELDS: &[&str] = &["name", "limit_cents", "amount_cents"];

impl Proposal {
    /// A proposal that must name its authority (as a recorded one must, see
    /// [`Proposal::from_recorded`]): the tests' way to read one from text.
    #[cfg(test)]
    pub fn parse(text: &str) -> Result<Proposal, GateError> {
        match Self::parse_input(text)? {
            (p, false) => Ok(p),
            (_, true) => Err(authority_required()),
        }
    }

    /// A proposal as an agent's host gives it. One that names no authority runs under its
    /// agent's standing lease (`<agent>-standing`, see `Gate::grant_standing_lease`): the
    /// second value says so, and the gate decides whether it may (it may not under strict
    /// authority) and grants that lease at its first use.
    pub fn parse_input(text: &str) -> Result<(Proposal, bool), GateError> {
        Self::from_input(&parse_input(text, "")?)
    }

    /// A proposal recorded in a journal (a PROPOSED entry's `proposal`, a value read and
    /// verified with its entry), read as [`Proposal::parse`] reads its text, with no text
    /// written and parsed again.
    pub fn from_recorded(v: &Value) -> Result<Proposal, GateError> {
        check_safe_numbers(v, &mut String::new())?;
        match Self::from_input(v)? {
            (p, false) => Ok(p),
            (_, true) => Err(authority_required()),
        }
    }

    /// [`Proposal::parse_input`] of JSON already parsed (and its numbers checked).
    fn from_input(v: &Value) -> Result<(Proposal, bool), GateError> {
        let m = Obj::strict(v, "", "a proposal", FIELDS)?;
        let agent = m.name("agent", "who proposes (an agent name)")?;

        let t = Obj::strict(
            m.required("target", "the service the effect goes to ({\"name\": ...})")?,
            "/target",
            "target",
            TARGET_FIELDS,
        )?;
        let target = TargetSpec {
            name: t.name("name", "the target service's name")?,
            dedupes: t.bool_or("dedupes", false)?,
            dedupe_window_ms: t
                .opt_u64("dedupe_window_ms")?
                .unwrap_or(DEFAULT_DEDUPE_WINDOW_MS),
            lookup: t.bool_or("lookup", false)?,
            timeout_ms: t.opt_u64("timeout_ms")?.unwrap_or(DEFAULT_TIMEOUT_MS),
            clock_skew_ms: t.opt_u64("clock_skew_ms")?.unwrap_or(DEFAULT_CLOCK_SKEW_MS),
        };
        if target.timeout_ms == 0 {
            return Err(field_err("/target/timeout_ms", "must be at least 1"));
        }

        let effect = m
            .required("effect", "what to do, as a JSON object")?
            .clone();
        Obj::any(&effect, "/effect", "the effect")?;
        let key = m.get_some("key").cloned();

        // No lease and no approval named (no `authority`, or only its `host_check`): the
        // agent's standing lease; the gate decides whether that may be, and grants it.
        let (named, host_check) = match m.get("authority") {
            None => (None, false),
            Some(a) => {
                let a = Obj::strict(a, "/authority", "authority", AUTHORITY_FIELDS)?;
                let named = match (a.get("lease"), a.get("approval")) {
                    (Some(_), Some(_)) => {
                        return Err(field_err(
                            "/authority",
                            "names a lease or an approval, not both",
                        ))
                    }
                    (Some(_), None) => Some(Authority::Lease(a.name("lease", "")?)),
                    (None, Some(_)) => Some(Authority::Approval(a.name("approval", "")?)),
                    (None, None) => None,
                };
                (named, a.bool_or("host_check", false)?)
            }
        };
        let standing = named.is_none();
        let authority = match named {
            Some(a) => a,
            None => Authority::Lease(crate::defaults::standing_lease_name(&agent)?),
        };

        let mut premises = BTreeMap::new();
        if let Some(p) = m.get("premises") {
            let p = Obj::any(p, "/premises", "premises (name -> value read)")?;
            for (k, v) in p.map() {
                check_name(k, &p.at(k))?;
                premises.insert(k.clone(), v.clone());
            }
        }

        let mut bounds = BTreeMap::new();
        if let Some(b) = m.get("bounds") {
            let b = Obj::any(b, "/bounds", "bounds (premise name -> bound)")?;
            for (k, spec) in b.map() {
                let field = b.at(k);
                if !premises.contains_key(k) {
                    return Err(field_err(
                        &field,
                        "bounds a premise the proposal does not declare: add it to premises",
                    ));
                }
                let s = Obj::strict(spec, &field, "a bound", &["at_most", "at_least"])?;
                let bound = match (s.get("at_most"), s.get("at_least")) {
                    (Some(x), None) if x.is_number() => Bound::AtMost(x.clone()),
                    (None, Some(x)) if x.is_number() => Bound::AtLeast(x.clone()),
                    _ => {
                        return Err(field_err(
                            &field,
                            "must be {\"at_most\": number} or {\"at_least\": number}",
                        ))
                    }
                };
                bounds.insert(k.clone(), bound);
            }
        }

        let cap = match m.get_some("cap") {
            None => None,
            Some(c) => {
                let c = Obj::strict(c, "/cap", "cap", CAP_FIELDS)?;
                Some(Cap {
                    name: c.name("name", "the cap's name")?,
                    limit_cents: c.u64("limit_cents", "the most the cap lets through, in cents")?,
                    amount_cents: c.u64(
                        "amount_cents",
                        "what this effect counts against it, in cents",
                    )?,
                })
            }
        };

        Ok((
            Proposal {
                agent,
                target,
                key,
                effect,
                authority,
                host_check,
                premises,
                bounds,
                cap,
            },
            standing,
        ))
    }

    pub fn effect_id(&self) -> String {
        effect_id_for(self.key.as_ref(), &self.effect)
    }

    /// What "the same request" means: the payload, apart from the key it is filed under.
    pub fn payload_hash(&self) -> String {
        let mut m = Map::new();
        m.insert("effect".into(), self.effect.clone());
        m.insert("target".into(), Value::String(self.target.name.clone()));
        sha256_hex(canonical(&Value::Object(m)).as_bytes())
    }

    /// The proposal as recorded in its PROPOSED entry, and read back by recovery.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("agent".into(), self.agent.clone().into());
        let mut t = Map::new();
        t.insert("name".into(), self.target.name.clone().into());
        t.insert("dedupes".into(), self.target.dedupes.into());
        t.insert(
            "dedupe_window_ms".into(),
            self.target.dedupe_window_ms.into(),
        );
        t.insert("lookup".into(), self.target.lookup.into());
        t.insert("timeout_ms".into(), self.target.timeout_ms.into());
        // Recorded when set, so journals of one machine read as they always did.
        if self.target.clock_skew_ms != DEFAULT_CLOCK_SKEW_MS {
            t.insert("clock_skew_ms".into(), self.target.clock_skew_ms.into());
        }
        m.insert("target".into(), Value::Object(t));
        if let Some(k) = &self.key {
            m.insert("key".into(), k.clone());
        }
        m.insert("effect".into(), self.effect.clone());
        let mut a = Map::new();
        match &self.authority {
            Authority::Lease(l) => a.insert("lease".into(), l.clone().into()),
            Authority::Approval(ap) => a.insert("approval".into(), ap.clone().into()),
        };
        if self.host_check {
            a.insert("host_check".into(), true.into());
        }
        m.insert("authority".into(), Value::Object(a));
        m.insert(
            "premises".into(),
            Value::Object(
                self.premises
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
        );
        if !self.bounds.is_empty() {
            let b = self
                .bounds
                .iter()
                .map(|(k, b)| {
                    let mut o = Map::new();
                    match b {
                        Bound::AtMost(x) => o.insert("at_most".into(), x.clone()),
                        Bound::AtLeast(x) => o.insert("at_least".into(), x.clone()),
                    };
                    (k.clone(), Value::Object(o))
                })
                .collect();
            m.insert("bounds".into(), Value::Object(b));
        }
        if let Some(c) = &self.cap {
            let mut o = Map::new();
            o.insert("name".into(), c.name.clone().into());
            o.insert("limit_cents".into(), c.limit_cents.into());
            o.insert("amount_cents".into(), c.amount_cents.into());
            m.insert("cap".into(), Value::Object(o));
        }
        Value::Object(m)
    }

    /// The premise names to capture: the proposal's own, then any extra the approval saw.
    pub fn premise_names(&self, extra: &[String]) -> Vec<String> {
        let mut names: Vec<String> = self.premises.keys().cloned().collect();
        for n in extra {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{"agent":"refund-agent","target":{"name":"payments","dedupes":true},
        "key":"refund:order_881","effect":{"order":"order_881","amount_cents":2000},
        "authority":{"lease":"case-4471"},"premises":{"eligible":true,"refunded_by_others_cents":0}}"#;

    #[test]
    fn parses_and_round_trips() {
        let p = Proposal::parse(OK).unwrap();
        assert_eq!(p.target.dedupe_window_ms, DEFAULT_DEDUPE_WINDOW_MS);
        let again = Proposal::parse(&canonical(&p.to_json())).unwrap();
        // As the journal holds it: read from the recorded value, the same proposal.
        let recorded = Proposal::from_recorded(&p.to_json()).unwrap();
        assert_eq!(recorded, p);
        assert_eq!(p, again);
    }

    fn field_of(text: &str) -> String {
        match Proposal::parse(text) {
            Err(GateError::InvalidField { field, .. }) => field,
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn each_bad_field_is_named() {
        assert!(matches!(
            Proposal::parse("{"),
            Err(GateError::InvalidJson(_))
        ));
        assert_eq!(field_of("[]"), "");
        assert_eq!(
            field_of(&OK.replace(r#""agent":"refund-agent","#, "")),
            "/agent"
        );
        assert_eq!(
            field_of(&OK.replace(r#""dedupes":true"#, r#""dedupes":"yes""#)),
            "/target/dedupes"
        );
        assert_eq!(
            field_of(&OK.replace(
                r#""effect":{"order":"order_881","amount_cents":2000}"#,
                r#""effect":7"#
            )),
            "/effect"
        );
        // Neither lease nor approval: only a proposal that may run standing takes it.
        assert_eq!(
            field_of(&OK.replace(r#"{"lease":"case-4471"}"#, "{}")),
            "/authority"
        );
        let (p, standing) = Proposal::parse_input(
            &OK.replace(r#"{"lease":"case-4471"}"#, r#"{"host_check":true}"#),
        )
        .unwrap();
        assert!(standing && p.host_check);
        assert_eq!(
            field_of(&OK.replace(r#""premises""#, r#""premise""#)),
            "/premise"
        );
        let big = OK.replace("refund-agent", &"a".repeat(MAX_INPUT_BYTES));
        assert_eq!(
            Proposal::parse(&big),
            Err(GateError::TooLarge(MAX_INPUT_BYTES as u64))
        );
    }

    #[test]
    fn unknown_fields_are_refused_at_every_depth() {
        // Each of these once committed and sent, a check silently gone (issue 23).
        let cases = [
            (
                r#""lease":"case-4471""#,
                r#""lease":"case-4471","host_chek":true"#,
                "/authority/host_chek",
            ),
            (
                r#""lease":"case-4471""#,
                r#""leese":"case-4471""#,
                "/authority/leese",
            ),
            (
                r#""dedupes":true"#,
                r#""dedupes":true,"dedupe":true"#,
                "/target/dedupe",
            ),
            (
                r#""dedupes":true"#,
                r#""dedupes":true,"lookups":true"#,
                "/target/lookups",
            ),
        ];
        for (from, to, at) in cases {
            assert_eq!(field_of(&OK.replace(from, to)), at, "{to}");
        }
        let capped = OK.replace(
            r#""premises""#,
            r#""cap":{"name":"o","limit":3000,"amount_cents":2000},"premises""#,
        );
        assert_eq!(field_of(&capped), "/cap/limit");
        let bounded = OK.replace(
            r#""premises""#,
            r#""bounds":{"eligible":{"at_most":1,"at_mots":2}},"premises""#,
        );
        assert_eq!(field_of(&bounded), "/bounds/eligible/at_mots");
        match Proposal::parse(&OK.replace(
            r#""lease":"case-4471""#,
            r#""lease":"case-4471","host_chek":true"#,
        )) {
            Err(GateError::InvalidField { problem, .. }) => {
                assert!(
                    problem.contains("did you mean \"host_check\"?"),
                    "{problem}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_authority_is_the_standing_lease_of_the_agent_unless_recorded() {
        let text = OK.replace(r#""authority":{"lease":"case-4471"},"#, "");
        let (p, standing) = Proposal::parse_input(&text).unwrap();
        assert!(standing);
        assert_eq!(
            p.authority,
            Authority::Lease("refund-agent-standing".into())
        );
        assert_eq!(field_of(&text), "/authority");
    }

    #[test]
    fn numbers_past_the_safe_range_are_refused_where_they_are() {
        let at = |amount: &str| field_of(&OK.replace("2000", amount));
        assert_eq!(at("18446744073709551617"), "/effect/amount_cents");
        assert_eq!(at("18446744073709551616"), "/effect/amount_cents");
        assert_eq!(at("9007199254740992"), "/effect/amount_cents");
        assert_eq!(at("-9007199254740992"), "/effect/amount_cents");
        assert_eq!(at("1.8446744073709552e19"), "/effect/amount_cents");
        for fine in ["9007199254740991", "-9007199254740991", "12.5", "0", "-3"] {
            assert!(Proposal::parse(&OK.replace("2000", fine)).is_ok(), "{fine}");
        }
        let nested = OK.replace(
            r#""eligible":true"#,
            r#""eligible":true,"a/b":[1,{"~x":9007199254740993}]"#,
        );
        assert_eq!(field_of(&nested), "/premises/a~1b/1/~0x");
    }
}
