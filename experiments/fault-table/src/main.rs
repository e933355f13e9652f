//! `fault-table [--out DIR]`: plays the fault table and writes `fault-table.md` and
//! `fault-table.json` into DIR (default: results/ at the repository root).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use interlock_fault_table::{compute, render, repo_root, Approach, TIERS};

fn main() -> Result<()> {
    let mut out = repo_root().join("results");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => match args.next() {
                Some(d) => out = PathBuf::from(d),
                None => bail!("--out needs a directory"),
            },
            "-h" | "--help" => {
                println!(
                    "usage: fault-table [--out DIR]   (default DIR: results/ at the repo root)"
                );
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (usage: fault-table [--out DIR])"),
        }
    }
    let table = compute()?;
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let md = out.join("fault-table.md");
    let js = out.join("fault-table.json");
    std::fs::write(&md, render::markdown(&table))?;
    std::fs::write(
        &js,
        serde_json::to_string_pretty(&render::json(&table))? + "\n",
    )?;
    for tier in TIERS {
        let counts: Vec<String> = Approach::ALL
            .iter()
            .map(|a| format!("{} {}", a.label(), table.wrong_count(tier, *a)))
            .collect();
        println!("tier {tier}: wrong outcomes: {}", counts.join(", "));
    }
    for p in &table.problems {
        println!("problem: {p}");
    }
    println!("wrote {} and {}", md.display(), js.display());
    Ok(())
}
