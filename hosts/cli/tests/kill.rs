//! Real crashes: a child process submits refunds through the gate on a file journal and is
//! killed with SIGKILL at a random moment; `interlock recover` (a new process, sometimes
//! itself killed once first) recovers; then the money and the journal are checked.
//!
//! Iterations: `INTERLOCK_KILLS` (default 30); seed: `INTERLOCK_KILL_SEED` (printed, so
//! one seed replays a run's kill delays, tiers and recovery kills).
//!
//! The child is this test binary run again (`child_process_entry` with
//! `INTERLOCK_KILL_CHILD` set), so it is the real host library (`GateHost`, the component,
//! `FileJournal`, `PaymentsTarget`) in its own process, with no hidden CLI subcommand.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{runtime, Rng, HOUR_MS, LEASE, T0_MS};
use interlock_cli::{Clock, Error, GateHost, PaymentsTarget};
use interlock_file_journal::{Error as FileError, FileJournal, StdFiles};
use interlock_payments_sim::{Payments, Tier};
use serde_json::{json, Value};

/// Refunds the child submits, one per order, each under its own key.
const EFFECTS: usize = 8;
const PAID_CENTS: u64 = 10_000;
const AMOUNT_CENTS: u64 = 2_000;
const CHILD_ENV: &str = "INTERLOCK_KILL_CHILD";
const TIER_ENV: &str = "INTERLOCK_KILL_TIER";

fn order(i: usize) -> String {
    format!("order_{i}")
}

fn tier_of(label: &str) -> Tier {
    Tier::parse(label).expect("tier label")
}

fn proposal(tier: Tier, i: usize) -> String {
    json!({
        "agent": "refund-agent",
        "target": {"name": "payments", "dedupes": tier.dedupes, "lookup": tier.lookup,
                   "dedupe_window_ms": 86_400_000u64, "timeout_ms": 1000},
        "key": format!("refund:{}", order(i)),
        "effect": {"order": order(i), "amount_cents": AMOUNT_CENTS},
        "authority": {"lease": LEASE},
        "premises": {"eligible": true, "refunded_by_others_cents": 0},
    })
    .to_string()
}

/// The child: submit every refund in turn, printing `ready` once set up. Not a test of its
/// own; without `INTERLOCK_KILL_CHILD` it returns at once.
#[test]
fn child_process_entry() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    let tier = tier_of(&std::env::var(TIER_ENV).expect("tier"));
    let clock = Clock::fake(T0_MS);
    let journal = StdFiles::at(dir).expect("open journal");
    let mut gate = GateHost::new(runtime(), journal, clock.clone()).expect("gate");
    let payments = Payments::open(&dir.join("payments.json")).expect("payments");
    let mut target = PaymentsTarget::new(payments, clock);
    println!("ready");
    for i in 0..EFFECTS {
        let outcome = gate
            .submit(&proposal(tier, i), &mut target)
            .expect("submit");
        println!("{i} {:?}", outcome.state);
    }
    println!("done");
}

fn interlock(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_interlock"));
    cmd.arg("--clock-ms").arg(T0_MS.to_string()).args(args);
    cmd
}

fn text(o: &Output) -> String {
    format!(
        "status {}\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A fresh case: orders paid, the lease granted (in this process, then released).
fn setup(dir: &Path, tier: Tier) {
    let mut payments = Payments::create(&dir.join("payments.json"), tier).unwrap();
    for i in 0..EFFECTS {
        payments.add_order(&order(i), PAID_CENTS).unwrap();
    }
    let journal = StdFiles::at(dir).unwrap();
    let mut gate = GateHost::new(runtime(), journal, Clock::fake(T0_MS)).unwrap();
    gate.grant_lease(LEASE, T0_MS + HOUR_MS).unwrap();
}

fn spawn_child(dir: &Path, tier: Tier) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .env(TIER_ENV, tier.label())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child")
}

/// Waits for the child's `ready`; returns the rest of its stdout as a reader.
fn await_ready(child: &mut Child) -> BufReader<std::process::ChildStdout> {
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            let status = child.wait().unwrap();
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("the child ended before it was ready: {status}\n{err}");
        }
        // libtest prints `test child_process_entry ... ` first, on the same line.
        if line.trim_end().ends_with("ready") {
            return out;
        }
    }
}

/// The last state of each effect's stream, read directly (before recovery).
fn states_on_disk(dir: &Path) -> Result<BTreeMap<String, String>, FileError> {
    let journal = FileJournal::open(dir)?;
    let mut last = BTreeMap::new();
    for stream in journal.streams() {
        if let Some(id) = stream.strip_prefix("effect:") {
            let entries = journal.read(&stream, 0)?;
            let e: Value = serde_json::from_str(entries.last().unwrap()).unwrap();
            last.insert(id.to_string(), e["state"].as_str().unwrap().to_string());
        }
    }
    Ok(last)
}

#[derive(Default)]
struct Tally {
    iterations: u64,
    /// Final state of every effect, by tier: "tier/STATE" -> count.
    finals: BTreeMap<String, u64>,
    /// Last state found on disk right after the kill ("none" = never recorded).
    at_kill: BTreeMap<String, u64>,
    torn: u64,
    /// What each torn tail held: its size and the entry states it had begun to write.
    torn_tails: Vec<String>,
    recover_killed: u64,
    children_finished: u64,
    refunds: u64,
    ambiguous_paid: u64,
}

/// Recovers (retrying once after a repair if the tail is torn); returns the output.
fn recover(dir: &Path, tally: &mut Tally) -> Output {
    let d = dir.to_str().unwrap();
    let out = interlock(&["recover", d]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("torn") {
        tally.torn += 1;
        let rep = interlock(&["repair", d]).output().unwrap();
        assert!(rep.status.success(), "repair failed: {}", text(&rep));
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("journal.torn-") {
                let bytes = std::fs::read_to_string(e.path()).unwrap_or_default();
                let states: Vec<&str> = bytes
                    .split("\"state\":\"")
                    .skip(1)
                    .filter_map(|t| t.split('"').next())
                    .collect();
                let last = std::fs::read_to_string(dir.join("journal.jsonl"))
                    .unwrap_or_default()
                    .lines()
                    .last()
                    .and_then(|l| serde_json::from_str::<Value>(l).ok())
                    .and_then(|v| v["state"].as_str().map(str::to_string))
                    .unwrap_or_default();
                tally.torn_tails.push(format!(
                    "{} bytes cut off {name} (the partial entry's state: {states:?}; \
                     the journal now ends with {last})",
                    bytes.len()
                ));
            }
        }
        return interlock(&["recover", d]).output().unwrap();
    }
    out
}

/// What the kill hit, to steer the kill window.
enum Hit {
    /// The child finished every refund before the kill.
    AfterTheEnd,
    /// Nothing was recorded yet.
    BeforeTheStart,
    Inside,
}

fn one_iteration(rng: &mut Rng, n: u64, window_us: u64, tally: &mut Tally) -> (Duration, Hit) {
    let tier = [Tier::ONE, Tier::TWO, Tier::THREE][(n % 3) as usize];
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    setup(dir, tier);

    let mut child = spawn_child(dir, tier);
    let mut out = await_ready(&mut child);
    let started = Instant::now();
    let mut ran = Duration::ZERO;
    // n == 0 calibrates: the child runs to the end; the time to its last refund sets the
    // kill window.
    if n == 0 {
        let mut line = String::new();
        while out.read_line(&mut line).unwrap() > 0 && !line.contains("done") {
            line.clear();
        }
        ran = started.elapsed();
    } else {
        std::thread::sleep(Duration::from_micros(rng.below(window_us)));
        child.kill().unwrap(); // SIGKILL
    }
    let status = child.wait().unwrap();
    drop(out);
    let mut hit = Hit::Inside;
    if status.success() {
        tally.children_finished += 1;
        hit = Hit::AfterTheEnd;
    }
    match states_on_disk(dir) {
        Ok(states) => {
            if states.is_empty() {
                hit = Hit::BeforeTheStart;
            }
            let recorded = states.len();
            for s in states.values() {
                *tally.at_kill.entry(s.clone()).or_default() += 1;
            }
            *tally.at_kill.entry("none".into()).or_default() += (EFFECTS - recorded) as u64;
        }
        Err(FileError::TornTail { .. }) => {
            *tally.at_kill.entry("torn".into()).or_default() += 1;
        }
        Err(e) => panic!("iteration {n}: the journal does not open after the kill: {e}"),
    }

    // Sometimes recovery itself is killed once before it can finish.
    if rng.below(4) == 0 {
        let mut rec = interlock(&["recover", dir.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.below(window_us)));
        rec.kill().unwrap();
        rec.wait().unwrap();
        tally.recover_killed += 1;
    }

    let rec = recover(dir, tally);
    // 0: all resolved; 1: something AMBIGUOUS (checked below); anything else is a failure.
    assert!(
        matches!(rec.status.code(), Some(0 | 1)),
        "iteration {n}: recover failed: {}",
        text(&rec)
    );
    let ver = interlock(&["verify", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        ver.status.success(),
        "iteration {n}: verify failed: {}",
        text(&ver)
    );
    check(dir, tier, n, tally, &rec);
    (ran, hit)
}

/// The money and the journal agree: nothing paid twice, every effect terminal, and the
/// refunds are exactly those the journal says happened (plus, at tier 3, AMBIGUOUS ones
/// that may have landed).
fn check(dir: &Path, tier: Tier, n: u64, tally: &mut Tally, rec: &Output) {
    let ctx = || format!("iteration {n} (tier {}):\n{}", tier.label(), text(rec));
    let journal = StdFiles::at(dir).unwrap();
    let mut gate = GateHost::new(runtime(), journal, Clock::fake(T0_MS)).unwrap();
    let open = gate.open_effects().unwrap();
    assert!(open.is_empty(), "{}: open after recovery: {open:?}", ctx());
    let payments = Payments::open(&dir.join("payments.json")).unwrap();
    let mut expected_cents = 0;
    for i in 0..EFFECTS {
        let id = gate.effect_id_of(&proposal(tier, i)).unwrap();
        let refunds = payments.refunds(&order(i));
        tally.refunds += refunds.len() as u64;
        assert!(
            refunds.len() <= 1,
            "{}: {} paid {} times: {refunds:?}",
            ctx(),
            order(i),
            refunds.len()
        );
        let state = match gate.receipt(&id, None) {
            Ok(r) => {
                let r: Value = serde_json::from_str(&r).unwrap();
                r["final"].as_str().unwrap().to_string()
            }
            Err(Error::Gate(_)) => "none".to_string(),
            Err(e) => panic!("{}: receipt of {id}: {e}", ctx()),
        };
        *tally
            .finals
            .entry(format!("tier {}: {state}", tier.label()))
            .or_default() += 1;
        match state.as_str() {
            "COMMITTED" => {
                assert_eq!(refunds.len(), 1, "{}: {id} COMMITTED but unpaid", ctx());
                assert_eq!(refunds[0].reference.as_deref(), Some(id.as_str()));
                expected_cents += AMOUNT_CENTS;
            }
            // Never recorded: the kill came before the intent's fsync, so nothing was sent.
            "none" => assert!(refunds.is_empty(), "{}: {id} unrecorded but paid", ctx()),
            // Only a tier without dedupe and lookup may end unknown.
            "AMBIGUOUS" if tier == Tier::THREE => {
                if refunds.len() == 1 {
                    tally.ambiguous_paid += 1;
                    expected_cents += AMOUNT_CENTS;
                }
            }
            other => panic!("{}: {id} ended {other}", ctx()),
        }
        let paid: u64 = refunds.iter().map(|r| r.amount_cents).sum();
        assert!(paid <= AMOUNT_CENTS, "{}: {id} paid {paid}", ctx());
    }
    let total: u64 = (0..EFFECTS)
        .map(|i| payments.refunded_cents(&order(i)))
        .sum();
    assert_eq!(total, expected_cents, "{}", ctx());
}

#[test]
fn sigkill_at_random_points_then_recover() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return; // in the child, only `child_process_entry` runs
    }
    let kills: u64 = std::env::var("INTERLOCK_KILLS")
        .ok()
        .map(|s| s.parse().expect("INTERLOCK_KILLS is a number"))
        .unwrap_or(30);
    let seed: u64 = std::env::var("INTERLOCK_KILL_SEED")
        .ok()
        .map(|s| s.parse().expect("INTERLOCK_KILL_SEED is a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("kill test: INTERLOCK_KILL_SEED={seed} INTERLOCK_KILLS={kills}");
    let mut rng = Rng(seed);
    let mut tally = Tally::default();
    let started = Instant::now();
    // Calibrate: one child that is not killed. The kills land in twice the time it takes
    // from `ready` to its last refund: a killed child runs slower than the calibration (its
    // first calls warm up), and a few kills should come after the end.
    let (full, _) = one_iteration(&mut rng, 0, 0, &mut tally);
    // The machine's speed drifts (fsync latency, other load), so the window follows what the
    // kills hit: shorter after a kill that came too late, longer after one that came too
    // early. (A replay with the same seed replays the choices, not the exact timing.)
    let mut window_us = 2 * full.as_micros() as u64 + 1;
    tally.iterations = 1;
    for n in 1..=kills {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            one_iteration(&mut rng, n, window_us, &mut tally)
        }));
        match result {
            Ok((_, Hit::AfterTheEnd)) => window_us = window_us * 4 / 5 + 1,
            Ok((_, Hit::BeforeTheStart)) => window_us = window_us * 5 / 4 + 1,
            Ok((_, Hit::Inside)) => {}
            Err(e) => {
                eprintln!(
                    "kill test failed: replay with INTERLOCK_KILL_SEED={seed} INTERLOCK_KILLS={kills}"
                );
                std::panic::resume_unwind(e);
            }
        }
        tally.iterations += 1;
    }
    let elapsed = started.elapsed();
    println!(
        "kill test: seed {seed}, {} iterations ({kills} kills + 1 calibration) in {:.1?}; \
         the calibration child's refunds took {:.1?}, the final kill window {window_us} us; {} children finished before the kill; \
         {} recoveries killed; {} torn tails repaired; {} refunds, {} AMBIGUOUS that landed",
        tally.iterations,
        elapsed,
        full,
        tally.children_finished,
        tally.recover_killed,
        tally.torn,
        tally.refunds,
        tally.ambiguous_paid
    );
    println!("  last state on disk after the kill: {:?}", tally.at_kill);
    for t in &tally.torn_tails {
        println!("  torn tail repaired: {t}");
    }
    for (k, v) in &tally.finals {
        println!("  final {k}: {v}");
    }
}
