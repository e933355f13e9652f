//! `interlock mcp-proxy`: the gate in front of an MCP server, with no change to the agent or
//! the server. To the agent it is an MCP server (stdio, or Streamable HTTP with `--listen`);
//! to the real server an MCP client (a child process over stdio, or `--upstream URL`). It
//! lists the upstream's tools unchanged and passes every call through, except the tools the
//! configuration gates.
//!
//! A gated call runs the loop of ARCHITECTURE.md, "Tool gating": every mapping (the key,
//! the premise read, the idempotency argument, the lookup, the words said to the model) is
//! the component's `tools` interface; this file only moves MCP messages. One gate instance
//! serves every call: its lock is held for each gate call, never across a call upstream, so
//! many calls are in flight at once on one journal.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{Peer, RequestContext, RoleClient, RoleServer, RunningService};
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};

use crate::bindings::interlock::gate::target::{Ask, Reply, Step};
use crate::bindings::interlock::gate::types::{Outcome, Reason, State};
use crate::gate::{describe, Error as GateCallError, GateHost};
use crate::GateError;

/// Where the proxy's journal goes when neither the configuration nor `--journal` says.
pub const DEFAULT_JOURNAL_DIR: &str = ".interlock/mcp";

/// How long a call waits out another call's live claim on the same effect (a duplicate in
/// flight) before it tells the model to call again.
const CLAIM_WAIT: Duration = Duration::from_secs(60);

/// What `interlock mcp-proxy` was asked to do.
pub struct Options {
    /// The configuration (the original's format), as read from `--config`.
    pub config: String,
    /// `--listen HOST:PORT`: serve Streamable HTTP at `/mcp` instead of stdio.
    pub listen: Option<String>,
    /// `--upstream URL`: the real server over Streamable HTTP, instead of a child process.
    pub upstream: Option<String>,
    /// The real server's command (after `--`).
    pub command: Vec<String>,
    /// Who proposes the effects (`agent` in the journal).
    pub agent: String,
    /// The host's authority for tools whose configuration names none: `{"lease": NAME}`.
    pub lease: Option<String>,
    /// Strict authority: a gated tool with no authority of its own and no `--lease` is
    /// refused at start, instead of running under the agent's standing lease.
    pub strict: bool,
}

/// The journal the configuration names (`journal_dir`), or the default.
pub fn journal_dir(config: &str) -> Result<PathBuf> {
    let v: Value = serde_json::from_str(config).context("the configuration is not JSON")?;
    Ok(PathBuf::from(
        v.get("journal_dir")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_JOURNAL_DIR),
    ))
}

/// The gated tools of a configuration, each with the authority it will be proposed under:
/// its own, else `--lease`, else the agent's standing lease; and the gated tools that run
/// under that standing lease. Under `--strict` a tool with no authority is refused here.
pub fn check(
    gate: &mut GateHost,
    options: &Options,
) -> Result<(BTreeSet<String>, Vec<String>), GateError> {
    gate.set_strict_authority(options.strict)
        .map_err(gate_error)?;
    let gated = gate
        .tools()
        .check_config(&options.config)
        .map_err(gate_error)?;
    let standing = gate
        .tools()
        .check_authority(
            &options.config,
            authority(options).as_deref(),
            options.strict,
        )
        .map_err(gate_error)?;
    Ok((gated.into_iter().collect(), standing))
}

/// The host's authority (`--lease`), as a proposal names it.
fn authority(options: &Options) -> Option<String> {
    options
        .lease
        .as_ref()
        .map(|l| json!({ "lease": l }).to_string())
}

fn gate_error(e: GateCallError) -> GateError {
    match e {
        GateCallError::Gate(g) => g,
        other => GateError::InvalidJson(other.to_string()),
    }
}

/// The proxy: one gate, one upstream, the configuration.
#[derive(Clone)]
struct Proxy {
    shared: Arc<Shared>,
}

struct Shared {
    gate: Mutex<GateHost>,
    upstream: Peer<RoleClient>,
    config: String,
    gated: BTreeSet<String>,
    agent: String,
    authority: Option<String>,
}

/// Why a gated call could not be gated (nothing was recorded, nothing sent).
enum CallFailure {
    /// The call or the configuration is wrong: the component's typed error.
    Gate(GateError),
    /// The premise tool failed or answered an error; the call is not proposed.
    PremiseRead(String),
    /// The gate instance itself failed (a trap, the journal): the proxy cannot go on.
    Host(String),
}

impl From<GateCallError> for CallFailure {
    fn from(e: GateCallError) -> Self {
        match e {
            GateCallError::Gate(g) => CallFailure::Gate(g),
            other => CallFailure::Host(other.to_string()),
        }
    }
}

impl Proxy {
    fn gate<T>(
        &self,
        f: impl FnOnce(&mut GateHost) -> Result<T, GateCallError>,
    ) -> Result<T, GateCallError> {
        let mut gate = self.shared.gate.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut gate)
    }

    /// Calls `tool` upstream: `(is_error, answer JSON)` as the component reads the result,
    /// or the transport's failure.
    async fn call(&self, tool: &str, arguments: &str) -> Result<(bool, String), String> {
        let result = self.call_raw(tool, arguments).await?;
        let text = serde_json::to_string(&result).map_err(|e| e.to_string())?;
        self.gate(|g| g.tools().mcp_answer(&text))
            .map_err(|e| format!("{tool} answered what is not a tool result: {e}"))
    }

    async fn call_raw(&self, tool: &str, arguments: &str) -> Result<CallToolResult, String> {
        let args: Map<String, Value> =
            serde_json::from_str(arguments).map_err(|e| format!("arguments: {e}"))?;
        self.shared
            .upstream
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
            .await
            .map_err(|e| format!("the upstream server did not answer {tool}: {e}"))
    }

    /// A read (premise or lookup): its answer, or why it failed.
    async fn read(&self, tool: &str, arguments: &str) -> Result<String, String> {
        match self.call(tool, arguments).await? {
            (false, answer) => Ok(answer),
            (true, answer) => Err(format!("{tool} answered an error: {answer}")),
        }
    }

    async fn answer(&self, step: &Step) -> Reply {
        let config = &self.shared.config;
        match &step.ask {
            Ask::Done(_) | Ask::Crash(_) => {
                unreachable!("a done step is not asked; no crash point is set")
            }
            Ask::Sleep(ms) => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                Reply::Slept
            }
            Ask::Capture(r) => {
                let read = self.gate(|g| g.tools().premise_call(config, &r.target, &r.effect));
                let Ok(Some((tool, args))) = read else {
                    return Reply::Failed(format!("no premise read for {}: {read:?}", r.target));
                };
                match self.read(&tool, &args).await {
                    Ok(answer) => {
                        match self.gate(|g| g.tools().premises(config, &r.target, &answer)) {
                            Ok(p) => Reply::Captured(p),
                            Err(e) => Reply::Failed(e.to_string()),
                        }
                    }
                    Err(e) => Reply::Failed(e),
                }
            }
            Ask::Authorize(_) => Reply::Failed("the MCP proxy has no host check of its own".into()),
            Ask::Apply(r) => {
                let send = self.gate(|g| {
                    let timeout = g.send_timeout_ms(&r.effect_id)?;
                    let call =
                        g.tools()
                            .send_call(config, &r.target, &r.effect, &r.idempotency_key)?;
                    Ok((timeout, call))
                });
                let (timeout, (tool, args)) = match send {
                    Ok(s) => s,
                    // Nothing was called: the send could not even be made.
                    Err(e) => return Reply::Rejected(e.to_string()),
                };
                let sent =
                    tokio::time::timeout(Duration::from_millis(timeout), self.call(&tool, &args))
                        .await;
                match sent {
                    Ok(Ok((false, answer))) => Reply::Applied(answer),
                    Ok(Ok((true, answer))) => Reply::Rejected(answer),
                    Ok(Err(e)) => Reply::Unknown(e),
                    Err(_) => Reply::Unknown(format!("{tool} did not answer within {timeout} ms")),
                }
            }
            Ask::Query(r) => {
                let look = self.gate(|g| {
                    g.tools()
                        .lookup_call(config, &r.target, &r.effect_id, &r.effect)
                });
                let Ok(Some((tool, args))) = look else {
                    return Reply::Failed(format!("no lookup for {}: {look:?}", r.target));
                };
                match self.read(&tool, &args).await {
                    Ok(answer) => {
                        match self.gate(|g| g.tools().found(config, &r.target, &answer)) {
                            Ok(true) => Reply::Found(answer),
                            Ok(false) => Reply::NotFound,
                            Err(e) => Reply::Failed(e.to_string()),
                        }
                    }
                    Err(e) => Reply::Failed(e),
                }
            }
        }
    }

    /// Runs the gate's steps from `step` to the outcome.
    async fn drive(&self, mut step: Step) -> Result<Outcome, GateCallError> {
        loop {
            if let Ask::Done(outcome) = &step.ask {
                return Ok(outcome.clone());
            }
            let reply = self.answer(&step).await;
            step = self.gate(|g| g.resume(step.op, &reply))?;
        }
    }

    /// Runs `first` (a submit or a recovery) and, while another call's claim on the effect
    /// is live, waits as long as the gate says and asks again.
    async fn settle(
        &self,
        first: impl Fn(&mut GateHost) -> Result<Step, GateCallError>,
    ) -> Result<Outcome, GateCallError> {
        let deadline = tokio::time::Instant::now() + CLAIM_WAIT;
        loop {
            let step = self.gate(&first)?;
            let outcome = self.drive(step).await?;
            let live =
                outcome.state == State::Dispatched && outcome.reason == Some(Reason::ClaimLive);
            if !live || tokio::time::Instant::now() >= deadline {
                return Ok(outcome);
            }
            let wait = outcome.retry_after_ms.unwrap_or(50) + 1;
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
    }

    async fn gated(&self, tool: &str, arguments: &str) -> Result<Outcome, CallFailure> {
        let s = &self.shared;
        let read = self.gate(|g| g.tools().premise_call(&s.config, tool, arguments))?;
        let premises = match read {
            Some((ptool, pargs)) => Some(
                self.read(&ptool, &pargs)
                    .await
                    .map_err(CallFailure::PremiseRead)?,
            ),
            None => None,
        };
        let proposal = self.gate(|g| {
            g.tools().proposal(
                &s.config,
                tool,
                arguments,
                premises.as_deref(),
                &s.agent,
                s.authority.as_deref(),
            )
        })?;
        Ok(self.settle(|g| g.submit_step(&proposal)).await?)
    }

    /// The tool result the model gets for a gated call.
    async fn reply(&self, tool: &str, arguments: &str) -> CallToolResult {
        match self.gated(tool, arguments).await {
            Ok(outcome) => match self.gate(|g| g.tools().reply(tool, &outcome)) {
                Ok(r) => {
                    let outcome: Value = serde_json::from_str(&r.outcome).unwrap_or(Value::Null);
                    let mut result = if r.is_error {
                        let mut e = CallToolResult::error(vec![ContentBlock::text(r.message)]);
                        e.structured_content = Some(outcome.clone());
                        e
                    } else {
                        let mut ok = CallToolResult::success(vec![ContentBlock::text(r.message)]);
                        // The tool's own answer, as the tool's output schema expects it.
                        ok.structured_content =
                            outcome.get("result").filter(|v| v.is_object()).cloned();
                        ok
                    };
                    let mut meta = Map::new();
                    meta.insert("interlock/outcome".into(), outcome);
                    result.meta = Some(rmcp::model::MetaObject(meta));
                    result
                }
                Err(e) => failure(format!("the gate could not word its answer: {e}"), None),
            },
            Err(CallFailure::Gate(e)) => {
                let detail = match &e {
                    GateError::InvalidField(f) => {
                        json!({"kind": "invalid_field", "field": f.field, "problem": f.problem})
                    }
                    other => json!({"kind": "gate_error", "message": describe(other)}),
                };
                failure(
                    format!(
                        "{tool} was NOT done and nothing was recorded: {}. Fix the call and try again.",
                        describe(&e)
                    ),
                    Some(json!({ "error": detail })),
                )
            }
            Err(CallFailure::PremiseRead(m)) => failure(
                format!(
                    "{tool} was NOT done and nothing was recorded: the facts it rests on could not be read ({m}). Try again later."
                ),
                Some(json!({"error": {"kind": "premise_read_failed", "message": m}})),
            ),
            Err(CallFailure::Host(m)) => failure(
                format!("{tool}: the gate failed ({m}); nothing more was sent. A person must look at the proxy's journal."),
                Some(json!({"error": {"kind": "host", "message": m}})),
            ),
        }
    }

    /// Recovers every open effect before the first call is served.
    async fn recover_all(&self) -> Result<()> {
        let open = self
            .gate(|g| g.open_effects())
            .map_err(|e| anyhow!("{e}"))?;
        for effect in open {
            let outcome = self
                .settle(|g| g.recover_step(&effect))
                .await
                .map_err(|e| anyhow!("recovering {effect}: {e}"))?;
            eprintln!(
                "interlock mcp-proxy: recovered {effect}: {:?}{}",
                outcome.state,
                outcome
                    .reason
                    .map(|r| format!(" ({r:?})"))
                    .unwrap_or_default()
            );
        }
        Ok(())
    }
}

fn failure(message: String, structured: Option<Value>) -> CallToolResult {
    let mut r = CallToolResult::error(vec![ContentBlock::text(message)]);
    r.structured_content = structured;
    r
}

impl ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("interlock-mcp-proxy", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.shared
            .upstream
            .list_tools(request)
            .await
            .map_err(|e| ErrorData::internal_error(format!("the upstream server: {e}"), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.shared.gated.contains(request.name.as_ref()) {
            // Not an effect the configuration names: untouched, both ways.
            return self
                .shared
                .upstream
                .call_tool_once(request)
                .await
                .or_else(|e| {
                    Ok(failure(format!("the upstream server did not answer: {e}"), None).into())
                });
        }
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default()).to_string();
        Ok(self.reply(&request.name, &arguments).await.into())
    }
}

/// The upstream: a child process over stdio, or a Streamable HTTP URL.
async fn connect(options: &Options) -> Result<RunningService<RoleClient, ()>> {
    if let Some(url) = &options.upstream {
        let transport = StreamableHttpClientTransport::from_uri(url.clone());
        return ()
            .serve(transport)
            .await
            .with_context(|| format!("cannot reach the upstream MCP server at {url}"));
    }
    let (program, args) = options.command.split_first().ok_or_else(|| {
        anyhow!("give the upstream server's command after `--`, or --upstream URL")
    })?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args);
    let transport = TokioChildProcess::new(cmd)
        .with_context(|| format!("cannot start the upstream server `{program}`"))?;
    ().serve(transport)
        .await
        .with_context(|| format!("the upstream server `{program}` did not start as an MCP server"))
}

/// Runs the proxy until the agent disconnects (stdio) or the process is stopped (HTTP).
pub fn run(gate: GateHost, options: Options) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(serve(gate, options))
}

async fn serve(mut gate: GateHost, options: Options) -> Result<()> {
    let (gated, standing) = check(&mut gate, &options).map_err(|e| anyhow!("{}", describe(&e)))?;
    if !standing.is_empty() {
        // Visible, never silent; on stderr, since stdout may be the MCP channel.
        let notice = gate
            .standing_notice(&options.agent)
            .map_err(|e| anyhow!("{e}"))?;
        eprintln!("{notice}");
    }
    let routes: Vec<String> = gated.iter().cloned().collect();
    gate.set_routes(&routes).map_err(|e| anyhow!("{e}"))?;
    let upstream = connect(&options).await?;
    let listed = upstream
        .peer()
        .list_all_tools()
        .await
        .context("the upstream server did not list its tools")?;
    let names: Vec<String> = listed.iter().map(|t| t.name.to_string()).collect();
    gate.tools()
        .check_tools(&options.config, &names)
        .map_err(|e| anyhow!("the upstream server's tools: {e}"))?;
    let proxy = Proxy {
        shared: Arc::new(Shared {
            gate: Mutex::new(gate),
            upstream: upstream.peer().clone(),
            config: options.config.clone(),
            gated,
            agent: options.agent.clone(),
            authority: authority(&options),
        }),
    };
    proxy.recover_all().await?;
    match &options.listen {
        None => {
            eprintln!("interlock mcp-proxy: serving MCP on stdio");
            let running = proxy
                .serve(rmcp::transport::stdio())
                .await
                .context("the agent did not start an MCP session on stdio")?;
            running.waiting().await?;
        }
        Some(addr) => {
            let factory = proxy.clone();
            let service = StreamableHttpService::new(
                move || Ok(factory.clone()),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            );
            let router = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            eprintln!(
                "interlock mcp-proxy: serving MCP at http://{}/mcp",
                listener.local_addr()?
            );
            axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await?;
        }
    }
    upstream.cancel().await.ok();
    Ok(())
}

/// The configuration file's text; a missing or unreadable file says which.
pub fn read_config(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the configuration {}", path.display()))
}
