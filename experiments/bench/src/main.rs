//! `interlock-bench`: the cost of the gate against the physical limit (issue 8).
//!
//! ```text
//! cargo run --release -p interlock-bench                 # full: writes results/bench.md, .json
//! cargo run --release -p interlock-bench -- --only recover  # the other rows kept from bench.json
//! cargo run -p interlock-bench -- --quick                # CI: every benchmark still runs
//! ```
//! The Node and Python figures come from experiments/bench/node and experiments/bench/python,
//! which write results/bench-node.json and bench-python.json; the full run starts both
//! (group `hosts`) and folds them in, and runs the long simulation's binary for two minutes
//! (group `simulation`), so one command writes every row.

mod benches;
mod common;
mod hosts;
mod report;
mod shared;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use interlock_cli::Runtime;

use report::Figure;

const GROUPS: &[&str] = &[
    "send",
    "overhead",
    "concurrency",
    "cold",
    "size",
    "recover",
    "crash",
    "simulation",
    "hosts",
];

struct Args {
    quick: bool,
    /// `--shared`: the shared journals' throughput, into DIR/shared-journal.md instead.
    shared: bool,
    /// `--profile wasm|native`: a submit loop on one side only, for `perf record`.
    profile: Option<String>,
    only: Vec<String>,
    out: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        quick: false,
        shared: false,
        profile: None,
        only: Vec::new(),
        out: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => args.quick = true,
            "--shared" => args.shared = true,
            "--only" => {
                let g = it.next().context("--only needs a group")?;
                if !GROUPS.contains(&g.as_str()) {
                    bail!("unknown group {g:?}; groups: {}", GROUPS.join(", "));
                }
                args.only.push(g);
            }
            "--profile" => args.profile = Some(it.next().context("--profile wasm|native")?),
            "--out" => args.out = Some(it.next().context("--out needs a folder")?.into()),
            "-h" | "--help" => {
                println!(
                    "interlock-bench [--quick] [--only GROUP]... [--out DIR]\n\
                     interlock-bench --shared [--quick] [--out DIR]   (DIR/shared-journal.md)\n\
                     groups: {}\n\
                     full mode writes DIR/bench.md and bench.json (DIR: results/ of the checkout);\n\
                     --quick writes nothing unless --out is given",
                    GROUPS.join(", ")
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (see --help)"),
        }
    }
    Ok(args)
}

fn run() -> Result<()> {
    let args = parse_args()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap_or(root);
    // The committed components (dist/, what every host loads), unless INTERLOCK_WASM names
    // another: the CLI's own search prefers a build in the cargo target folder, which a
    // release bench's folder may hold from long ago (a run measured such a stale gate). The
    // CLI and `interlock serve` the `hosts` group starts are given the same.
    for (var, name) in [
        ("INTERLOCK_WASM", interlock_cli::runtime::DIST_WASM_NAME),
        (
            "INTERLOCK_HTTP_WASM",
            interlock_cli::runtime::HTTP_WASM_NAME,
        ),
    ] {
        if std::env::var_os(var).is_none() {
            // Set before any thread is started.
            std::env::set_var(var, root.join("dist").join(name));
        }
    }
    let wasm = interlock_cli::runtime::locate(None)?;
    eprintln!("interlock-bench: the gate component {}", wasm.display());
    let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
    let cache = home.join(".cache/interlock-bench");
    let cfg = benches::Config {
        quick: args.quick,
        runtime: Runtime::load(&wasm)?,
        wasm,
        scratch: cache.join("tmp"),
        cache,
    };
    if let Some(side) = &args.profile {
        return benches::profile_loop(&cfg, side, 5);
    }
    std::fs::create_dir_all(&cfg.scratch)?;
    let machine = report::Machine::probe(&cfg.scratch);
    if args.shared {
        let (rows, notes) = shared::shared(&cfg)?;
        let text = shared::markdown(
            &rows,
            &notes,
            &format!(
                "{} CPUs ({}), disk {}, {} build",
                machine.nproc, machine.cpu, machine.disk, machine.profile
            ),
            cfg.quick,
        );
        eprint!("{text}");
        let out = match (&args.out, args.quick) {
            (Some(dir), _) => Some(dir.clone()),
            (None, false) => Some(root.join("results")),
            (None, true) => None,
        };
        if let Some(dir) = out {
            std::fs::create_dir_all(&dir)?;
            // The kill runs (hosts/cli/tests/shared_kill.rs) are recorded below the table by
            // hand, with their command: keep them.
            let path = dir.join("shared-journal.md");
            let kept = std::fs::read_to_string(&path)
                .ok()
                .and_then(|old| old.find(shared::KILL_RUNS).map(|i| old[i..].to_string()));
            std::fs::write(&path, text + "\n" + kept.as_deref().unwrap_or(""))?;
            eprintln!("wrote {}", dir.join("shared-journal.md").display());
        }
        return Ok(());
    }
    eprintln!(
        "interlock-bench: {} mode, {} CPUs, disk {}, {} build",
        if cfg.quick { "quick" } else { "full" },
        machine.nproc,
        machine.disk,
        machine.profile
    );
    let mut figures: Vec<Figure> = Vec::new();
    for &group in GROUPS {
        if !args.only.is_empty() && !args.only.iter().any(|g| g == group) {
            continue;
        }
        eprintln!("== {group}");
        let got = match group {
            "send" => benches::send_path(&cfg),
            "overhead" => benches::overhead(&cfg),
            "concurrency" => benches::concurrency(&cfg),
            "cold" => benches::cold_start(&cfg),
            "size" => benches::size(&cfg),
            "recover" => benches::recovery(&cfg),
            "crash" => benches::crash(&cfg),
            "simulation" => hosts::simulation(&cfg, &root),
            "hosts" => hosts::node_and_python(&cfg, &root),
            _ => unreachable!(),
        }
        .with_context(|| format!("benchmark group {group}"))?;
        for mut f in got {
            f.group = group;
            eprintln!("  {:<34} {:>12.3} {}", f.id, f.value, f.unit);
            figures.push(f);
        }
    }
    let out = match (&args.out, args.quick) {
        (Some(dir), _) => Some(dir.clone()),
        (None, false) => Some(root.join("results")),
        (None, true) => None,
    };
    if let (Some(dir), false) = (&out, args.only.is_empty()) {
        // A run of some groups keeps the last run's figures of the others, in group order.
        figures.extend(report::kept(dir, &args.only, GROUPS)?);
        let rank = |g: &str| GROUPS.iter().position(|x| *x == g);
        figures.sort_by_key(|f| rank(f.group));
    }
    figures.extend(report::foreign(&root.join("results"))?);
    if let Some(dir) = out {
        report::write(&dir, &figures, &machine, args.quick)?;
        eprintln!("wrote {}", dir.join("bench.md").display());
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("interlock-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
