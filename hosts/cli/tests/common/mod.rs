//! Shared by the integration tests: the component, the seed case, a proposal.
#![allow(dead_code)] // each test binary uses a different part

use std::sync::OnceLock;

use interlock_cli::Runtime;
use interlock_payments_sim::Tier;
use serde_json::json;

pub const ORDER: &str = "order_881";
pub const PAID_CENTS: u64 = 10_000;
pub const REFUND_CENTS: u64 = 2_000;
pub const LEASE: &str = "case-4471";
/// 2027-01-15T08:00:00Z: a fixed start for the fake clock.
pub const T0_MS: u64 = 1_800_000_000_000;
pub const HOUR_MS: u64 = 3_600_000;

/// The gate component, compiled once per test binary. A missing .wasm fails the test:
/// these tests are the host's reason to exist, so they never skip.
pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        let wasm = interlock_cli::runtime::locate(None).unwrap_or_else(|e| {
            panic!("{e:#}\n(run `bash scripts/build-wasm.sh` from the repo root)")
        });
        Runtime::load(&wasm).unwrap_or_else(|e| panic!("cannot load {}: {e:#}", wasm.display()))
    })
}

/// The seed case's proposal at `tier`, with premises read at decision time.
pub fn proposal(tier: Tier, amount_cents: u64, premises: serde_json::Value) -> String {
    json!({
        "agent": "refund-agent",
        "target": {
            "name": "payments",
            "dedupes": tier.dedupes,
            "lookup": tier.lookup,
            "dedupe_window_ms": 86_400_000u64,
            "timeout_ms": 1000,
        },
        "key": "refund:order_881",
        "effect": {"order": ORDER, "amount_cents": amount_cents},
        "authority": {"lease": LEASE},
        "premises": premises,
    })
    .to_string()
}
