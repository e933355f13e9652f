//! Target adapters: how the host performs the steps the gate asks for.
//!
//! An adapter routes and translates; it never decides. What a reply means (retry, look up,
//! refuse, AMBIGUOUS) is the gate's business, and which of the payments service's answers
//! are definitive is the service's own: `interlock_payments_sim`'s `capture`, `apply` and
//! `query`, which the Node and Python hosts call through its component.

use interlock_payments_sim::{Payments, Reply as PayReply};

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
/// `{"order": "order_881", "amount_cents": 2000}`. The service answers every step but
/// `authorize`, which is this host's own check.
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

/// The gate asks only for the targets in `routes`; another one is a host bug, never
/// answered with a made-up reply (it could close an effect whose send may have landed).
fn ours(target: &str) {
    assert_eq!(
        target, PAYMENTS,
        "the gate asked for a target this host does not route"
    );
}

/// The service's answer as the gate's reply: the same cases, one for one.
fn reply(r: PayReply) -> Reply {
    match r {
        PayReply::Captured(json) => Reply::Captured(json),
        PayReply::Applied(json) => Reply::Applied(json),
        PayReply::Rejected(code) => Reply::Rejected(code),
        PayReply::Unknown(code) => Reply::Unknown(code),
        PayReply::Found(json) => Reply::Found(json),
        PayReply::NotFound => Reply::NotFound,
        PayReply::Failed(code) => Reply::Failed(code),
    }
}

impl Targets for PaymentsTarget {
    fn routes(&self) -> Vec<String> {
        vec![PAYMENTS.to_string()]
    }

    fn capture(&mut self, req: &CaptureRequest) -> Reply {
        ours(&req.target);
        reply(
            self.payments
                .capture(&req.effect_id, &req.effect, &req.names),
        )
    }

    fn authorize(&mut self, req: &AuthorizeRequest) -> Reply {
        match self.authorizer.as_mut() {
            Some(check) => Reply::Allowed(check(req)),
            None => Reply::Failed("this host has no authority check installed".into()),
        }
    }

    fn apply(&mut self, req: &ApplyRequest) -> Reply {
        ours(&req.target);
        let now_ms = self.clock.now_ms();
        reply(
            self.payments
                .apply(&req.effect_id, &req.effect, &req.idempotency_key, now_ms),
        )
    }

    fn query(&mut self, req: &QueryRequest) -> Reply {
        ours(&req.target);
        reply(self.payments.query(&req.effect_id, &req.effect))
    }
}
