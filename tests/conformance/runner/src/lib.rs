//! The conformance runner, once for every host. It plays the vectors of tests/conformance
//! (the step language in its README.md) through the host's gate, and the fault table's
//! baselines without it. A host provides only primitives: worker processes (gate instances
//! over its journal), the fake clock and its journal's storage operations (`driver`), and
//! forwards the imported `gate` to the current worker's instance.
//!
//! The world the vectors script (the simulated payments service, premise reads and host
//! checks that fail, a person's refund by hand) lives here, and so does the loop that drives
//! the gate's steps, with the crash points: every host dies at the same place. Every
//! decision about an effect is the gate component's.
//!
//! `no_std` keeps the component's imports to the gate and the driver: Rust std would add
//! wasi:cli and wasi:io, which the browser would then have to provide.
#![no_std]
extern crate alloc;

mod baseline;
mod run;
mod world;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde::Deserialize;
use serde_json::Value;

wit_bindgen::generate!({
    world: "conformance-runner",
    path: "wit",
    generate_all,
});

use exports::interlock::conformance::runner as r;

// The allocator, panic handler and cabi_realloc std would give (see its docs).
use interlock_component_rt as _;

/// Every vector starts at this fake time (2027-01-15T08:00:00Z).
pub const T0_MS: u64 = 1_800_000_000_000;
/// The lease every vector starts with, granted for [`LEASE_MS`].
const LEASE: &str = "case-4471";
const LEASE_MS: u64 = 48 * 3_600_000;
/// The order every vector is about, paid [`PAID_CENTS`] unless the vector says otherwise.
const ORDER: &str = "order_881";
const PAID_CENTS: u64 = 10_000;
/// A task's key unless its `decide` names one.
const DEFAULT_KEY: &str = "refund:order_881";
/// The one target the vectors use.
const PAYMENTS: &str = "payments";

/// A vector, as tests/conformance/README.md describes it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Vector {
    id: String,
    #[allow(dead_code)] // read by people and the fault table, not by the runner
    fault: String,
    #[allow(dead_code)]
    title: String,
    tier: String,
    #[serde(default)]
    paid_cents: Option<u64>,
    /// A tool-gating vector's configuration (the MCP proxy's and `protect()`'s, as is):
    /// its steps are the agent's tool calls (`call`), mapped by the gate's `tools`.
    #[serde(default)]
    config: Option<Value>,
    /// The host's authority for gated tools whose configuration names none (the proxy's
    /// `--lease`); absent: the lease every vector starts with. `null`: none.
    #[serde(default = "host_authority")]
    host_authority: Option<Value>,
    steps: Vec<Value>,
    expect: Value,
    /// Host name -> why that host cannot run this vector.
    #[serde(default)]
    skip: BTreeMap<String, String>,
}

fn host_authority() -> Option<Value> {
    Some(serde_json::json!({ "lease": LEASE }))
}

impl Vector {
    fn parse(text: &str) -> Result<Vector, String> {
        serde_json::from_str(text).map_err(|e| format!("not a vector: {e}"))
    }
}

type Res<T> = Result<T, String>;

fn field<'v>(step: &'v Value, name: &str) -> Res<&'v Value> {
    step.get(name)
        .ok_or_else(|| format!("step {step} lacks {name:?}"))
}

fn str_field<'v>(step: &'v Value, name: &str) -> Res<&'v str> {
    field(step, name)?
        .as_str()
        .ok_or_else(|| format!("{name:?} must be a string in {step}"))
}

fn u64_field(step: &Value, name: &str) -> Res<u64> {
    field(step, name)?
        .as_u64()
        .ok_or_else(|| format!("{name:?} must be an integer in {step}"))
}

fn bool_field(step: &Value, name: &str) -> Res<bool> {
    field(step, name)?
        .as_bool()
        .ok_or_else(|| format!("{name:?} must be true or false in {step}"))
}

struct Runner;

impl r::Guest for Runner {
    fn start_ms() -> u64 {
        T0_MS
    }

    fn workers(vector: String) -> Result<u32, String> {
        Ok(run::workers(&Vector::parse(&vector)?))
    }

    fn run(vector: String, pins: String, options: r::Options) -> Result<r::Report, String> {
        let v = Vector::parse(&vector)?;
        let pins: BTreeMap<String, String> =
            serde_json::from_str(&pins).map_err(|e| format!("the pins are not a map: {e}"))?;
        run::run(&v, &pins, &options).map_err(|e| format!("{}: {e}", v.id))
    }

    fn baseline(vector: String, approach: String) -> Result<String, String> {
        let v = Vector::parse(&vector)?;
        let approach = baseline::Baseline::parse(&approach)?;
        let played = baseline::run(approach, &v).map_err(|e| format!("{}: {e}", v.id))?;
        serde_json::to_string(&played).map_err(|e| e.to_string())
    }
}

export!(Runner);
