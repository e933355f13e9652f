//! CI mode of the deterministic simulation: the regression seeds, then a sweep of seeds.
//!
//! `GATE_SEED=<n>` replays exactly one seed and prints its trace; `GATE_SEEDS=<n>` sets the
//! sweep's size (default 2,000); `GATE_STRICT=1` fails on known core bugs too.
use std::time::Instant;

use interlock_simulation::{run_seed, run_seed_with_clocks, Clocks, SeedReport, KNOWN_CORE_BUGS};

/// Seeds that found a bug, with the invariant they broke. They run on every CI run: none
/// may fail, and while the bug is in `KNOWN_CORE_BUGS` the seed must still reproduce it
/// (else the world generator drifted and the case no longer tests what it says).
const REGRESSIONS: &[(u64, &str)] = &[
    (7, "authority_died_between_check_and_send"),
    (15, "premises_changed_during_host_check"),
    (11, "receipt_pins_unsynced_entry"),
    (307, "cap_released_while_executed_unknown"),
    (13121, "torn_close_hides_open_effect"),
    (12032, "outcome_reported_from_unsynced_entry"),
    (42370, "cap_reservation_of_another_payload"),
    // The harness's own: two recoverers raced an effect a power loss had just erased.
    (75318, "unexpected_gate_error"),
    // A payload changed under one key raced the first: its reservation replaced the
    // first's share (found in the long run after the first fixes).
    (140690, "cap_reservation_of_another_payload"),
    // Three workers, one payload: a loser's release freed the winner's share.
    (110, "cap_exceeded"),
];

/// Run `seeds` on every core; the reports come back in seed order.
fn run_all(seeds: &[u64]) -> Vec<SeedReport> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = seeds.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let hs: Vec<_> = seeds
            .chunks(chunk)
            .map(|c| s.spawn(move || c.iter().map(|&x| run_seed(x)).collect::<Vec<_>>()))
            .collect();
        hs.into_iter()
            .flat_map(|h| h.join().expect("a simulation thread"))
            .collect()
    })
}

#[test]
fn simulation() {
    if let Ok(seed) = std::env::var("GATE_SEED") {
        let seed: u64 = seed.parse().expect("GATE_SEED is a number");
        let r = run_seed(seed);
        eprintln!("{}", r.describe());
        assert!(r.ok(), "seed {seed} fails: {:?}", r.violation);
        return;
    }
    let start = Instant::now();
    let n: u64 = std::env::var("GATE_SEEDS").map_or(2_000, |s| s.parse().expect("a number"));
    let mut seeds: Vec<u64> = REGRESSIONS.iter().map(|r| r.0).collect();
    seeds.extend(1..=n);
    let reports = run_all(&seeds);
    let mut failed = Vec::new();
    let mut known: std::collections::BTreeMap<&str, Vec<u64>> = Default::default();
    let mut steps = 0;
    for (i, r) in reports.iter().enumerate() {
        steps += r.steps;
        for k in &r.known {
            known.entry(k.invariant).or_default().push(r.seed);
        }
        if i < REGRESSIONS.len()
            && KNOWN_CORE_BUGS.contains(&REGRESSIONS[i].1)
            && !r.known.iter().any(|k| k.invariant == REGRESSIONS[i].1)
            && r.violation.is_none()
        {
            failed.push((
                r.seed,
                REGRESSIONS[i].1,
                "regression seed no longer reproduces its known bug".into(),
            ));
        }
        let Some(v) = &r.violation else { continue };
        if failed.len() < 3 {
            eprintln!("{}", r.describe());
        }
        let what = if i < REGRESSIONS.len() {
            format!("regression seed (found {})", REGRESSIONS[i].1)
        } else {
            "sweep".to_string()
        };
        failed.push((r.seed, v.invariant, what));
    }
    eprintln!(
        "simulation: {} regression seeds + {n} seeds, {steps} steps, {:.1} s",
        REGRESSIONS.len(),
        start.elapsed().as_secs_f64(),
    );
    for (inv, seeds) in known {
        eprintln!(
            "  known core bug {inv}: hit by {} seeds, first {:?}",
            seeds.len(),
            &seeds[..seeds.len().min(5)]
        );
    }
    assert!(failed.is_empty(), "failing seeds: {failed:?}");
}

/// Several machines share the journal, their clocks apart by up to 2 s, and every proposal
/// allows 2 s of skew (`clock_skew_ms`): every invariant holds, at every seed of the sweep.
/// `GATE_SKEW_SEEDS=<n>` sets the sweep's size (default 500).
#[test]
fn skewed_clocks_with_a_margin_break_nothing() {
    let n: u64 = std::env::var("GATE_SKEW_SEEDS").map_or(500, |s| s.parse().expect("a number"));
    let clocks = Clocks {
        max_skew_ms: 2_000,
        margin_ms: 2_000,
    };
    let failed: Vec<_> = (1..=n)
        .map(|s| run_seed_with_clocks(s, clocks))
        .filter(|r| !r.ok())
        .collect();
    if let Some(r) = failed.first() {
        eprintln!("{}", r.describe());
    }
    assert!(
        failed.is_empty(),
        "{} of {n} seeds fail with skewed clocks: {:?}",
        failed.len(),
        failed
            .iter()
            .map(|r| (r.seed, r.violation.as_ref().map(|v| v.invariant)))
            .collect::<Vec<_>>()
    );
}

/// The same clocks without the margin: the model has teeth, a worker whose clock runs ahead
/// takes over a send another still waits on (or acts past a deadline) in some seed.
#[test]
fn skewed_clocks_without_a_margin_are_caught() {
    let clocks = Clocks {
        max_skew_ms: 2_000,
        margin_ms: 0,
    };
    let caught: Vec<_> = (1..=500)
        .map(|s| run_seed_with_clocks(s, clocks))
        .filter_map(|r| r.violation.map(|v| (r.seed, v.invariant)))
        .collect();
    eprintln!("without a margin: {caught:?}");
    assert!(
        !caught.is_empty(),
        "500 seeds of 2 s skew and no margin broke nothing"
    );
}
