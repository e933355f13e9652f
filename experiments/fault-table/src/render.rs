//! `results/fault-table.md` and `results/fault-table.json`, from a [`Table`].

use std::fmt::Write as _;

use serde_json::json;

use crate::{Approach, Cell, Table, TIERS};

/// The exact command that regenerates the results (from the repository root).
pub const COMMAND: &str = "CARGO_TARGET_DIR=$HOME/.cache/interlock-target \
INTERLOCK_WASM=dist/interlock_gate.wasm cargo run -p interlock-fault-table";

fn fault_name(fault: &str) -> &'static str {
    match fault {
        "F1" => "crash before the refund is sent",
        "F2" => "crash after sending, before the reply",
        "F3" => "same request submitted twice",
        "F4" => "model says $30 on the retry",
        "F5" => "same request, different amount",
        "F6" => "permission pulled before the refund lands",
        "F7" => "order stops being eligible",
        "F8" => "support refunds by hand during the outage",
        "F9" => "permission pulled during the outage",
        "F10" => "retry after the 24-hour ID window",
        _ => "",
    }
}

/// A cell as the tables show it: words, a cross when wrong, the exact cents.
fn show(c: &Cell) -> String {
    match (c.refunded_cents, c.wrong) {
        (Some(cents), Some(true)) => format!("{} ✗ ({cents})", c.words),
        (Some(cents), _) => format!("{} ({cents})", c.words),
        _ => c.words.clone(),
    }
}

fn right(c: &Cell) -> String {
    match c.right_cents {
        Some(0) => "nothing (0)".into(),
        Some(r) => format!("{} ({r})", crate::dollars(r)),
        None => "n/a".into(),
    }
}

/// The rows of `tier` (each a vector or n/a), with the cells of every approach.
fn tier_rows<'t>(table: &'t Table, tier: &str, counted_only: bool) -> Vec<Vec<&'t Cell>> {
    let mut rows: Vec<Vec<&Cell>> = Vec::new();
    for c in table.cells.iter().filter(|c| c.tier == tier) {
        if counted_only && !c.counted {
            continue;
        }
        match rows.last_mut() {
            Some(r) if r[0].vector_id == c.vector_id && r[0].fault == c.fault => r.push(c),
            _ => rows.push(vec![c]),
        }
    }
    rows
}

fn header(out: &mut String, first: &[&str]) {
    let mut cols: Vec<&str> = first.to_vec();
    cols.extend(Approach::ALL.iter().map(|a| a.label()));
    cols.push("right");
    let _ = writeln!(out, "| {} |", cols.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(cols.len()));
}

fn cells_of(row: &[&Cell]) -> String {
    let mut s: Vec<String> = Approach::ALL
        .iter()
        .map(|a| {
            row.iter()
                .find(|c| c.approach == *a)
                .map(|c| show(c))
                .unwrap_or_else(|| "missing".into())
        })
        .collect();
    s.push(right(row[0]));
    s.join(" | ")
}

fn counts_line(table: &Table, tier: &str) -> String {
    Approach::ALL
        .iter()
        .map(|a| format!("{} {}", a.label(), table.wrong_count(tier, *a)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The Markdown report.
pub fn markdown(table: &Table) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# The fault table\n");
    let _ = writeln!(
        out,
        "F1..F10 (FAULTS.md) through four approaches on the same simulated payments service \
         (`interlock-payments-sim`). Every row is a conformance vector from \
         `tests/conformance/`, played by the conformance runner (`tests/conformance/runner`): through the \
         gate for Interlock, without it for the three baselines (its `baseline` export). A cell is what was refunded on `order_881` \
         at the end, in words and (in parentheses) exact cents; ✗ marks a wrong outcome \
         (refunded differs from the right amount: nothing for F6, F7, F9; $20 otherwise, for \
         F8 the hand refund's $20 alone).\n"
    );
    let _ = writeln!(
        out,
        "## Headline: tier 1 (the service dedupes; F10 from `F10-t1+lookup`)\n"
    );
    header(&mut out, &["fault", "what happens"]);
    for row in tier_rows(table, "1", true) {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            row[0].fault,
            fault_name(&row[0].fault),
            cells_of(&row)
        );
    }
    let _ = writeln!(
        out,
        "\nWrong outcomes out of F1..F10: {}.\n",
        counts_line(table, "1")
    );
    let _ = writeln!(out, "## Wrong outcomes per tier\n");
    let mut cols = vec!["tier", "faults counted"];
    cols.extend(Approach::ALL.iter().map(|a| a.label()));
    let _ = writeln!(
        out,
        "| {} |\n|{}",
        cols.join(" | "),
        "---|".repeat(cols.len())
    );
    for tier in TIERS {
        let n = table.counted(tier, Approach::Interlock).len();
        let counts: Vec<String> = Approach::ALL
            .iter()
            .map(|a| table.wrong_count(tier, *a).to_string())
            .collect();
        let which = if tier == "1" {
            "F1..F10".to_string()
        } else {
            format!("F1..F9 ({n}; F10 n/a)")
        };
        let _ = writeln!(out, "| {tier} | {which} | {} |", counts.join(" | "));
    }
    let _ = writeln!(out);
    for tier in TIERS {
        let what = match tier {
            "1" => "dedupes by idempotency key for 24 hours",
            "2" => "no dedupe; a refund can be looked up by reference",
            _ => "neither dedupe nor lookup",
        };
        let _ = writeln!(out, "## Tier {tier}: {what}\n");
        header(&mut out, &["fault", "vector"]);
        for row in tier_rows(table, tier, false) {
            let vector = match (&row[0].vector_id, row[0].counted) {
                (Some(id), true) => format!("`{id}`"),
                (Some(id), false) => format!("`{id}` (not counted)"),
                (None, _) => "n/a".into(),
            };
            let _ = writeln!(out, "| {} | {vector} | {} |", row[0].fault, cells_of(&row));
        }
        let _ = writeln!(out, "\nWrong outcomes: {}.", counts_line(table, tier));
        if tier == "1" {
            let _ = writeln!(
                out,
                "The `F10-t1` row (tier 1 without lookup) is shown but not counted: the \
                 headline F10 is `F10-t1+lookup`. There Interlock ends AMBIGUOUS and never \
                 resends past the window."
            );
        } else {
            let _ = writeln!(
                out,
                "F10 is n/a: the 24-hour key window only matters to a service that dedupes."
            );
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "## How each approach is modelled\n");
    let _ = writeln!(
        out,
        "All four play the same vector on a fresh in-memory service of the vector's tier: \
         clock at 1800000000000, `order_881` paid 10000 cents (or the vector's `paid_cents`), \
         eligible, no refunds. The service never checks eligibility (it is a fact of the \
         order system, not a rule of the payments API), so a sender without a gate pays out \
         on an ineligible order, as in F7. The baselines keep a durable list of unfinished \
         tasks; a `send` that crashes `before_intent` or `after_intent` dies before the call \
         to the service, one that crashes `after_commit` has the service apply it and loses \
         the reply (the task stays unfinished either way); `restart` re-runs every \
         unfinished task in decision order; `hand_refund`, `set_eligible` and `advance` \
         change the world as in the conformance runner. Leases, approvals, premises and caps \
         mean nothing to a baseline, so `lease`, `revoke_lease` and `approve` are no-ops. \
         An error from the service refunds nothing for that attempt.\n"
    );
    let _ = writeln!(
        out,
        "- **plain retry**: re-runs the step on restart with the task's current decision (a \
         re-decided $30 is sent) and no idempotency key.\n\
         - **request IDs** (the standard fix): one idempotency key per request, the task's \
         key (`refund:order_881`), reused on restart with the task's current decision; a \
         re-decided amount under the same key meets the service's mismatch error on a \
         deduping tier; a second `send` sends again under the same key. On tiers 2 and 3 the \
         service ignores keys, so the key protects nothing.\n\
         - **durable workflows** (Temporal-style, used as documented): the first `send` of a \
         key starts a workflow whose id is the key and records the decision; a restart \
         retries the recorded activity with its recorded arguments and key (a later \
         `redecide` does not change it); starting a workflow whose id exists (a second send, \
         even from another task with the same key) returns the existing result and sends \
         nothing.\n\
         - **Interlock**: the conformance runner's `run` on the vector, through the gate \
         component, as every host's conformance test runs it; the runner checks every \
         expectation of the vector, and the table requires its failures to be empty.\n"
    );
    if table.problems.is_empty() {
        let _ = writeln!(
            out,
            "Every vector's `expect.refunded_cents` equals its fault's right amount."
        );
    } else {
        let _ = writeln!(out, "Problems with the vectors:\n");
        for p in &table.problems {
            let _ = writeln!(out, "- {p}");
        }
    }
    let failures: Vec<String> = table
        .cells
        .iter()
        .flat_map(|c| {
            c.runner_failures
                .iter()
                .map(move |f| format!("{}: {f}", c.vector_id.as_deref().unwrap_or("?")))
        })
        .collect();
    if failures.is_empty() {
        let _ = writeln!(out, "The Interlock runner reported no failures.\n");
    } else {
        let _ = writeln!(out, "\nInterlock runner failures:\n");
        for f in failures {
            let _ = writeln!(out, "- {f}");
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "## Regenerate\n\nFrom the repository root (after `scripts/build-wasm.sh`):\n\n\
         ```sh\n{COMMAND}\n```\n\nIt writes this file and `results/fault-table.json` (every \
         cell, with the baselines' calls to the service). `cargo test -p \
         interlock-fault-table` checks the published numbers."
    );
    out
}

/// The JSON report: every cell, the wrong counts, the problems.
pub fn json(table: &Table) -> serde_json::Value {
    json!({
        "command": COMMAND,
        "headline": {"tier": "1", "f10_vector": "F10-t1+lookup"},
        "wrong_counts": table.wrong_counts(),
        "problems": table.problems,
        "cells": table.cells,
    })
}
