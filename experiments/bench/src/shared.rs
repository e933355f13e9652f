//! The shared journals' throughput (issue 13): effects/s with 1, 8 and 32 workers on the
//! file journal, on SQLite and on PostgreSQL, each worker a gate instance (the component,
//! in wasmtime) with its own journal handle (its own connection), and the commits and the
//! durable ones (an fsync or a commit that waits for the WAL) per effect, measured in one
//! run. `interlock-bench --shared` writes results/shared-journal.md.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use interlock_cli::{Clock, GateHost, JournalBackend};
use interlock_core::{Journal, JournalError};
use interlock_file_journal::SharedFileJournal;
use interlock_sql_journal::testing::Cluster;

use crate::benches::{gate_err, submit_for, Config};
use crate::common::{LEASE, LEASE_UNTIL_MS, T0_MS};

/// The heading of the kill runs' section, which a new table keeps.
pub const KILL_RUNS: &str = "## Kill runs";

/// What the workers' handles asked of their backend.
#[derive(Default)]
struct Counts {
    appends: AtomicU64,
    durable: AtomicU64,
}

/// A journal handle that counts its appends and the durable ones (a durable append or a
/// sync: one commit that waits for the disk).
struct Counted {
    inner: Box<dyn JournalBackend>,
    counts: Arc<Counts>,
}

impl Journal for Counted {
    fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        self.counts.appends.fetch_add(1, Ordering::Relaxed);
        if durable {
            self.counts.durable.fetch_add(1, Ordering::Relaxed);
        }
        self.inner
            .append(stream, expected_len, entries, durable, open)
    }
    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        self.inner.read(stream, start)
    }
    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        self.inner.length(stream)
    }
    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.inner.open_streams()
    }
    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.inner.streams()
    }
    fn sync(&mut self) -> Result<(), JournalError> {
        self.counts.durable.fetch_add(1, Ordering::Relaxed);
        self.inner.sync()
    }
}

/// One row of the table.
pub struct Row {
    pub backend: &'static str,
    pub workers: usize,
    pub effects: u64,
    pub seconds: f64,
    pub commits: u64,
    pub durable: u64,
}

/// Runs `workers` threads of submits for `run_for`, each on a handle `open` makes.
fn measure(
    cfg: &Config,
    backend: &'static str,
    workers: usize,
    run_for: Duration,
    open: &dyn Fn() -> Result<Box<dyn JournalBackend>>,
) -> Result<Row> {
    let counts = Arc::new(Counts::default());
    let mut hosts = Vec::new();
    for t in 0..workers {
        let journal = Counted {
            inner: open()?,
            counts: counts.clone(),
        };
        let mut h =
            GateHost::new(&cfg.runtime, Box::new(journal), Clock::fake(T0_MS)).map_err(gate_err)?;
        if t == 0 {
            h.grant_lease(LEASE, LEASE_UNTIL_MS).map_err(gate_err)?;
        }
        hosts.push(h);
    }
    let (a0, d0) = (
        counts.appends.load(Ordering::Relaxed),
        counts.durable.load(Ordering::Relaxed),
    );
    let (effects, elapsed) = submit_for(hosts, run_for)?;
    Ok(Row {
        backend,
        workers,
        effects,
        seconds: elapsed.as_secs_f64(),
        commits: counts.appends.load(Ordering::Relaxed) - a0,
        durable: counts.durable.load(Ordering::Relaxed) - d0,
    })
}

/// Every backend at 1, 8 and 32 workers. PostgreSQL runs on a throwaway cluster (skipped,
/// and said so, only when PostgreSQL is not installed).
pub fn shared(cfg: &Config) -> Result<(Vec<Row>, Vec<String>)> {
    let run_for = Duration::from_millis(if cfg.quick { 150 } else { 3000 });
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let cluster = match Cluster::start() {
        Ok(c) => Some(c),
        Err(why) => {
            notes.push(format!("PostgreSQL not measured: {why}"));
            None
        }
    };
    for workers in [1usize, 8, 32] {
        let tmp = tempfile::TempDir::new_in(&cfg.scratch)?;
        let file = SharedFileJournal::open(&tmp.path().join("journal"))?;
        let fs0 = file.fsyncs();
        let mut row = measure(cfg, "file", workers, run_for, &|| {
            Ok(Box::new(file.clone()))
        })?;
        // The file journal's durable appends share fsyncs (group commit): count those.
        row.durable = file.fsyncs() - fs0;
        rows.push(row);

        let url = format!("sqlite://{}/journal.db", tmp.path().display());
        rows.push(measure(cfg, "sqlite", workers, run_for, &|| {
            Ok(Box::new(interlock_sql_journal::open_url(&url)?))
        })?);

        if let Some(c) = &cluster {
            let url = c.database();
            rows.push(measure(cfg, "postgres", workers, run_for, &|| {
                Ok(Box::new(interlock_sql_journal::open_url(&url)?))
            })?);
        }
    }
    Ok((rows, notes))
}

/// The results file.
pub fn markdown(rows: &[Row], notes: &[String], machine: &str, quick: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Shared journals: throughput (issue 13)\n");
    let _ = writeln!(
        out,
        "Generated by `cargo run --release -p interlock-bench -- --shared`{}. Each worker is a \
         gate instance (the component in wasmtime) submitting new effects (a tier-1 refund, a \
         target that answers at once) on its own journal handle: the file journal shared by \
         the threads of one process (one writer per folder, group commit), a SQLite file (one \
         connection per worker) or a PostgreSQL database (one connection per worker, a \
         throwaway cluster on a unix socket, this machine). A commit is one append (one \
         transaction on SQL); a durable one waits for the disk (an fdatasync, or a commit that \
         flushes the WAL). All figures come from one run on a shared machine: compare them \
         with each other, not with another run.\n",
        if quick {
            " in quick mode (150 ms per cell: a check that it runs, not a measurement)"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "Machine: {machine}.\n");
    let _ = writeln!(
        out,
        "| backend | workers | effects/s | commits/effect | durable commits/effect | effects |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for r in rows {
        let per = |n: u64| n as f64 / r.effects.max(1) as f64;
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {:.2} | {:.2} | {} in {:.2} s |",
            r.backend,
            r.workers,
            r.effects as f64 / r.seconds,
            per(r.commits),
            per(r.durable),
            r.effects,
            r.seconds
        );
    }
    for n in notes {
        let _ = writeln!(out, "\n{n}");
    }
    out
}
