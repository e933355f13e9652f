//! `interlock demo`: a refund, a crash after the send, a restart; and the naive run beside it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use interlock_cli::case::{self, HOUR_MS, LEASE, ORDER, PAID_CENTS, REFUND_CENTS};
use interlock_cli::gate::CrashAction;
use interlock_cli::{CrashPoint, PaymentsTarget};
use interlock_payments_sim::Payments;

use crate::cli::{Mode, Phase};
use crate::output::{is_journal_url, state_name, Failure};
use crate::{open_payments, owner_only_dir, Ctx};

/// Marks a folder as the demo's own, so `demo --dir` never wipes anything else.
const DEMO_MARKER: &str = ".interlock-demo";

pub(crate) fn demo(
    ctx: &Ctx,
    mode: Mode,
    dir: Option<PathBuf>,
    journal: Option<PathBuf>,
) -> Result<u8, Failure> {
    let own = dir.is_none();
    let dir = dir.unwrap_or_else(|| Path::new(".interlock-demo").join(mode.name()));
    if let Some(url) = &journal {
        if !is_journal_url(url) || matches!(mode, Mode::Naive) {
            return Err(Failure::new(
                2,
                "usage",
                "--journal takes a shared journal's URL (sqlite:///..., postgres://...), and \
                 the naive mode has no journal",
            ));
        }
    }
    if own {
        // The demo's own parent folder, owner-only even when an earlier demo made it open.
        owner_only_dir(Path::new(".interlock-demo"))?;
    }
    fresh_demo_dir(&dir)?;
    // Where the gate's journal is: the folder, or the shared journal.
    let at = journal.clone().unwrap_or_else(|| dir.clone());
    let tier = mode.tier();
    let payments_path = dir.join("payments.json");
    let mut payments = Payments::create(&payments_path, tier)?;
    payments.add_order(ORDER, PAID_CENTS)?;

    match mode {
        Mode::Naive => ctx.say(format_args!(
            "system: no gate (plain retry), payments API at tier {}",
            tier.label()
        )),
        _ => ctx.say(format_args!(
            "system: INTERLOCK, payments API at tier {}",
            tier.label()
        )),
    }
    ctx.say(format_args!(
        "customer paid {}. case #4471 approves one {} partial refund.",
        dollars(PAID_CENTS),
        dollars(REFUND_CENTS)
    ));
    ctx.say(format_args!(
        "agent decides: refund {}",
        dollars(REFUND_CENTS)
    ));

    let effect = if let Mode::Naive = mode {
        None
    } else {
        // The decision: premises read from the system of record now, authority granted.
        let premises = payments.premises(ORDER, None)?;
        let proposal = case::proposal(tier, REFUND_CENTS, premises);
        std::fs::write(dir.join("proposal.json"), &proposal)?;
        let mut gate = ctx.gate(&at)?;
        let effect = gate.effect_id_of(&proposal)?;
        gate.grant_lease(LEASE, ctx.clock.now_ms() + HOUR_MS)?;
        Some(effect)
    };
    drop(payments);

    ctx.say("── refund executes, then the process dies before the ack ──");
    let phase = if effect.is_some() {
        "send"
    } else {
        "naive-send"
    };
    let mut child_args = vec!["demo-child", "--dir", path_str(&dir)?, "--phase", phase];
    if journal.is_some() {
        child_args.extend(["--journal", path_str(&at)?]);
    }
    let child = run_self(ctx, &child_args)?;
    if child.status.success() || child.status.code() == Some(2) {
        return Err(Failure::new(
            1,
            "demo_failed",
            format!(
                "the child process did not crash as planned:\n{}",
                child_text(&child)
            ),
        ));
    }
    ctx.say("💥 crash");
    ctx.say("── process restarts ──");

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
            return Err(Failure::new(
                1,
                "demo_failed",
                format!("the restarted process failed:\n{}", child_text(&rerun)),
            ));
        }
        ctx.say("no journal: the restarted process re-runs the step and refunds again");
        let (refunded, records) = print_totals(ctx, &payments_path)?;
        if refunded > REFUND_CENTS {
            ctx.say("Paid twice.");
        }
        ctx.print(
            json!({
                "ok": true, "mode": mode.name(), "dir": dir.display().to_string(),
                "refunded_cents": refunded, "refund_records": records,
                "paid_twice": refunded > REFUND_CENTS,
            }),
            format_args!(
                "final {} refunded for one approved {}",
                dollars(refunded),
                dollars(REFUND_CENTS)
            ),
        );
        return Ok(0);
    };

    let before = last_state(&receipt_json(ctx, &at, &effect)?);
    // Another process (another machine, on a shared journal) recovers.
    let rec = run_self(
        ctx,
        &[
            "--json",
            "recover",
            path_str(&at)?,
            "--payments",
            path_str(&payments_path)?,
        ],
    )?;
    // `recover` exits 1 for an AMBIGUOUS effect: that is a result here, not a failure.
    if !matches!(rec.status.code(), Some(0 | 1)) {
        return Err(Failure::new(
            1,
            "demo_failed",
            format!("recovery failed:\n{}", child_text(&rec)),
        ));
    }
    let outcomes: Value = serde_json::from_slice(&rec.stdout)
        .with_context(|| format!("`recover --json` printed no JSON:\n{}", child_text(&rec)))?;
    let reason = outcomes
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["effect_id"] == effect.as_str())
        .and_then(|o| o["reason"].as_str())
        .map(str::to_string);
    let receipt = receipt_json(ctx, &at, &effect)?;
    let (state, via) = last_state(&receipt);
    let said = match before.0.as_str() {
        "DISPATCHED" => "DISPATCHED with no COMMITTED".to_string(),
        other => other.to_string(),
    };
    let mut how = Vec::new();
    how.extend(via.as_ref().map(|v| format!("via {v}")));
    how.extend(reason.clone());
    let how = if how.is_empty() {
        String::new()
    } else {
        format!(" ({})", how.join(", "))
    };
    ctx.say(format_args!("journal says {said} → recovery: {state}{how}"));
    let (refunded, records) = print_totals(ctx, &payments_path)?;
    ctx.say("journal:");
    for entry in receipt["entries"].as_array().into_iter().flatten() {
        let s = entry["state"].as_str().unwrap_or("?");
        let via = entry["via"].as_str().unwrap_or("");
        ctx.say(format_args!(
            "  {}",
            format!("{s:<11} {effect} {via}").trim_end()
        ));
    }
    ctx.say(format_args!(
        "receipt: final {}, executed {}, attempts {}; full JSON: interlock receipt {} {effect}",
        receipt["final"].as_str().unwrap_or("?"),
        receipt["executed"].as_str().unwrap_or("?"),
        receipt["attempts"],
        at.display()
    ));
    ctx.print(
        json!({
            "ok": true, "mode": mode.name(), "dir": dir.display().to_string(),
            "effect_id": effect, "journal_before": before.0, "final": state, "via": via,
            "reason": reason, "refunded_cents": refunded, "refund_records": records,
        }),
        format_args!("final {state}"),
    );
    Ok(0)
}

/// The child processes: they really die (abort), as a crashed agent does.
pub(crate) fn demo_child(
    ctx: &Ctx,
    dir: &Path,
    phase: Phase,
    journal: Option<&Path>,
) -> Result<u8, Failure> {
    let payments_path = dir.join("payments.json");
    let mut payments = open_payments(&payments_path)?;
    match phase {
        Phase::Send => {
            let proposal = std::fs::read_to_string(dir.join("proposal.json"))?;
            let mut gate = ctx.gate(journal.unwrap_or(dir))?;
            gate.crash_at(CrashPoint::AfterSend, CrashAction::Abort);
            let mut target = PaymentsTarget::new(payments, ctx.clock.clone());
            let outcome = gate.submit(&proposal, &mut target)?;
            Err(Failure::new(
                1,
                "demo_failed",
                format!(
                    "the send ended {} without reaching the service",
                    state_name(outcome.state)
                ),
            ))
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

pub(crate) fn fresh_demo_dir(dir: &Path) -> Result<()> {
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
    owner_only_dir(dir)?;
    std::fs::write(
        dir.join(DEMO_MARKER),
        "made by `interlock demo`; wiped by the next one\n",
    )?;
    Ok(())
}

/// Runs this program again with the same global flags, as a new process.
pub(crate) fn run_self(ctx: &Ctx, args: &[&str]) -> Result<std::process::Output> {
    let exe = std::env::current_exe().context("cannot find this program to restart it")?;
    let mut cmd = Command::new(exe);
    if let Some(ms) = ctx.clock_ms {
        cmd.arg("--clock-ms").arg(ms.to_string());
    }
    if let Some(w) = &ctx.wasm {
        cmd.arg("--wasm").arg(w);
    }
    cmd.arg("--lock-wait-ms")
        .arg(ctx.lock_wait.as_millis().to_string());
    cmd.args(args)
        .output()
        .context("cannot start a child process")
}

pub(crate) fn child_text(out: &std::process::Output) -> String {
    format!(
        "status {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub(crate) fn path_str(p: &Path) -> Result<&str> {
    p.to_str()
        .ok_or_else(|| anyhow!("{} is not UTF-8", p.display()))
}

pub(crate) fn receipt_json(ctx: &Ctx, dir: &Path, effect: &str) -> Result<Value, Failure> {
    let text = ctx.gate(dir)?.receipt(effect, None)?;
    Ok(serde_json::from_str(&text).context("the receipt is not JSON")?)
}

/// The state and `via` of a receipt's last journal entry.
pub(crate) fn last_state(receipt: &Value) -> (String, Option<String>) {
    let last = receipt["entries"].as_array().and_then(|e| e.last());
    let state = last
        .and_then(|e| e["state"].as_str())
        .or(receipt["state"].as_str())
        .unwrap_or("?")
        .to_string();
    let via = last.and_then(|e| e["via"].as_str()).map(str::to_string);
    (state, via)
}

pub(crate) fn print_totals(ctx: &Ctx, payments_path: &Path) -> Result<(u64, usize), Failure> {
    let payments = open_payments(payments_path)?;
    let refunded = payments.refunded_cents(ORDER);
    let records = payments.refunds(ORDER).len();
    ctx.say(format_args!(
        "refunded on order #881: {} ({records} refund record(s))",
        dollars(refunded),
    ));
    Ok((refunded, records))
}

pub(crate) fn dollars(cents: u64) -> String {
    if cents.is_multiple_of(100) {
        format!("${}", cents / 100)
    } else {
        format!("${}.{:02}", cents / 100, cents % 100)
    }
}
