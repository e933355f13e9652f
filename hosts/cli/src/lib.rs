//! The wasmtime host of the Interlock gate component.
//!
//! Every rule of the gate lives in the component (guest/). This crate is glue: it provides
//! the component's imports (one file per WIT interface: [`storage`], [`clock`]), loads and
//! caches the component ([`runtime`]), and drives the gate's sans-IO steps against target
//! adapters ([`gate`], [`targets`]). The journal's rules run inside the component too:
//! this host only reads and writes files and rows. A recovery rule or any other decision
//! written here would drift from the other hosts: it is a bug.

pub mod case;
pub mod clock;
pub mod conformance;
pub mod gate;
#[cfg(feature = "mcp-proxy")]
pub mod mcp_proxy;
pub mod payments_component;
pub mod proof;
pub mod runtime;
#[cfg(feature = "serve")]
pub mod serve;
pub mod services;
pub mod storage;
pub mod targets;

/// What a command that needs a feature this build left out answers (scripts/demo.sh builds
/// none of them).
pub const WITHOUT_SQL: &str = "this interlock was built without shared journals (feature `sql`): \
    cargo build -p interlock-cli --features sql";

/// The generated bindings of world `gate-component`, in one place.
pub mod bindings {
    wasmtime::component::bindgen!({
        world: "gate-component",
        path: "../../wit",
    });
}

pub use bindings::exports::interlock::gate::gate::{GateError, Problem, ProblemKind, VerifyReport};
pub use bindings::interlock::gate::target::{
    ApplyRequest, Ask, AuthorizeRequest, CaptureRequest, QueryRequest, Reply, Step,
};
pub use bindings::interlock::gate::types::JournalError;
pub use bindings::interlock::gate::types::{Executed, Outcome, PremiseChange, Reason, State};
pub use clock::Clock;
pub use gate::{CrashAction, CrashPoint, Effects, Error, GateHost};
pub use runtime::Runtime;
pub use storage::{MemoryFiles, Storage, SwitchFiles};
pub use targets::{PaymentsTarget, Targets};
