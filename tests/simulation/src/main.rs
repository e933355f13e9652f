//! Long mode: `cargo run --release -p interlock-simulation -- --seeds 1000000`.
//! Runs the seeds on every core, prints each failure with its trace and fault rates, and
//! writes the figures to results/simulation.md (or `--out PATH`). `--verbose` prints one
//! line per seed: how it ended and the fault rates it ran under.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use interlock_simulation::{run_seed, KNOWN_CORE_BUGS};

/// The seeds allocate and free a JSON tree per entry read: with glibc's malloc, a third of a
/// run's time (perf, 2 threads); mimalloc's per-thread heaps make it a few percent.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What the runs found, with the seeds to replay: kept by hand in src/findings.md and
/// appended to the figures each run writes.
const FINDINGS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/findings.md");

struct Totals {
    seeds: u64,
    steps: u64,
    events: BTreeMap<&'static str, u64>,
    /// invariant -> (count, first seeds)
    failures: BTreeMap<&'static str, (u64, Vec<u64>)>,
    first_trace: BTreeMap<&'static str, String>,
    /// known core bug -> (seeds hitting it, first seeds)
    known: BTreeMap<&'static str, (u64, Vec<u64>)>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let seeds: u64 = arg("--seeds").map_or(1_000_000, |s| s.parse().expect("--seeds N"));
    let from: u64 = arg("--from").map_or(1, |s| s.parse().expect("--from N"));
    let budget = arg("--max-seconds").map(|s| Duration::from_secs(s.parse().expect("secs")));
    let verbose = args.iter().any(|a| a == "--verbose");
    let out = arg("--out").unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../results/simulation.md").to_string()
    });
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = Arc::new(AtomicU64::new(from));
    let end = from + seeds;
    let totals = Arc::new(Mutex::new(Totals {
        seeds: 0,
        steps: 0,
        events: BTreeMap::new(),
        failures: BTreeMap::new(),
        first_trace: BTreeMap::new(),
        known: BTreeMap::new(),
    }));
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let next = next.clone();
            let totals = totals.clone();
            std::thread::spawn(move || loop {
                if budget.is_some_and(|b| start.elapsed() > b) {
                    return;
                }
                let base = next.fetch_add(256, Ordering::Relaxed);
                if base >= end {
                    return;
                }
                let mut local = Vec::new();
                for seed in base..(base + 256).min(end) {
                    local.push(run_seed(seed));
                }
                let mut t = totals.lock().expect("no panics hold the lock");
                for r in local {
                    if verbose {
                        eprintln!("{}", r.summary());
                    }
                    t.seeds += 1;
                    t.steps += r.steps;
                    for (k, v) in &r.events {
                        *t.events.entry(k).or_default() += v;
                    }
                    for k in &r.known {
                        let e = t.known.entry(k.invariant).or_default();
                        e.0 += 1;
                        if e.1.len() < 10 {
                            e.1.push(r.seed);
                        }
                    }
                    if let Some(v) = &r.violation {
                        let e = t.failures.entry(v.invariant).or_default();
                        e.0 += 1;
                        if e.1.len() < 10 {
                            e.1.push(r.seed);
                        }
                        if !t.first_trace.contains_key(v.invariant) {
                            eprintln!("{}", r.describe());
                            t.first_trace.insert(v.invariant, r.describe());
                        }
                    }
                }
                if t.seeds % 65_536 < 256 {
                    eprintln!(
                        "{} seeds, {:.0} s, failures {:?}",
                        t.seeds,
                        start.elapsed().as_secs_f64(),
                        t.failures
                            .iter()
                            .map(|(k, v)| (*k, v.0))
                            .collect::<Vec<_>>()
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a worker thread");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let t = totals.lock().expect("threads are done");
    let mut md = String::new();
    md.push_str("# Deterministic simulation: long run\n\n");
    md.push_str(&format!(
        "Command: `cargo run --release -p interlock-simulation -- --seeds {seeds}{}{}`  \n",
        if from != 1 {
            format!(" --from {from}")
        } else {
            String::new()
        },
        budget.map_or(String::new(), |b| format!(" --max-seconds {}", b.as_secs()))
    ));
    md.push_str(&format!(
        "Seeds run: {} (from {from}){}  \nTime: {elapsed:.0} s on {threads} threads  \nSteps: {} ({:.1} per seed)\n\n",
        t.seeds,
        if t.seeds < seeds {
            format!(", of {seeds} asked: stopped by the time budget")
        } else {
            String::new()
        },
        t.steps,
        t.steps as f64 / t.seeds.max(1) as f64
    ));
    md.push_str("## Events injected, by kind\n\n| event | count |\n|---|---|\n");
    for (k, v) in &t.events {
        md.push_str(&format!("| {k} | {v} |\n"));
    }
    md.push_str("\n## Known core bugs hit (recorded; the seed ran on)\n\n");
    md.push_str("| invariant | seeds hitting it | first seeds |\n|---|---|---|\n");
    for k in KNOWN_CORE_BUGS {
        let (n, mut first) = t.known.get(k).cloned().unwrap_or_default();
        first.sort_unstable();
        md.push_str(&format!("| {k} | {n} | {first:?} |\n"));
    }
    md.push_str("\n## Other invariant violations (each stops its seed)\n\n");
    if t.failures.is_empty() {
        md.push_str("None.\n");
    } else {
        md.push_str("| invariant | seeds failing | first seeds |\n|---|---|---|\n");
        for (k, (n, first)) in &t.failures {
            let mut first = first.clone();
            first.sort_unstable();
            md.push_str(&format!("| {k} | {n} | {first:?} |\n"));
        }
    }
    md.push_str(&std::fs::read_to_string(FINDINGS).unwrap_or_default());
    std::fs::write(&out, md).expect("write the results file");
    println!(
        "{} seeds in {elapsed:.0} s; failures: {:?}; wrote {out}",
        t.seeds,
        t.failures
            .iter()
            .map(|(k, v)| (*k, v.0))
            .collect::<Vec<_>>()
    );
}
