//! This host's driver of the conformance runner (tests/conformance/runner, the one
//! interpreter of the vectors, a component every host runs). What is here is this host's
//! own: gate instances on wasmtime over one storage (a journal folder, or a database), a
//! fake clock, and the storage operations `tear_journal`, `reopen` and `repair` act on,
//! through the store and the component's `journal-admin`. The step language, the world,
//! the crash points and the expectations are the runner's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use interlock_file_journal::{StdFiles, JOURNAL_FILE, LOCK_WAIT_MS};
use interlock_journal::Files;
#[cfg(feature = "sql")]
use interlock_sql_journal::SqlStore;
use serde::Deserialize;
use serde_json::Value;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Engine, Store};

use crate::bindings::exports::interlock::gate::gate as exported;
use crate::bindings::exports::interlock::gate::tools as gate_tools;
use crate::bindings::interlock::gate::target::{CallAnswer, Reply, Step};
use crate::bindings::interlock::gate::types::JournalError;
use crate::bindings::interlock::gate::types::Outcome;
use crate::clock::Clock;
use crate::gate::{Error, GateHost};
use crate::runtime::Runtime;
use crate::storage::{Storage, SwitchFiles};

mod bindings {
    wasmtime::component::bindgen!({
        world: "conformance-runner",
        path: "../../tests/conformance/runner/wit",
        imports: { default: trappable },
        with: {
            "interlock:gate/types": crate::bindings::interlock::gate::types,
            "interlock:gate/target": crate::bindings::interlock::gate::target,
        },
    });
}

use bindings::exports::interlock::conformance::runner::{Options, Report};
use bindings::interlock::conformance::driver;
use bindings::interlock::gate::gate as imported;
use bindings::interlock::gate::tools as imported_tools;

/// Where scripts/build-wasm.sh puts the runner, relative to the checkout.
pub const DIST_WASM: &str = "dist/conformance_runner.wasm";
/// The file beside the vectors that pins each vector's journal bytes.
pub const PINS: &str = "journal-pins.json";

/// A vector file: what the fault table and the tests show of it, and its text, which the
/// runner reads (and checks) in full.
#[derive(Clone, Debug, Deserialize)]
pub struct Vector {
    pub id: String,
    pub fault: String,
    pub title: String,
    pub tier: String,
    pub steps: Vec<Value>,
    pub expect: Value,
    #[serde(default)]
    pub skip: BTreeMap<String, String>,
    #[serde(skip)]
    pub json: String,
}

impl Vector {
    pub fn parse(text: &str) -> Result<Vector> {
        let mut v: Vector = serde_json::from_str(text)?;
        v.json = text.to_string();
        Ok(v)
    }
}

/// Every `*.json` vector in `dir` (sorted by file name), except the pins file.
pub fn load_dir(dir: &Path) -> Result<Vec<(PathBuf, Vector)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with(PINS));
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p)?;
            let v =
                Vector::parse(&text).with_context(|| format!("{} is not a vector", p.display()))?;
            Ok((p, v))
        })
        .collect()
}

/// The pinned journal hashes, by vector id (the text of [`PINS`]; `{}` when absent).
pub fn load_pins(dir: &Path) -> Result<String> {
    let path = dir.join(PINS);
    if !path.exists() {
        return Ok("{}".into());
    }
    Ok(std::fs::read_to_string(&path)?)
}

/// The runner in a development checkout: `$INTERLOCK_CONFORMANCE_WASM`, else the
/// checkout's dist/ (see [`DIST_WASM`]).
pub fn locate() -> PathBuf {
    std::env::var_os("INTERLOCK_CONFORMANCE_WASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(DIST_WASM)
        })
}

/// The run's world as this host keeps it: the journal directory, the fake clock, and the
/// worker processes (gate instances), the current one answering the runner's `gate`.
struct Driver {
    gates: Runtime,
    /// The journal's folder, for a file journal.
    dir: PathBuf,
    /// What every worker's instance is given: the folder (closed and opened again under
    /// them by `reopen_journal`), or one connection to the database.
    storage: Storage,
    /// The folder's store, for a file journal.
    switch: Option<SwitchFiles>,
    clock: Clock,
    workers: Vec<GateHost>,
    current: usize,
    /// The runner's events, kept when asked for (`Runner::trace`).
    events: Option<Vec<String>>,
}

impl Driver {
    fn worker(&mut self) -> wasmtime::Result<&mut GateHost> {
        self.workers
            .get_mut(self.current)
            .ok_or_else(|| wasmtime::Error::msg("the runner called the gate with no worker alive"))
    }

    /// An instance over the run's storage, its journal not opened: what the operator's
    /// commands (repair) and the pins (entries in order) go through.
    fn admin(&self) -> wasmtime::Result<GateHost> {
        GateHost::unopened(&self.gates, self.storage.clone(), self.clock.clone())
            .map_err(|e| wasmtime::Error::msg(format!("cannot start a gate instance: {e}")))
    }
}

/// A call's two failure layers: a trap of the gate instance traps the runner too; the
/// gate's own error goes back to the runner as the gate said it.
fn forward<T, U>(
    r: Result<T, Error>,
    ok: impl FnOnce(T) -> U,
) -> wasmtime::Result<Result<U, imported::GateError>> {
    match r {
        Ok(v) => Ok(Ok(ok(v))),
        Err(Error::Gate(e)) => Ok(Err(gate_error(e))),
        Err(e) => Err(wasmtime::Error::msg(e.to_string())),
    }
}

/// The gate's error as the runner's import spells it: the same WIT type, generated twice
/// (once as the gate's export, once as the runner's import).
fn gate_error(e: exported::GateError) -> imported::GateError {
    use exported::GateError as E;
    use imported::GateError as I;
    match e {
        E::InvalidJson(m) => I::InvalidJson(m),
        E::InvalidField(f) => I::InvalidField(imported::FieldError {
            field: f.field,
            problem: f.problem,
        }),
        E::TooLarge(n) => I::TooLarge(n),
        E::UnknownEffect(id) => I::UnknownEffect(id),
        E::UnknownOperation(op) => I::UnknownOperation(op),
        E::UnexpectedReply(m) => I::UnexpectedReply(m),
        E::Journal(j) => I::Journal(j),
        E::CorruptJournal(m) => I::CorruptJournal(m),
        E::Contention(m) => I::Contention(m),
    }
}

fn verify_report(r: exported::VerifyReport) -> imported::VerifyReport {
    use exported::ProblemKind as E;
    use imported::ProblemKind as I;
    imported::VerifyReport {
        streams: r.streams,
        entries: r.entries,
        problems: r
            .problems
            .into_iter()
            .map(|p| imported::Problem {
                stream: p.stream,
                seq: p.seq,
                kind: match p.kind {
                    E::HashMismatch => I::HashMismatch,
                    E::BrokenLink => I::BrokenLink,
                    E::BadSeq => I::BadSeq,
                    E::Unparsable => I::Unparsable,
                    E::Truncated => I::Truncated,
                },
                detail: p.detail,
            })
            .collect(),
    }
}

impl imported::Host for Driver {
    fn submit(&mut self, proposal: String) -> wasmtime::Result<Result<Step, imported::GateError>> {
        forward(self.worker()?.submit_step(&proposal), |s| s)
    }
    fn resume(
        &mut self,
        op: u64,
        reply: Reply,
    ) -> wasmtime::Result<Result<Step, imported::GateError>> {
        forward(self.worker()?.resume(op, &reply), |s| s)
    }
    fn recover(&mut self, effect: String) -> wasmtime::Result<Result<Step, imported::GateError>> {
        forward(self.worker()?.recover_step(&effect), |s| s)
    }
    fn open_effects(&mut self) -> wasmtime::Result<Result<Vec<String>, imported::GateError>> {
        forward(self.worker()?.open_effects(), |s| s)
    }
    fn set_routes(&mut self, targets: Vec<String>) -> wasmtime::Result<()> {
        self.worker()?
            .set_routes(&targets)
            .map_err(|e| wasmtime::Error::msg(e.to_string()))
    }
    fn defaults(&mut self) -> wasmtime::Result<String> {
        self.worker()?
            .defaults()
            .map_err(|e| wasmtime::Error::msg(e.to_string()))
    }
    fn grant_lease(
        &mut self,
        lease: String,
        until: u64,
    ) -> wasmtime::Result<Result<(), imported::GateError>> {
        forward(self.worker()?.grant_lease(&lease, until), |s| s)
    }
    fn revoke_lease(&mut self, lease: String) -> wasmtime::Result<Result<(), imported::GateError>> {
        forward(self.worker()?.revoke_lease(&lease), |s| s)
    }
    fn approve(&mut self, approval: String) -> wasmtime::Result<Result<(), imported::GateError>> {
        forward(self.worker()?.approve(&approval), |s| s)
    }
    fn receipt(
        &mut self,
        effect: String,
        key: Option<Vec<u8>>,
    ) -> wasmtime::Result<Result<String, imported::GateError>> {
        forward(self.worker()?.receipt(&effect, key.as_deref()), |s| s)
    }
    fn verify(
        &mut self,
        anchors: Vec<String>,
    ) -> wasmtime::Result<Result<imported::VerifyReport, imported::GateError>> {
        forward(self.worker()?.verify(&anchors), verify_report)
    }
    fn effect_id_of(
        &mut self,
        proposal: String,
    ) -> wasmtime::Result<Result<String, imported::GateError>> {
        forward(self.worker()?.effect_id_of(&proposal), |s| s)
    }
    fn cancel(&mut self, op: u64) -> wasmtime::Result<()> {
        self.worker()?
            .cancel(op)
            .map_err(|e| wasmtime::Error::msg(e.to_string()))
    }
    fn revoke_approval(
        &mut self,
        approval: String,
    ) -> wasmtime::Result<Result<(), imported::GateError>> {
        forward(self.worker()?.revoke_approval(&approval), |s| s)
    }
    fn confirm(
        &mut self,
        effect: String,
        evidence: String,
    ) -> wasmtime::Result<Result<Outcome, imported::GateError>> {
        forward(self.worker()?.confirm(&effect, &evidence), |s| s)
    }
    fn check_receipt(
        &mut self,
        receipt: String,
        key: Vec<u8>,
    ) -> wasmtime::Result<Result<imported::VerifyReport, imported::GateError>> {
        forward(self.worker()?.check_receipt(&receipt, &key), verify_report)
    }
    fn set_approval_rules(
        &mut self,
        rules: String,
    ) -> wasmtime::Result<Result<(), imported::GateError>> {
        forward(self.worker()?.set_approval_rules(&rules), |s| s)
    }
    fn inbox(&mut self) -> wasmtime::Result<Result<String, imported::GateError>> {
        forward(self.worker()?.inbox(), |s| s)
    }
    fn scoreboard(&mut self) -> wasmtime::Result<Result<String, imported::GateError>> {
        forward(self.worker()?.scoreboard(), |s| s)
    }
    fn decide(
        &mut self,
        decision: String,
    ) -> wasmtime::Result<Result<String, imported::GateError>> {
        forward(self.worker()?.decide(&decision), |s| s)
    }
    fn approval_rules(&mut self) -> wasmtime::Result<Result<String, imported::GateError>> {
        Err(not_imported("approval-rules"))
    }
    fn webhook(
        &mut self,
        _: imported::WebhookScheme,
        _: Vec<(String, String)>,
        _: Vec<u8>,
        _: String,
        _: Option<u64>,
    ) -> wasmtime::Result<Result<String, imported::GateError>> {
        Err(not_imported("webhook"))
    }
    // The runner's component imports only the functions it calls (above); these three are
    // in the WIT interface but never asked.
    fn send_timeout_ms(&mut self, _: String) -> wasmtime::Result<Result<u64, imported::GateError>> {
        Err(not_imported("send-timeout-ms"))
    }
    fn standing_lease_name(
        &mut self,
        _: String,
    ) -> wasmtime::Result<Result<String, imported::GateError>> {
        Err(not_imported("standing-lease-name"))
    }
    fn grant_standing_lease(
        &mut self,
        _: String,
    ) -> wasmtime::Result<Result<String, imported::GateError>> {
        Err(not_imported("grant-standing-lease"))
    }
    fn recover_waiting(
        &mut self,
        effect: String,
        wait: Option<imported::ClaimWait>,
    ) -> wasmtime::Result<Result<Step, imported::GateError>> {
        let wait = wait.map(|w| crate::gate::ClaimWait {
            poll_ms: w.poll_ms,
            max_polls: w.max_polls,
        });
        forward(self.worker()?.recover_waiting_step(&effect, wait), |s| s)
    }
    fn crash_at(
        &mut self,
        point: Option<crate::bindings::interlock::gate::target::CrashPoint>,
    ) -> wasmtime::Result<()> {
        self.worker()?
            .set_crash_point(point)
            .map_err(|e| wasmtime::Error::msg(e.to_string()))
    }
    fn set_strict_authority(&mut self, strict: bool) -> wasmtime::Result<()> {
        self.worker()?
            .set_strict_authority(strict)
            .map_err(|e| wasmtime::Error::msg(e.to_string()))
    }
    fn standing_notice(
        &mut self,
        _: String,
    ) -> wasmtime::Result<Result<String, imported::GateError>> {
        Err(not_imported("standing-notice"))
    }
}

/// The gate's tool-gating machine (`interlock:gate/tools`), forwarded as `gate` is: to the
/// current worker's instance, unchanged (the same WIT types, generated twice).
impl imported_tools::Host for Driver {
    fn start(
        &mut self,
        config: String,
        options: imported_tools::ToolOptions,
    ) -> wasmtime::Result<Result<imported_tools::Started, imported::GateError>> {
        let options = gate_tools::ToolOptions {
            agent: options.agent,
            authority: options.authority,
            strict: options.strict,
            results: match options.results {
                imported_tools::Results::Mcp => gate_tools::Results::Mcp,
                imported_tools::Results::Plain => gate_tools::Results::Plain,
            },
            wait: options.wait.map(|w| exported::ClaimWait {
                poll_ms: w.poll_ms,
                max_polls: w.max_polls,
            }),
        };
        let r = self.worker()?.tools().start(&config, &options);
        forward(r, |s| imported_tools::Started {
            gated: s.gated,
            standing: s.standing,
            journal_dir: s.journal_dir,
        })
    }
    fn check_tools(
        &mut self,
        available: Vec<String>,
    ) -> wasmtime::Result<Result<(), imported::GateError>> {
        forward(self.worker()?.tools().check_tools(&available), |()| ())
    }
    fn call(
        &mut self,
        tool: String,
        arguments: String,
    ) -> wasmtime::Result<Result<imported_tools::ToolStep, imported::GateError>> {
        forward(self.worker()?.tools().call(&tool, &arguments), tool_step)
    }
    fn recover(
        &mut self,
        effect: String,
    ) -> wasmtime::Result<Result<imported_tools::ToolStep, imported::GateError>> {
        forward(self.worker()?.tools().recover(&effect), tool_step)
    }
    fn resume(
        &mut self,
        id: u64,
        answer: CallAnswer,
    ) -> wasmtime::Result<Result<imported_tools::ToolStep, imported::GateError>> {
        forward(self.worker()?.tools().resume(id, &answer), tool_step)
    }
    fn cancel(&mut self, id: u64) -> wasmtime::Result<()> {
        self.worker()?
            .tools()
            .cancel(id)
            .map_err(|e| wasmtime::Error::msg(e.to_string()))
    }
}

/// The machine's step, as the runner's import spells it (the same WIT type).
fn tool_step(s: gate_tools::ToolStep) -> imported_tools::ToolStep {
    match s {
        gate_tools::ToolStep::Call(r) => {
            imported_tools::ToolStep::Call(imported_tools::ToolRequest {
                id: r.id,
                call: imported_tools::ToolCall {
                    tool: r.call.tool,
                    arguments: r.call.arguments,
                },
                timeout_ms: r.timeout_ms,
            })
        }
        gate_tools::ToolStep::Sleep(s) => imported_tools::ToolStep::Sleep(s),
        gate_tools::ToolStep::Ask(q) => {
            imported_tools::ToolStep::Ask(imported_tools::PersonQuestion {
                id: q.id,
                request: q.request,
            })
        }
        gate_tools::ToolStep::Crash(p) => imported_tools::ToolStep::Crash(p),
        gate_tools::ToolStep::Done(d) => imported_tools::ToolStep::Done(imported_tools::ToolDone {
            tool: d.tool,
            reply: imported_tools::ToolReply {
                is_error: d.reply.is_error,
                message: d.reply.message,
                outcome: d.reply.outcome,
            },
            outcome: d.outcome,
        }),
    }
}

fn not_imported(name: &str) -> wasmtime::Error {
    wasmtime::Error::msg(format!(
        "the conformance runner does not import gate.{name}"
    ))
}

impl driver::Host for Driver {
    fn new_worker(&mut self) -> wasmtime::Result<u32> {
        let host = GateHost::new(&self.gates, self.storage.clone(), self.clock.clone())
            .map_err(|e| wasmtime::Error::msg(format!("cannot start a gate instance: {e}")))?;
        self.workers.push(host);
        self.current = self.workers.len() - 1;
        Ok(self.workers.len() as u32)
    }
    fn use_worker(&mut self, worker: u32) -> wasmtime::Result<()> {
        let i = (worker as usize)
            .checked_sub(1)
            .filter(|i| *i < self.workers.len())
            .ok_or_else(|| wasmtime::Error::msg(format!("no worker {worker}")))?;
        self.current = i;
        Ok(())
    }
    fn end_workers(&mut self) -> wasmtime::Result<()> {
        // Numbers stay unique over the run: dead instances are kept, never used again.
        self.current = usize::MAX;
        Ok(())
    }
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.clock.now_ms())
    }
    fn advance_ms(&mut self, ms: u64) -> wasmtime::Result<()> {
        self.clock.advance(ms);
        Ok(())
    }
    fn journal_bytes(&mut self) -> wasmtime::Result<Vec<u8>> {
        if self.switch.is_none() {
            // The entries in append order, each followed by a newline: a file's bytes.
            let mut admin = self.admin()?;
            let entries = admin
                .open_journal()
                .and_then(|()| admin.entries_in_order())
                .map_err(|e| wasmtime::Error::msg(e.to_string()))?;
            return Ok(entries
                .iter()
                .flat_map(|e| [e.as_bytes(), b"\n"].concat())
                .collect());
        }
        let mut files = self.storage.clone();
        let size = files.file_size(JOURNAL_FILE).ok().flatten().unwrap_or(0);
        if size == 0 {
            return Ok(Vec::new());
        }
        files
            .file_read(JOURNAL_FILE, 0, size)
            .map_err(|e| wasmtime::Error::msg(format!("cannot read {JOURNAL_FILE}: {e}")))
    }
    fn tear_journal(&mut self, bytes: u64) -> wasmtime::Result<Result<(), String>> {
        let mut files = self.storage.clone();
        let torn = files.file_size(JOURNAL_FILE).and_then(|size| {
            files.file_truncate(JOURNAL_FILE, size.unwrap_or(0).saturating_sub(bytes))
        });
        Ok(torn.map_err(|e| format!("cannot tear {JOURNAL_FILE}: {e}")))
    }
    fn reopen_journal(&mut self) -> wasmtime::Result<Result<(), JournalError>> {
        let Some(switch) = &self.switch else {
            return Err(wasmtime::Error::msg(
                "reopen-journal asked of a journal that is not a file",
            ));
        };
        // Closed under every instance (the folder's lock let go), then opened as a new
        // process would: the journal opened over it says whether it is whole.
        switch.close("journal is closed");
        match StdFiles::open(&self.dir, std::time::Duration::from_millis(LOCK_WAIT_MS)) {
            Ok(files) => switch.set(files),
            Err(e) => return Ok(Err(JournalError::Io(e.to_string()))),
        }
        Ok(match self.admin()?.open_journal() {
            Ok(()) => Ok(()),
            Err(Error::Journal(e)) => Err(e),
            Err(e) => Err(JournalError::Io(e.to_string())),
        })
    }
    fn repair_journal(&mut self) -> wasmtime::Result<Result<(), String>> {
        Ok(self
            .admin()?
            .repair_journal()
            .map(|_| ())
            .map_err(|e| e.to_string()))
    }
    fn note(&mut self, event: String) -> wasmtime::Result<()> {
        if let Some(events) = self.events.as_mut() {
            events.push(event);
        }
        Ok(())
    }
}

/// Where a run's journal lives.
#[derive(Clone, Debug)]
pub enum JournalAt {
    /// A file journal in this (empty) folder.
    Folder(PathBuf),
    /// A shared journal (`sqlite:///...`, `postgres://...`), new and empty.
    Url(String),
}

/// The runner component, compiled once; each run is a fresh instance.
pub struct Runner {
    engine: Engine,
    pre: bindings::ConformanceRunnerPre<Driver>,
    gates: Runtime,
}

/// What one run returned, with the runner's events when they were asked for.
pub struct Run {
    pub report: Report,
    pub events: Vec<Value>,
}

impl Runner {
    /// Loads the runner at `wasm`, to drive the gates of `gates`.
    pub fn load(wasm: &Path, gates: &Runtime) -> Result<Runner> {
        let engine = Engine::default();
        let component = Component::from_file(&engine, wasm)
            .map_err(anyhow::Error::from)
            .with_context(|| {
                format!(
                    "cannot load the conformance runner {} (bash scripts/build-wasm.sh builds it)",
                    wasm.display()
                )
            })?;
        let mut linker = Linker::<Driver>::new(&engine);
        imported::add_to_linker::<_, HasSelf<_>>(&mut linker, |d| d)
            .map_err(anyhow::Error::from)?;
        imported_tools::add_to_linker::<_, HasSelf<_>>(&mut linker, |d| d)
            .map_err(anyhow::Error::from)?;
        driver::add_to_linker::<_, HasSelf<_>>(&mut linker, |d| d).map_err(anyhow::Error::from)?;
        // The runner uses these interfaces' types only.
        for types_only in [
            "interlock:gate/types@0.1.0",
            "interlock:gate/target@0.1.0",
            "interlock:gate/journal@0.1.0",
        ] {
            linker.instance(types_only).map_err(anyhow::Error::from)?;
        }
        let pre = linker
            .instantiate_pre(&component)
            .map_err(anyhow::Error::from)?;
        let pre = bindings::ConformanceRunnerPre::new(pre).map_err(anyhow::Error::from)?;
        Ok(Runner {
            engine,
            pre,
            gates: gates.clone(),
        })
    }

    /// Plays `vector` in `workdir` (an empty folder: the file journal goes there).
    pub fn run(
        &self,
        vector: &Vector,
        pins: &str,
        check_pin: bool,
        workdir: &Path,
    ) -> Result<Report> {
        let at = JournalAt::Folder(workdir.to_path_buf());
        Ok(self.play(vector, pins, check_pin, &at, false)?.report)
    }

    /// Plays `vector` on the journal `at` (an empty folder, or a new shared journal).
    pub fn run_at(
        &self,
        vector: &Vector,
        pins: &str,
        check_pin: bool,
        at: &JournalAt,
    ) -> Result<Report> {
        Ok(self.play(vector, pins, check_pin, at, false)?.report)
    }

    /// [`Runner::run`], keeping the runner's events (tests/conformance/README.md, "Events").
    pub fn trace(&self, vector: &Vector, workdir: &Path) -> Result<Run> {
        let at = JournalAt::Folder(workdir.to_path_buf());
        self.play(vector, "{}", false, &at, true)
    }

    fn play(
        &self,
        vector: &Vector,
        pins: &str,
        check_pin: bool,
        at: &JournalAt,
        keep: bool,
    ) -> Result<Run> {
        let (storage, dir, switch) = match at {
            JournalAt::Folder(dir) => {
                let files = StdFiles::open(dir, std::time::Duration::from_millis(LOCK_WAIT_MS))?;
                let switch = SwitchFiles::new(files);
                (Storage::from(switch.clone()), dir.clone(), Some(switch))
            }
            #[cfg(feature = "sql")]
            JournalAt::Url(url) => {
                let sql = SqlStore::open_url(url).with_context(|| format!("cannot open {url}"))?;
                (Storage::from(sql), PathBuf::new(), None)
            }
            #[cfg(not(feature = "sql"))]
            JournalAt::Url(url) => anyhow::bail!("{url}: {}", crate::WITHOUT_SQL),
        };
        let file_journal = switch.is_some();
        let mut store = Store::new(
            &self.engine,
            Driver {
                gates: self.gates.clone(),
                dir,
                storage,
                switch,
                clock: Clock::fake(0),
                workers: Vec::new(),
                current: usize::MAX,
                events: keep.then(Vec::new),
            },
        );
        let runner = self
            .pre
            .instantiate(&mut store)
            .map_err(anyhow::Error::from)?;
        let api = runner.interlock_conformance_runner();
        let t0 = api.call_start_ms(&mut store).map_err(anyhow::Error::from)?;
        store.data().clock.advance(t0);
        let options = Options {
            host: "cli".into(),
            file_journal,
            check_pin,
        };
        let report = api
            .call_run(&mut store, &vector.json, &pins.to_string(), &options)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("the runner trapped on {}", vector.id))?
            .map_err(|e| anyhow!(e))?;
        let events = store
            .data_mut()
            .events
            .take()
            .unwrap_or_default()
            .iter()
            .map(|e| serde_json::from_str(e))
            .collect::<Result<_, _>>()?;
        Ok(Run { report, events })
    }

    /// Plays `vector` without Interlock, as the fault table's baseline `approach` does.
    pub fn baseline(&self, vector: &Vector, approach: &str) -> Result<Value> {
        let mut store = Store::new(
            &self.engine,
            Driver {
                gates: self.gates.clone(),
                dir: PathBuf::new(),
                storage: Storage::memory(),
                switch: None,
                clock: Clock::fake(0),
                workers: Vec::new(),
                current: usize::MAX,
                events: None,
            },
        );
        let runner = self
            .pre
            .instantiate(&mut store)
            .map_err(anyhow::Error::from)?;
        let text = runner
            .interlock_conformance_runner()
            .call_baseline(&mut store, &vector.json, approach)
            .map_err(anyhow::Error::from)?
            .map_err(|e| anyhow!(e))?;
        Ok(serde_json::from_str(&text)?)
    }
}

pub use bindings::exports::interlock::conformance::runner::Report as RunReport;
