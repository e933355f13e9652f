//! Every default a host needs, in one place. Hosts read them through `gate.defaults` (and
//! a send's timeout through `gate.send-timeout-ms`) instead of keeping copies that drift.
use alloc::format;
use alloc::string::String;
use serde_json::Value;

use crate::canon::canonical;
use crate::fields;
use crate::proposal::check_name;
pub use crate::proposal::{DEFAULT_CLOCK_SKEW_MS, DEFAULT_DEDUPE_WINDOW_MS, DEFAULT_TIMEOUT_MS};
use crate::types::GateError;

/// How long a host waits between recovery attempts on a live claim when the gate gives no
/// `retry_after_ms`, and how many attempts it makes before reporting the effect open.
pub const CLAIM_WAIT_POLL_MS: u64 = 200;
pub const CLAIM_WAIT_MAX_POLLS: u64 = 150;

/// Where tool gating keeps its journal when its configuration names no `journal_dir` (the
/// original's MCP proxy default; the short configuration of its landing page names none).
pub const TOOLS_JOURNAL_DIR: &str = ".interlock/mcp";

/// The standing lease's life from its one grant: long enough to be standing, finite so a
/// journal never holds authority without an end.
pub const STANDING_LEASE_MS: u64 = 10 * 365 * 24 * 3_600_000;

/// The name of `agent`'s standing lease (see `Gate::grant_standing_lease`).
pub fn standing_lease_name(agent: &str) -> Result<String, GateError> {
    check_name(agent, "/agent")?;
    let name = format!("{agent}-standing");
    check_name(&name, "/agent")?;
    Ok(name)
}

/// What a host prints once, at start, when effects may run under `agent`'s standing lease
/// (authority is not strict and some effect names none): the default is visible, never
/// silent.
pub fn standing_notice(agent: &str) -> Result<String, GateError> {
    let lease = standing_lease_name(agent)?;
    Ok(format!(
        "interlock: gating under standing lease {lease} (agent {agent}), granted and recorded \
         in the journal at its first use and named in every receipt; name a lease or an \
         approval to scope an effect, or turn on strict authority to require one"
    ))
}

/// The defaults as JSON: `timeout_ms`, `dedupe_window_ms`, `clock_skew_ms`, `claim_wait`
/// (`poll_ms`, `max_polls`) and `standing_lease_ms`.
pub fn defaults_json() -> String {
    let claim_wait = fields!("poll_ms" => CLAIM_WAIT_POLL_MS, "max_polls" => CLAIM_WAIT_MAX_POLLS);
    canonical(&Value::Object(fields!(
        "timeout_ms" => DEFAULT_TIMEOUT_MS,
        "dedupe_window_ms" => DEFAULT_DEDUPE_WINDOW_MS,
        "clock_skew_ms" => DEFAULT_CLOCK_SKEW_MS,
        "claim_wait" => Value::Object(claim_wait),
        "standing_lease_ms" => STANDING_LEASE_MS,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_one_json_object() {
        let v: Value = serde_json::from_str(&defaults_json()).unwrap();
        assert_eq!(v["timeout_ms"], 30_000);
        assert_eq!(v["dedupe_window_ms"], 86_400_000);
        assert_eq!(v["claim_wait"]["poll_ms"], 200);
        assert_eq!(v["claim_wait"]["max_polls"], 150);
        assert_eq!(v["standing_lease_ms"], STANDING_LEASE_MS);
    }

    #[test]
    fn the_standing_notice_names_the_lease_and_how_to_scope_it() {
        let n = standing_notice("refund-agent").unwrap();
        assert!(n.contains("standing lease refund-agent-standing"), "{n}");
        assert!(n.contains("name a lease"), "{n}");
        assert!(standing_notice("").is_err());
    }

    #[test]
    fn the_standing_lease_is_named_after_its_agent() {
        assert_eq!(
            standing_lease_name("refund-agent").unwrap(),
            "refund-agent-standing"
        );
        assert!(matches!(
            standing_lease_name(""),
            Err(GateError::InvalidField { .. })
        ));
        let long = "a".repeat(250);
        assert!(matches!(
            standing_lease_name(&long),
            Err(GateError::InvalidField { .. })
        ));
    }
}
