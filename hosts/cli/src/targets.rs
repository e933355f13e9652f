//! Target adapters: how the host performs the steps the gate asks for.
//!
//! An adapter translates; it never decides. What a reply means (retry, look up, refuse,
//! AMBIGUOUS) is the gate's business. The one judgement an adapter makes is which of its
//! service's answers are definitive (`rejected`: nothing applied) and which leave the
//! send's fate unknown (`unknown`).

use interlock_payments_sim::{Error as PayError, Payments};
use serde_json::{json, Map, Value};

use crate::bindings::interlock::gate::target::{
    ApplyRequest, AuthorizeRequest, CaptureRequest, QueryRequest, Reply,
};
use crate::clock::Clock;

/// Performs the gate's steps against real services, routed by `target` name.
pub trait Targets {
    /// The target names this host reaches. The gate asks nothing for any other target and
    /// leaves such effects open (`target-unroutable`) for a host that reaches them.
    fn routes(&self) -> Vec<String>;
    fn capture(&mut self, req: &CaptureRequest) -> Reply;
    fn authorize(&mut self, req: &AuthorizeRequest) -> Reply;
    fn apply(&mut self, req: &ApplyRequest) -> Reply;
    fn query(&mut self, req: &QueryRequest) -> Reply;
}

/// The target name of [`PaymentsTarget`] in proposals.
pub const PAYMENTS: &str = "payments";

/// A host's own authority check (asked only when a proposal sets `authority.host_check`).
pub type Authorizer = Box<dyn FnMut(&AuthorizeRequest) -> bool>;

/// The simulated refund API as a target. The effect JSON is
/// `{"order": "order_881", "amount_cents": 2000}`.
pub struct PaymentsTarget {
    pub payments: Payments,
    clock: Clock,
    authorizer: Option<Authorizer>,
}

impl PaymentsTarget {
    pub fn new(payments: Payments, clock: Clock) -> PaymentsTarget {
        PaymentsTarget {
            payments,
            clock,
            authorizer: None,
        }
    }

    /// Sets the host's authority check. Without one the check cannot be made: the effect
    /// stays open (`read-failed`). It must not pass because the host forgot to install one,
    /// nor be closed, since its send may already have landed.
    pub fn with_authorizer(mut self, check: Authorizer) -> PaymentsTarget {
        self.authorizer = Some(check);
        self
    }
}

/// The effect a payments proposal carries.
struct RefundEffect {
    order: String,
    amount_cents: u64,
}

fn parse_effect(target: &str, effect: &str) -> Result<RefundEffect, String> {
    // The gate asks only for the targets in `routes`.
    assert_eq!(
        target, PAYMENTS,
        "the gate asked for a target this host does not route"
    );
    let v: Value = serde_json::from_str(effect).map_err(|e| format!("effect is not JSON: {e}"))?;
    let order = v.get("order").and_then(Value::as_str);
    let amount = v.get("amount_cents").and_then(Value::as_u64);
    match (order, amount) {
        (Some(order), Some(amount_cents)) => Ok(RefundEffect {
            order: order.to_string(),
            amount_cents,
        }),
        _ => Err(format!(
            "effect must be {{\"order\": string, \"amount_cents\": integer}}, got {effect}"
        )),
    }
}

fn refund_json(r: &interlock_payments_sim::Refund) -> String {
    json!({ "refund_id": r.id, "amount_cents": r.amount_cents }).to_string()
}

impl Targets for PaymentsTarget {
    fn routes(&self) -> Vec<String> {
        vec![PAYMENTS.to_string()]
    }

    fn capture(&mut self, req: &CaptureRequest) -> Reply {
        let effect = match parse_effect(&req.target, &req.effect) {
            Ok(e) => e,
            Err(m) => return Reply::Failed(m),
        };
        // The effect's own refund (reference = effect id) never counts against it.
        let all = match self.payments.premises(&effect.order, Some(&req.effect_id)) {
            Ok(v) => v,
            Err(e) => return Reply::Failed(e.to_string()),
        };
        let mut asked = Map::new();
        for name in &req.names {
            match all.get(name) {
                Some(v) => asked.insert(name.clone(), v.clone()),
                None => {
                    return Reply::Failed(format!("the payments service has no premise {name:?}"))
                }
            };
        }
        Reply::Captured(Value::Object(asked).to_string())
    }

    fn authorize(&mut self, req: &AuthorizeRequest) -> Reply {
        match self.authorizer.as_mut() {
            Some(check) => Reply::Allowed(check(req)),
            None => Reply::Failed("this host has no authority check installed".into()),
        }
    }

    fn apply(&mut self, req: &ApplyRequest) -> Reply {
        let effect = match parse_effect(&req.target, &req.effect) {
            Ok(e) => e,
            // Nothing was sent, so this is definitive.
            Err(m) => return Reply::Rejected(m),
        };
        let now_ms = self.clock.now_ms();
        match self.payments.refund(
            &effect.order,
            effect.amount_cents,
            Some(&req.idempotency_key),
            Some(&req.effect_id),
            now_ms,
        ) {
            Ok(refund) => Reply::Applied(refund_json(&refund)),
            // The service's own refusals: it checked and created nothing.
            Err(
                e @ (PayError::UnknownOrder(_)
                | PayError::ExceedsBalance { .. }
                | PayError::IdempotencyMismatch { .. }),
            ) => Reply::Rejected(e.to_string()),
            // A storage failure may come after the refund was made: its fate is unknown.
            Err(e) => Reply::Unknown(e.to_string()),
        }
    }

    fn query(&mut self, req: &QueryRequest) -> Reply {
        if let Err(m) = parse_effect(&req.target, &req.effect) {
            return Reply::Failed(m);
        }
        match self.payments.find_by_reference(&req.effect_id) {
            Ok(Some(refund)) => Reply::Found(refund_json(&refund)),
            Ok(None) => Reply::NotFound,
            Err(e) => Reply::Failed(e.to_string()),
        }
    }
}
