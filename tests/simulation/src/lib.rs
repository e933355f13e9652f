//! Deterministic simulation of the gate under faults.
//!
//! One seed builds one world: a payments service of one tier (1, 2, 3 or 1+lookup), a few
//! orders, leases, decided refund requests (some under approvals, caps, bounds or a host
//! check), several workers (each a [`Gate`]; a crash drops it mid-operation) and one shared
//! journal that injects faults ([`SimJournal`]). A seeded scheduler interleaves the workers'
//! steps with the world's events: a person refunding by hand, eligibility changing, leases
//! revoked, re-granted or expiring, approvals revoked, the clock jumping (past claims, hours,
//! past the 24 h dedupe window), lost requests, lost replies, late landings, power loss.
//!
//! The host loop here is test harness, but it keeps the host contract: a target call is
//! abandoned by the claim deadline, and a request in flight lands (if ever) strictly before
//! the claim it was sent under expires.
//!
//! Invariants are checked after every step (see [`World::check_step`]) and at each send
//! (see [`World::check_send`]); at the end the world settles (faults stop, the clock passes
//! every claim, agents resubmit and recovery runs) and every effect must be terminal, every
//! receipt must check and the journal must verify against every receipt handed out.
//!
//! `GATE_SEED=<n> cargo test -p interlock-simulation` replays one seed and prints its trace.
//!
//! The parts: [`World`] and its ground truth (`world`), the scheduler that interleaves
//! workers and events (`schedule`), the rates at which faults are injected (`faults`, and
//! the journal that injects them, `journal`), the host loop that drives the gate
//! (`harness`), the invariants (`checks`) and the end of a run (`settle`).
mod checks;
mod faults;
mod harness;
mod journal;
mod schedule;
mod settle;
mod world;

pub use faults::FaultRates;
pub use journal::{CrashKind, Fault, SimJournal, View};
pub use world::{Clocks, World};

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub const T0: u64 = 1_800_000_000_000;
const HOUR: u64 = 3_600_000;
pub const RECEIPT_KEY: &[u8] = b"simulation-receipt-key";

/// Invariants that currently fail because of known core bugs (reported to the lead, see
/// results/simulation.md). A seed that hits one records it (first hit of each kind, with
/// the step) and runs on, so the sweep keeps hunting other bugs; `GATE_STRICT=1` (or
/// [`run_seed_strict`]) makes it a failure. Empty this list when the core is fixed.
pub const KNOWN_CORE_BUGS: &[&str] = &[];
// Found and fixed in the core (their seeds stay in tests/simulation.rs as regressions):
// A authority_died_between_check_and_send: authority is read again at the durable DISPATCHED.
// B premises_changed_during_host_check: the host check is asked before the premise read.
// C receipt_pins_unsynced_entry: `receipt` syncs the journal before pinning it.
// D cap_released_while_executed_unknown: a REFUSED whose send may have landed keeps its cap share.
// E torn_close_hides_open_effect: PROPOSED is appended alone (open) before a fresh effect's end.
// F outcome_reported_from_unsynced_entry: replays sync the journal before reporting.
// G cap_reservation_of_another_payload: cap shares are keyed by effect id and payload hash, so
//   another payload under the same key neither reuses nor replaces a share; a share whose
//   effect is recorded with another payload is stale and no longer counts.

#[derive(Clone, Debug)]
pub struct Violation {
    pub invariant: &'static str,
    pub detail: String,
}

#[derive(Debug)]
pub struct SeedReport {
    pub seed: u64,
    pub tier: String,
    pub steps: u64,
    pub events: BTreeMap<&'static str, u64>,
    pub violation: Option<Violation>,
    /// Known core bugs this seed hit (the first hit of each kind); the seed ran on.
    pub known: Vec<Violation>,
    /// The fault rates this seed ran under.
    pub faults: FaultRates,
    pub trace: Vec<String>,
}

impl SeedReport {
    pub fn ok(&self) -> bool {
        self.violation.is_none()
    }

    /// One line: the seed, how it ended, and the fault rates it ran under.
    pub fn summary(&self) -> String {
        let end = match &self.violation {
            None => "ok".to_string(),
            Some(v) => format!("VIOLATION {}", v.invariant),
        };
        format!(
            "seed {} (tier {}, {} steps): {end}; faults: {}",
            self.seed, self.tier, self.steps, self.faults
        )
    }

    pub fn describe(&self) -> String {
        let mut s = format!(
            "seed {} (tier {}, {} steps)\n",
            self.seed, self.tier, self.steps
        );
        if let Some(v) = &self.violation {
            s.push_str(&format!("VIOLATION {}: {}\n", v.invariant, v.detail));
        }
        for v in &self.known {
            s.push_str(&format!("known core bug {}: {}\n", v.invariant, v.detail));
        }
        s.push_str(&format!("faults: {}\n", self.faults));
        s.push_str(&format!(
            "replay: GATE_SEED={} cargo test -p interlock-simulation -- --nocapture\ntrace:\n",
            self.seed
        ));
        for line in &self.trace {
            s.push_str("  ");
            s.push_str(line);
            s.push('\n');
        }
        s
    }
}

/// Run one seed to the end (or its first violation). A panic in the core is a violation.
/// Known core bugs are recorded and the seed runs on, unless `GATE_STRICT=1`.
pub fn run_seed(seed: u64) -> SeedReport {
    run_seed_with(seed, std::env::var("GATE_STRICT").is_ok_and(|v| v == "1"))
}

/// Like [`run_seed`], but a known core bug is a failure too.
pub fn run_seed_strict(seed: u64) -> SeedReport {
    run_seed_with(seed, true)
}

/// [`run_seed`] with the workers on machines whose clocks differ ([`Clocks`]).
pub fn run_seed_with_clocks(seed: u64, clocks: Clocks) -> SeedReport {
    run_world(World::with_clocks(seed, clocks), false)
}

fn run_seed_with(seed: u64, strict: bool) -> SeedReport {
    run_world(World::new(seed), strict)
}

fn run_world(mut w: World, strict: bool) -> SeedReport {
    let seed = w.seed;
    w.strict = strict;
    let r = catch_unwind(AssertUnwindSafe(|| w.run()));
    let violation = match r {
        Ok(Ok(())) => None,
        Ok(Err(v)) => Some(v),
        Err(p) => Some(Violation {
            invariant: "panic",
            detail: p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        }),
    };
    SeedReport {
        seed,
        tier: w.tier.label(),
        steps: w.steps,
        events: std::mem::take(&mut w.events),
        violation,
        known: std::mem::take(&mut w.known),
        faults: w.rates,
        trace: std::mem::take(&mut w.trace),
    }
}

fn fail<T>(invariant: &'static str, detail: impl Into<String>) -> Result<T, Violation> {
    Err(Violation {
        invariant,
        detail: detail.into(),
    })
}
