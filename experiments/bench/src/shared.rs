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
use interlock_cli::{Clock, GateHost, Storage};
use interlock_file_journal::StdFiles;
use interlock_journal::{Files, StorageError};
use interlock_sql_journal::testing::Cluster;
use interlock_sql_journal::{Counters, SqlStore};

use crate::benches::{gate_err, submit_for, Config};
use crate::common::{LEASE, LEASE_UNTIL_MS, T0_MS};

/// The heading of the kill runs' section, which a new table keeps.
pub const KILL_RUNS: &str = "## Kill runs";

/// A journal folder that counts its appends (one `file-append` per journal append).
#[derive(Clone)]
struct CountedFiles {
    inner: StdFiles,
    appends: Arc<AtomicU64>,
}

impl Files for CountedFiles {
    fn file_size(&mut self, name: &str) -> Result<Option<u64>, StorageError> {
        self.inner.file_size(name)
    }
    fn file_read(&mut self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, StorageError> {
        self.inner.file_read(name, offset, len)
    }
    fn file_append(&mut self, name: &str, at: u64, bytes: &[u8]) -> Result<(), StorageError> {
        self.appends.fetch_add(1, Ordering::Relaxed);
        self.inner.file_append(name, at, bytes)
    }
    fn file_sync(&mut self, name: &str) -> Result<(), StorageError> {
        self.inner.file_sync(name)
    }
    fn file_truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        self.inner.file_truncate(name, len)
    }
    fn file_replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        self.inner.file_replace(name, bytes)
    }
    fn file_create(&mut self, name: &str, bytes: &[u8]) -> Result<bool, StorageError> {
        self.inner.file_create(name, bytes)
    }
}

/// What a backend's workers did so far: (commits, durable ones).
type Count = Box<dyn Fn() -> (u64, u64)>;

/// One row of the table.
pub struct Row {
    pub backend: &'static str,
    pub workers: usize,
    pub effects: u64,
    pub seconds: f64,
    pub commits: u64,
    pub durable: u64,
}

/// Runs `workers` threads of submits for `run_for`, each a gate instance on the storage
/// `open` gives it; `count` says what they committed.
fn measure(
    cfg: &Config,
    backend: &'static str,
    workers: usize,
    run_for: Duration,
    open: &dyn Fn() -> Result<Storage>,
    count: &Count,
) -> Result<Row> {
    let mut hosts = Vec::new();
    for t in 0..workers {
        let mut h = GateHost::new(&cfg.runtime, open()?, Clock::fake(T0_MS)).map_err(gate_err)?;
        if t == 0 {
            h.grant_lease(LEASE, LEASE_UNTIL_MS).map_err(gate_err)?;
        }
        hosts.push(h);
    }
    let (c0, d0) = count();
    let (effects, elapsed) = submit_for(hosts, run_for)?;
    let (c1, d1) = count();
    Ok(Row {
        backend,
        workers,
        effects,
        seconds: elapsed.as_secs_f64(),
        commits: c1 - c0,
        durable: d1 - d0,
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
    let sql = |url: String, counters: Arc<Counters>| {
        move || -> Result<Storage> {
            Ok(match SqlStore::open_url(&url)? {
                SqlStore::Sqlite(s) => SqlStore::Sqlite(s.with_counters(counters.clone())),
                SqlStore::Postgres(p) => {
                    SqlStore::Postgres(Box::new(p.with_counters(counters.clone())))
                }
            }
            .into())
        }
    };
    for workers in [1usize, 8, 32] {
        let tmp = tempfile::TempDir::new_in(&cfg.scratch)?;
        // One folder for the process: every instance shares it (and each fdatasync).
        let file = CountedFiles {
            inner: StdFiles::at(&tmp.path().join("journal"))?,
            appends: Arc::default(),
        };
        let counted = file.clone();
        rows.push(measure(
            cfg,
            "file",
            workers,
            run_for,
            &|| Ok(Storage::from_files(file.clone())),
            &(Box::new(move || {
                (
                    counted.appends.load(Ordering::Relaxed),
                    counted.inner.fsyncs(),
                )
            }) as Count),
        )?);

        let url = format!("sqlite://{}/journal.db", tmp.path().display());
        let counters = Arc::new(Counters::default());
        let c = counters.clone();
        rows.push(measure(
            cfg,
            "sqlite",
            workers,
            run_for,
            &sql(url, counters),
            &(Box::new(move || (c.commits(), c.durable_commits())) as Count),
        )?);

        if let Some(cluster) = &cluster {
            let counters = Arc::new(Counters::default());
            let c = counters.clone();
            rows.push(measure(
                cfg,
                "postgres",
                workers,
                run_for,
                &sql(cluster.database(), counters),
                &(Box::new(move || (c.commits(), c.durable_commits())) as Count),
            )?);
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
