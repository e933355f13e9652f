//! Real targets, each written once: which calls of a service's official SDK a host makes
//! for each of the gate's steps (the premise read, the send, the lookup), with which
//! arguments, and what the answer, or the error the SDK raised, means for the gate
//! (`applied`, `rejected`, `unknown`; `found`, `not-found`, `failed`; `captured`, `failed`).
//!
//! A built-in target is an effect definition of the `effects` machine with `"builtin":
//! "<name>"` (ARCHITECTURE.md, "Real targets"): the machine asks the host for
//! [`ServiceCall`]s instead of the definition's own `premises`, `apply` and `lookup`
//! functions, and the host only calls its SDK and hands back what came back, as plain JSON
//! ([`ServiceAnswer`]: the object it returned, or the error it raised as its type, its HTTP
//! status and its code). One file per target; this file is what they share.
//!
//! A target is a pure function of the step and of the answers so far ([`Target::turn`]):
//! it names the next call, or the reply. So a step may take several calls (a charge, then
//! its refunds page by page) and a test replays any of them without a service.
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use serde_json::{Map, Value};

use crate::canon::canonical;
use crate::schema::field_err;
use crate::types::{GateError, Reply};

pub mod git;
pub mod postgres;
pub mod smtp;
pub mod stripe;

/// Which of the gate's steps a target performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Read the premises, fresh, this effect's own result left out (`capture`, and the
    /// read a proposal is made from).
    Premises,
    /// The effect itself (`apply`).
    Send,
    /// Whether the effect already happened (`query`).
    Lookup,
}

/// What one step is about.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The effect object, as [`Target::check_effect`] accepted it.
    pub effect: &'a Value,
    pub effect_id: &'a str,
    /// For [`Phase::Send`]: what the service takes as its idempotency key.
    pub idempotency_key: &'a str,
    /// For [`Phase::Premises`]: the premises asked for.
    pub names: &'a [String],
    /// For [`Phase::Send`]: how long the host may wait for the answer.
    pub timeout_ms: Option<u64>,
    /// For [`Phase::Premises`]: this read is the one a proposal is made from (what the agent
    /// decided on), not a re-check. A target may read it as of what the agent saw (git's
    /// `base`); a re-check always reads the present.
    pub decision: bool,
}

/// One call of the service's SDK for the host to make.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceCall {
    /// `resource.method`, as the service's SDKs spell it (`refunds.create`).
    pub operation: String,
    /// The operation's parameters, a JSON object; `id`, when present, is the id of the
    /// object the SDK method takes first (`charges.retrieve(id)`).
    pub params: Value,
    /// The request options, a JSON object in snake_case (`idempotency_key`).
    pub options: Value,
    /// A send: give up waiting after this long and answer [`ServiceAnswer::NoAnswer`].
    pub timeout_ms: Option<u64>,
}

/// An error an SDK raised, as the host hands it back: what the service said, when it said
/// anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceError {
    /// The error's type as the service names it (Stripe's `type`: `card_error`, ...), else
    /// the SDK's name for the error (`APIConnectionError`).
    pub error_type: Option<String>,
    /// The HTTP status the service answered with (or its protocol's reply code); none when
    /// no answer came (a connection error, a timeout).
    pub status: Option<u32>,
    /// The service's code for the error (`charge_already_refunded`).
    pub code: Option<String>,
    pub message: String,
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(s) => write!(f, "HTTP {s}")?,
            None => f.write_str("no answer")?,
        }
        if let Some(t) = &self.error_type {
            write!(f, " {t}")?;
        }
        if let Some(c) = &self.code {
            write!(f, " ({c})")?;
        }
        write!(f, ": {}", cut(&self.message, 300))
    }
}

/// What came back from one [`ServiceCall`].
#[derive(Clone, Debug, PartialEq)]
pub enum ServiceAnswer {
    /// The SDK returned this object (as JSON).
    Returned(Value),
    /// The SDK raised this error.
    Raised(ServiceError),
    /// Nothing came back: the host gave up after the call's `timeout_ms`, or the call
    /// could not be made.
    NoAnswer(String),
}

impl ServiceAnswer {
    /// What the SDK returned, as the JSON text a host hands back; text that is not JSON is
    /// no answer at all (never a guess at what it meant).
    pub fn returned(text: &str) -> ServiceAnswer {
        match serde_json::from_str(text) {
            Ok(v) => ServiceAnswer::Returned(v),
            Err(e) => ServiceAnswer::NoAnswer(format!("the host handed back no JSON: {e}")),
        }
    }
}

/// What a target does next in a step.
#[derive(Clone, Debug, PartialEq)]
pub enum Turn {
    Call(ServiceCall),
    Reply(Reply),
}

/// What a target can do, its tier: an effect definition may say less (a stand-in service
/// that ignores idempotency keys), never more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tier {
    pub dedupes: bool,
    pub dedupe_window_ms: Option<u64>,
    pub lookup: bool,
}

impl Tier {
    /// Tier 2: no dedupe, a lookup.
    pub const LOOKUP: Tier = Tier {
        dedupes: false,
        dedupe_window_ms: None,
        lookup: true,
    };
}

/// A real target, defined once.
pub trait Target: Sync {
    /// Its name in an effect definition's `builtin` (`stripe.refund`).
    fn name(&self) -> &'static str;
    /// The service whose SDK the host calls (`stripe`).
    fn service(&self) -> &'static str;
    /// What the service can do.
    fn tier(&self) -> Tier;
    /// The premises it reads (for a target whose premises depend on the effect, their
    /// patterns: `file:<path>`).
    fn premises(&self) -> &'static [&'static str];
    /// The premises it reads for `effect` (checked by [`Target::check_effect`]).
    fn premises_of(&self, effect: &Value) -> Vec<String> {
        let _ = effect;
        self.premises().iter().map(|p| String::from(*p)).collect()
    }
    /// Checks an effect object (every problem `invalid-field` at its pointer, `/effect/...`).
    fn check_effect(&self, effect: &Value) -> Result<(), GateError>;
    /// The next call of `phase`, or its reply, given the answers so far (in order).
    fn turn(&self, phase: Phase, cx: &Context<'_>, answers: &[ServiceAnswer]) -> Turn;
}

impl fmt::Debug for dyn Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every built-in target.
pub const BUILTINS: &[&dyn Target] = &[
    &stripe::Refund,
    &postgres::Insert,
    &git::COMMIT,
    &git::MERGE,
    &git::PUSH,
    &smtp::Send,
];

/// The built-in target `name`, or `invalid-field` at `at` naming the ones there are.
pub fn builtin(name: &str, at: &str) -> Result<&'static dyn Target, GateError> {
    BUILTINS
        .iter()
        .copied()
        .find(|t| t.name() == name)
        .ok_or_else(|| {
            let names: Vec<&str> = BUILTINS.iter().map(|t| t.name()).collect();
            field_err(
                at,
                format!(
                    "{name:?} is not a built-in target; there are: {}",
                    names.join(", ")
                ),
            )
        })
}

/// The built-in targets as JSON, for hosts and docs: name -> `{service, premises,
/// dedupes, dedupe_window_ms, lookup}`.
pub fn describe() -> String {
    let mut all = Map::new();
    for t in BUILTINS {
        let tier = t.tier();
        let mut d = Map::new();
        d.insert("service".into(), t.service().into());
        d.insert("premises".into(), t.premises().to_vec().into());
        d.insert("dedupes".into(), tier.dedupes.into());
        d.insert("dedupe_window_ms".into(), tier.dedupe_window_ms.into());
        d.insert("lookup".into(), tier.lookup.into());
        all.insert(t.name().into(), Value::Object(d));
    }
    canonical(&Value::Object(all))
}

/// The HTTP table every target starts from (the HTTP target's, docs/http-api.yaml): a 2xx
/// applied, a 4xx refused with nothing applied, a 5xx or no answer unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendVerdict {
    Applied,
    NotApplied,
    Unknown,
}

pub fn http_send_verdict(status: u32) -> SendVerdict {
    match status {
        200..=299 => SendVerdict::Applied,
        400..=499 => SendVerdict::NotApplied,
        _ => SendVerdict::Unknown,
    }
}

/// The first `n` characters of `s` (a message never carries a whole answer).
pub fn cut(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// A read's answer as the object it must be (`object` is the value of its `"object"`
/// member, as Stripe-like APIs tag them), or why it is not one: the read failed.
pub fn read_object<'a>(
    answer: &'a ServiceAnswer,
    object: &str,
    operation: &str,
) -> Result<&'a Map<String, Value>, String> {
    match answer {
        ServiceAnswer::Returned(Value::Object(m))
            if m.get("object").and_then(Value::as_str) == Some(object) =>
        {
            Ok(m)
        }
        ServiceAnswer::Returned(other) => Err(format!(
            "{operation} answered something that is not a {object}: {}",
            cut(&canonical(other), 200)
        )),
        ServiceAnswer::Raised(e) => Err(format!("{operation}: {e}")),
        ServiceAnswer::NoAnswer(m) => Err(format!("{operation}: no answer ({m})")),
    }
}

/// The premises asked for, from all a target read; a name it does not read fails the read.
pub fn captured(target: &str, names: &[String], all: &Map<String, Value>) -> Reply {
    let mut picked = Map::new();
    for n in names {
        match all.get(n) {
            Some(v) => {
                picked.insert(n.clone(), v.clone());
            }
            None => {
                return Reply::Failed(format!(
                    "{target} reads no premise {n:?} (it reads {})",
                    all.keys().cloned().collect::<Vec<_>>().join(", ")
                ))
            }
        }
    }
    Reply::Captured(canonical(&Value::Object(picked)))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod testing;
