//! The payments simulator as a component: WIT calls in, `interlock-payments-sim` calls,
//! WIT values out. No tier rule, and no judgement of the gate's steps (`target`), lives
//! here; if this file grows logic, that logic belongs in the crate, which every host then
//! shares.
//!
//! `no_std` keeps the import list empty: the service needs no clock (time is an argument)
//! and no storage (the host keeps `snapshot()`), and Rust std would add wasi:cli and
//! wasi:io for printing and exiting.
#![no_std]
extern crate alloc;

use alloc::string::{String, ToString};
use core::cell::RefCell;

use interlock_payments_sim::{Error, Payments, Refund, Reply, Tier};

wit_bindgen::generate!({
    world: "payments-sim",
    path: "../wit",
    generate_all,
});

use exports::interlock::payments_sim::service as s;
use exports::interlock::payments_sim::target as t;

// The allocator, panic handler and cabi_realloc std would give (see its docs).
use interlock_component_rt as _;

/// The instance's one service. Wasm components are single-threaded, so a RefCell suffices.
struct One(RefCell<Option<Payments>>);
unsafe impl Sync for One {}
static SERVICE: One = One(RefCell::new(None));

fn with<R>(f: impl FnOnce(&mut Payments) -> R) -> R {
    let mut slot = SERVICE.0.borrow_mut();
    match slot.as_mut() {
        Some(p) => f(p),
        None => panic!("payments-sim: call create or restore first"),
    }
}

fn install(p: Payments) {
    *SERVICE.0.borrow_mut() = Some(p);
}

fn err(e: Error) -> s::ServiceError {
    match e {
        Error::UnknownOrder(o) => s::ServiceError::UnknownOrder(o),
        Error::ExceedsBalance {
            order,
            requested_cents,
            remaining_cents,
        } => s::ServiceError::ExceedsBalance(s::BalanceError {
            order,
            requested_cents,
            remaining_cents,
        }),
        Error::IdempotencyMismatch { key } => s::ServiceError::IdempotencyMismatch(key),
        Error::LookupUnsupported => s::ServiceError::LookupUnsupported,
        Error::BadTier(t) => s::ServiceError::BadTier(t),
        Error::Corrupt(m) => s::ServiceError::Corrupt(m),
        Error::InvalidJson(m) => s::ServiceError::InvalidJson(m),
    }
}

/// The WIT error back to the crate's, for its Display text.
fn error(e: s::ServiceError) -> Error {
    match e {
        s::ServiceError::UnknownOrder(o) => Error::UnknownOrder(o),
        s::ServiceError::ExceedsBalance(b) => Error::ExceedsBalance {
            order: b.order,
            requested_cents: b.requested_cents,
            remaining_cents: b.remaining_cents,
        },
        s::ServiceError::IdempotencyMismatch(key) => Error::IdempotencyMismatch { key },
        s::ServiceError::LookupUnsupported => Error::LookupUnsupported,
        s::ServiceError::BadTier(t) => Error::BadTier(t),
        s::ServiceError::Corrupt(m) => Error::Corrupt(m),
        s::ServiceError::InvalidJson(m) => Error::InvalidJson(m),
    }
}

fn reply(r: Reply) -> t::Reply {
    match r {
        Reply::Captured(j) => t::Reply::Captured(j),
        Reply::Applied(j) => t::Reply::Applied(j),
        Reply::Rejected(m) => t::Reply::Rejected(m),
        Reply::Unknown(m) => t::Reply::Unknown(m),
        Reply::Found(j) => t::Reply::Found(j),
        Reply::NotFound => t::Reply::NotFound,
        Reply::Failed(m) => t::Reply::Failed(m),
    }
}

fn refund_json(r: Refund) -> String {
    serde_json::to_string(&r).expect("a refund always serializes")
}

struct Component;

impl s::Guest for Component {
    fn create(tier: String) -> Result<(), s::ServiceError> {
        install(Payments::in_memory(Tier::parse(&tier).map_err(err)?));
        Ok(())
    }
    fn restore(state: String) -> Result<(), s::ServiceError> {
        install(Payments::restore(&state).map_err(err)?);
        Ok(())
    }
    fn snapshot() -> String {
        with(|p| p.snapshot())
    }
    fn add_order(order: String, paid_cents: u64) -> Result<(), s::ServiceError> {
        with(|p| p.add_order(&order, paid_cents)).map_err(err)
    }
    fn set_eligible(order: String, eligible: bool) -> Result<(), s::ServiceError> {
        with(|p| p.set_eligible(&order, eligible)).map_err(err)
    }
    fn refund(
        order: String,
        amount_cents: u64,
        idempotency_key: Option<String>,
        reference: Option<String>,
        now_ms: u64,
    ) -> Result<String, s::ServiceError> {
        with(|p| {
            p.refund(
                &order,
                amount_cents,
                idempotency_key.as_deref(),
                reference.as_deref(),
                now_ms,
            )
        })
        .map(refund_json)
        .map_err(err)
    }
    fn refund_by_hand(
        order: String,
        amount_cents: u64,
        now_ms: u64,
    ) -> Result<String, s::ServiceError> {
        with(|p| p.refund_by_hand(&order, amount_cents, now_ms))
            .map(refund_json)
            .map_err(err)
    }
    fn find_by_reference(reference: String) -> Result<Option<String>, s::ServiceError> {
        with(|p| p.find_by_reference(&reference))
            .map(|r| r.map(refund_json))
            .map_err(err)
    }
    fn premises(
        order: String,
        excluding_reference: Option<String>,
    ) -> Result<String, s::ServiceError> {
        with(|p| p.premises(&order, excluding_reference.as_deref()))
            .map(|v| v.to_string())
            .map_err(err)
    }
    fn refunded_cents(order: String) -> u64 {
        with(|p| p.refunded_cents(&order))
    }
    fn refund_count() -> u64 {
        with(|p| p.refund_count() as u64)
    }
    fn tier() -> String {
        with(|p| p.tier().label())
    }
    fn message(e: s::ServiceError) -> String {
        error(e).to_string()
    }
}

impl t::Guest for Component {
    fn capture(req: t::CaptureRequest) -> t::Reply {
        reply(with(|p| p.capture(&req.effect_id, &req.effect, &req.names)))
    }
    fn apply(req: t::ApplyRequest, now_ms: u64) -> t::Reply {
        reply(with(|p| {
            p.apply(&req.effect_id, &req.effect, &req.idempotency_key, now_ms)
        }))
    }
    fn query(req: t::QueryRequest) -> t::Reply {
        reply(with(|p| p.query(&req.effect_id, &req.effect)))
    }
}

export!(Component);
