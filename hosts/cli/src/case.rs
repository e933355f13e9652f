//! The support case of the fault catalogue (docs/FAULTS.md, "The case"), shared by the demo and the
//! tests: order_881 paid $100, case 4471 approves one $20 refund under lease `case-4471`.
use interlock_payments_sim::Tier;
use serde_json::{json, Value};

pub const ORDER: &str = "order_881";
pub const PAID_CENTS: u64 = 10_000;
pub const REFUND_CENTS: u64 = 2_000;
pub const LEASE: &str = "case-4471";
pub const HOUR_MS: u64 = 3_600_000;

/// The refund proposal in the gate's schema (ARCHITECTURE.md, "Proposal"), with the
/// premises read when the agent decided. The key comes from the approved request, never
/// from model output, so a re-decided amount is caught as a conflicting payload.
pub fn proposal(tier: Tier, amount_cents: u64, premises: Value) -> String {
    json!({
        "agent": "refund-agent",
        "target": {
            "name": "payments",
            "dedupes": tier.dedupes,
            "lookup": tier.lookup,
            "dedupe_window_ms": 86_400_000u64,
            // Short, so a restarted process waits only a second for the claim to lapse.
            "timeout_ms": 1000,
        },
        "key": "refund:order_881",
        "effect": {"order": ORDER, "amount_cents": amount_cents},
        "authority": {"lease": LEASE},
        "premises": premises,
    })
    .to_string()
}
