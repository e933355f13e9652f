//! `interlock`: the command-line host of the Interlock gate.
//!
//! Every decision is the gate component's; this binary opens journals and services, runs
//! the gate, and prints what it decided.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use interlock_cli::bindings::interlock::gate::types::{Outcome, State};
use interlock_cli::gate::CrashAction;
use interlock_cli::seed::{self, HOUR_MS, LEASE, ORDER, PAID_CENTS, REFUND_CENTS};
use interlock_cli::{Clock, CrashPoint, GateHost, PaymentsTarget, Runtime};
use interlock_file_journal::{Error as FileError, FileJournal};
use interlock_payments_sim::{Payments, Tier};
use serde_json::Value;

const AFTER_HELP: &str = "\
Interlock journals an agent's side effect (say, a $20 refund) before it is sent, re-checks
its authority and premises right before the send and after any crash, and recovers by what
the target service can do: retry under the idempotency key (tier 1), look the effect up
(tier 2), or say AMBIGUOUS and hand it to a person (tier 3).

Start here:
  interlock demo 2          a refund, a crash after the send, a restart: paid once
  interlock demo naive      the same without the gate: paid twice

Then look at what the demo left behind (its folder is printed at the end):
  interlock verify .interlock-demo/2
  interlock receipt .interlock-demo/2 EFFECT_ID

Exit codes: 0 ok, 1 a verification or outcome failure, 2 a usage or input error.

The gate component is found with --wasm, $INTERLOCK_WASM, the build output of
`bash scripts/build-wasm.sh`, or next to this program.";

#[derive(Parser)]
#[command(name = "interlock", version, about = "A safety gate for an AI agent's side effects", after_help = AFTER_HELP)]
struct Cli {
    /// Use a fake wall clock fixed at this Unix time in milliseconds, for reproducible runs
    /// (waits advance it instead of sleeping).
    #[arg(long, global = true, value_name = "MS")]
    clock_ms: Option<u64>,
    /// The gate component (.wasm).
    #[arg(long, global = true, value_name = "PATH")]
    wasm: Option<PathBuf>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the seed story: a $20 refund, a crash after the send, a restart.
    Demo {
        /// `naive` (no gate, plain retry) or the payments API's tier: 1 (dedupes),
        /// 2 (lookup), 3 (neither).
        mode: Mode,
        /// Where the journal and the payments state go [default: ./.interlock-demo/MODE].
        /// Wiped at start, so it must be empty or an earlier demo's folder.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Recover every open effect in a journal against the payments service.
    Recover {
        /// The journal folder.
        dir: PathBuf,
        /// The payments service's state file [default: DIR/payments.json].
        #[arg(long, value_name = "FILE")]
        payments: Option<PathBuf>,
    },
    /// Verify every stream's hash chain (exit 1 on any problem).
    Verify {
        /// The journal folder.
        dir: PathBuf,
        /// Receipts (JSON files) that pin their streams, so truncation is caught too.
        #[arg(long = "receipt", value_name = "FILE")]
        receipts: Vec<PathBuf>,
    },
    /// Print an effect's receipt as JSON.
    Receipt {
        /// The journal folder.
        dir: PathBuf,
        /// The effect id (32 hex digits).
        effect: String,
        /// Sign the receipt with HMAC-SHA256 under the bytes of this file.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
    /// Cut a torn last line off a journal (it is saved to a side file first).
    Repair {
        /// The journal folder.
        dir: PathBuf,
    },
    /// The demo's child processes (run by `demo`).
    #[command(hide = true)]
    DemoChild {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        phase: Phase,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Naive,
    #[value(name = "1")]
    Tier1,
    #[value(name = "2")]
    Tier2,
    #[value(name = "3")]
    Tier3,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Naive => "naive",
            Mode::Tier1 => "1",
            Mode::Tier2 => "2",
            Mode::Tier3 => "3",
        }
    }

    fn tier(self) -> Tier {
        match self {
            Mode::Tier1 => Tier::ONE,
            Mode::Tier2 => Tier::TWO,
            // Plain retry sends no key, so the tier does not matter; 3 is the honest case.
            Mode::Tier3 | Mode::Naive => Tier::THREE,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Phase {
    /// Gated: submit the proposal, die after the service committed.
    Send,
    /// No gate: refund, die before the ack.
    NaiveSend,
    /// No gate: the restarted process re-runs the step.
    NaiveRerun,
}

/// A failure with its exit code: 1 for a failed check or outcome, 2 for bad input.
struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure {
            code: 2,
            error: error.into(),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let clock = match cli.clock_ms {
        Some(ms) => Clock::fake(ms),
        None => Clock::System,
    };
    let ctx = Ctx {
        clock,
        clock_ms: cli.clock_ms,
        wasm: cli.wasm,
    };
    let result = match cli.command {
        Cmd::Demo { mode, dir } => demo(&ctx, mode, dir),
        Cmd::Recover { dir, payments } => recover(&ctx, &dir, payments),
        Cmd::Verify { dir, receipts } => verify(&ctx, &dir, &receipts),
        Cmd::Receipt {
            dir,
            effect,
            key_file,
        } => receipt(&ctx, &dir, &effect, key_file.as_deref()),
        Cmd::Repair { dir } => repair(&dir),
        Cmd::DemoChild { dir, phase } => demo_child(&ctx, &dir, phase),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("error: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}

/// What every command shares.
struct Ctx {
    clock: Clock,
    clock_ms: Option<u64>,
    wasm: Option<PathBuf>,
}

impl Ctx {
    fn gate(&self, dir: &Path) -> Result<GateHost> {
        let runtime = Runtime::locate_and_load(self.wasm.as_deref())?;
        let journal = open_journal(dir)?;
        Ok(GateHost::new(
            &runtime,
            Box::new(journal),
            self.clock.clone(),
        )?)
    }
}

fn open_journal(dir: &Path) -> Result<FileJournal> {
    // FileJournal::open creates a missing folder; a typo must not become an empty journal.
    if !dir.is_dir() {
        bail!("{} is not a folder; no journal there", dir.display());
    }
    FileJournal::open(dir).map_err(|e| {
        let hint = match &e {
            FileError::TornTail { .. } => {
                format!("\nrun `interlock repair {}`, then try again", dir.display())
            }
            FileError::Locked { .. } => "; is another interlock process using it?".to_string(),
            _ => String::new(),
        };
        anyhow!("cannot open the journal in {}: {e}{hint}", dir.display())
    })
}

fn open_payments(path: &Path) -> Result<Payments> {
    // Formatted here, not chained: the adapter's message already includes its source.
    Payments::open(path).map_err(|e| {
        anyhow!(
            "cannot open the payments service state {}: {e}",
            path.display()
        )
    })
}

// ---------------------------------------------------------------- recover, verify, ...

fn recover(ctx: &Ctx, dir: &Path, payments: Option<PathBuf>) -> Result<u8, Failure> {
    let payments_path = payments.unwrap_or_else(|| dir.join("payments.json"));
    let mut gate = ctx.gate(dir)?;
    let mut target = PaymentsTarget::new(open_payments(&payments_path)?, ctx.clock.clone());
    let results = gate.recover_all(&mut target).map_err(anyhow::Error::from)?;
    if results.is_empty() {
        println!("nothing to recover: no open effects");
    }
    let mut code = 0;
    for (effect, result) in results {
        match result {
            Ok(o) => {
                println!("{effect} {} {}", state_name(o.state), reason_text(&o));
                // A person must look at these; the command says so by its exit code.
                if matches!(o.state, State::Ambiguous | State::Dispatched) {
                    code = 1;
                }
            }
            Err(e) => {
                println!("{effect} ERROR {e}");
                code = 1;
            }
        }
    }
    Ok(code)
}

fn verify(ctx: &Ctx, dir: &Path, receipts: &[PathBuf]) -> Result<u8, Failure> {
    let anchors = receipts
        .iter()
        .map(|p| std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display())))
        .collect::<Result<Vec<_>>>()?;
    let mut gate = match ctx.gate(dir) {
        Ok(g) => g,
        // A line that is not even an entry is a verification failure, not bad input.
        Err(e) if is_corrupt(&e) => return Err(Failure { code: 1, error: e }),
        Err(e) => return Err(e.into()),
    };
    let report = gate.verify(&anchors).map_err(anyhow::Error::from)?;
    if report.problems.is_empty() {
        println!("ok: {} streams, {} entries", report.streams, report.entries);
        return Ok(0);
    }
    println!(
        "FAILED: {} problem(s) in {} streams, {} entries",
        report.problems.len(),
        report.streams,
        report.entries
    );
    for p in &report.problems {
        let kind = words(format!("{:?}", p.kind), '-');
        println!("  stream {} seq {}: {kind}: {}", p.stream, p.seq, p.detail);
    }
    Ok(1)
}

fn is_corrupt(e: &anyhow::Error) -> bool {
    e.to_string().contains("corrupt journal")
}

fn receipt(ctx: &Ctx, dir: &Path, effect: &str, key_file: Option<&Path>) -> Result<u8, Failure> {
    let key = key_file
        .map(|p| std::fs::read(p).with_context(|| format!("cannot read key file {}", p.display())))
        .transpose()?;
    let mut gate = ctx.gate(dir)?;
    let receipt = gate
        .receipt(effect, key.as_deref())
        .map_err(anyhow::Error::from)?;
    println!("{receipt}");
    Ok(0)
}

fn repair(dir: &Path) -> Result<u8, Failure> {
    if !dir.is_dir() {
        return Err(anyhow!("{} is not a folder; no journal there", dir.display()).into());
    }
    let report = FileJournal::repair(dir)
        .map_err(|e| anyhow!("cannot repair the journal in {}: {e}", dir.display()))?;
    println!("{report}");
    Ok(0)
}

// ---------------------------------------------------------------- the demo

/// Marks a folder as the demo's own, so `demo --dir` never wipes anything else.
const DEMO_MARKER: &str = ".interlock-demo";

fn demo(ctx: &Ctx, mode: Mode, dir: Option<PathBuf>) -> Result<u8, Failure> {
    let dir = dir.unwrap_or_else(|| Path::new(".interlock-demo").join(mode.name()));
    fresh_demo_dir(&dir)?;
    let tier = mode.tier();
    let payments_path = dir.join("payments.json");
    let mut payments = Payments::create(&payments_path, tier)?;
    payments.add_order(ORDER, PAID_CENTS)?;

    match mode {
        Mode::Naive => println!(
            "system: no gate (plain retry), payments API at tier {}",
            tier.label()
        ),
        _ => println!("system: INTERLOCK, payments API at tier {}", tier.label()),
    }
    println!(
        "customer paid {}. case #4471 approves one {} partial refund.",
        dollars(PAID_CENTS),
        dollars(REFUND_CENTS)
    );
    println!("agent decides: refund {}", dollars(REFUND_CENTS));

    let effect = if let Mode::Naive = mode {
        None
    } else {
        // The decision: premises read from the system of record now, authority granted.
        let premises = payments.premises(ORDER, None)?;
        let proposal = seed::proposal(tier, REFUND_CENTS, premises);
        std::fs::write(dir.join("proposal.json"), &proposal)?;
        let mut gate = ctx.gate(&dir)?;
        let effect = gate.effect_id_of(&proposal).map_err(anyhow::Error::from)?;
        gate.grant_lease(LEASE, ctx.clock.now_ms() + HOUR_MS)
            .map_err(anyhow::Error::from)?;
        Some(effect)
    };
    drop(payments);

    println!("── refund executes, then the process dies before the ack ──");
    let phase = if effect.is_some() {
        "send"
    } else {
        "naive-send"
    };
    let child = run_self(
        ctx,
        &["demo-child", "--dir", path_str(&dir)?, "--phase", phase],
    )?;
    if child.status.success() || child.status.code() == Some(2) {
        return Err(Failure {
            code: 1,
            error: anyhow!(
                "the child process did not crash as planned:\n{}",
                child_text(&child)
            ),
        });
    }
    println!("💥 crash");
    println!("── process restarts ──");

    let Some(effect) = effect else {
        let rerun = run_self(
            ctx,
            &[
                "demo-child",
                "--dir",
                path_str(&dir)?,
                "--phase",
                "naive-rerun",
            ],
        )?;
        if !rerun.status.success() {
            return Err(anyhow!("the restarted process failed:\n{}", child_text(&rerun)).into());
        }
        println!("no journal: the restarted process re-runs the step and refunds again");
        let refunded = print_totals(&payments_path)?;
        if refunded > REFUND_CENTS {
            println!("Paid twice.");
        }
        println!(
            "final {} refunded for one approved {}",
            dollars(refunded),
            dollars(REFUND_CENTS)
        );
        return Ok(0);
    };

    let before = last_state(&receipt_json(ctx, &dir, &effect)?);
    let rec = run_self(ctx, &["recover", path_str(&dir)?])?;
    // `recover` exits 1 for an AMBIGUOUS effect: that is a result here, not a failure.
    if !matches!(rec.status.code(), Some(0 | 1)) {
        return Err(anyhow!("recovery failed:\n{}", child_text(&rec)).into());
    }
    let receipt = receipt_json(ctx, &dir, &effect)?;
    let (state, via) = last_state(&receipt);
    // `recover` prints `ID STATE REASON`; the reason is `-` when there is none.
    let reason = String::from_utf8_lossy(&rec.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(effect.as_str()))
        .and_then(|rest| rest.split_whitespace().nth(1).map(str::to_string))
        .filter(|r| r != "-");
    let said = match before.0.as_str() {
        "DISPATCHED" => "DISPATCHED with no COMMITTED".to_string(),
        other => other.to_string(),
    };
    let mut how = Vec::new();
    how.extend(via.map(|v| format!("via {v}")));
    how.extend(reason);
    let how = if how.is_empty() {
        String::new()
    } else {
        format!(" ({})", how.join(", "))
    };
    println!("journal says {said} → recovery: {state}{how}");
    print_totals(&payments_path)?;
    println!("journal:");
    for entry in receipt["entries"].as_array().into_iter().flatten() {
        let s = entry["state"].as_str().unwrap_or("?");
        let via = entry["via"].as_str().unwrap_or("");
        println!("  {}", format!("{s:<11} {effect} {via}").trim_end());
    }
    println!(
        "receipt: final {}, executed {}, attempts {}; full JSON: interlock receipt {} {effect}",
        receipt["final"].as_str().unwrap_or("?"),
        receipt["executed"].as_str().unwrap_or("?"),
        receipt["attempts"],
        dir.display()
    );
    println!("final {state}");
    Ok(0)
}

/// The child processes: they really die (abort), as a crashed agent does.
fn demo_child(ctx: &Ctx, dir: &Path, phase: Phase) -> Result<u8, Failure> {
    let payments_path = dir.join("payments.json");
    let mut payments = open_payments(&payments_path)?;
    match phase {
        Phase::Send => {
            let proposal = std::fs::read_to_string(dir.join("proposal.json"))?;
            let mut gate = ctx.gate(dir)?;
            gate.crash_at(CrashPoint::AfterCommit, CrashAction::Abort);
            let mut target = PaymentsTarget::new(payments, ctx.clock.clone());
            let outcome = gate
                .submit(&proposal, &mut target)
                .map_err(anyhow::Error::from)?;
            Err(anyhow!(
                "the send ended {} without reaching the service",
                state_name(outcome.state)
            )
            .into())
        }
        Phase::NaiveSend => {
            payments.refund(ORDER, REFUND_CENTS, None, None, ctx.clock.now_ms())?;
            std::process::abort();
        }
        Phase::NaiveRerun => {
            payments.refund(ORDER, REFUND_CENTS, None, None, ctx.clock.now_ms())?;
            Ok(0)
        }
    }
}

fn fresh_demo_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)?.next().is_none();
        if !empty && !dir.join(DEMO_MARKER).exists() {
            bail!(
                "{} is not empty and not a demo folder; the demo wipes its folder, pick another",
                dir.display()
            );
        }
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot wipe {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(
        dir.join(DEMO_MARKER),
        "made by `interlock demo`; wiped by the next one\n",
    )?;
    Ok(())
}

/// Runs this program again with the same global flags, as a new process.
fn run_self(ctx: &Ctx, args: &[&str]) -> Result<std::process::Output> {
    let exe = std::env::current_exe().context("cannot find this program to restart it")?;
    let mut cmd = Command::new(exe);
    if let Some(ms) = ctx.clock_ms {
        cmd.arg("--clock-ms").arg(ms.to_string());
    }
    if let Some(w) = &ctx.wasm {
        cmd.arg("--wasm").arg(w);
    }
    cmd.args(args)
        .output()
        .context("cannot start a child process")
}

fn child_text(out: &std::process::Output) -> String {
    format!(
        "status {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn path_str(p: &Path) -> Result<&str> {
    p.to_str()
        .ok_or_else(|| anyhow!("{} is not UTF-8", p.display()))
}

fn receipt_json(ctx: &Ctx, dir: &Path, effect: &str) -> Result<Value> {
    let text = ctx.gate(dir)?.receipt(effect, None)?;
    serde_json::from_str(&text).context("the receipt is not JSON")
}

/// The state and `via` of a receipt's last journal entry.
fn last_state(receipt: &Value) -> (String, Option<String>) {
    let last = receipt["entries"].as_array().and_then(|e| e.last());
    let state = last
        .and_then(|e| e["state"].as_str())
        .or(receipt["state"].as_str())
        .unwrap_or("?")
        .to_string();
    let via = last.and_then(|e| e["via"].as_str()).map(str::to_string);
    (state, via)
}

fn print_totals(payments_path: &Path) -> Result<u64> {
    let payments = open_payments(payments_path)?;
    let refunded = payments.refunded_cents(ORDER);
    println!(
        "refunded on order #881: {} ({} refund record(s))",
        dollars(refunded),
        payments.refunds(ORDER).len()
    );
    Ok(refunded)
}

fn dollars(cents: u64) -> String {
    if cents.is_multiple_of(100) {
        format!("${}", cents / 100)
    } else {
        format!("${}.{:02}", cents / 100, cents % 100)
    }
}

/// The state as spelled in JSON (upper case), derived from the generated enum so a new
/// WIT case needs no change here.
fn state_name(s: State) -> String {
    variant_name(format!("{s:?}")).to_uppercase()
}

/// `Reason::ClaimLive` (the generated Debug) -> `ClaimLive`.
fn variant_name(debug: String) -> String {
    debug.rsplit("::").next().unwrap_or_default().to_string()
}

/// The reason as its JSON code (`no_dedupe_no_lookup`), or `-`.
fn reason_text(o: &Outcome) -> String {
    o.reason
        .map_or_else(|| "-".to_string(), |r| words(format!("{r:?}"), '_'))
}

/// `Reason::NoDedupeNoLookup` (the generated Debug) -> `no_dedupe_no_lookup` with `sep`
/// `_`, as WIT spells it with `-`; derived so a new WIT case needs no change here.
fn words(debug: String, sep: char) -> String {
    let mut out = String::new();
    for (i, c) in variant_name(debug).chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push(sep);
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}
