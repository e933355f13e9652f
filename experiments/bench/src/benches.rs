//! The benchmarks of issue 8. Each returns figures; a figure with a goal is a ratio (or a
//! count) measured in this run against its own baseline, since the machines are shared.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use interlock_cli::Storage;
use interlock_cli::{Ask, Clock, GateHost, Reply, Runtime, State};
use interlock_core::{Gate, Journal, JournalError};
use interlock_file_journal::{FileJournal, StdFiles, JOURNAL_FILE};
use interlock_journal::MemFiles;
use serde_json::{json, Value};

use crate::common::*;
use crate::report::Figure;

pub struct Config {
    pub quick: bool,
    pub runtime: Runtime,
    pub wasm: PathBuf,
    /// Scratch journals live here (on the disk the cache is on).
    pub scratch: PathBuf,
    /// Journals worth keeping between runs (the million-effect one).
    pub cache: PathBuf,
}

impl Config {
    fn pick<T>(&self, quick: T, full: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }

    fn tempdir(&self) -> Result<tempfile::TempDir> {
        fs::create_dir_all(&self.scratch)?;
        Ok(tempfile::TempDir::new_in(&self.scratch)?)
    }
}

/// Every host submits new effects on its own thread, all started at once, for `run_for`:
/// how many were committed, and how long the slowest thread took.
pub(crate) fn submit_for(hosts: Vec<GateHost>, run_for: Duration) -> Result<(u64, Duration)> {
    let start = Arc::new(Barrier::new(hosts.len() + 1));
    std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .into_iter()
            .enumerate()
            .map(|(t, mut host)| {
                let start = start.clone();
                scope.spawn(move || -> Result<u64> {
                    start.wait();
                    let began = Instant::now();
                    let mut done = 0u64;
                    while began.elapsed() < run_for {
                        let n = (t as u64) << 32 | done;
                        let o = host
                            .submit(&proposal(n), &mut NullTarget)
                            .map_err(gate_err)?;
                        ensure!(o.state == State::Committed, "{o:?}");
                        done += 1;
                    }
                    Ok(done)
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        let mut total = 0;
        for h in handles {
            total += h.join().expect("a bench thread panicked")?;
        }
        Ok((total, began.elapsed()))
    })
}

pub(crate) fn gate_err(e: interlock_cli::Error) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Goal 1 and 2: durable writes on the send path, and a submit on the file journal against
/// one raw `write` + `fdatasync` of the same bytes on the same disk, interleaved.
pub fn send_path(cfg: &Config) -> Result<Vec<Figure>> {
    let tmp = cfg.tempdir()?;
    let dir = tmp.path().join("journal");
    let shared = StdFiles::at(&dir)?;
    let mut host =
        GateHost::new(&cfg.runtime, shared.clone(), Clock::fake(T0_MS)).map_err(gate_err)?;
    host.grant_lease(LEASE, LEASE_UNTIL_MS).map_err(gate_err)?;
    let raw_path = tmp.path().join("raw.bin");
    let raw = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&raw_path)?;
    let journal_len = || fs::metadata(dir.join(JOURNAL_FILE)).map(|m| m.len());

    let n = cfg.pick(8, 400);
    let warmup = cfg.pick(2, 20);
    let (mut gate_t, mut raw_t) = (Vec::new(), Vec::new());
    let (mut fsyncs, mut bytes_total) = (0u64, 0u64);
    for i in 0..warmup + n {
        let (len0, fs0) = (journal_len()?, shared.fsyncs());
        let (outcome, t) = time(|| host.submit(&proposal(i), &mut NullTarget));
        ensure!(outcome.map_err(gate_err)?.state == State::Committed);
        let bytes = journal_len()? - len0;
        let buf = vec![b'x'; bytes as usize];
        let ((), r) = time(|| {
            (&raw).write_all(&buf).expect("raw write");
            raw.sync_data().expect("raw fdatasync");
        });
        if i >= warmup {
            gate_t.push(t);
            raw_t.push(r);
            fsyncs += shared.fsyncs() - fs0;
            bytes_total += bytes;
        }
    }
    let per_effect = fsyncs as f64 / n as f64;
    let (g, r) = (median(&mut gate_t), median(&mut raw_t));
    let ratio = g.as_secs_f64() / r.as_secs_f64();
    let p90 = |xs: &[Duration]| xs[xs.len() * 9 / 10];
    Ok(vec![
        Figure::new(
            "send.fsyncs_per_effect",
            "durable writes (fdatasync) per submitted effect",
            per_effect,
            "fsync/effect",
        )
        .goal("= 1", per_effect == 1.0)
        .detail(format!(
            "{fsyncs} fdatasync for {n} submits (FileJournal::fsyncs); the original did 3 before the send"
        )),
        Figure::new(
            "send.submit_vs_raw_fsync",
            "submit latency on the file journal / one raw write+fdatasync of the same bytes",
            ratio,
            "x",
        )
        .goal("<= 1.2x (+ the target's own time, 0 here)", ratio <= 1.2)
        .detail(format!(
            "median submit {:.0} µs (p90 {:.0}), median raw {:.0} µs (p90 {:.0}), {} bytes/effect, {n} samples interleaved",
            us(g),
            us(p90(&gate_t)),
            us(r),
            us(p90(&raw_t)),
            bytes_total / n
        )),
    ])
}

/// Goal 3: the component in wasmtime against the same core built natively, both over the
/// file journal of `adapters/journal` on files in memory (inside the component, and
/// natively), in alternating rounds.
pub fn overhead(cfg: &Config) -> Result<Vec<Figure>> {
    let rounds = cfg.pick(2, 15);
    let per_round = cfg.pick(20, 400);
    let mut gate = Gate::new();
    let mut native_j = interlock_journal::FileJournal::open(MemFiles::new())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    gate.grant_lease(&mut native_j, T0_MS, LEASE, LEASE_UNTIL_MS)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut host =
        GateHost::new(&cfg.runtime, Storage::memory(), Clock::fake(T0_MS)).map_err(gate_err)?;
    host.grant_lease(LEASE, LEASE_UNTIL_MS).map_err(gate_err)?;

    let mut next = 0u64;
    let (mut nat, mut wasm) = (Vec::new(), Vec::new());
    for round in 0..rounds + 1 {
        let native_round = |next: &mut u64, gate: &mut Gate, j: &mut dyn Journal| {
            let t = Instant::now();
            for _ in 0..per_round {
                let s = native_submit(gate, j, T0_MS, &proposal(*next), false);
                assert_eq!(s, interlock_core::State::Committed);
                *next += 1;
            }
            t.elapsed() / per_round as u32
        };
        let wasm_round = |next: &mut u64, host: &mut GateHost| -> Result<Duration> {
            let t = Instant::now();
            for _ in 0..per_round {
                let o = host
                    .submit(&proposal(*next), &mut NullTarget)
                    .map_err(gate_err)?;
                ensure!(o.state == State::Committed);
                *next += 1;
            }
            Ok(t.elapsed() / per_round as u32)
        };
        let (a, b) = if round % 2 == 0 {
            let a = native_round(&mut next, &mut gate, &mut native_j);
            (a, wasm_round(&mut next, &mut host)?)
        } else {
            let b = wasm_round(&mut next, &mut host)?;
            (native_round(&mut next, &mut gate, &mut native_j), b)
        };
        if round > 0 {
            // round 0 warms both up
            nat.push(a);
            wasm.push(b);
        }
    }
    let (n, w) = (median(&mut nat), median(&mut wasm));
    let ratio = w.as_secs_f64() / n.as_secs_f64();

    // Where the difference could go: one component call that does little (effect-id-of:
    // parse, canonicalize, hash) against the same native call.
    let calls = cfg.pick(50, 5000);
    let p = proposal(7);
    let ((), nat_id) = time(|| {
        for _ in 0..calls {
            std::hint::black_box(gate.effect_id_of(std::hint::black_box(&p)).unwrap());
        }
    });
    let (_, wasm_id) = time(|| {
        for _ in 0..calls {
            std::hint::black_box(host.effect_id_of(&p).unwrap());
        }
    });
    let id_ratio = wasm_id.as_secs_f64() / nat_id.as_secs_f64();
    let spread = |xs: &[Duration]| {
        let (lo, hi) = (xs[0], xs[xs.len() - 1]); // sorted by `median`
        format!("{:.1}-{:.1} µs", us(lo), us(hi))
    };
    Ok(vec![
        Figure::new(
            "overhead.native_submit",
            "submit with an in-memory journal: the core built natively (the file journal over files in memory)",
            us(n),
            "µs",
        )
        .goal("<= 30 µs (41 µs on 11-29, 69 µs at 8c80d3d)", us(n) <= 30.0)
        .detail(format!(
            "median of {rounds} rounds x {per_round} submits, rounds {}; instructions per submit: `valgrind --tool=callgrind` (results/bench-notes.md)",
            spread(&nat)
        )),
        Figure::new(
            "overhead.component_vs_native",
            "submit with an in-memory journal: component in wasmtime / the core built natively",
            ratio,
            "x",
        )
        .goal("<= 1.1x", ratio <= 1.1)
        .detail(format!(
            "median of {rounds} rounds x {per_round} submits: component {:.1} µs, native {:.1} µs per submit (3 gate calls, 4 journal imports each)",
            us(w),
            us(n)
        )),
        Figure::new(
            "overhead.effect_id_of",
            "effect-id-of (parse + canonicalize + SHA-256): component / native",
            id_ratio,
            "x",
        )
        .detail(format!(
            "component {:.2} µs, native {:.2} µs per call",
            us(wasm_id / calls),
            us(nat_id / calls)
        )),
    ])
}

/// Goal 4: effects per second with 1, 8 and 64 submits in flight (one thread and one gate
/// instance each) on one file journal with group commit.
pub fn concurrency(cfg: &Config) -> Result<Vec<Figure>> {
    let run_for = Duration::from_millis(cfg.pick(150, 3000));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut figures = Vec::new();
    let (mut serial, mut serial_cpu) = (0.0, Duration::ZERO);
    for in_flight in [1usize, 8, 64] {
        let tmp = cfg.tempdir()?;
        let shared = StdFiles::at(&tmp.path().join("journal"))?;
        let mut hosts = Vec::new();
        for t in 0..in_flight {
            let mut h = GateHost::new(&cfg.runtime, shared.clone(), Clock::fake(T0_MS))
                .map_err(gate_err)?;
            if t == 0 {
                h.grant_lease(LEASE, LEASE_UNTIL_MS).map_err(gate_err)?;
            }
            hosts.push(h);
        }
        let fs0 = shared.fsyncs();
        let cpu0 = cpu_time();
        let (total, elapsed) = submit_for(hosts, run_for)?;
        let cpu_per_effect = (cpu_time() - cpu0) / total.max(1) as u32;
        let rate = total as f64 / elapsed.as_secs_f64();
        if in_flight == 1 {
            serial = rate;
            serial_cpu = cpu_per_effect;
        }
        let fsyncs = shared.fsyncs() - fs0;
        let speedup = rate / serial;
        let f = Figure::new(
            match in_flight {
                1 => "concurrency.in_flight_1",
                8 => "concurrency.in_flight_8",
                _ => "concurrency.in_flight_64",
            },
            &format!("effects/s with {in_flight} submits in flight (file journal, group commit)"),
            rate,
            "effects/s",
        )
        .detail(format!(
            "{total} effects in {:.2} s, {:.2} fdatasync/effect, {speedup:.1}x serial, {:.0} µs CPU/effect",
            elapsed.as_secs_f64(),
            fsyncs as f64 / total.max(1) as f64,
            us(cpu_per_effect)
        ));
        if in_flight == 64 {
            // The CPU bound: every core busy with effects at the CPU one effect costs when
            // it runs alone (serial: no contention, its fsync waits not counted as CPU).
            let bound = cores as f64 / serial_cpu.as_secs_f64();
            let share = rate / bound;
            figures.push(
                Figure::new(
                    "concurrency.vs_cpu_bound",
                    "effects/s at 64 in flight / the CPU bound (cores / CPU time per effect, serial)",
                    share,
                    "x",
                )
                .goal(">= 0.8x", share >= 0.8)
                .detail(format!(
                    "{rate:.0} effects/s against {bound:.0}/s ({cores} cores, {:.0} µs CPU per effect at 1 in flight; {:.0} µs at 64)",
                    us(serial_cpu),
                    us(cpu_per_effect)
                )),
            );
            figures.push(Figure::new(
                "concurrency.speedup_64",
                "effects/s at 64 in flight / at 1 in flight",
                speedup,
                "x",
            ));
        }
        figures.push(f);
    }
    Ok(figures)
}

/// Goal 5: cold start. Loading the precompiled component (deserialize + link +
/// InstancePre), and one instance from the InstancePre (what every GateHost costs).
pub fn cold_start(cfg: &Config) -> Result<Vec<Figure>> {
    let n_load = cfg.pick(2, 20);
    let n_inst = cfg.pick(20, 2000);
    Runtime::load(&cfg.wasm)?; // the compiled cache exists after this
    let mut loads = Vec::new();
    for _ in 0..n_load {
        let (rt, t) = time(|| Runtime::load(&cfg.wasm));
        rt?;
        loads.push(t);
    }
    let mut insts = Vec::new();
    for _ in 0..n_inst {
        let (h, t) = time(|| GateHost::new(&cfg.runtime, Storage::memory(), Clock::fake(T0_MS)));
        h.map_err(gate_err)?;
        insts.push(t);
    }
    let load = median(&mut loads);
    let inst = median(&mut insts);
    let mut figures = vec![
        Figure::new(
            "cold.instantiate",
            "instantiate the gate from its InstancePre (a new GateHost: store + instance)",
            ms(inst),
            "ms",
        )
        .goal("<= 1 ms", ms(inst) <= 1.0)
        .detail(format!("median of {n_inst}")),
        Figure::new(
            "cold.load_precompiled",
            "load the precompiled component (read + hash the .wasm, deserialize the cached .cwasm, link, InstancePre)",
            ms(load),
            "ms",
        )
        .detail(format!("median of {n_load}; what a new CLI process pays before its first call")),
    ];
    if !cfg.quick {
        // Compiling from scratch (no cache next to the copy): what the cache saves.
        let tmp = cfg.tempdir()?;
        let copy = tmp.path().join("interlock_gate.wasm");
        fs::copy(&cfg.wasm, &copy)?;
        let (rt, t) = time(|| Runtime::load(&copy));
        rt?;
        figures.push(
            Figure::new(
                "cold.compile",
                "compile the component with cranelift (first run, no cache)",
                ms(t),
                "ms",
            )
            .detail("one sample; paid once per .wasm and wasmtime version".into()),
        );
    }
    Ok(figures)
}

/// Each gate artifact's size, raw and gzipped (`gzip -9`): the gate every host that does not
/// serve HTTP loads (`--wasm`, dist/interlock_gate.wasm; the goal is on it), and, beside it,
/// the Worker's (interlock_gate_api.wasm) and `interlock serve`'s (interlock_http.wasm).
pub fn size(cfg: &Config) -> Result<Vec<Figure>> {
    let dir = cfg.wasm.parent().unwrap_or(Path::new("."));
    let artifacts = [
        (
            "size",
            cfg.wasm.clone(),
            "the gate (hosts that do not serve HTTP)",
        ),
        (
            "size.api",
            dir.join("interlock_gate_api.wasm"),
            "the gate and its HTTP API (the Worker)",
        ),
        (
            "size.http",
            dir.join("interlock_http.wasm"),
            "the wasi:http gate (`interlock serve`)",
        ),
    ];
    let mut figures = Vec::new();
    for (id, wasm, what) in artifacts {
        if id != "size" && !wasm.exists() {
            continue;
        }
        let name = wasm.file_name().unwrap_or_default().to_string_lossy();
        let raw = fs::metadata(&wasm)?.len() as f64 / 1024.0;
        let gz = std::process::Command::new("gzip")
            .args(["-9", "-c"])
            .arg(&wasm)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| o.stdout.len() as f64 / 1024.0);
        let mut raw_fig = Figure::new(&format!("{id}.raw"), &format!("{name}: {what}"), raw, "KiB");
        let mut gz_fig = Figure::new(
            &format!("{id}.gzip"),
            &format!("{name}, gzip -9"),
            gz.unwrap_or(f64::NAN),
            "KiB",
        );
        if gz.is_none() {
            gz_fig = gz_fig.detail("gzip not found".into());
        }
        if id == "size" {
            raw_fig = raw_fig.goal("<= 300 KiB", raw <= 300.0);
            gz_fig = gz_fig.goal("<= 100 KiB", gz.is_some_and(|g| g <= 100.0));
        }
        figures.push(raw_fig);
        figures.push(gz_fig);
    }
    Ok(figures)
}

/// Writes journals the way the gate does, straight to `journal.jsonl`, for the recovery
/// benchmark: the native core (same code as the component) over a journal that streams
/// every entry to the file and forgets effect streams once they close (a generated effect
/// is never read again). Never fsyncs: the file is synced once at the end.
struct Generator {
    out: BufWriter<File>,
    /// Streams still needed: the lease and the effect being submitted.
    live: std::collections::HashMap<String, (Vec<String>, bool)>,
}

impl Journal for Generator {
    fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        _durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        let s = self.live.entry(stream.to_owned()).or_default();
        if s.0.len() as u64 != expected_len {
            return Err(JournalError::Conflict(s.0.len() as u64));
        }
        for e in entries {
            self.out
                .write_all(e.as_bytes())
                .and_then(|()| self.out.write_all(b"\n"))
                .map_err(|e| JournalError::Io(e.to_string()))?;
        }
        s.0.extend(entries.iter().cloned());
        s.1 = open;
        if !open && stream.starts_with("effect:") {
            self.live.remove(stream);
        }
        Ok(())
    }
    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        Ok(self
            .live
            .get(stream)
            .map(|s| s.0.iter().skip(start as usize).cloned().collect())
            .unwrap_or_default())
    }
    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        Ok(self.live.get(stream).map_or(0, |s| s.0.len() as u64))
    }
    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        Ok(Vec::new())
    }
    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        Ok(Vec::new())
    }
    fn sync(&mut self) -> Result<(), JournalError> {
        Ok(())
    }
}

/// A journal of `closed` committed effects and `open` effects left mid-send (intent
/// durable, no reply), spread evenly, with a checkpoint. Kept in `dir` with a `meta.json`
/// saying its length; a run only appends, so it is truncated back before each use.
fn ensure_history(dir: &Path, closed: u64, open: u64) -> Result<Value> {
    let meta_path = dir.join("meta.json");
    if let Ok(text) = fs::read_to_string(&meta_path) {
        let meta: Value = serde_json::from_str(&text)?;
        let len = meta["len"].as_u64().context("meta.json len")?;
        let journal = OpenOptions::new()
            .write(true)
            .open(dir.join(JOURNAL_FILE))?;
        if journal.metadata()?.len() >= len {
            journal.set_len(len)?;
            journal.sync_all()?;
            return Ok(meta);
        }
    }
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir)?;
    eprintln!(
        "  generating a journal of {closed} closed + {open} open effects in {} (once)",
        dir.display()
    );
    let began = Instant::now();
    let mut g = Generator {
        out: BufWriter::with_capacity(1 << 20, File::create(dir.join(JOURNAL_FILE))?),
        live: Default::default(),
    };
    let mut gate = Gate::new();
    gate.grant_lease(&mut g, T0_MS, LEASE, LEASE_UNTIL_MS)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let every = (closed / open.max(1)).max(1);
    let (mut n_closed, mut n_open) = (0, 0);
    let mut n = 0u64;
    while n_closed < closed || n_open < open {
        let leave_open = n_open < open && (n_closed % every == every / 2 || n_closed >= closed);
        native_submit(&mut gate, &mut g, T0_MS, &proposal(n), leave_open);
        if leave_open {
            n_open += 1;
        } else {
            n_closed += 1;
        }
        n += 1;
    }
    g.out.flush()?;
    g.out.get_ref().sync_all()?;
    drop(g);
    let gen_s = began.elapsed().as_secs_f64();
    let (j, scan) = time(|| FileJournal::open(dir));
    let mut j = j?;
    ensure!(j.open_streams().len() as u64 == open);
    let (r, ckpt) = time(|| {
        if j.checkpoint_covers().is_none() {
            j.checkpoint()
        } else {
            Ok(())
        }
    });
    r?;
    let len = fs::metadata(dir.join(JOURNAL_FILE))?.len();
    drop(j);
    let meta = json!({
        "closed": closed, "open": open, "len": len, "generate_s": gen_s,
        "full_scan_open_ms": ms(scan), "checkpoint_ms": ms(ckpt),
        "note": "full_scan_open_ms is FileJournal::open without a checkpoint (it writes one after a scan of 64 MiB or more; checkpoint_ms is the explicit write when it did not)"
    });
    fs::write(&meta_path, serde_json::to_string_pretty(&meta)?)?;
    Ok(meta)
}

/// Goal 6: recovery after a crash, with a long history of closed effects and some open
/// ones: open the journal (from its checkpoint), a new gate instance, `recover_all`.
pub fn recovery(cfg: &Config) -> Result<Vec<Figure>> {
    let (small, big, open) = cfg.pick((1_000, 10_000, 10), (10_000, 1_000_000, 1_000));
    let runs = cfg.pick(1, 3);
    let tmp = cfg.tempdir()?;
    let mut results = Vec::new();
    for closed in [small, big] {
        // The big one is kept between runs; the small one is cheap to write each time.
        let dir = if closed >= 100_000 {
            cfg.cache.join(format!("recover-{closed}-{open}"))
        } else {
            tmp.path().join(format!("recover-{closed}-{open}"))
        };
        let meta = ensure_history(&dir, closed, open)?;
        let mut times = Vec::new();
        let mut opens = Vec::new();
        for _ in 0..runs {
            let meta = ensure_history(&dir, closed, open)?; // truncate back to the history
            {
                let journal = FileJournal::open(&dir)?;
                ensure!(
                    journal.scanned_bytes() == 0,
                    "the checkpoint was not used ({} bytes scanned)",
                    journal.scanned_bytes()
                );
            }
            // The instance opens the journal (from its checkpoint) itself.
            let began = Instant::now();
            let files = StdFiles::at(&dir)?;
            // Past every claim (1 s), inside the lease.
            let mut host = GateHost::new(&cfg.runtime, files, Clock::fake(T0_MS + 60_000))
                .map_err(gate_err)?;
            let opened = began.elapsed();
            let recovered = host.recover_all(&mut NullTarget).map_err(gate_err)?;
            let elapsed = began.elapsed();
            ensure!(
                recovered.len() as u64 == open,
                "{} recovered",
                recovered.len()
            );
            for (id, r) in &recovered {
                let o = r.as_ref().map_err(|e| anyhow::anyhow!("{id}: {e}"))?;
                ensure!(o.state == State::Committed, "{id}: {o:?}");
            }
            drop(host);
            times.push(elapsed);
            opens.push(opened);
            let _ = meta;
        }
        results.push((closed, median(&mut times), median(&mut opens), meta));
    }
    if !cfg.quick {
        // Leave the cached journal as generated.
        ensure_history(&cfg.cache.join(format!("recover-{big}-{open}")), big, open)?;
    }
    let mut figures = Vec::new();
    for (closed, t, o, meta) in &results {
        figures.push(
            Figure::new(
                if closed == &small {
                    "recover.small"
                } else {
                    "recover.big"
                },
                &format!("open + recover_all with {closed} closed and {open} open effects"),
                ms(*t),
                "ms",
            )
            .goal("<= 1000 ms", ms(*t) <= 1000.0)
            .detail(format!(
                "open from checkpoint {:.1} ms; journal {:.0} MiB; without the checkpoint open scans it all: {:.0} ms",
                ms(*o),
                meta["len"].as_f64().unwrap_or(0.0) / 1048576.0,
                meta["full_scan_open_ms"].as_f64().unwrap_or(f64::NAN)
            )),
        );
    }
    let ratio = results[1].1.as_secs_f64() / results[0].1.as_secs_f64();
    figures.push(
        Figure::new(
            "recover.big_vs_small",
            &format!("recovery time, {big} closed / {small} closed (same {open} open)"),
            ratio,
            "x",
        )
        .goal("<= 1.5x", ratio <= 1.5),
    );
    Ok(figures)
}

/// Goal 7: crash in the middle of a send (intent durable, no reply), then a restarted
/// process recovers, on the real clock with a 1 s target timeout: the claim is the floor.
pub fn crash(cfg: &Config) -> Result<Vec<Figure>> {
    let runs = cfg.pick(1, 5);
    let mut times = Vec::new();
    for i in 0..runs {
        let tmp = cfg.tempdir()?;
        let dir = tmp.path().join("journal");
        let clock = Clock::System;
        {
            let mut host = GateHost::new(&cfg.runtime, StdFiles::at(&dir)?, clock.clone())
                .map_err(gate_err)?;
            host.grant_lease(LEASE, clock.now_ms() + 3_600_000)
                .map_err(gate_err)?;
            let mut step = host.submit_step(&proposal(i)).map_err(gate_err)?;
            loop {
                let reply = match &step.ask {
                    Ask::Capture(_) => Reply::Captured(PREMISES.into()),
                    Ask::Authorize(_) => Reply::Allowed(true),
                    Ask::Apply(_) => break, // the crash: the send went out, no reply
                    other => bail!("unexpected step before the send: {other:?}"),
                };
                step = host.resume(step.op, &reply).map_err(gate_err)?;
            }
        } // the process dies: instance and journal handle (and its lock) are gone
        let crashed = Instant::now();
        let mut host = GateHost::new(&cfg.runtime, StdFiles::at(&dir)?, clock).map_err(gate_err)?;
        let recovered = host.recover_all(&mut NullTarget).map_err(gate_err)?;
        let t = crashed.elapsed();
        ensure!(recovered.len() == 1);
        let o = recovered[0]
            .1
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        ensure!(o.state == State::Committed, "{o:?}");
        times.push(t);
    }
    let t = median(&mut times);
    Ok(vec![Figure::new(
        "crash.to_closed",
        "crash mid-send to COMMITTED: a new gate host over the journal recovers it (real clock, 1 s target timeout, tier 2)",
        ms(t),
        "ms",
    )
    .goal("<= 50 ms: a restart and one lookup (original: 43 s median)", ms(t) <= 50.0)
    .detail(format!(
        "median of {runs}; the crashed host's instance and journal handle dropped, a new GateHost opens the journal and recovers: the lookup, asked under the live 1 s claim, finds the refund, COMMITTED without waiting the claim out (a new process adds `cold.load_precompiled`)"
    ))])
}

/// `--profile wasm|native`: only submits on one side for `secs`, for `perf record`.
pub fn profile_loop(cfg: &Config, side: &str, secs: u64) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(secs);
    let mut n = 0u64;
    match side {
        "native" => {
            let mut gate = Gate::new();
            let mut j = interlock_journal::FileJournal::open(MemFiles::new())
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            gate.grant_lease(&mut j, T0_MS, LEASE, LEASE_UNTIL_MS)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            while Instant::now() < until {
                native_submit(&mut gate, &mut j, T0_MS, &proposal(n), false);
                n += 1;
            }
        }
        "wasm" => {
            let mut host = GateHost::new(&cfg.runtime, Storage::memory(), Clock::fake(T0_MS))
                .map_err(gate_err)?;
            host.grant_lease(LEASE, LEASE_UNTIL_MS).map_err(gate_err)?;
            while Instant::now() < until {
                host.submit(&proposal(n), &mut NullTarget)
                    .map_err(gate_err)?;
                n += 1;
            }
        }
        other => bail!("--profile wasm or native, not {other:?}"),
    }
    eprintln!("{n} submits in {secs} s on {side}");
    Ok(())
}
