//! `interlock mcp-proxy`: the gate in front of an MCP server, with no change to the agent or
//! the server. To the agent it is an MCP server (stdio, or Streamable HTTP with `--listen`);
//! to the real server an MCP client (a child process over stdio, or `--upstream URL`). It
//! lists the upstream's tools unchanged and passes every call through, except the tools the
//! configuration gates.
//!
//! A gated call runs the component's tool-gating machine (`tools`: ARCHITECTURE.md, "Tool
//! gating"): it names each tool to call upstream and what to do with the answer, down to
//! the words said to the model; this file only moves MCP messages. One gate instance serves
//! every call: its lock is held for each machine call, never across a call upstream, so many
//! calls are in flight at once on one journal.
//!
//! A gated call that waits for a person's approval, when the configuration names a
//! `decider`, is a question for the person at the client: the machine words it (an MCP
//! `elicitation/create`, form mode), and this file asks it of the agent's client when the
//! client declared the `elicitation` capability, and hands back the answer; the machine
//! records it as the decider's decision and goes on from there.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{
    ElicitationMode, Peer, RequestContext, RoleClient, RoleServer, RunningService,
};
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};

use crate::gate::{
    describe, CallAnswer, Error as GateCallError, GateHost, Results, Started, ToolDone,
    ToolOptions, ToolRequest, ToolStep,
};
use crate::GateError;

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

/// The machine's options for this proxy.
fn tool_options(options: &Options) -> ToolOptions {
    ToolOptions {
        agent: options.agent.clone(),
        authority: authority(options),
        strict: options.strict,
        results: Results::Mcp,
        wait: None,
    }
}

/// Starts tool gating on `gate`: the configuration and the authority checked (a tool with
/// none of its own and no `--lease` runs under the agent's standing lease, or under
/// `--strict` is refused here). What it gates, those under the standing lease, and the
/// journal folder the configuration names (or the default).
pub fn check(gate: &mut GateHost, options: &Options) -> Result<Started, GateError> {
    gate.set_strict_authority(options.strict)
        .map_err(gate_error)?;
    gate.tools()
        .start(&options.config, &tool_options(options))
        .map_err(gate_error)
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
    gated: BTreeSet<String>,
}

impl Proxy {
    fn gate<T>(
        &self,
        f: impl FnOnce(&mut GateHost) -> Result<T, GateCallError>,
    ) -> Result<T, GateCallError> {
        let mut gate = self.shared.gate.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut gate)
    }

    /// Calls `tool` upstream with `arguments` (JSON text), within `timeout_ms` when it is a
    /// send: the `CallToolResult` as JSON, or why none came.
    async fn call_upstream(&self, call: &ToolRequest) -> CallAnswer {
        let tool = &call.call.tool;
        let args: Map<String, Value> = match serde_json::from_str(&call.call.arguments) {
            Ok(a) => a,
            Err(e) => return CallAnswer::Failed(format!("arguments: {e}")),
        };
        let request = CallToolRequestParams::new(tool.clone()).with_arguments(args);
        let sent = self.shared.upstream.call_tool(request);
        let result = match call.timeout_ms {
            Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), sent).await {
                Ok(r) => r,
                Err(_) => {
                    return CallAnswer::Failed(format!("{tool} did not answer within {ms} ms"))
                }
            },
            None => sent.await,
        };
        match result.map(|r| serde_json::to_string(&r)) {
            Ok(Ok(json)) => CallAnswer::Returned(json),
            Ok(Err(e)) => CallAnswer::Failed(format!("{tool}: {e}")),
            Err(e) => CallAnswer::Failed(format!("the upstream server did not answer {tool}: {e}")),
        }
    }

    /// Asks the agent's client (`client`: none at a recovery) the machine's question for a
    /// person (`request`: an `elicitation/create` request's params): the client's
    /// `ElicitResult` as JSON, or why no one could be asked.
    async fn ask_person(client: Option<&Peer<RoleServer>>, request: &str) -> CallAnswer {
        let Some(client) = client else {
            return CallAnswer::Failed("no client to ask (a recovery at start)".into());
        };
        if !client
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
        {
            return CallAnswer::Failed("the client declared no form elicitation".into());
        }
        let params: ElicitRequestParams = match serde_json::from_str(request) {
            Ok(p) => p,
            Err(e) => return CallAnswer::Failed(format!("the question: {e}")),
        };
        match client.create_elicitation(params).await {
            Ok(r) => match serde_json::to_string(&r) {
                Ok(json) => CallAnswer::Returned(json),
                Err(e) => CallAnswer::Failed(format!("the answer: {e}")),
            },
            Err(e) => CallAnswer::Failed(format!("the client did not answer: {e}")),
        }
    }

    /// Drives the machine from `first` to the end of the call: each tool it names is called
    /// upstream, each sleep slept, each question asked of the agent's `client`.
    async fn drive(
        &self,
        first: ToolStep,
        client: Option<&Peer<RoleServer>>,
    ) -> Result<ToolDone, GateCallError> {
        let mut step = first;
        loop {
            let (id, answer) = match step {
                ToolStep::Done(d) => return Ok(d),
                ToolStep::Crash(p) => return Err(GateCallError::Crashed(p)),
                ToolStep::Sleep((id, ms)) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    (id, CallAnswer::Slept)
                }
                ToolStep::Call(req) => (req.id, self.call_upstream(&req).await),
                ToolStep::Ask(q) => (q.id, Self::ask_person(client, &q.request).await),
            };
            step = self.gate(|g| g.tools().resume(id, &answer))?;
        }
    }

    /// The tool result the model gets for a gated call.
    async fn reply(
        &self,
        tool: &str,
        arguments: &str,
        client: &Peer<RoleServer>,
    ) -> CallToolResult {
        let done = match self.gate(|g| g.tools().call(tool, arguments)) {
            Ok(first) => self.drive(first, Some(client)).await,
            Err(e) => Err(e),
        };
        let d = match done {
            Ok(d) => d,
            Err(e) => {
                return failure(
                    format!("{tool}: the gate failed ({e}); nothing more was sent. A person must look at the proxy's journal."),
                    Some(json!({"error": {"kind": "host", "message": e.to_string()}})),
                )
            }
        };
        let outcome: Value = serde_json::from_str(&d.reply.outcome).unwrap_or(Value::Null);
        if d.outcome.is_none() {
            // Refused before the gate was asked: nothing recorded.
            return failure(d.reply.message, Some(outcome));
        }
        let mut result = if d.reply.is_error {
            let mut e = CallToolResult::error(vec![ContentBlock::text(d.reply.message)]);
            e.structured_content = Some(outcome.clone());
            e
        } else {
            let mut ok = CallToolResult::success(vec![ContentBlock::text(d.reply.message)]);
            // The tool's own answer, as the tool's output schema expects it.
            ok.structured_content = outcome.get("result").filter(|v| v.is_object()).cloned();
            ok
        };
        let mut meta = Map::new();
        meta.insert("interlock/outcome".into(), outcome);
        result.meta = Some(rmcp::model::MetaObject(meta));
        result
    }

    /// Recovers every open effect before the first call is served.
    async fn recover_all(&self) -> Result<()> {
        let open = self
            .gate(|g| g.open_effects())
            .map_err(|e| anyhow!("{e}"))?;
        for effect in open {
            let first = self
                .gate(|g| g.tools().recover(&effect))
                .map_err(|e| anyhow!("recovering {effect}: {e}"))?;
            let done = self
                .drive(first, None)
                .await
                .map_err(|e| anyhow!("recovering {effect}: {e}"))?;
            let o = done.outcome;
            eprintln!(
                "interlock mcp-proxy: recovered {effect}: {}",
                o.map(|o| format!(
                    "{:?}{}",
                    o.state,
                    o.reason.map(|r| format!(" ({r:?})")).unwrap_or_default()
                ))
                .unwrap_or_else(|| "nothing asked".into())
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
        context: RequestContext<RoleServer>,
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
        Ok(self
            .reply(&request.name, &arguments, &context.peer)
            .await
            .into())
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
    let started = check(&mut gate, &options).map_err(|e| anyhow!("{}", describe(&e)))?;
    if !started.standing.is_empty() {
        // Visible, never silent; on stderr, since stdout may be the MCP channel.
        let notice = gate
            .standing_notice(&options.agent)
            .map_err(|e| anyhow!("{e}"))?;
        eprintln!("{notice}");
    }
    let upstream = connect(&options).await?;
    let listed = upstream
        .peer()
        .list_all_tools()
        .await
        .context("the upstream server did not list its tools")?;
    let names: Vec<String> = listed.iter().map(|t| t.name.to_string()).collect();
    gate.tools()
        .check_tools(&names)
        .map_err(|e| anyhow!("the upstream server's tools: {e}"))?;
    let proxy = Proxy {
        shared: Arc::new(Shared {
            gate: Mutex::new(gate),
            upstream: upstream.peer().clone(),
            gated: started.gated.into_iter().collect(),
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
