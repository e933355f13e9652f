//! [`GateHost`]: one instance of the gate component and the loop that drives its steps.
//!
//! The gate never calls a target. It answers each call with a step (capture, authorize,
//! apply, query, or done); the host performs it through [`Targets`] and hands the reply
//! back with `resume`. Nothing here decides anything: the loop only routes.

use std::fmt;

use wasmtime::Store;

use crate::bindings::exports::interlock::gate::effects::Guest as EffectsApi;
use crate::bindings::exports::interlock::gate::exporter::{
    Batch, ExportError, Guest as ExporterApi, Opened,
};
pub use crate::bindings::exports::interlock::gate::gate::WebhookScheme;
use crate::bindings::exports::interlock::gate::gate::{GateError, Guest, VerifyReport};
use crate::bindings::exports::interlock::gate::journal_admin::{Guest as AdminApi, RepairReport};
use crate::bindings::exports::interlock::gate::proof::{Guest as ProofApi, ProofError};
use crate::bindings::exports::interlock::gate::tools::Guest as ToolsApi;
use crate::bindings::interlock::gate::target::{Ask, Reply, Step};
use crate::bindings::interlock::gate::types::{JournalError, Outcome};
use crate::clock::Clock;
use crate::runtime::Runtime;
use crate::storage::Storage;
use crate::targets::Targets;

/// The store data: what the component's imports reach. `wasi`, `http` and `table` serve
/// only the wasi:http component (world http-gate, which also exports the gate; `interlock
/// serve`): its WASI wall clock is `clock`, so the conformance vectors run over it with the
/// fake clock.
pub struct HostState {
    /// Where the journal is stored (`storage`).
    pub(crate) storage: Storage,
    pub(crate) clock: Clock,
    #[cfg(feature = "serve")]
    pub(crate) wasi: wasmtime_wasi::WasiCtx,
    #[cfg(feature = "serve")]
    pub(crate) http: wasmtime_wasi_http::WasiHttpCtx,
    #[cfg(feature = "serve")]
    pub(crate) table: wasmtime::component::ResourceTable,
}

impl HostState {
    /// The state over `storage`, `env` the WASI environment (the wasi:http component's
    /// settings).
    pub fn new(storage: Storage, clock: Clock, env: &[(String, String)]) -> Self {
        #[cfg(not(feature = "serve"))]
        let _ = env;
        HostState {
            storage,
            #[cfg(feature = "serve")]
            wasi: wasmtime_wasi::WasiCtx::builder()
                .wall_clock(clock.clone())
                .envs(env)
                .build(),
            clock,
            #[cfg(feature = "serve")]
            http: wasmtime_wasi_http::WasiHttpCtx::new(),
            #[cfg(feature = "serve")]
            table: wasmtime::component::ResourceTable::new(),
        }
    }
}

#[cfg(feature = "serve")]
impl wasmtime_wasi::WasiView for HostState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        wasmtime_wasi::WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

#[cfg(feature = "serve")]
impl wasmtime_wasi_http::WasiHttpView for HostState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: Default::default(),
        }
    }
}

/// Where a test or the demo kills the host on purpose: the gate's one crash injection
/// (`gate.crash-at`), the same points in every host.
pub use crate::bindings::interlock::gate::target::CrashPoint;

impl fmt::Display for CrashPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CrashPoint::BeforeSend => "after the intent was durable, before the send",
            CrashPoint::AfterSend => "after the service committed, before the reply",
            CrashPoint::InRecovery => "during recovery, after its send or lookup",
        })
    }
}

/// How a [`CrashPoint`] is acted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashAction {
    /// Abort the process, as a real crash does (the CLI's demo).
    Abort,
    /// Return [`Error::Crashed`]; the caller drops the host and starts a fresh one.
    Error,
}

/// Why a gate call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The gate refused the call (the WIT `gate-error`); the journal is as documented there.
    #[error("{}", describe(.0))]
    Gate(GateError),
    /// A crash injected with [`GateHost::crash_at`] and [`CrashAction::Error`].
    #[error("simulated crash {0}")]
    Crashed(CrashPoint),
    /// The component trapped (or wasmtime failed). Never a gate error: the instance is
    /// broken and must be dropped.
    #[error("the gate component trapped: {0:#}")]
    Trap(anyhow::Error),
    /// The journal did not open (`journal-admin.open`): a torn tail, a corrupt line, a newer
    /// format, a storage failure.
    #[error("the journal did not open: {}", journal(.0))]
    Journal(JournalError),
    /// A proof call failed (the WIT `proof-error`): a bad key, a signature or proof that
    /// does not hold, a malformed document. Nothing was written.
    #[error("{}", describe_proof(.0))]
    Proof(ProofError),
}

/// A proof error for a person (the component's words; a key is never in them).
pub fn describe_proof(e: &ProofError) -> String {
    match e {
        ProofError::BadKey(m) => format!("bad key: {m}"),
        ProofError::BadSignature(m) => format!("the signature does not hold: {m}"),
        ProofError::Malformed(m) => format!("malformed: {m}"),
        ProofError::UnknownVersion(m) => format!("unknown format version: {m}"),
        ProofError::ProofFailed(m) => format!("the proof does not hold: {m}"),
        ProofError::Gate(g) => describe(g),
    }
}

fn trap(e: wasmtime::Error) -> Error {
    Error::Trap(anyhow::Error::from(e))
}

/// How long recovery waits on another worker's live claim (the gate answers `dispatched`
/// with reason `claim-live`): poll every `poll_ms`, at most `max_polls` times.
#[derive(Clone, Copy, Debug)]
pub struct ClaimWait {
    pub poll_ms: u64,
    pub max_polls: u64,
}

impl Default for ClaimWait {
    /// The core's defaults (the one place every host reads them from).
    fn default() -> Self {
        ClaimWait {
            poll_ms: interlock_core::defaults::CLAIM_WAIT_POLL_MS,
            max_polls: interlock_core::defaults::CLAIM_WAIT_MAX_POLLS,
        }
    }
}

/// One effect's recovery: its id and how it ended (or why the gate refused the call).
pub type Recovered = (String, Result<Outcome, Error>);

/// The component's exports this host calls: the same interfaces in every world it runs.
pub(crate) struct Exports {
    pub(crate) gate: Guest,
    pub(crate) tools: ToolsApi,
    pub(crate) effects: EffectsApi,
    pub(crate) admin: AdminApi,
    pub(crate) proof: ProofApi,
    pub(crate) exporter: ExporterApi,
}

/// One instance of the gate component with its journal and clock.
pub struct GateHost {
    pub(crate) store: Store<HostState>,
    pub(crate) gate: Exports,
    clock: Clock,
    crash: Option<CrashAction>,
    claim_wait: ClaimWait,
    /// What the instance was last told it can route (`set-routes`); `None` until told.
    routes: Option<Vec<String>>,
}

impl GateHost {
    /// A fresh instance over `storage`, its journal opened (`journal-admin.open`; a torn
    /// tail, a corrupt line or a newer format is [`Error::Journal`]). Cheap (the component
    /// is compiled once in `runtime`); a restarted process is a new `GateHost` on the same
    /// storage.
    pub fn new(
        runtime: &Runtime,
        storage: impl Into<Storage>,
        clock: Clock,
    ) -> Result<GateHost, Error> {
        let mut host = GateHost::unopened(runtime, storage, clock)?;
        host.open_journal()?;
        Ok(host)
    }

    /// A fresh instance over `storage` whose journal is not opened yet: to repair it first
    /// ([`GateHost::repair_journal`]), then [`GateHost::open_journal`].
    pub fn unopened(
        runtime: &Runtime,
        storage: impl Into<Storage>,
        clock: Clock,
    ) -> Result<GateHost, Error> {
        let state = HostState::new(storage.into(), clock.clone(), &[]);
        let mut store = Store::new(&runtime.engine, state);
        let instance = runtime.pre.instantiate(&mut store).map_err(trap)?;
        let gate = runtime.exports.load(&mut store, &instance).map_err(trap)?;
        Ok(GateHost {
            store,
            gate,
            clock,
            crash: None,
            claim_wait: ClaimWait::default(),
            routes: None,
        })
    }

    /// Kill this host at `point` (see [`CrashAction`]): the gate asks its host to die
    /// there (`gate.crash-at`), as it does in every host's tests.
    pub fn crash_at(&mut self, point: CrashPoint, action: CrashAction) {
        self.set_crash_point(Some(point))
            .expect("crash-at does not trap");
        self.crash = Some(action);
    }

    pub fn set_claim_wait(&mut self, wait: ClaimWait) {
        self.claim_wait = wait;
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    fn api(&self) -> &Guest {
        &self.gate.gate
    }

    /// Opens the instance's journal over its storage (again, if it was open): the
    /// component's `journal-admin.open`.
    pub fn open_journal(&mut self) -> Result<(), Error> {
        let admin = self.gate.admin.clone();
        let backend = self.store.data().storage.backend();
        admin
            .call_open(&mut self.store, backend)
            .map_err(trap)?
            .map_err(Error::Journal)
    }

    /// Repairs a torn tail of a file journal (`journal-admin.repair`: saves it to
    /// `journal.torn-<offset>`, cuts the journal to its last whole line); the journal is not
    /// opened by it.
    pub fn repair_journal(&mut self) -> Result<RepairReport, Error> {
        let admin = self.gate.admin.clone();
        admin
            .call_repair(&mut self.store)
            .map_err(trap)?
            .map_err(Error::Journal)
    }

    /// Every entry of the open journal in append order (`journal-admin.entries-in-order`):
    /// each followed by a newline, the bytes a file journal of the same appends holds.
    pub fn entries_in_order(&mut self) -> Result<Vec<String>, Error> {
        let admin = self.gate.admin.clone();
        admin
            .call_entries_in_order(&mut self.store)
            .map_err(trap)?
            .map_err(Error::Journal)
    }

    /// The instance's storage (tests reach the journal's bytes through it).
    pub fn storage(&self) -> Storage {
        self.store.data().storage.clone()
    }

    /// Runs `first` and every step after it until the gate is done.
    pub fn drive(&mut self, first: Step, targets: &mut dyn Targets) -> Result<Outcome, Error> {
        let mut step = first;
        loop {
            let reply = match &step.ask {
                Ask::Done(outcome) => return Ok(outcome.clone()),
                Ask::Sleep(ms) => {
                    self.clock.sleep(*ms);
                    Reply::Slept
                }
                Ask::Crash(point) => {
                    return match self.crash {
                        Some(CrashAction::Abort) => std::process::abort(),
                        _ => Err(Error::Crashed(*point)),
                    }
                }
                Ask::Capture(req) => targets.capture(req),
                Ask::Authorize(req) => targets.authorize(req),
                Ask::Apply(req) => targets.apply(req),
                Ask::Query(req) => targets.query(req),
            };
            step = self.resume(step.op, &reply)?;
        }
    }

    /// Tells the gate which targets `targets` reaches, when that changed.
    pub fn route(&mut self, targets: &dyn Targets) -> Result<(), Error> {
        let routes = targets.routes();
        if self.routes.as_ref() != Some(&routes) {
            let api = self.api().clone();
            api.call_set_routes(&mut self.store, &routes)
                .map_err(trap)?;
            self.routes = Some(routes);
        }
        Ok(())
    }

    /// Gates a proposal (JSON, schema in ARCHITECTURE.md) through to its outcome.
    pub fn submit(&mut self, proposal: &str, targets: &mut dyn Targets) -> Result<Outcome, Error> {
        self.route(targets)?;
        let first = self.submit_step(proposal)?;
        self.drive(first, targets)
    }

    /// Only the first step of a submit, for a caller driving steps itself.
    pub fn submit_step(&mut self, proposal: &str) -> Result<Step, Error> {
        let api = self.api().clone();
        gate(api.call_submit(&mut self.store, &proposal.to_owned()))
    }

    pub fn resume(&mut self, op: u64, reply: &Reply) -> Result<Step, Error> {
        let api = self.api().clone();
        gate(api.call_resume(&mut self.store, op, reply))
    }

    /// Recovers one effect by the gate's recovery table, waiting out another worker's
    /// live claim as the gate asks (`recover-waiting`, by this host's [`ClaimWait`]); once
    /// that runs out the effect is reported open (`claim-live`).
    pub fn recover(&mut self, effect: &str, targets: &mut dyn Targets) -> Result<Outcome, Error> {
        self.route(targets)?;
        let first = self.recover_waiting_step(effect, Some(self.claim_wait))?;
        self.drive(first, targets)
    }

    /// Recovers every open effect. One effect's gate error does not stop the others; a
    /// trap or an injected crash stops everything (the instance is gone).
    pub fn recover_all(&mut self, targets: &mut dyn Targets) -> Result<Vec<Recovered>, Error> {
        let mut results = Vec::new();
        for effect in self.open_effects()? {
            let result = self.recover(&effect, targets);
            if let Err(e @ (Error::Trap(_) | Error::Crashed(_))) = result {
                return Err(e);
            }
            results.push((effect, result));
        }
        Ok(results)
    }

    pub fn open_effects(&mut self) -> Result<Vec<String>, Error> {
        let api = self.api().clone();
        gate(api.call_open_effects(&mut self.store))
    }

    pub fn effect_id_of(&mut self, proposal: &str) -> Result<String, Error> {
        let api = self.api().clone();
        gate(api.call_effect_id_of(&mut self.store, &proposal.to_owned()))
    }

    pub fn cancel(&mut self, op: u64) -> Result<(), Error> {
        let api = self.api().clone();
        api.call_cancel(&mut self.store, op).map_err(trap)
    }

    pub fn grant_lease(&mut self, lease: &str, expires_at_ms: u64) -> Result<(), Error> {
        let api = self.api().clone();
        gate(api.call_grant_lease(&mut self.store, lease, expires_at_ms))
    }

    pub fn revoke_lease(&mut self, lease: &str) -> Result<(), Error> {
        let api = self.api().clone();
        gate(api.call_revoke_lease(&mut self.store, lease))
    }

    pub fn approve(&mut self, approval: &str) -> Result<(), Error> {
        let api = self.api().clone();
        gate(api.call_approve(&mut self.store, &approval.to_owned()))
    }

    pub fn revoke_approval(&mut self, approval: &str) -> Result<(), Error> {
        let api = self.api().clone();
        gate(api.call_revoke_approval(&mut self.store, approval))
    }

    /// Records the approval rules and routes in force from now on.
    pub fn set_approval_rules(&mut self, rules: &str) -> Result<(), Error> {
        let api = self.api().clone();
        gate(api.call_set_approval_rules(&mut self.store, &rules.to_owned()))
    }

    /// The approval rules in force (JSON; `{}` when none).
    pub fn approval_rules(&mut self) -> Result<String, Error> {
        let api = self.api().clone();
        gate(api.call_approval_rules(&mut self.store))
    }

    /// Opens the export position for `to` and `out` (wit/export.wit `open`). The outer
    /// error is a trap; the inner one the component's `export-error`.
    pub fn export_open(
        &mut self,
        to: &str,
        out: Option<&str>,
        name: Option<&str>,
        content: bool,
        file_length: Option<u64>,
    ) -> Result<Result<Opened, ExportError>, Error> {
        let api = self.gate.exporter.clone();
        api.call_open(&mut self.store, to, out, name, content, file_length)
            .map_err(trap)
    }

    /// The next batch of the open export (none: caught up).
    pub fn export_next(&mut self, max: u32) -> Result<Result<Option<Batch>, ExportError>, Error> {
        let api = self.gate.exporter.clone();
        api.call_next(&mut self.store, max).map_err(trap)
    }

    /// The receiver took batch `id` (a file sink: the file's length now).
    pub fn export_sent(
        &mut self,
        id: u64,
        file_length: Option<u64>,
    ) -> Result<Result<(), ExportError>, Error> {
        let api = self.gate.exporter.clone();
        api.call_sent(&mut self.store, id, file_length)
            .map_err(trap)
    }

    /// The OTLP resource and scope of every exported span and metric (JSON).
    pub fn otlp_resource(&mut self) -> Result<String, Error> {
        let api = self.gate.exporter.clone();
        api.call_otlp_resource(&mut self.store).map_err(trap)
    }

    /// The inbox (JSON): every item a person may act on now.
    pub fn inbox(&mut self) -> Result<String, Error> {
        let api = self.api().clone();
        gate(api.call_inbox(&mut self.store))
    }

    /// The scoreboard (JSON): items by route, time to decision, deadlines missed, the share
    /// approved by rule.
    pub fn scoreboard(&mut self) -> Result<String, Error> {
        let api = self.api().clone();
        gate(api.call_scoreboard(&mut self.store))
    }

    /// A person's decision on an inbox item; answers the item after (JSON).
    pub fn decide(&mut self, decision: &str) -> Result<String, Error> {
        let api = self.api().clone();
        gate(api.call_decide(&mut self.store, &decision.to_owned()))
    }

    /// A service's signed webhook, checked and recorded (JSON: what it recorded).
    pub fn webhook(
        &mut self,
        scheme: WebhookScheme,
        headers: &[(String, String)],
        body: &[u8],
        secret: &str,
        tolerance_s: Option<u64>,
    ) -> Result<String, Error> {
        let api = self.api().clone();
        gate(api.call_webhook(&mut self.store, scheme, headers, body, secret, tolerance_s))
    }

    pub fn confirm(&mut self, effect: &str, evidence: &str) -> Result<Outcome, Error> {
        let api = self.api().clone();
        gate(api.call_confirm(&mut self.store, &effect.to_owned(), &evidence.to_owned()))
    }

    /// The receipt JSON, signed with HMAC-SHA256 when `key` is given.
    pub fn receipt(&mut self, effect: &str, key: Option<&[u8]>) -> Result<String, Error> {
        let api = self.api().clone();
        gate(api.call_receipt(&mut self.store, &effect.to_owned(), key))
    }

    pub fn check_receipt(&mut self, receipt: &str, key: &[u8]) -> Result<VerifyReport, Error> {
        let api = self.api().clone();
        gate(api.call_check_receipt(&mut self.store, &receipt.to_owned(), key))
    }

    /// Verifies every stream; each receipt in `anchors` pins its stream's length and head.
    pub fn verify(&mut self, anchors: &[String]) -> Result<VerifyReport, Error> {
        let api = self.api().clone();
        gate(api.call_verify(&mut self.store, anchors))
    }

    /// The component's tool mapping (`interlock:gate/tools`: which tool calls are effects
    /// and how one becomes a premise read, a proposal, a send and a lookup).
    pub fn effects(&mut self) -> Effects<'_> {
        Effects { host: self }
    }

    pub fn tools(&mut self) -> Tools<'_> {
        Tools { host: self }
    }

    /// Only the first step of a recovery, for a caller driving steps itself.
    pub fn recover_step(&mut self, effect: &str) -> Result<Step, Error> {
        let api = self.api().clone();
        gate(api.call_recover(&mut self.store, &effect.to_owned()))
    }

    /// Only the first step of a recovery that waits out a live claim by `wait`
    /// (`recover-waiting`; `None` waits by the gate's defaults).
    pub fn recover_waiting_step(
        &mut self,
        effect: &str,
        wait: Option<ClaimWait>,
    ) -> Result<Step, Error> {
        let api = self.api().clone();
        let wait = wait.map(
            |w| crate::bindings::exports::interlock::gate::gate::ClaimWait {
                poll_ms: w.poll_ms,
                max_polls: w.max_polls,
            },
        );
        gate(api.call_recover_waiting(&mut self.store, &effect.to_owned(), wait))
    }

    /// Asks the gate to crash at `point` (`gate.crash-at`; `None` clears it) without
    /// choosing how this host dies: for a caller driving steps itself, which meets the
    /// `crash` step.
    pub fn set_crash_point(&mut self, point: Option<CrashPoint>) -> Result<(), Error> {
        let api = self.api().clone();
        api.call_crash_at(&mut self.store, point).map_err(trap)
    }

    /// Tells the gate which targets this host reaches (`set-routes`), as given.
    pub fn set_routes(&mut self, routes: &[String]) -> Result<(), Error> {
        let api = self.api().clone();
        api.call_set_routes(&mut self.store, routes).map_err(trap)?;
        self.routes = Some(routes.to_vec());
        Ok(())
    }

    /// Strict authority: a proposal naming no lease or approval is refused instead of
    /// running under its agent's standing lease (`gate.set-strict-authority`).
    pub fn set_strict_authority(&mut self, strict: bool) -> Result<(), Error> {
        let api = self.api().clone();
        api.call_set_strict_authority(&mut self.store, strict)
            .map_err(trap)
    }

    /// The line to print once at start when effects of `agent` may run under its standing
    /// lease.
    pub fn standing_notice(&mut self, agent: &str) -> Result<String, Error> {
        let api = self.api().clone();
        gate(api.call_standing_notice(&mut self.store, agent))
    }

    /// How long a send of `effect` may take (its recorded `target.timeout_ms`, the default
    /// filled in): a host that performs the send waits no longer.
    pub fn send_timeout_ms(&mut self, effect: &str) -> Result<u64, Error> {
        let api = self.api().clone();
        gate(api.call_send_timeout_ms(&mut self.store, &effect.to_owned()))
    }

    /// The gate's `defaults` export (JSON).
    pub fn defaults(&mut self) -> Result<String, Error> {
        let api = self.api().clone();
        api.call_defaults(&mut self.store).map_err(trap)
    }
}

/// The tool-gating machine of one gate instance (see [`GateHost::tools`]): the loop every
/// tool-gating host runs, in the component. A host calls the tool a step names and hands
/// back what came back; every input is JSON text, checked by the component.
pub struct Tools<'a> {
    host: &'a mut GateHost,
}

pub use crate::bindings::exports::interlock::gate::tools::{
    Results, Started, ToolCall, ToolDone, ToolOptions, ToolRequest, ToolStep,
};
pub use crate::bindings::interlock::gate::target::CallAnswer;

impl Tools<'_> {
    fn api(&self) -> ToolsApi {
        self.host.gate.tools.clone()
    }

    /// Configures this instance's tool gating (the configuration and the authority
    /// checked, nothing recorded): the tools it gates, and those that run under the agent's
    /// standing lease.
    pub fn start(&mut self, config: &str, options: &ToolOptions) -> Result<Started, Error> {
        let api = self.api();
        gate(api.call_start(&mut self.host.store, &config.to_owned(), options))
    }

    /// Whether every tool the configuration names is among `available`.
    pub fn check_tools(&mut self, available: &[String]) -> Result<(), Error> {
        let api = self.api();
        gate(api.call_check_tools(&mut self.host.store, available))
    }

    /// One gated call.
    pub fn call(&mut self, tool: &str, arguments: &str) -> Result<ToolStep, Error> {
        let api = self.api();
        gate(api.call_call(&mut self.host.store, tool, &arguments.to_owned()))
    }

    /// Recovers one open effect of a gated tool (waiting out a live claim).
    pub fn recover(&mut self, effect: &str) -> Result<ToolStep, Error> {
        let api = self.api();
        gate(api.call_recover(&mut self.host.store, &effect.to_owned()))
    }

    /// Continues call `id` with what its tool did.
    pub fn resume(&mut self, id: u64, answer: &CallAnswer) -> Result<ToolStep, Error> {
        let api = self.api();
        gate(api.call_resume(&mut self.host.store, id, answer))
    }

    /// Drops call `id`.
    pub fn cancel(&mut self, id: u64) -> Result<(), Error> {
        let api = self.api();
        api.call_cancel(&mut self.host.store, id).map_err(trap)
    }
}

pub use crate::bindings::exports::interlock::gate::tools::ToolReply;

/// The effect-definition machine of one gate instance (see [`GateHost::effects`]): here
/// for the built-in targets (wit/targets.wit), whose steps are service calls the host makes
/// with its clients (`crate::services`). Every input is JSON text, checked by the component.
pub struct Effects<'a> {
    host: &'a mut GateHost,
}

pub use crate::bindings::exports::interlock::gate::effects::{EffectCall, EffectStep};
pub use crate::bindings::interlock::gate::targets::{ServiceAnswer, ServiceCall, ServiceError};

impl Effects<'_> {
    fn api(&self) -> EffectsApi {
        self.host.gate.effects.clone()
    }

    /// The agent of the definitions that name none (the gate's defaults otherwise).
    pub fn configure(&mut self, agent: &str) -> Result<(), Error> {
        let api = self.api();
        gate(api.call_configure(&mut self.host.store, agent, None, None))
    }

    /// Defines an effect; the agent whose standing lease it runs under, if it names no
    /// authority.
    pub fn define(&mut self, definition: &str) -> Result<Option<String>, Error> {
        let api = self.api();
        gate(api.call_define(&mut self.host.store, &definition.to_owned()))
    }

    /// One call of the effect `target` with `values` (a JSON list) and `overrides`, its
    /// proposal submitted; or, with `propose`, only made (nothing recorded).
    pub fn call(
        &mut self,
        target: &str,
        values: &str,
        overrides: Option<&str>,
        propose: bool,
    ) -> Result<EffectStep, Error> {
        let api = self.api();
        let (values, overrides) = (values.to_owned(), overrides.map(str::to_owned));
        let store = &mut self.host.store;
        gate(if propose {
            api.call_propose(store, target, &values, overrides.as_ref())
        } else {
            api.call_call(store, target, &values, overrides.as_ref())
        })
    }

    /// Submits a proposal (made by `propose`, or by hand).
    pub fn submit(&mut self, proposal: &str) -> Result<EffectStep, Error> {
        let api = self.api();
        gate(api.call_submit(&mut self.host.store, &proposal.to_owned()))
    }

    /// Recovers one open effect (waiting out a live claim).
    pub fn recover(&mut self, effect: &str) -> Result<EffectStep, Error> {
        let api = self.api();
        gate(api.call_recover(&mut self.host.store, &effect.to_owned()))
    }

    /// Continues call `id` with what its function did (or that the host slept).
    pub fn resume(&mut self, id: u64, answer: &CallAnswer) -> Result<EffectStep, Error> {
        let api = self.api();
        gate(api.call_resume(&mut self.host.store, id, answer))
    }

    /// Continues service call `id` with what the service answered.
    pub fn answer(&mut self, id: u64, answer: &ServiceAnswer) -> Result<EffectStep, Error> {
        let api = self.api();
        gate(api.call_answer(&mut self.host.store, id, answer))
    }

    /// Drives `step` to its end, `done` (or `proposed`, for `propose`): each service call
    /// made by `service`, each sleep slept, a crash as the host's crash action. A built-in
    /// target's definition given on the command line has no functions, so a function's
    /// call is answered `failed`.
    pub fn drive(
        &mut self,
        mut step: EffectStep,
        service: &mut dyn crate::services::Service,
    ) -> Result<EffectStep, Error> {
        loop {
            step = match step {
                end @ (EffectStep::Done(_) | EffectStep::Proposed(_)) => return Ok(end),
                EffectStep::Crash(point) => {
                    return match self.host.crash {
                        Some(CrashAction::Abort) => std::process::abort(),
                        _ => Err(Error::Crashed(point)),
                    };
                }
                EffectStep::Sleep((id, ms)) => {
                    self.host.clock.sleep(ms);
                    self.resume(id, &CallAnswer::Slept)?
                }
                EffectStep::Call(c) => self.resume(
                    c.id,
                    &CallAnswer::Failed(format!(
                        "this host gives {} no {:?} function",
                        c.target, c.role
                    )),
                )?,
                EffectStep::Request(r) => {
                    let answer = crate::services::answer_of(service, &r);
                    self.answer(r.id, &answer)?
                }
            };
        }
    }
}

/// Splits a call's two failure layers: a trap (outer) and the gate's own error (inner).
fn gate<T>(r: wasmtime::Result<Result<T, GateError>>) -> Result<T, Error> {
    r.map_err(trap)?.map_err(Error::Gate)
}

/// A proof call's result: a trap is a trap, a gate error inside stays a gate error.
pub(crate) fn proved<T>(r: wasmtime::Result<Result<T, ProofError>>) -> Result<T, Error> {
    match r.map_err(trap)? {
        Ok(v) => Ok(v),
        Err(ProofError::Gate(g)) => Err(Error::Gate(g)),
        Err(e) => Err(Error::Proof(e)),
    }
}

/// A gate error for a person.
pub fn describe(e: &GateError) -> String {
    match e {
        GateError::InvalidJson(m) => format!("the input is not JSON: {m}"),
        GateError::InvalidField(f) => format!("invalid input at {}: {}", f.field, f.problem),
        GateError::TooLarge(limit) => format!("the input is larger than {limit} bytes"),
        GateError::UnknownEffect(id) => format!("no effect {id} in the journal"),
        GateError::UnknownOperation(op) => format!("no operation {op} is in progress"),
        GateError::UnexpectedReply(m) => format!("the reply does not answer the step: {m}"),
        GateError::Journal(j) => {
            format!("the journal failed (nothing more was sent): {}", journal(j))
        }
        GateError::CorruptJournal(m) => {
            format!("the journal fails verification, the gate will not act on it: {m}")
        }
        GateError::Contention(m) => format!("other workers kept winning the journal: {m}; retry"),
    }
}

fn journal(e: &JournalError) -> String {
    match e {
        JournalError::Conflict(actual) => format!("append conflict (stream length is {actual})"),
        JournalError::Io(m) => format!("i/o error: {m}"),
        JournalError::Corrupt(m) => format!("corrupt: {m}"),
        JournalError::TornTail(m) => format!("torn tail: {m}"),
        JournalError::Other(m) => m.clone(),
    }
}
