//! The operator's commands on a journal: recover, verify, receipt, repair, leases, approvals.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use interlock_cli::bindings::interlock::gate::types::State;
use interlock_cli::gate::ClaimWait;
use interlock_cli::{GateHost, PaymentsTarget, Storage};
use interlock_file_journal::StdFiles;

use crate::cli::Until;
use crate::output::{
    file_kind, is_journal_url, outcome_json, reason_text, report_json, state_name, words, Failure,
};
use crate::{make_journal_dir, not_open, open_payments, read_input, Ctx};

pub(crate) fn recover(
    ctx: &Ctx,
    dir: &Path,
    payments: Option<PathBuf>,
    no_wait: bool,
) -> Result<u8, Failure> {
    let payments_path = match payments {
        Some(p) => p,
        None if is_journal_url(dir) => return Err(Failure::new(
            2,
            "usage",
            "a shared journal has no folder to keep the payments state in: give --payments FILE",
        )),
        None => dir.join("payments.json"),
    };
    let mut gate = ctx.gate(dir)?;
    if no_wait {
        gate.set_claim_wait(ClaimWait {
            max_polls: 0,
            ..ClaimWait::default()
        });
    }
    let mut target = PaymentsTarget::new(open_payments(&payments_path)?, ctx.clock.clone());
    let results = gate.recover_all(&mut target)?;
    if results.is_empty() {
        ctx.say("nothing to recover: no open effects");
    }
    let mut code = 0;
    let mut list = Vec::new();
    for (effect, result) in results {
        match result {
            Ok(o) => {
                ctx.say(format_args!(
                    "{effect} {} {}",
                    state_name(o.state),
                    reason_text(&o)
                ));
                // A person must look at these (or recovery run again); the exit code says so.
                if !matches!(
                    o.state,
                    State::Committed | State::Confirmed | State::Refused
                ) {
                    code = 1;
                }
                list.push(outcome_json(&o));
            }
            Err(e) => {
                let f = Failure::from(e);
                ctx.say(format_args!("{effect} ERROR {}", f.message));
                list.push(json!({"effect_id": effect, "error": f.to_json()["error"]}));
                code = 1;
            }
        }
    }
    if ctx.json {
        println!("{}", Value::Array(list));
    }
    Ok(code)
}

pub(crate) fn verify(
    ctx: &Ctx,
    dir: &Path,
    receipts: &[PathBuf],
    checkpoints: &[PathBuf],
) -> Result<u8, Failure> {
    let mut anchors = receipts
        .iter()
        .map(|p| read_input(p))
        .collect::<Result<Vec<_>, _>>()?;
    // A checkpoint held is a signed note (text); the gate takes it as {"checkpoint": note}.
    for c in checkpoints {
        anchors.push(json!({"checkpoint": read_input(c)?}).to_string());
    }
    // A line that is not an entry, or a torn last line, is a journal that fails
    // verification (exit 1), not bad input.
    let failed_check = |f: Failure| match f.kind {
        "corrupt_journal" | "torn_journal" => f.with_code(1),
        _ => f,
    };
    let mut gate = ctx.gate(dir).map_err(failed_check)?;
    let report = gate
        .verify(&anchors)
        .map_err(|e| failed_check(Failure::from(e)))?;
    let code = if report.problems.is_empty() { 0 } else { 1 };
    if ctx.json {
        println!("{}", report_json(&report));
        return Ok(code);
    }
    if code == 0 {
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

pub(crate) fn receipt(
    ctx: &Ctx,
    dir: &Path,
    effect: &str,
    key_file: Option<&Path>,
) -> Result<u8, Failure> {
    let key = key_file
        .map(|p| std::fs::read(p).with_context(|| format!("cannot read key file {}", p.display())))
        .transpose()?;
    let mut gate = ctx.gate(dir)?;
    // The receipt is JSON already: the same document with or without --json.
    println!("{}", gate.receipt(effect, key.as_deref())?);
    Ok(0)
}

pub(crate) fn repair(ctx: &Ctx, dir: &Path) -> Result<u8, Failure> {
    if is_journal_url(dir) {
        return Err(Failure::new(
            2,
            "usage",
            format!(
                "{} is a shared journal: its appends commit whole or not at all, so it has no \
                 torn tail to repair",
                dir.display()
            ),
        ));
    }
    if !dir.is_dir() {
        return Err(Failure::new(
            2,
            "no_journal",
            format!("{} is not a folder; no journal there", dir.display()),
        ));
    }
    // The component's repair (journal-admin.repair), over the folder locked at once: a
    // journal open elsewhere is not cut under its writer.
    let files = StdFiles::open_existing(dir, Duration::ZERO).map_err(|e| {
        Failure::new(
            2,
            file_kind(&e),
            format!("cannot repair the journal in {}: {e}", dir.display()),
        )
    })?;
    let report = GateHost::unopened(&ctx.runtime()?, files, ctx.clock.clone())?
        .repair_journal()
        .map_err(|e| match e {
            interlock_cli::Error::Journal(j) => {
                let f = not_open(dir, false, &j);
                Failure::new(
                    2,
                    f.kind,
                    f.message
                        .replacen("cannot open the journal", "cannot repair the journal", 1),
                )
            }
            other => Failure::from(other),
        })?;
    let report = interlock_file_journal::RepairReport {
        torn_offset: report.torn_offset,
        torn_bytes: report.torn_bytes,
        saved_to: report.saved_to.map(|name| dir.join(name)),
    };
    let value = json!({
        "ok": true,
        "repaired": report.torn_offset.is_some(),
        "torn_offset": report.torn_offset,
        "torn_bytes": report.torn_bytes,
        "saved_to": report.saved_to.as_ref().map(|p| p.display().to_string()),
    });
    ctx.print(value, &report);
    Ok(0)
}

// ---------------------------------------------------------------- leases and approvals

pub(crate) fn lease_grant(ctx: &Ctx, dir: &Path, name: &str, until: &Until) -> Result<u8, Failure> {
    let expires_at_ms = match (until.until_ms, until.for_ms) {
        (Some(ms), _) => ms,
        (None, Some(d)) => ctx
            .clock
            .now_ms()
            .checked_add(d)
            .ok_or_else(|| Failure::new(2, "usage", "--for reaches past the end of time"))?,
        (None, None) => return Err(Failure::new(2, "usage", "give --until-ms or --for")),
    };
    let create = !is_journal_url(dir) && !dir.exists();
    if create {
        // The gate judges the grant first, on a journal in memory, so a refused grant
        // leaves no folder behind.
        GateHost::new(&ctx.runtime()?, Storage::memory(), ctx.clock.clone())?
            .grant_lease(name, expires_at_ms)
            .map_err(|e| Failure::from(e).context("cannot grant the lease"))?;
        make_journal_dir(dir).map_err(|e| {
            Failure::from(e).context(format!(
                "cannot create the journal folder {}",
                dir.display()
            ))
        })?;
    }
    ctx.gate(dir)?
        .grant_lease(name, expires_at_ms)
        .map_err(|e| Failure::from(e).context("cannot grant the lease"))?;
    let mut text = String::new();
    if create {
        text = format!("new journal in {}\n", dir.display());
    }
    text += &format!("lease {name} granted until {expires_at_ms} (Unix ms)");
    ctx.print(
        json!({"ok": true, "lease": name, "expires_at_ms": expires_at_ms, "created_journal": create}),
        text,
    );
    Ok(0)
}

pub(crate) fn lease_revoke(ctx: &Ctx, dir: &Path, name: &str) -> Result<u8, Failure> {
    ctx.gate(dir)?
        .revoke_lease(name)
        .map_err(|e| Failure::from(e).context("cannot revoke the lease"))?;
    ctx.print(
        json!({"ok": true, "lease": name, "revoked": true}),
        format!("lease {name} revoked"),
    );
    Ok(0)
}

pub(crate) fn approve(ctx: &Ctx, dir: &Path, file: &Path) -> Result<u8, Failure> {
    let mut gate = ctx.gate(dir)?;
    let approval = read_input(file)?;
    gate.approve(&approval)
        .map_err(|e| Failure::from(e).context("cannot record the approval"))?;
    // The gate accepted it, so it is an object with a string id; read back for the report.
    let id = serde_json::from_str::<Value>(&approval)
        .ok()
        .and_then(|v| v["approval"].as_str().map(str::to_string))
        .unwrap_or_default();
    ctx.print(
        json!({"ok": true, "approval": id}),
        format!("approval {id} recorded"),
    );
    Ok(0)
}

pub(crate) fn revoke_approval(ctx: &Ctx, dir: &Path, id: &str) -> Result<u8, Failure> {
    ctx.gate(dir)?
        .revoke_approval(id)
        .map_err(|e| Failure::from(e).context("cannot revoke the approval"))?;
    ctx.print(
        json!({"ok": true, "approval": id, "revoked": true}),
        format!("approval {id} revoked"),
    );
    Ok(0)
}
