//! The simulated payments service as a component (adapters/payments-sim/component), loaded
//! beside the gate.
//!
//! The tier rules live once, in `interlock-payments-sim`; the component is that crate
//! behind a resource-free WIT API (adapters/payments-sim/wit), so hosts without Rust run
//! the same rules. This file is glue: it loads the component and gives it the crate's API
//! and error type. Its state is kept here, apart from the gate's journal: with a file
//! ([`SimService::create`], [`SimService::open`]) every successful mutation stores the
//! component's `snapshot()` durably before returning, with the crate's own file format and
//! writer, so a crash of the gate never erases what the service committed.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use interlock_payments_sim::{
    write_state_file, Error as PayError, Refund, Reply as PayReply, Tier,
};
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use bindings::exports::interlock::payments_sim::service::ServiceError;
use bindings::exports::interlock::payments_sim::target::{
    ApplyRequest, CaptureRequest, QueryRequest, Reply,
};

/// The generated bindings of world `payments-sim`, in one place.
pub mod bindings {
    wasmtime::component::bindgen!({
        world: "payments-sim",
        path: "../../adapters/payments-sim/wit",
    });
}

/// Where scripts/build-wasm.sh puts the component, relative to the checkout.
pub const DIST_WASM: &str = "dist/payments_sim.wasm";

/// The component in a development checkout: `$INTERLOCK_PAYMENTS_SIM_WASM`, else the
/// checkout's dist/ (see [`DIST_WASM`]). Not checked for existence: [`SimService::load`]
/// says what to run when it is missing.
pub fn locate() -> PathBuf {
    std::env::var_os("INTERLOCK_PAYMENTS_SIM_WASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(DIST_WASM)
        })
}

/// A failed call of the simulated service.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The service refused (the WIT `service-error`), or its state file could not be
    /// written ([`PayError::Io`]); as the native crate, it changed nothing.
    #[error(transparent)]
    Service(#[from] PayError),
    /// The component trapped (a call before `create`/`restore`, a broken invariant) or
    /// answered outside its contract. Never a service error: drop the instance.
    #[error("the payments-sim component trapped: {0:#}")]
    Trap(anyhow::Error),
}

fn trap(e: wasmtime::Error) -> SimError {
    SimError::Trap(anyhow::Error::from(e))
}

/// The component's refusal as the native crate's error.
pub fn service_error(e: ServiceError) -> SimError {
    SimError::Service(match e {
        ServiceError::UnknownOrder(o) => PayError::UnknownOrder(o),
        ServiceError::ExceedsBalance(b) => PayError::ExceedsBalance {
            order: b.order,
            requested_cents: b.requested_cents,
            remaining_cents: b.remaining_cents,
        },
        ServiceError::IdempotencyMismatch(key) => PayError::IdempotencyMismatch { key },
        ServiceError::LookupUnsupported => PayError::LookupUnsupported,
        ServiceError::BadTier(t) => PayError::BadTier(t),
        ServiceError::Corrupt(m) => PayError::Corrupt(m),
        ServiceError::InvalidJson(m) => PayError::InvalidJson(m),
    })
}

/// Flattens a call: wasmtime's error is a trap, the WIT error a service refusal.
fn call<T>(r: wasmtime::Result<Result<T, ServiceError>>) -> Result<T, SimError> {
    r.map_err(trap)?.map_err(service_error)
}

/// The component answered JSON outside its contract: a broken component, like a trap.
fn bad_json(what: &str, json: &str, e: serde_json::Error) -> SimError {
    SimError::Trap(anyhow!(
        "the component's {what} is not the documented JSON ({e}): {json}"
    ))
}

fn parse_refund(json: &str) -> Result<Refund, SimError> {
    serde_json::from_str(json).map_err(|e| bad_json("refund", json, e))
}

/// The component's reply as the crate's. `allowed` is outside its contract (the service
/// has no authority check): a broken component, like a trap.
fn pay_reply(r: Reply) -> Result<PayReply, SimError> {
    Ok(match r {
        Reply::Captured(json) => PayReply::Captured(json),
        Reply::Allowed(yes) => {
            return Err(SimError::Trap(anyhow!(
                "the component answered allowed({yes}), which it never does"
            )))
        }
        Reply::Slept => {
            return Err(SimError::Trap(anyhow!(
                "the component answered slept, which it never does"
            )))
        }
        Reply::Applied(json) => PayReply::Applied(json),
        Reply::Rejected(code) => PayReply::Rejected(code),
        Reply::Unknown(code) => PayReply::Unknown(code),
        Reply::Found(json) => PayReply::Found(json),
        Reply::NotFound => PayReply::NotFound,
        Reply::Failed(code) => PayReply::Failed(code),
    })
}

/// The target name the requests carry (the component does not read it).
const TARGET: &str = "payments";

/// One instance of the payments-sim component, holding one service. The methods mirror
/// `interlock_payments_sim::Payments` (names, argument types, results); they take
/// `&mut self` because every call runs in the store.
pub struct SimService {
    store: Store<()>,
    sim: bindings::PaymentsSim,
    /// Where the state is kept, if anywhere; written after every successful mutation.
    path: Option<PathBuf>,
}

impl SimService {
    /// Compiles and instantiates the component at `wasm`. The instance holds no service
    /// yet: call [`SimService::in_memory`], [`SimService::create`], [`SimService::open`]
    /// or [`SimService::restore`] first (any other call traps).
    // Compiled on every load, not cached like the gate (runtime.rs): the component is
    // small. If it shows in profiles, share runtime.rs's .cwasm cache.
    pub fn load(engine: &Engine, wasm: &Path) -> anyhow::Result<SimService> {
        if !wasm.is_file() {
            return Err(anyhow!(
                "the payments-sim component {} is missing; build it with \
                 `bash scripts/build-wasm.sh` from the repo root",
                wasm.display()
            ));
        }
        let component = Component::from_file(engine, wasm)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("{} is not a valid component", wasm.display()))?;
        // The component imports nothing: an empty linker is the check.
        let linker = Linker::<()>::new(engine);
        let mut store = Store::new(engine, ());
        let sim = bindings::PaymentsSim::instantiate(&mut store, &component, &linker)
            .map_err(anyhow::Error::from)
            .with_context(|| {
                format!(
                    "{} does not fit world payments-sim (it must import nothing)",
                    wasm.display()
                )
            })?;
        Ok(SimService {
            store,
            sim,
            path: None,
        })
    }

    /// Runs a mutation; with a file, stores the new state before returning. A failed
    /// write puts the previous state back, so, as natively, a failed call changes nothing.
    fn mutate<T>(
        &mut self,
        f: impl FnOnce(&mut SimService) -> Result<T, SimError>,
    ) -> Result<T, SimError> {
        let Some(path) = self.path.clone() else {
            return f(self);
        };
        let before = self.snapshot()?;
        let out = f(self)?;
        let after = self.snapshot()?;
        if after != before {
            if let Err(e) = write_state_file(&path, &after) {
                let api = self.sim.interlock_payments_sim_service();
                call(api.call_restore(&mut self.store, &before))?;
                return Err(e.into());
            }
        }
        Ok(out)
    }

    /// A new, empty service with no file (`Payments::in_memory`).
    pub fn in_memory(&mut self, tier: Tier) -> Result<(), SimError> {
        let api = self.sim.interlock_payments_sim_service();
        call(api.call_create(&mut self.store, &tier.label()))?;
        self.path = None;
        Ok(())
    }

    /// A new, empty service kept at `path` (an existing file there is replaced).
    pub fn create(&mut self, path: &Path, tier: Tier) -> Result<(), SimError> {
        self.in_memory(tier)?;
        write_state_file(path, &self.snapshot()?)?;
        self.path = Some(path.to_path_buf());
        Ok(())
    }

    /// Reloads the service kept at `path`, as after a restart; later mutations are kept
    /// there. Unreadable state is [`PayError::Corrupt`] naming the path, as natively.
    pub fn open(&mut self, path: &Path) -> Result<(), SimError> {
        let text = std::fs::read(path).map_err(PayError::from)?;
        let corrupt = |m: &dyn std::fmt::Display| {
            SimError::Service(PayError::Corrupt(format!("{}: {m}", path.display())))
        };
        let text = std::str::from_utf8(&text).map_err(|e| corrupt(&e))?;
        match self.restore(text) {
            Err(SimError::Service(PayError::Corrupt(m) | PayError::InvalidJson(m))) => {
                return Err(corrupt(&m))
            }
            other => other?,
        }
        self.path = Some(path.to_path_buf());
        Ok(())
    }

    /// Replaces the service with one from a snapshot (any host's), with no file. On an
    /// error the previous service (and its file) stays.
    pub fn restore(&mut self, json: &str) -> Result<(), SimError> {
        let api = self.sim.interlock_payments_sim_service();
        call(api.call_restore(&mut self.store, json))?;
        self.path = None;
        Ok(())
    }

    /// The state as JSON, the text of the state file (`Payments::snapshot`).
    pub fn snapshot(&mut self) -> Result<String, SimError> {
        let api = self.sim.interlock_payments_sim_service();
        api.call_snapshot(&mut self.store).map_err(trap)
    }

    /// Where the state is kept, if in a file.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn tier(&mut self) -> Result<Tier, SimError> {
        let api = self.sim.interlock_payments_sim_service();
        let label = api.call_tier(&mut self.store).map_err(trap)?;
        Tier::parse(&label).map_err(|e| SimError::Trap(anyhow!("tier: {e}")))
    }

    pub fn add_order(&mut self, order: &str, paid_cents: u64) -> Result<(), SimError> {
        self.mutate(|s| {
            let api = s.sim.interlock_payments_sim_service();
            call(api.call_add_order(&mut s.store, order, paid_cents))
        })
    }

    pub fn set_eligible(&mut self, order: &str, eligible: bool) -> Result<(), SimError> {
        self.mutate(|s| {
            let api = s.sim.interlock_payments_sim_service();
            call(api.call_set_eligible(&mut s.store, order, eligible))
        })
    }

    /// `Payments::refund`: dedupe by tier, balance checked, eligibility not checked.
    pub fn refund(
        &mut self,
        order: &str,
        amount_cents: u64,
        idempotency_key: Option<&str>,
        reference: Option<&str>,
        now_ms: u64,
    ) -> Result<Refund, SimError> {
        let json = self.mutate(|s| {
            let api = s.sim.interlock_payments_sim_service();
            call(api.call_refund(
                &mut s.store,
                order,
                amount_cents,
                idempotency_key,
                reference,
                now_ms,
            ))
        })?;
        parse_refund(&json)
    }

    pub fn refund_by_hand(
        &mut self,
        order: &str,
        amount_cents: u64,
        now_ms: u64,
    ) -> Result<Refund, SimError> {
        let json = self.mutate(|s| {
            let api = s.sim.interlock_payments_sim_service();
            call(api.call_refund_by_hand(&mut s.store, order, amount_cents, now_ms))
        })?;
        parse_refund(&json)
    }

    pub fn find_by_reference(&mut self, reference: &str) -> Result<Option<Refund>, SimError> {
        let api = self.sim.interlock_payments_sim_service();
        match call(api.call_find_by_reference(&mut self.store, reference))? {
            Some(json) => parse_refund(&json).map(Some),
            None => Ok(None),
        }
    }

    pub fn premises(
        &mut self,
        order: &str,
        excluding_reference: Option<&str>,
    ) -> Result<serde_json::Value, SimError> {
        let api = self.sim.interlock_payments_sim_service();
        let json = call(api.call_premises(&mut self.store, order, excluding_reference))?;
        serde_json::from_str(&json).map_err(|e| bad_json("premises", &json, e))
    }

    pub fn refunded_cents(&mut self, order: &str) -> Result<u64, SimError> {
        let api = self.sim.interlock_payments_sim_service();
        api.call_refunded_cents(&mut self.store, order)
            .map_err(trap)
    }

    /// The crate's Display text of `error`, as the component says it (`service.message`).
    pub fn message(&mut self, error: &ServiceError) -> Result<String, SimError> {
        let api = self.sim.interlock_payments_sim_service();
        api.call_message(&mut self.store, error).map_err(trap)
    }

    /// `Payments::capture`: the gate's capture step, answered by the component.
    pub fn capture(
        &mut self,
        effect_id: &str,
        effect: &str,
        names: &[String],
    ) -> Result<PayReply, SimError> {
        let req = CaptureRequest {
            effect_id: effect_id.to_string(),
            target: TARGET.to_string(),
            effect: effect.to_string(),
            names: names.to_vec(),
        };
        let api = self.sim.interlock_payments_sim_target();
        pay_reply(api.call_capture(&mut self.store, &req).map_err(trap)?)
    }

    /// `Payments::apply`: the gate's apply step, answered by the component. With a file,
    /// the new state is stored before returning; when that fails nothing is kept, and, as
    /// the WIT asks of a host that cannot store it, the answer is `unknown`.
    pub fn apply(
        &mut self,
        effect_id: &str,
        effect: &str,
        idempotency_key: &str,
        now_ms: u64,
    ) -> Result<PayReply, SimError> {
        let req = ApplyRequest {
            effect_id: effect_id.to_string(),
            target: TARGET.to_string(),
            effect: effect.to_string(),
            idempotency_key: idempotency_key.to_string(),
            attempt: 0,
        };
        let out = self.mutate(|s| {
            let api = s.sim.interlock_payments_sim_target();
            pay_reply(api.call_apply(&mut s.store, &req, now_ms).map_err(trap)?)
        });
        match out {
            Err(SimError::Service(e @ PayError::Io(_))) => Ok(PayReply::Unknown(e.detail())),
            other => other,
        }
    }

    /// `Payments::query`: the gate's query step, answered by the component.
    pub fn query(&mut self, effect_id: &str, effect: &str) -> Result<PayReply, SimError> {
        let req = QueryRequest {
            effect_id: effect_id.to_string(),
            target: TARGET.to_string(),
            effect: effect.to_string(),
        };
        let api = self.sim.interlock_payments_sim_target();
        pay_reply(api.call_query(&mut self.store, &req).map_err(trap)?)
    }

    pub fn refund_count(&mut self) -> Result<usize, SimError> {
        let api = self.sim.interlock_payments_sim_service();
        let n = api.call_refund_count(&mut self.store).map_err(trap)?;
        usize::try_from(n).map_err(|e| SimError::Trap(anyhow!("refund count {n}: {e}")))
    }
}
