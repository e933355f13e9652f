//! The figures other programs measure, run from here so one command writes every row: the
//! Node and Python scripts and `interlock serve` beside the Worker (their JSON is folded in
//! by `report::foreign`), and the long simulation's own binary (seeds per second, as its
//! long run counts them). The fresh-machine times come from experiments/install/fresh.py,
//! run on its own (it builds from an empty target folder).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::benches::Config;
use crate::report::Figure;

/// The cargo target folder this binary runs from (`<target>/release/interlock-bench`).
fn target_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(exe
        .parent()
        .and_then(Path::parent)
        .context("interlock-bench runs from <target>/<profile>/")?
        .to_path_buf())
}

/// `node experiments/bench/node/bench.mjs` and `experiments/bench/python/bench.py` (with the
/// venv of `INTERLOCK_PY_VENV`, default hosts/python/.venv): each writes its
/// results/bench-*.json, measuring wasmtime with this same binary (`--only overhead`). A
/// host that is not set up is skipped, saying so. Not in `--quick` (CI runs each host's own
/// tests).
pub fn node_and_python(cfg: &Config, root: &Path) -> Result<Vec<Figure>> {
    if cfg.quick {
        eprintln!("  hosts: not in --quick (each host's CI step covers it)");
        return Ok(Vec::new());
    }
    let target = target_dir()?;
    let venv = std::env::var_os("INTERLOCK_PY_VENV")
        .map_or_else(|| root.join("hosts/python/.venv"), PathBuf::from);
    let runs: [(&str, PathBuf, PathBuf); 2] = [
        (
            "node",
            PathBuf::from("node"),
            root.join("experiments/bench/node/bench.mjs"),
        ),
        (
            "python",
            venv.join("bin/python"),
            root.join("experiments/bench/python/bench.py"),
        ),
    ];
    for (name, program, script) in runs {
        if name == "python" && !program.exists() {
            eprintln!(
                "  hosts: no {} (hosts/python/test.sh makes it): python figures skipped",
                program.display()
            );
            continue;
        }
        eprintln!("  hosts: {} {}", program.display(), script.display());
        let status = Command::new(&program)
            .arg(&script)
            .current_dir(root)
            .env("CARGO_TARGET_DIR", &target)
            .env("PYTHONPATH", root.join("hosts/python/src"))
            .env("INTERLOCK_WASM", &cfg.wasm)
            .status()
            .with_context(|| format!("run {}", program.display()))?;
        if !status.success() {
            bail!(
                "{} {} failed: {status}",
                program.display(),
                script.display()
            );
        }
    }
    serve(root, &target)?;
    Ok(Vec::new())
}

/// `node hosts/edge/scripts/throughput.js` with this target folder's release `interlock`
/// (built here, every feature): `interlock serve` beside the Worker, requests/s at 1, 8 and
/// 64 clients; it writes results/serve.md and bench-serve.json. Skipped, saying so, when
/// hosts/edge is not set up (`npm ci` there).
fn serve(root: &Path, target: &Path) -> Result<()> {
    let edge = root.join("hosts/edge");
    if !edge.join("node_modules/.bin/workerd").exists() {
        eprintln!("  hosts: no hosts/edge/node_modules (npm ci there): serve figures skipped");
        return Ok(());
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(&cargo)
        .args(["build", "--release", "-p", "interlock-cli"])
        .current_dir(root)
        .env("CARGO_TARGET_DIR", target)
        .status()
        .context("cargo build --release -p interlock-cli")?;
    if !built.success() {
        bail!("cargo build --release -p interlock-cli failed: {built}");
    }
    let cli = target.join("release/interlock");
    eprintln!(
        "  hosts: node scripts/throughput.js --cli {}",
        cli.display()
    );
    let status = Command::new("node")
        .arg("scripts/throughput.js")
        .arg("--cli")
        .arg(&cli)
        .current_dir(&edge)
        .stdout(std::process::Stdio::null())
        .status()
        .context("run hosts/edge/scripts/throughput.js")?;
    if !status.success() {
        bail!("hosts/edge/scripts/throughput.js failed: {status}");
    }
    Ok(())
}

/// How long the simulation's binary runs here; the long run is 900 s.
const SIMULATION_RUN: Duration = Duration::from_secs(120);
const LONG_RUN_S: f64 = 900.0;
const LONG_RUN_SEEDS: f64 = 1_000_000.0;

/// Seeds per second of the long simulation (`interlock-simulation`, release, every core),
/// run on fresh seeds for two minutes: the goal is a million seeds in the long run's 900 s.
/// Not in `--quick` (CI runs the simulation's own quick mode in its tests).
pub fn simulation(cfg: &Config, root: &Path) -> Result<Vec<Figure>> {
    if cfg.quick {
        eprintln!("  simulation: not in --quick (cargo test -p interlock-simulation runs it)");
        return Ok(Vec::new());
    }
    let target = target_dir()?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(&cargo)
        .args(["build", "--release", "-p", "interlock-simulation"])
        .current_dir(root)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .context("cargo build -p interlock-simulation")?;
    if !built.success() {
        bail!("cargo build --release -p interlock-simulation failed: {built}");
    }
    let tmp = tempfile::tempdir()?;
    let out = tmp.path().join("simulation.md");
    let from = 20_000_000u64; // fresh seeds, beyond those the long run and CI use
    let secs = SIMULATION_RUN.as_secs();
    let run = Command::new(target.join("release/interlock-simulation"))
        .args(["--seeds", "1000000", "--from", &from.to_string()])
        .args(["--max-seconds", &secs.to_string()])
        .arg("--out")
        .arg(&out)
        .output()
        .context("run interlock-simulation")?;
    let said = String::from_utf8_lossy(&run.stdout);
    // "N seeds in T s; failures: [...]; wrote ..."
    let line = said
        .lines()
        .find(|l| l.contains(" seeds in "))
        .with_context(|| format!("interlock-simulation said {said:?}"))?;
    let mut words = line.split_whitespace();
    let seeds: f64 = words.next().context("seed count")?.parse()?;
    let elapsed: f64 = line
        .split(" seeds in ")
        .nth(1)
        .and_then(|r| r.split(" s").next())
        .context("elapsed")?
        .parse()?;
    let failures = line.split("failures: ").nth(1).unwrap_or("?");
    let rate = seeds / elapsed.max(1.0);
    let goal = LONG_RUN_SEEDS / LONG_RUN_S;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(vec![Figure::new(
        "simulation.seeds_per_s",
        "simulation seeds per second (interlock-simulation, release, every core)",
        rate,
        "seeds/s",
    )
    .goal(
        "1,000,000 seeds in the long run's 900 s (>= 1111/s)",
        rate >= goal,
    )
    .detail(format!(
        "{seeds:.0} fresh seeds (from {from}) in {elapsed:.0} s on {cores} threads, failures {}; a million would take {:.0} s",
        failures.split(';').next().unwrap_or("?"),
        LONG_RUN_SEEDS / rate
    ))])
}
