//! Checks the protocol model exhaustively (BFS) at every tier and prints the state counts;
//! then shows that broken tables are caught, so the checks can fail.
use std::time::Instant;

use interlock_core::recovery::{decide, Action, Claim, Dedupe, Inputs, Lookup};
use interlock_model::{Budget, Protocol, Tier};
use stateright::{Checker, Model};

fn run(model: Protocol) -> impl Checker<Protocol> {
    model
        .checker()
        .threads(std::thread::available_parallelism().map_or(1, |n| n.get()))
        .spawn_bfs()
        .join()
}

fn check(name: &str, tier: Tier, budget: Budget) {
    let started = Instant::now();
    let checker = run(Protocol::new(tier, budget));
    println!(
        "model {name} {budget:?}: {} states ({} unique), max depth {}, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker.assert_properties();
}

#[test]
fn tier1_dedupes() {
    check("tier 1 (dedupe)", Tier::ONE, Budget::default());
}

#[test]
fn tier2_lookup() {
    check("tier 2 (lookup)", Tier::TWO, Budget::default());
}

#[test]
fn tier3_neither() {
    check("tier 3 (neither)", Tier::THREE, Budget::default());
}

#[test]
fn tier1_with_lookup() {
    check("tier 1+lookup", Tier::ONE_LOOKUP, Budget::default());
}

/// More faults per behaviour. Slower (see results/model-check.md); run with
/// `INTERLOCK_MODEL_DEEP=1 cargo test --release -p interlock-model -- --nocapture`.
#[test]
fn deeper_budget() {
    if std::env::var_os("INTERLOCK_MODEL_DEEP").is_none() {
        eprintln!("skipped: set INTERLOCK_MODEL_DEEP=1 for the deeper budget");
        return;
    }
    let budget = Budget {
        crashes: 3,
        losses: 3,
        lookup_failures: 1,
        read_failures: 1,
        stalls: 2,
    };
    for (name, tier) in [
        ("tier 1 (dedupe)", Tier::ONE),
        ("tier 2 (lookup)", Tier::TWO),
        ("tier 3 (neither)", Tier::THREE),
        ("tier 1+lookup", Tier::ONE_LOOKUP),
    ] {
        check(name, tier, budget);
    }
}

/// A broken table must produce a counterexample for `property` at `tier`.
fn caught(tier: Tier, table: fn(Inputs) -> Action, property: &'static str) {
    let checker = run(Protocol {
        table,
        ..Protocol::new(tier, Budget::default())
    });
    assert!(
        checker.discovery(property).is_some(),
        "the broken table was not caught by {property:?}"
    );
}

#[test]
fn a_resend_without_dedupe_or_lookup_is_caught() {
    // Resend where the table says AMBIGUOUS: tier 3 pays twice.
    fn resend(i: Inputs) -> Action {
        match decide(i) {
            Action::Ambiguous => Action::Send,
            a => a,
        }
    }
    caught(Tier::THREE, resend, "never applied twice");
    caught(Tier::THREE, resend, "tier 3 never resends");
}

#[test]
fn acting_under_a_live_claim_is_caught() {
    // Act as if every claim were over (and so every "not found" were evidence).
    fn ignore_claim(i: Inputs) -> Action {
        decide(Inputs {
            claim: Claim::Over,
            lookup: trusted(i.lookup),
            ..i
        })
    }
    caught(Tier::TWO, ignore_claim, "never applied twice");
}

fn trusted(l: Lookup) -> Lookup {
    if l == Lookup::NotFoundUnderClaim {
        Lookup::NotFound
    } else {
        l
    }
}

#[test]
fn trusting_a_not_found_heard_under_a_live_claim_is_caught() {
    // The lookup may be asked under a live claim; its "not found" must not be used once the
    // claim is over (the send in flight may have landed after it).
    fn trust(i: Inputs) -> Action {
        decide(Inputs {
            lookup: trusted(i.lookup),
            ..i
        })
    }
    caught(Tier::TWO, trust, "never applied twice");
}

#[test]
fn resending_past_the_window_is_caught() {
    fn window_ignored(i: Inputs) -> Action {
        decide(Inputs {
            dedupe: if i.dedupe == Dedupe::WindowPassed {
                Dedupe::InsideWindow
            } else {
                i.dedupe
            },
            ..i
        })
    }
    caught(Tier::ONE, window_ignored, "never applied twice");
}

#[test]
fn skipping_the_lookup_is_caught() {
    // Treat "not asked" as "not found": a resend at tier 2 without asking.
    fn no_query(i: Inputs) -> Action {
        decide(Inputs {
            lookup: if i.lookup == Lookup::NotAsked {
                Lookup::NotFound
            } else {
                i.lookup
            },
            ..i
        })
    }
    caught(Tier::TWO, no_query, "never applied twice");
}

#[test]
fn sending_without_a_recheck_is_caught() {
    fn no_recheck(i: Inputs) -> Action {
        match decide(i) {
            Action::Recheck | Action::Refuse => Action::Send,
            a => a,
        }
    }
    caught(
        Tier::TWO,
        no_recheck,
        "never a send without a re-check that held",
    );
}
