//! The service as the gate's target: one function per step the gate asks of it
//! (`interlock:gate/target`), taking the request's fields and returning the reply.
//!
//! This is where the adapter's one judgement lives: which of the service's answers are
//! definitive (`rejected`: it checked the call and made nothing) and which leave the
//! refund's fate unknown (`unknown`). Every host gets it from here, natively (the CLI) or
//! through the component (Node, Python); a host routes steps here and never judges them.
//!
//! Texts in replies are codes ([`Error::detail`]), not sentences: a rejection's text lands
//! in the journal (`detail`), whose bytes every host must write identically.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};

use serde::Serialize;
use serde_json::Value;

use crate::{quote, Error, Payments, Refund};

/// The answer to one step: the cases of the gate's `reply` a payments service gives.
/// `allowed` is not among them: the service has no authority check, so a host answers
/// `authorize` from its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The premises asked for, as a JSON object (keys sorted).
    Captured(String),
    /// The refund made (or, deduped, the first one): `{"amount_cents": u64, "refund_id": string}`.
    Applied(String),
    /// The service refused and made nothing; carries the code.
    Rejected(String),
    /// The refund may or may not have been made; carries the code.
    Unknown(String),
    /// The lookup found the refund; the same JSON as `Applied`.
    Found(String),
    /// The lookup is sure no refund carries the effect id.
    NotFound,
    /// A read failed; nothing can be concluded from it. Carries the code.
    Failed(String),
}

/// The effect of a payments proposal: `{"order": "order_881", "amount_cents": 2000}`.
struct RefundEffect {
    order: String,
    amount_cents: u64,
}

/// Parses the effect, or says with a code what is wrong with it: `invalid_effect: not_json`,
/// or `invalid_effect: field="/order"` (a JSON pointer to the missing or mistyped field).
fn parse_effect(effect: &str) -> Result<RefundEffect, String> {
    let v: Value =
        serde_json::from_str(effect).map_err(|_| "invalid_effect: not_json".to_string())?;
    let field = |pointer: &str| format!("invalid_effect: field={}", quote(pointer));
    let order = v
        .get("order")
        .and_then(Value::as_str)
        .ok_or_else(|| field("/order"))?;
    let amount_cents = v
        .get("amount_cents")
        .and_then(Value::as_u64)
        .ok_or_else(|| field("/amount_cents"))?;
    Ok(RefundEffect {
        order: order.to_string(),
        amount_cents,
    })
}

/// What the gate records as the refund's result. Fields in sorted order, so the text is
/// the same whatever map order serde_json is built with.
#[derive(Serialize)]
struct RefundResult<'a> {
    amount_cents: u64,
    refund_id: &'a str,
}

fn result_json(r: &Refund) -> String {
    serde_json::to_string(&RefundResult {
        amount_cents: r.amount_cents,
        refund_id: &r.id,
    })
    .expect("a refund result always serializes")
}

/// Whether a refusal of `refund` is definitive: the service checked the call and made
/// nothing. Every kind is listed, so a new one needs a decision here.
pub(crate) fn definitive(e: &Error) -> bool {
    match e {
        Error::UnknownOrder(_)
        | Error::ExceedsBalance { .. }
        | Error::IdempotencyMismatch { .. } => true,
        // The state file failed; a storage failure may come after the refund was made.
        #[cfg(feature = "std")]
        Error::Io(_) => false,
        // Not answers `refund` gives; were one ever given, nothing says nothing was made.
        Error::LookupUnsupported
        | Error::BadTier(_)
        | Error::Corrupt(_)
        | Error::InvalidJson(_) => false,
    }
}

impl Payments {
    /// The gate's `capture` step: reads the premises `names` of the effect's order, fresh.
    /// The effect's own refund (reference `effect_id`) never counts against it. `failed`
    /// when the effect is malformed, the order unknown or a name not a premise of the
    /// service (`unknown_premise: name="..."`).
    pub fn capture(&self, effect_id: &str, effect: &str, names: &[String]) -> Reply {
        let effect = match parse_effect(effect) {
            Ok(e) => e,
            Err(code) => return Reply::Failed(code),
        };
        let all = match self.premises(&effect.order, Some(effect_id)) {
            Ok(v) => v,
            Err(e) => return Reply::Failed(e.detail()),
        };
        let mut asked = BTreeMap::new();
        for name in names {
            match all.get(name) {
                Some(v) => asked.insert(name.as_str(), v),
                None => return Reply::Failed(format!("unknown_premise: name={}", quote(name))),
            };
        }
        Reply::Captured(serde_json::to_string(&asked).expect("premises always serialize"))
    }

    /// The gate's `apply` step: refunds the effect with `idempotency_key` (where the tier
    /// dedupes) and `effect_id` as the reference a lookup finds. `rejected` when the
    /// effect is malformed (nothing was sent) or the service refused it (unknown order,
    /// over the balance, key reused with other parameters); `unknown` when its state could
    /// not be stored.
    pub fn apply(
        &mut self,
        effect_id: &str,
        effect: &str,
        idempotency_key: &str,
        now_ms: u64,
    ) -> Reply {
        let effect = match parse_effect(effect) {
            Ok(e) => e,
            Err(code) => return Reply::Rejected(code),
        };
        match self.refund(
            &effect.order,
            effect.amount_cents,
            Some(idempotency_key),
            Some(effect_id),
            now_ms,
        ) {
            Ok(refund) => Reply::Applied(result_json(&refund)),
            Err(e) if definitive(&e) => Reply::Rejected(e.detail()),
            Err(e) => Reply::Unknown(e.detail()),
        }
    }

    /// The gate's `query` step: whether a refund carries the reference `effect_id`.
    /// `failed` when the effect is malformed or the tier offers no lookup.
    pub fn query(&self, effect_id: &str, effect: &str) -> Reply {
        if let Err(code) = parse_effect(effect) {
            return Reply::Failed(code);
        }
        match self.find_by_reference(effect_id) {
            Ok(Some(refund)) => Reply::Found(result_json(&refund)),
            Ok(None) => Reply::NotFound,
            Err(e) => Reply::Failed(e.detail()),
        }
    }
}
