//! The fault table (FAULTS.md, "The approaches compared"): F1..F10 through plain retry,
//! request IDs, durable workflows and Interlock, on the same simulated payments service,
//! at each tier.
//!
//! The scenarios are the conformance vectors in tests/conformance/, not a second copy:
//! fault `Fn` at tier `T` is vector `Fn-tT`; F10 exists only at tier 1, as `F10-t1+lookup`
//! (the headline row) and `F10-t1`. Every column is the conformance runner
//! (tests/conformance/runner): the Interlock column is its `run` on the vector through the
//! gate, the baselines are its `baseline`, which plays the same steps without a gate.

pub mod render;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use interlock_cli::conformance::{self, Runner, Vector};
use interlock_cli::Runtime;
use serde::Serialize;
use serde_json::Value;

/// The repository's root, found from this crate's manifest.
pub fn repo_root() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::canonicalize(&root).unwrap_or(root)
}

/// Where the conformance vectors are.
pub fn vectors_dir() -> PathBuf {
    repo_root().join("tests/conformance")
}

/// The faults of the table.
pub const FAULTS: [&str; 10] = ["F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9", "F10"];
/// The tiers of the table (the service's; F10 adds "1+lookup").
pub const TIERS: [&str; 3] = ["1", "2", "3"];

/// A column of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Approach {
    PlainRetry,
    RequestIds,
    DurableWorkflows,
    Interlock,
}

impl Approach {
    pub const ALL: [Approach; 4] = [
        Approach::PlainRetry,
        Approach::RequestIds,
        Approach::DurableWorkflows,
        Approach::Interlock,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Approach::PlainRetry => "plain retry",
            Approach::RequestIds => "request IDs",
            Approach::DurableWorkflows => "durable workflows",
            Approach::Interlock => "Interlock",
        }
    }

    /// The runner's name of a baseline (`None`: Interlock).
    fn baseline(self) -> Option<&'static str> {
        match self {
            Approach::PlainRetry => Some("plain-retry"),
            Approach::RequestIds => Some("request-ids"),
            Approach::DurableWorkflows => Some("durable-workflows"),
            Approach::Interlock => None,
        }
    }
}

/// The right amount refunded on `order_881` at the end of fault `fault`: nothing for F6,
/// F7 and F9 (no authority, or not eligible); the approved $20 otherwise (for F8 that is
/// the hand refund's $20 alone).
pub fn right_cents(fault: &str) -> u64 {
    match fault {
        "F6" | "F7" | "F9" => 0,
        _ => 2_000,
    }
}

/// One cell: one approach on one vector (or an n/a cell: F10 at tiers 2 and 3).
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// The table's tier: "1", "2" or "3".
    pub tier: String,
    pub fault: String,
    /// The conformance vector played; `None` for an n/a cell.
    pub vector_id: Option<String>,
    /// The vector's own tier ("1+lookup" for F10's headline row).
    pub service_tier: Option<String>,
    /// Whether this cell counts in its tier's wrong total (every cell but the extra
    /// `F10-t1` row of tier 1 and the n/a cells). At tier 1 these are the headline cells.
    pub counted: bool,
    pub approach: Approach,
    pub refunded_cents: Option<u64>,
    pub right_cents: Option<u64>,
    pub wrong: Option<bool>,
    /// The cell as the table shows it, without the cents ("$40", "refused", ...).
    pub words: String,
    /// Why the cell is n/a, if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub na: Option<String>,
    /// Interlock only: every difference the conformance runner found (must be empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runner_failures: Vec<String>,
    /// Baselines only: each call to the service and its answer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<String>,
}

/// A row: one fault at one tier, played from one vector (or n/a).
#[derive(Clone, Debug)]
pub struct Row {
    pub tier: &'static str,
    pub fault: &'static str,
    pub vector_id: Option<String>,
    pub counted: bool,
    pub na: Option<&'static str>,
}

/// Every row of every tier's table, in order.
pub fn rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for tier in TIERS {
        for fault in FAULTS {
            if fault == "F10" {
                if tier == "1" {
                    for (id, counted) in [("F10-t1+lookup", true), ("F10-t1", false)] {
                        rows.push(Row {
                            tier,
                            fault,
                            vector_id: Some(id.to_string()),
                            counted,
                            na: None,
                        });
                    }
                } else {
                    rows.push(Row {
                        tier,
                        fault,
                        vector_id: None,
                        counted: false,
                        na: Some("the 24-hour key window only matters to a service that dedupes"),
                    });
                }
                continue;
            }
            rows.push(Row {
                tier,
                fault,
                vector_id: Some(format!("{fault}-t{tier}")),
                counted: true,
                na: None,
            });
        }
    }
    rows
}

/// The whole experiment's result.
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    pub cells: Vec<Cell>,
    /// Anything about the vectors a reader should know: a vector whose expected amount
    /// differs from the fault's right amount, for instance. Empty when all is well.
    pub problems: Vec<String>,
}

impl Table {
    /// The cell of `approach` for `vector_id`.
    pub fn cell(&self, vector_id: &str, approach: Approach) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.vector_id.as_deref() == Some(vector_id) && c.approach == approach)
    }

    /// The counted cells of `tier` for `approach`, in fault order.
    pub fn counted(&self, tier: &str, approach: Approach) -> Vec<&Cell> {
        self.cells
            .iter()
            .filter(|c| c.tier == tier && c.approach == approach && c.counted)
            .collect()
    }

    /// Wrong outcomes among the counted cells of `tier`.
    pub fn wrong_count(&self, tier: &str, approach: Approach) -> usize {
        self.counted(tier, approach)
            .iter()
            .filter(|c| c.wrong == Some(true))
            .count()
    }

    /// Per tier, per approach label, the wrong count.
    pub fn wrong_counts(&self) -> BTreeMap<String, BTreeMap<String, usize>> {
        TIERS
            .iter()
            .map(|t| {
                (
                    t.to_string(),
                    Approach::ALL
                        .iter()
                        .map(|a| (a.label().to_string(), self.wrong_count(t, *a)))
                        .collect(),
                )
            })
            .collect()
    }
}

/// "$20", "$40.50".
pub fn dollars(cents: u64) -> String {
    if cents.is_multiple_of(100) {
        format!("${}", cents / 100)
    } else {
        format!("${}.{:02}", cents / 100, cents % 100)
    }
}

fn baseline_words(refunded: u64, right: u64) -> String {
    match (refunded, right) {
        (0, _) => "nothing sent".into(),
        (r, 0) => format!("refunded {}", dollars(r)),
        (r, _) => dollars(r),
    }
}

/// Each task's amount at the end of the vector's steps, by name.
fn task_amounts(v: &Vector) -> BTreeMap<String, u64> {
    let mut amounts = BTreeMap::new();
    for s in &v.steps {
        let op = s.get("op").and_then(Value::as_str);
        if matches!(op, Some("decide" | "redecide")) {
            if let (Some(t), Some(a)) = (
                s.get("task").and_then(Value::as_str),
                s.get("amount_cents").and_then(Value::as_u64),
            ) {
                amounts.insert(t.to_string(), a);
            }
        }
    }
    amounts
}

/// Interlock's cell in words, from the tasks' last outcomes as the agent saw them.
fn interlock_words(v: &Vector, refunded_cents: u64, tasks: &BTreeMap<String, Value>) -> String {
    let amounts = task_amounts(v);
    let hand: u64 = v
        .steps
        .iter()
        .filter(|s| s.get("op").and_then(Value::as_str) == Some("hand_refund"))
        .filter_map(|s| s.get("amount_cents").and_then(Value::as_u64))
        .sum();
    let state = |o: &Value| {
        o.get("state")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let refused = tasks.values().any(|o| state(o) == "REFUSED");
    if refunded_cents == 0 && refused {
        return "refused".into();
    }
    let mut parts = vec![if hand > 0 && hand == refunded_cents {
        format!("{} by hand", dollars(refunded_cents))
    } else {
        dollars(refunded_cents)
    }];
    for (name, o) in tasks {
        let amount = amounts.get(name).copied().map(dollars).unwrap_or_default();
        match state(o).as_str() {
            "REFUSED" if o.get("replayed") == Some(&Value::Bool(true)) => {
                parts.push(format!("the {amount} retry refused"))
            }
            "REFUSED" => parts.push(format!("{amount} refused")),
            "AMBIGUOUS" => parts.push("ambiguous, not resent".into()),
            "COMMITTED" if o.get("via").and_then(Value::as_str) == Some("recovery-query") => {
                parts.push("found by lookup".into())
            }
            _ => {}
        }
    }
    parts.join(", ")
}

/// Plays every row through every approach. The component is loaded once; `vectors` by id.
pub fn compute_with(runner: &Runner, vectors: &BTreeMap<String, Vector>) -> Result<Table> {
    let mut cells = Vec::new();
    let mut problems = Vec::new();
    for row in rows() {
        let Some(id) = &row.vector_id else {
            for approach in Approach::ALL {
                cells.push(Cell {
                    tier: row.tier.into(),
                    fault: row.fault.into(),
                    vector_id: None,
                    service_tier: None,
                    counted: false,
                    approach,
                    refunded_cents: None,
                    right_cents: None,
                    wrong: None,
                    words: "n/a".into(),
                    na: row.na.map(String::from),
                    runner_failures: Vec::new(),
                    trace: Vec::new(),
                });
            }
            continue;
        };
        let v = vectors
            .get(id)
            .ok_or_else(|| anyhow!("vector {id} is missing from {}", vectors_dir().display()))?;
        if v.fault != row.fault {
            bail!("vector {id} is about fault {}, not {}", v.fault, row.fault);
        }
        let right = right_cents(row.fault);
        match v.expect.get("refunded_cents").and_then(Value::as_u64) {
            Some(e) if e == right => {}
            other => problems.push(format!(
                "vector {id} expects refunded_cents {other:?}, but {}'s right amount is {right}",
                row.fault
            )),
        }
        for approach in Approach::ALL {
            let (refunded, words, runner_failures, trace) = match approach.baseline() {
                Some(b) => {
                    let r = runner.baseline(v, b)?;
                    if let Some(why) = r["not_modelled"].as_str() {
                        bail!("vector {id} is in the table, but {why}");
                    }
                    let refunded = r["refunded_cents"].as_u64().unwrap_or_default();
                    let trace = serde_json::from_value(r["trace"].clone())?;
                    (refunded, baseline_words(refunded, right), Vec::new(), trace)
                }
                None => {
                    let work = tempfile::tempdir()?;
                    let report = runner
                        .run(v, "{}", false, work.path())
                        .with_context(|| format!("the conformance runner on {id}"))?;
                    let tasks: BTreeMap<String, Value> = serde_json::from_str(&report.tasks)?;
                    let words = interlock_words(v, report.refunded_cents, &tasks);
                    (report.refunded_cents, words, report.failures, Vec::new())
                }
            };
            cells.push(Cell {
                tier: row.tier.into(),
                fault: row.fault.into(),
                vector_id: Some(id.clone()),
                service_tier: Some(v.tier.clone()),
                counted: row.counted,
                approach,
                refunded_cents: Some(refunded),
                right_cents: Some(right),
                wrong: Some(refunded != right),
                words,
                na: None,
                runner_failures,
                trace,
            });
        }
    }
    Ok(Table { cells, problems })
}

/// Loads the vectors from `dir`, by id.
pub fn load_vectors(dir: &Path) -> Result<BTreeMap<String, Vector>> {
    Ok(conformance::load_dir(dir)?
        .into_iter()
        .map(|(_, v)| (v.id.clone(), v))
        .collect())
}

/// Loads the component (`$INTERLOCK_WASM` or the usual places) and the vectors, and plays
/// the whole table.
pub fn compute() -> Result<Table> {
    let runtime = Runtime::locate_and_load(None).context("cannot load the gate component")?;
    let runner = Runner::load(&conformance::locate(), &runtime)?;
    let vectors = load_vectors(&vectors_dir())?;
    compute_with(&runner, &vectors)
}
