//! `interlock`: the command-line host of the Interlock gate.
//!
//! Every decision is the gate component's; this binary opens journals and services, runs
//! the gate, and prints what it decided.

mod output;

use interlock_cli::{mcp_proxy, runtime, serve};

use std::fmt::Display;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use interlock_cli::bindings::interlock::gate::types::State;
use interlock_cli::case::{self, HOUR_MS, LEASE, ORDER, PAID_CENTS, REFUND_CENTS};
use interlock_cli::gate::{ClaimWait, CrashAction};
use interlock_cli::{Clock, CrashPoint, GateHost, PaymentsTarget, Runtime, Storage};
use interlock_file_journal::StdFiles;
use interlock_payments_sim::{Payments, Tier};
use serde_json::{json, Value};

use output::{
    file_kind, is_journal_url, journal_kind, outcome_json, reason_text, refuse_url, report_json,
    state_name, words, Failure,
};

const AFTER_HELP: &str = "\
Interlock journals an agent's side effect (say, a $20 refund) before it is sent, re-checks
its authority and premises right before the send and after any crash, and recovers by what
the target service can do: retry under the idempotency key (tier 1), look the effect up
(tier 2), or say AMBIGUOUS and hand it to a person (tier 3).

Start here:
  interlock demo 2          a refund, a crash after the send, a restart: paid once
  interlock demo naive      the same without the gate: paid twice

Then look at what the demo left behind (its folder is printed at the end):
  interlock verify .interlock-demo/2
  interlock receipt .interlock-demo/2 EFFECT_ID

An operator acts on a journal with:
  interlock lease grant DIR NAME --for 48h    authority for proposals naming the lease
  interlock lease revoke DIR NAME
  interlock approve DIR FILE                  an approval (JSON; FILE `-` reads stdin)
  interlock revoke-approval DIR ID

Every command acts on an existing journal folder and refuses a missing one, except
`lease grant`, which creates it (granting the first lease is how a journal is set up), and
`demo`. Where a folder goes, a shared journal's URL works too: sqlite:///path/journal.db
(many processes on one machine) or postgres://user@host/db (many machines); `recover` then
needs --payments FILE. A URL of anything else (file://) is refused. Bad input records
nothing.

--json prints one JSON document on stdout: for `recover` the list of outcomes
({effect_id, state, reason, executed, replayed, retry_after_ms, result, changed,
return_to}, spelled as the journal spells them: COMMITTED, conflicting_payload), for
`verify` the report ({ok, streams, entries, problems}), for `receipt` the receipt, for
the others {\"ok\": true, ...}. A failure is then also on stdout, as
{\"error\": {\"kind\", \"message\", \"field\"}} (`field`: the JSON pointer of an
invalid_field, with `problem`), and nothing is written to stderr. Without --json a failure
is one line on stderr.

Exit codes:
  0  ok
  1  the journal fails verification (a broken hash chain, an unparsable or torn line), or
     `recover` left an effect AMBIGUOUS or still open, or failed on one: a person must look
  2  usage or input error: bad arguments, invalid JSON or fields, a missing file or
     folder, a URL that names no journal, a journal that is locked or cannot be opened

The gate component is found with --wasm, $INTERLOCK_WASM, the build output of
`bash scripts/build-wasm.sh`, or next to this program.";

const GRANT_HELP: &str = "\
DIR is created when it does not exist (its parent must): granting the first lease is how a
journal is set up. A grant the gate refuses (an empty name, say) creates nothing.
The latest grant or revoke of a lease is what counts: granting again moves its expiry to the
new time, and grants a revoked lease anew.

Exit codes: 0 recorded; 2 usage or input error, nothing recorded (`interlock --help`).";

const APPROVE_HELP: &str = "\
The approval (schema: ARCHITECTURE.md, \"Approval\"):
  {\"approval\": \"apr-7\", \"approver\": \"manager@shop\",
   \"request\": {\"key\": \"refund:order_881\", \"effect\": {\"order\": \"order_881\", \"amount_cents\": 2000}},
   \"premises_seen\": {\"eligible\": true}, \"expires_at_ms\": 1800000000000}
It authorizes exactly the request whose key (or effect, without a key) it names; a proposal
names it as {\"authority\": {\"approval\": \"apr-7\"}}. Recording the same approval twice is
harmless; another request under an existing id is refused (invalid_field at /approval).

Exit codes: 0 recorded; 2 usage or input error, nothing recorded (`interlock --help`).";

const MCP_HELP: &str = "\
  interlock mcp-proxy --config interlock.mcp.json -- python3 payments_server.py
The configuration (the original's format; ARCHITECTURE.md, \"Tool gating\"):
  {\"journal_dir\": \".interlock/mcp\",
   \"tools\": {\"create_refund\": {
     \"key\": [\"order_id\"],
     \"premises\": {\"tool\": \"get_order\", \"arguments\": {\"order_id\": \"order_id\", \"excluding\": \"$effect_id\"}, \"fields\": [\"refunded_total\"]},
     \"lookup\": {\"tool\": \"find_refund\", \"arguments\": {\"reference\": \"$effect_id\"}, \"found\": \"found\"},
     \"idempotency_argument\": \"reference\",
     \"authority\": {\"lease\": \"refund-agent\"}}}}
Before it serves a call the proxy recovers every effect a crash left open. A call that is
not done (REFUSED, AMBIGUOUS, a bad call) answers isError with what changed and who to ask;
the outcome is in the result's structuredContent (and in _meta \"interlock/outcome\").

Exit codes: 0 the agent disconnected; 2 a bad configuration (at its JSON pointer) or an
upstream that does not start.";

const SERVE_HELP: &str = "\
  INTERLOCK_TOKEN=secret interlock serve .interlock/http --targets targets.json
The API is docs/http-api.yaml, the Worker's (hosts/edge): every request carries
`Authorization: Bearer <INTERLOCK_TOKEN>`; journals are /v1/journals/{name}/..., each a
subfolder of the folder given (or one shared journal's URL, served as --name). The
component (dist/interlock_http.wasm, world http-gate) decides everything; it reads its
settings from the environment this passes it: INTERLOCK_TOKEN (required), INTERLOCK_TARGETS
(or --targets FILE: the HTTP targets it performs itself), INTERLOCK_RECEIPT_KEY and
INTERLOCK_STRICT_AUTHORITY (1: a proposal naming no lease or approval is refused; by default
it runs under its agent's standing lease).

Prints `listening on http://HOST:PORT` once it accepts requests. Exit codes: 2 a missing
token, bad targets or a component that does not load.";

const REVOKE_HELP: &str = "\
Exit codes: 0 recorded; 2 usage or input error, nothing recorded (`interlock --help`).";

#[derive(Parser)]
#[command(name = "interlock", version, about = "A safety gate for an AI agent's side effects", after_help = AFTER_HELP)]
struct Cli {
    /// Use a fake wall clock fixed at this Unix time in milliseconds, for reproducible runs
    /// (waits advance it instead of sleeping).
    #[arg(long, global = true, value_name = "MS")]
    clock_ms: Option<u64>,
    /// The gate component (.wasm).
    #[arg(long, global = true, value_name = "PATH")]
    wasm: Option<PathBuf>,
    /// Print one JSON document on stdout, failures included (`interlock --help` says which).
    #[arg(long, global = true)]
    json: bool,
    /// How long to wait for the lock of a file journal another writer holds (default 5000;
    /// 0: fail at once).
    #[arg(long, global = true, value_name = "MS")]
    lock_wait_ms: Option<u64>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the story of the fault catalogue: a $20 refund, a crash after the send, a restart.
    Demo {
        /// `naive` (no gate, plain retry) or the payments API's tier: 1 (dedupes),
        /// 2 (lookup), 3 (neither).
        mode: Mode,
        /// Where the journal and the payments state go [default: ./.interlock-demo/MODE].
        /// Wiped at start, so it must be empty or an earlier demo's folder.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Keep the journal in this new shared journal instead (sqlite:///path.db,
        /// postgres://...): the worker that crashes and the one that recovers are two
        /// processes on one database, as on two machines. The payments state stays in DIR.
        #[arg(long, value_name = "URL")]
        journal: Option<PathBuf>,
    },
    /// Recover every open effect in a journal against the payments service (exit 1 when
    /// one is left AMBIGUOUS or open).
    Recover {
        /// The journal: a folder, or a shared journal's URL (sqlite:///path/journal.db,
        /// postgres://user@host/db).
        dir: PathBuf,
        /// The payments service's state file [default: DIR/payments.json; required for a URL].
        #[arg(long, value_name = "FILE")]
        payments: Option<PathBuf>,
        /// Leave effects whose claim another worker still holds to that worker (reported
        /// open, `claim_live`) instead of waiting the claims out: for one of many recovering
        /// workers on a shared journal.
        #[arg(long)]
        no_wait: bool,
    },
    /// Verify every stream's hash chain (exit 1 on any problem, a torn last line included;
    /// 2 when it cannot be checked: no folder, locked, an unreadable receipt).
    Verify {
        /// The journal: a folder, or a shared journal's URL (sqlite:///path/journal.db,
        /// postgres://user@host/db).
        dir: PathBuf,
        /// Receipts (JSON files) that pin their streams, so truncation is caught too.
        #[arg(long = "receipt", value_name = "FILE")]
        receipts: Vec<PathBuf>,
    },
    /// Print an effect's receipt as JSON.
    Receipt {
        /// The journal: a folder, or a shared journal's URL (sqlite:///path/journal.db,
        /// postgres://user@host/db).
        dir: PathBuf,
        /// The effect id (32 hex digits).
        effect: String,
        /// Sign the receipt with HMAC-SHA256 under the bytes of this file.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
    /// Cut a torn last line off a journal (it is saved to a side file first).
    Repair {
        /// The journal: a folder, or a shared journal's URL (sqlite:///path/journal.db,
        /// postgres://user@host/db).
        dir: PathBuf,
    },
    /// Grant or revoke a lease: the authority a proposal names as `authority.lease`.
    Lease {
        #[command(subcommand)]
        action: LeaseCmd,
    },
    /// Record an approval: authority for exactly one request. Durable on return.
    #[command(after_help = APPROVE_HELP)]
    Approve {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// The approval JSON, or `-` to read it from stdin.
        file: PathBuf,
    },
    /// Revoke an approval: every later dispatch or recovery under it is refused. Durable.
    #[command(after_help = REVOKE_HELP)]
    RevokeApproval {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// The approval's id (its `approval` field).
        id: String,
    },
    /// Put the gate in front of an MCP server: the agent talks to this proxy instead, with no
    /// code change on either side. Only the tools the configuration names are gated.
    #[command(after_help = MCP_HELP)]
    McpProxy {
        /// The configuration (JSON): which tools are effects, their key, premise tool, lookup
        /// tool and idempotency argument (ARCHITECTURE.md, "Tool gating").
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Serve MCP over Streamable HTTP at http://HOST:PORT/mcp instead of stdio.
        #[arg(long, value_name = "HOST:PORT")]
        listen: Option<String>,
        /// The real server over Streamable HTTP, instead of a command to start.
        #[arg(long, value_name = "URL", conflicts_with = "command")]
        upstream: Option<String>,
        /// The agent the journal names as proposing each effect.
        #[arg(long, default_value = "mcp-proxy")]
        agent: String,
        /// The lease gated calls are made under when their tool's configuration names no
        /// authority (grant it first: `interlock lease grant JOURNAL NAME --for 48h`).
        /// Without it (and without --strict) such calls run under the agent's standing
        /// lease, granted and recorded at first use; the proxy says so on stderr at start.
        #[arg(long, value_name = "NAME")]
        lease: Option<String>,
        /// Strict authority: refuse to start when a gated tool names no authority and no
        /// --lease is given, instead of running it under the agent's standing lease.
        #[arg(long)]
        strict: bool,
        /// The journal (a folder or a shared journal's URL) [default: the configuration's
        /// `journal_dir`, else .interlock/mcp].
        #[arg(long, value_name = "DIR|URL")]
        journal: Option<PathBuf>,
        /// The real server's command and its arguments.
        #[arg(last = true, value_name = "SERVER COMMAND")]
        command: Vec<String>,
    },
    /// Serve the gate's HTTP API (docs/http-api.yaml) from the wasi:http component, one
    /// instance per journal, as the Cloudflare Worker serves it from a Durable Object.
    #[command(after_help = SERVE_HELP)]
    Serve {
        /// The journals: a folder (one subfolder per journal name), or a shared journal's URL
        /// (sqlite:///..., postgres://...), served as the one journal --name.
        journals: PathBuf,
        /// Where to listen (port 0: any free port, printed).
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8787")]
        listen: std::net::SocketAddr,
        /// The HTTP targets the server performs itself (JSON; docs/http-api.yaml), instead
        /// of INTERLOCK_TARGETS.
        #[arg(long, value_name = "FILE")]
        targets: Option<PathBuf>,
        /// The journal's name when JOURNALS is a shared journal's URL.
        #[arg(long, default_value = "main")]
        name: String,
        /// The wasi:http component [default: dist/interlock_http.wasm, or $INTERLOCK_HTTP_WASM].
        #[arg(long, value_name = "PATH")]
        component: Option<PathBuf>,
    },
    /// The demo's child processes (run by `demo`).
    #[command(hide = true)]
    DemoChild {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        phase: Phase,
        #[arg(long)]
        journal: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum LeaseCmd {
    /// Grant, or extend, a lease until a time. Durable on return.
    #[command(after_help = GRANT_HELP)]
    Grant {
        /// The journal folder (created when missing, see below).
        dir: PathBuf,
        /// The lease's name, as proposals give it in `authority.lease`.
        name: String,
        #[command(flatten)]
        until: Until,
    },
    /// Revoke a lease: every later dispatch or recovery under it is refused. Durable.
    #[command(after_help = REVOKE_HELP)]
    Revoke {
        /// The journal: a folder (it must exist), or a shared journal's URL.
        dir: PathBuf,
        /// The lease's name.
        name: String,
    },
}

/// When a granted lease expires: one of the two.
#[derive(Args)]
#[group(required = true, multiple = false)]
struct Until {
    /// Until this Unix time in milliseconds.
    #[arg(long, value_name = "MS")]
    until_ms: Option<u64>,
    /// For this long from now (the --clock-ms clock): a whole number and a unit, ms, s, m,
    /// h or d, such as 48h.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    for_ms: Option<u64>,
}

/// `48h` -> 172800000 (ms).
fn parse_duration(s: &str) -> Result<u64, String> {
    let bad = || {
        format!("{s:?} is not a duration: a whole number and a unit (ms, s, m, h, d), such as 48h")
    };
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(unit_ms)
        .ok_or_else(|| format!("{s:?} is too long"))
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Naive,
    #[value(name = "1")]
    Tier1,
    #[value(name = "2")]
    Tier2,
    #[value(name = "3")]
    Tier3,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Naive => "naive",
            Mode::Tier1 => "1",
            Mode::Tier2 => "2",
            Mode::Tier3 => "3",
        }
    }

    fn tier(self) -> Tier {
        match self {
            Mode::Tier1 => Tier::ONE,
            Mode::Tier2 => Tier::TWO,
            // Plain retry sends no key, so the tier does not matter; 3 is the honest case.
            Mode::Tier3 | Mode::Naive => Tier::THREE,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Phase {
    /// Gated: submit the proposal, die after the service committed.
    Send,
    /// No gate: refund, die before the ack.
    NaiveSend,
    /// No gate: the restarted process re-runs the step.
    NaiveRerun,
}

fn main() -> ExitCode {
    // Known before parsing, so a usage error can be reported as JSON too.
    let json = std::env::args_os().skip(1).any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and --version are not errors (use_stderr is false for them).
        Err(e) if json && e.use_stderr() => {
            let text = e.render().to_string();
            let message = text.trim().trim_start_matches("error: ");
            println!("{}", Failure::new(2, "usage", message).to_json());
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    let clock = match cli.clock_ms {
        Some(ms) => Clock::fake(ms),
        None => Clock::System,
    };
    let ctx = Ctx {
        clock,
        clock_ms: cli.clock_ms,
        wasm: cli.wasm,
        json: cli.json,
        lock_wait: Duration::from_millis(
            cli.lock_wait_ms
                .unwrap_or(interlock_file_journal::LOCK_WAIT_MS),
        ),
    };
    let result = journal_arg(&cli.command)
        .map_or(Ok(()), refuse_url)
        .and_then(|()| demo_in_a_folder(&cli.command))
        .and_then(|()| run(&ctx, cli.command));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            if ctx.json {
                println!("{}", f.to_json());
            } else {
                eprintln!("error: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

/// The journal folder a command acts on.
fn journal_arg(cmd: &Cmd) -> Option<&Path> {
    match cmd {
        Cmd::Demo { dir, .. } => dir.as_deref(),
        Cmd::Recover { dir, .. }
        | Cmd::Verify { dir, .. }
        | Cmd::Receipt { dir, .. }
        | Cmd::Repair { dir }
        | Cmd::Approve { dir, .. }
        | Cmd::RevokeApproval { dir, .. }
        | Cmd::DemoChild { dir, .. }
        | Cmd::Lease {
            action: LeaseCmd::Grant { dir, .. } | LeaseCmd::Revoke { dir, .. },
        } => Some(dir),
        Cmd::McpProxy { journal, .. } => journal.as_deref(),
        Cmd::Serve { journals, .. } => Some(journals),
    }
}

/// The demo wipes and fills its folder (and keeps the payments state there): never a
/// shared journal.
fn demo_in_a_folder(cmd: &Cmd) -> Result<(), Failure> {
    match cmd {
        Cmd::Demo { dir: Some(dir), .. } | Cmd::DemoChild { dir, .. } if is_journal_url(dir) => {
            Err(Failure::new(
                2,
                "usage",
                format!(
                    "{} is a shared journal; the demo needs a folder of its own (--dir DIR)",
                    dir.display()
                ),
            ))
        }
        _ => Ok(()),
    }
}

fn run(ctx: &Ctx, cmd: Cmd) -> Result<u8, Failure> {
    match cmd {
        Cmd::Demo { mode, dir, journal } => demo(ctx, mode, dir, journal),
        Cmd::Recover {
            dir,
            payments,
            no_wait,
        } => recover(ctx, &dir, payments, no_wait),
        Cmd::Verify { dir, receipts } => verify(ctx, &dir, &receipts),
        Cmd::Receipt {
            dir,
            effect,
            key_file,
        } => receipt(ctx, &dir, &effect, key_file.as_deref()),
        Cmd::Repair { dir } => repair(ctx, &dir),
        Cmd::Lease {
            action: LeaseCmd::Grant { dir, name, until },
        } => lease_grant(ctx, &dir, &name, &until),
        Cmd::Lease {
            action: LeaseCmd::Revoke { dir, name },
        } => lease_revoke(ctx, &dir, &name),
        Cmd::Approve { dir, file } => approve(ctx, &dir, &file),
        Cmd::RevokeApproval { dir, id } => revoke_approval(ctx, &dir, &id),
        Cmd::DemoChild {
            dir,
            phase,
            journal,
        } => demo_child(ctx, &dir, phase, journal.as_deref()),
        Cmd::Serve {
            journals,
            listen,
            targets,
            name,
            component,
        } => serve(
            &journals,
            listen,
            targets.as_deref(),
            name,
            component.as_deref(),
        ),
        Cmd::McpProxy {
            config,
            listen,
            upstream,
            agent,
            lease,
            strict,
            journal,
            command,
        } => mcp_proxy(
            ctx,
            &config,
            journal,
            mcp_proxy::Options {
                config: String::new(),
                listen,
                upstream,
                command,
                agent,
                lease,
                strict,
            },
        ),
    }
}

fn mcp_proxy(
    ctx: &Ctx,
    config: &Path,
    journal: Option<PathBuf>,
    mut options: mcp_proxy::Options,
) -> Result<u8, Failure> {
    options.config = mcp_proxy::read_config(config)?;
    if options.upstream.is_none() && options.command.is_empty() {
        return Err(Failure::new(
            2,
            "usage",
            "give the upstream server's command after `--`, or --upstream URL",
        ));
    }
    let mut gate = ctx.gate_for_tools()?;
    // A bad configuration is refused before anything is opened, at its JSON pointer.
    let started = mcp_proxy::check(&mut gate, &options).map_err(|e| {
        Failure::from(interlock_cli::Error::Gate(e)).context(format!("{}", config.display()))
    })?;
    let dir = journal.unwrap_or_else(|| PathBuf::from(started.journal_dir));
    if !is_journal_url(&dir) {
        // The proxy's own journal: made on first start, like the original's journal_dir
        // (owner-only, as every journal folder).
        make_journal_dir(&dir)
            .with_context(|| format!("cannot make the journal folder {}", dir.display()))?;
    }
    mcp_proxy::run(ctx.gate(&dir)?, options)?;
    Ok(0)
}

fn serve(
    journals: &Path,
    listen: std::net::SocketAddr,
    targets: Option<&Path>,
    name: String,
    component: Option<&Path>,
) -> Result<u8, Failure> {
    let mut env: Vec<(String, String)> = [
        "INTERLOCK_TOKEN",
        "INTERLOCK_TARGETS",
        "INTERLOCK_RECEIPT_KEY",
        "INTERLOCK_STRICT_AUTHORITY",
    ]
    .into_iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
    .collect();
    if let Some(file) = targets {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the targets {}", file.display()))?;
        env.retain(|(k, _)| k != "INTERLOCK_TARGETS");
        env.push(("INTERLOCK_TARGETS".into(), text));
    }
    // The component reads these; checked here too (the same function) so a mistake stops
    // the start instead of answering 500 to every request.
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let settings = interlock_core::http_api::Settings::from_env(get)
        .map_err(|e| Failure::new(2, "usage", e))?;
    if settings.token.is_none() {
        return Err(Failure::new(
            2,
            "usage",
            "set INTERLOCK_TOKEN: every request must carry it (Authorization: Bearer <token>); \
             the gate is never served open",
        ));
    }
    let journals = if is_journal_url(journals) {
        if !interlock_core::http_api::journal_name_ok(&name) {
            return Err(Failure::new(
                2,
                "usage",
                format!("--name {name:?} is not a journal name (1 to 64 of A-Z a-z 0-9 . _ -)"),
            ));
        }
        serve::Journals::Url {
            url: journals.to_string_lossy().into_owned(),
            name,
        }
    } else {
        std::fs::create_dir_all(journals)
            .with_context(|| format!("cannot make the journals folder {}", journals.display()))?;
        serve::Journals::Folder(journals.to_path_buf())
    };
    let wasm = runtime::locate_http(component).map_err(|e| Failure {
        kind: "component",
        ..Failure::from(e)
    })?;
    let targets: Vec<String> = settings.targets.into_keys().collect();
    serve::run(
        &wasm,
        serve::Options {
            listen,
            journals,
            env,
            on_listening: Box::new(move |addr| {
                println!("listening on http://{addr} (targets it performs: {targets:?})");
                let _ = std::io::Write::flush(&mut std::io::stdout());
            }),
        },
    )
    .map_err(|e| Failure {
        kind: "serve",
        ..Failure::from(e)
    })?;
    Ok(0)
}

/// What every command shares.
struct Ctx {
    clock: Clock,
    clock_ms: Option<u64>,
    wasm: Option<PathBuf>,
    json: bool,
    lock_wait: Duration,
}

impl Ctx {
    fn runtime(&self) -> Result<Runtime, Failure> {
        Runtime::locate_and_load(self.wasm.as_deref()).map_err(|e| Failure {
            kind: "component",
            ..Failure::from(e)
        })
    }

    /// A gate over the journal `dir` names: a folder, or a shared journal's URL.
    fn gate(&self, dir: &Path) -> Result<GateHost, Failure> {
        let url = is_journal_url(dir);
        let storage: Storage = if url {
            open_database(dir)?.into()
        } else {
            open_folder(dir, self.lock_wait)?.into()
        };
        GateHost::new(&self.runtime()?, storage, self.clock.clone()).map_err(|e| match e {
            interlock_cli::Error::Journal(j) => not_open(dir, url, &j),
            other => Failure::from(other),
        })
    }

    /// A gate over an empty journal in memory: for the checks that record nothing.
    fn gate_for_tools(&self) -> Result<GateHost, Failure> {
        Ok(GateHost::new(
            &self.runtime()?,
            Storage::memory(),
            self.clock.clone(),
        )?)
    }

    /// `value` under --json, else `text`.
    fn print(&self, value: Value, text: impl Display) {
        if self.json {
            println!("{value}");
        } else {
            println!("{text}");
        }
    }

    /// A line for a person; nothing under --json (its document comes at the end).
    fn say(&self, text: impl Display) {
        if !self.json {
            println!("{text}");
        }
    }
}

/// The journal folder `dir`, locked (waiting up to `lock_wait` for another writer).
fn open_folder(dir: &Path, lock_wait: Duration) -> Result<StdFiles, Failure> {
    // Opening creates a missing folder; a typo must not become an empty journal.
    if !dir.is_dir() {
        return Err(Failure::new(
            2,
            "no_journal",
            format!("{} is not a folder; no journal there", dir.display()),
        ));
    }
    StdFiles::open(dir, lock_wait).map_err(|e| {
        Failure::new(
            2,
            file_kind(&e),
            format!("cannot open the journal in {}: {e}", dir.display()),
        )
    })
}

/// The database a shared journal's URL names, connected.
fn open_database(url: &Path) -> Result<interlock_sql_journal::SqlStore, Failure> {
    interlock_sql_journal::SqlStore::open_url(&url.to_string_lossy()).map_err(|e| {
        let kind = match e {
            interlock_sql_journal::Error::BadUrl { .. } => "usage",
            interlock_sql_journal::Error::Format(_) => "format",
            interlock_sql_journal::Error::Open(_) => "journal",
        };
        Failure::new(2, kind, format!("cannot open the journal: {e}"))
    })
}

/// Why the journal in `dir` did not open (the component's `journal-admin.open`).
fn not_open(dir: &Path, url: bool, e: &interlock_cli::JournalError) -> Failure {
    use interlock_cli::JournalError as J;
    let hint = match e {
        J::TornTail(_) => format!("\nrun `interlock repair {}`, then try again", dir.display()),
        _ => String::new(),
    };
    let text = match e {
        J::Conflict(n) => format!("conflict at {n}"),
        J::Io(m) | J::Corrupt(m) | J::TornTail(m) | J::Other(m) => m.clone(),
    };
    let at = if url { "" } else { "in " };
    Failure::new(
        2,
        journal_kind(e, url),
        format!(
            "cannot open the journal {at}{}: {text}{hint}",
            dir.display()
        ),
    )
}

fn open_payments(path: &Path) -> Result<Payments, Failure> {
    // Formatted here, not chained: the adapter's message already includes its source.
    Payments::open(path).map_err(|e| {
        Failure::new(
            2,
            "payments",
            format!(
                "cannot open the payments service state {}: {e}",
                path.display()
            ),
        )
    })
}

/// A file's text, or stdin's for `-`.
fn read_input(file: &Path) -> Result<String, Failure> {
    let mut text = String::new();
    let (read, name) = if file == Path::new("-") {
        (
            std::io::stdin().read_to_string(&mut text),
            "stdin".to_string(),
        )
    } else {
        (
            std::fs::File::open(file).and_then(|mut f| f.read_to_string(&mut text)),
            file.display().to_string(),
        )
    };
    read.map_err(|e| Failure::from(e).context(format!("cannot read {name}")))?;
    Ok(text)
}

// ---------------------------------------------------------------- recover, verify, ...

fn recover(ctx: &Ctx, dir: &Path, payments: Option<PathBuf>, no_wait: bool) -> Result<u8, Failure> {
    let payments_path = match payments {
        Some(p) => p,
        None if is_journal_url(dir) => return Err(Failure::new(
            2,
            "usage",
            "a shared journal has no folder to keep the payments state in: give --payments FILE",
        )),
        None => dir.join("payments.json"),
    };
    let mut gate = ctx.gate(dir)?;
    if no_wait {
        gate.set_claim_wait(ClaimWait {
            max_polls: 0,
            ..ClaimWait::default()
        });
    }
    let mut target = PaymentsTarget::new(open_payments(&payments_path)?, ctx.clock.clone());
    let results = gate.recover_all(&mut target)?;
    if results.is_empty() {
        ctx.say("nothing to recover: no open effects");
    }
    let mut code = 0;
    let mut list = Vec::new();
    for (effect, result) in results {
        match result {
            Ok(o) => {
                ctx.say(format_args!(
                    "{effect} {} {}",
                    state_name(o.state),
                    reason_text(&o)
                ));
                // A person must look at these (or recovery run again); the exit code says so.
                if !matches!(
                    o.state,
                    State::Committed | State::Confirmed | State::Refused
                ) {
                    code = 1;
                }
                list.push(outcome_json(&o));
            }
            Err(e) => {
                let f = Failure::from(e);
                ctx.say(format_args!("{effect} ERROR {}", f.message));
                list.push(json!({"effect_id": effect, "error": f.to_json()["error"]}));
                code = 1;
            }
        }
    }
    if ctx.json {
        println!("{}", Value::Array(list));
    }
    Ok(code)
}

fn verify(ctx: &Ctx, dir: &Path, receipts: &[PathBuf]) -> Result<u8, Failure> {
    let anchors = receipts
        .iter()
        .map(|p| read_input(p))
        .collect::<Result<Vec<_>, _>>()?;
    // A line that is not an entry, or a torn last line, is a journal that fails
    // verification (exit 1), not bad input.
    let failed_check = |f: Failure| match f.kind {
        "corrupt_journal" | "torn_journal" => f.with_code(1),
        _ => f,
    };
    let mut gate = ctx.gate(dir).map_err(failed_check)?;
    let report = gate
        .verify(&anchors)
        .map_err(|e| failed_check(Failure::from(e)))?;
    let code = if report.problems.is_empty() { 0 } else { 1 };
    if ctx.json {
        println!("{}", report_json(&report));
        return Ok(code);
    }
    if code == 0 {
        println!("ok: {} streams, {} entries", report.streams, report.entries);
        return Ok(0);
    }
    println!(
        "FAILED: {} problem(s) in {} streams, {} entries",
        report.problems.len(),
        report.streams,
        report.entries
    );
    for p in &report.problems {
        let kind = words(format!("{:?}", p.kind), '-');
        println!("  stream {} seq {}: {kind}: {}", p.stream, p.seq, p.detail);
    }
    Ok(1)
}

fn receipt(ctx: &Ctx, dir: &Path, effect: &str, key_file: Option<&Path>) -> Result<u8, Failure> {
    let key = key_file
        .map(|p| std::fs::read(p).with_context(|| format!("cannot read key file {}", p.display())))
        .transpose()?;
    let mut gate = ctx.gate(dir)?;
    // The receipt is JSON already: the same document with or without --json.
    println!("{}", gate.receipt(effect, key.as_deref())?);
    Ok(0)
}

fn repair(ctx: &Ctx, dir: &Path) -> Result<u8, Failure> {
    if is_journal_url(dir) {
        return Err(Failure::new(
            2,
            "usage",
            format!(
                "{} is a shared journal: its appends commit whole or not at all, so it has no \
                 torn tail to repair",
                dir.display()
            ),
        ));
    }
    if !dir.is_dir() {
        return Err(Failure::new(
            2,
            "no_journal",
            format!("{} is not a folder; no journal there", dir.display()),
        ));
    }
    // The component's repair (journal-admin.repair), over the folder locked at once: a
    // journal open elsewhere is not cut under its writer.
    let files = StdFiles::open_existing(dir, Duration::ZERO).map_err(|e| {
        Failure::new(
            2,
            file_kind(&e),
            format!("cannot repair the journal in {}: {e}", dir.display()),
        )
    })?;
    let report = GateHost::unopened(&ctx.runtime()?, files, ctx.clock.clone())?
        .repair_journal()
        .map_err(|e| match e {
            interlock_cli::Error::Journal(j) => {
                let f = not_open(dir, false, &j);
                Failure::new(
                    2,
                    f.kind,
                    f.message
                        .replacen("cannot open the journal", "cannot repair the journal", 1),
                )
            }
            other => Failure::from(other),
        })?;
    let report = interlock_file_journal::RepairReport {
        torn_offset: report.torn_offset,
        torn_bytes: report.torn_bytes,
        saved_to: report.saved_to.map(|name| dir.join(name)),
    };
    let value = json!({
        "ok": true,
        "repaired": report.torn_offset.is_some(),
        "torn_offset": report.torn_offset,
        "torn_bytes": report.torn_bytes,
        "saved_to": report.saved_to.as_ref().map(|p| p.display().to_string()),
    });
    ctx.print(value, &report);
    Ok(0)
}

// ---------------------------------------------------------------- leases and approvals

fn lease_grant(ctx: &Ctx, dir: &Path, name: &str, until: &Until) -> Result<u8, Failure> {
    let expires_at_ms = match (until.until_ms, until.for_ms) {
        (Some(ms), _) => ms,
        (None, Some(d)) => ctx
            .clock
            .now_ms()
            .checked_add(d)
            .ok_or_else(|| Failure::new(2, "usage", "--for reaches past the end of time"))?,
        (None, None) => return Err(Failure::new(2, "usage", "give --until-ms or --for")),
    };
    let create = !is_journal_url(dir) && !dir.exists();
    if create {
        // The gate judges the grant first, on a journal in memory, so a refused grant
        // leaves no folder behind.
        GateHost::new(&ctx.runtime()?, Storage::memory(), ctx.clock.clone())?
            .grant_lease(name, expires_at_ms)
            .map_err(|e| Failure::from(e).context("cannot grant the lease"))?;
        make_journal_dir(dir).map_err(|e| {
            Failure::from(e).context(format!(
                "cannot create the journal folder {}",
                dir.display()
            ))
        })?;
    }
    ctx.gate(dir)?
        .grant_lease(name, expires_at_ms)
        .map_err(|e| Failure::from(e).context("cannot grant the lease"))?;
    let mut text = String::new();
    if create {
        text = format!("new journal in {}\n", dir.display());
    }
    text += &format!("lease {name} granted until {expires_at_ms} (Unix ms)");
    ctx.print(
        json!({"ok": true, "lease": name, "expires_at_ms": expires_at_ms, "created_journal": create}),
        text,
    );
    Ok(0)
}

fn lease_revoke(ctx: &Ctx, dir: &Path, name: &str) -> Result<u8, Failure> {
    ctx.gate(dir)?
        .revoke_lease(name)
        .map_err(|e| Failure::from(e).context("cannot revoke the lease"))?;
    ctx.print(
        json!({"ok": true, "lease": name, "revoked": true}),
        format!("lease {name} revoked"),
    );
    Ok(0)
}

fn approve(ctx: &Ctx, dir: &Path, file: &Path) -> Result<u8, Failure> {
    let mut gate = ctx.gate(dir)?;
    let approval = read_input(file)?;
    gate.approve(&approval)
        .map_err(|e| Failure::from(e).context("cannot record the approval"))?;
    // The gate accepted it, so it is an object with a string id; read back for the report.
    let id = serde_json::from_str::<Value>(&approval)
        .ok()
        .and_then(|v| v["approval"].as_str().map(str::to_string))
        .unwrap_or_default();
    ctx.print(
        json!({"ok": true, "approval": id}),
        format!("approval {id} recorded"),
    );
    Ok(0)
}

fn revoke_approval(ctx: &Ctx, dir: &Path, id: &str) -> Result<u8, Failure> {
    ctx.gate(dir)?
        .revoke_approval(id)
        .map_err(|e| Failure::from(e).context("cannot revoke the approval"))?;
    ctx.print(
        json!({"ok": true, "approval": id, "revoked": true}),
        format!("approval {id} revoked"),
    );
    Ok(0)
}

// ---------------------------------------------------------------- the demo

/// Marks a folder as the demo's own, so `demo --dir` never wipes anything else.
const DEMO_MARKER: &str = ".interlock-demo";

fn demo(
    ctx: &Ctx,
    mode: Mode,
    dir: Option<PathBuf>,
    journal: Option<PathBuf>,
) -> Result<u8, Failure> {
    let own = dir.is_none();
    let dir = dir.unwrap_or_else(|| Path::new(".interlock-demo").join(mode.name()));
    if let Some(url) = &journal {
        if !is_journal_url(url) || matches!(mode, Mode::Naive) {
            return Err(Failure::new(
                2,
                "usage",
                "--journal takes a shared journal's URL (sqlite:///..., postgres://...), and \
                 the naive mode has no journal",
            ));
        }
    }
    if own {
        // The demo's own parent folder, owner-only even when an earlier demo made it open.
        owner_only_dir(Path::new(".interlock-demo"))?;
    }
    fresh_demo_dir(&dir)?;
    // Where the gate's journal is: the folder, or the shared journal.
    let at = journal.clone().unwrap_or_else(|| dir.clone());
    let tier = mode.tier();
    let payments_path = dir.join("payments.json");
    let mut payments = Payments::create(&payments_path, tier)?;
    payments.add_order(ORDER, PAID_CENTS)?;

    match mode {
        Mode::Naive => ctx.say(format_args!(
            "system: no gate (plain retry), payments API at tier {}",
            tier.label()
        )),
        _ => ctx.say(format_args!(
            "system: INTERLOCK, payments API at tier {}",
            tier.label()
        )),
    }
    ctx.say(format_args!(
        "customer paid {}. case #4471 approves one {} partial refund.",
        dollars(PAID_CENTS),
        dollars(REFUND_CENTS)
    ));
    ctx.say(format_args!(
        "agent decides: refund {}",
        dollars(REFUND_CENTS)
    ));

    let effect = if let Mode::Naive = mode {
        None
    } else {
        // The decision: premises read from the system of record now, authority granted.
        let premises = payments.premises(ORDER, None)?;
        let proposal = case::proposal(tier, REFUND_CENTS, premises);
        std::fs::write(dir.join("proposal.json"), &proposal)?;
        let mut gate = ctx.gate(&at)?;
        let effect = gate.effect_id_of(&proposal)?;
        gate.grant_lease(LEASE, ctx.clock.now_ms() + HOUR_MS)?;
        Some(effect)
    };
    drop(payments);

    ctx.say("── refund executes, then the process dies before the ack ──");
    let phase = if effect.is_some() {
        "send"
    } else {
        "naive-send"
    };
    let mut child_args = vec!["demo-child", "--dir", path_str(&dir)?, "--phase", phase];
    if journal.is_some() {
        child_args.extend(["--journal", path_str(&at)?]);
    }
    let child = run_self(ctx, &child_args)?;
    if child.status.success() || child.status.code() == Some(2) {
        return Err(Failure::new(
            1,
            "demo_failed",
            format!(
                "the child process did not crash as planned:\n{}",
                child_text(&child)
            ),
        ));
    }
    ctx.say("💥 crash");
    ctx.say("── process restarts ──");

    let Some(effect) = effect else {
        let rerun = run_self(
            ctx,
            &[
                "demo-child",
                "--dir",
                path_str(&dir)?,
                "--phase",
                "naive-rerun",
            ],
        )?;
        if !rerun.status.success() {
            return Err(Failure::new(
                1,
                "demo_failed",
                format!("the restarted process failed:\n{}", child_text(&rerun)),
            ));
        }
        ctx.say("no journal: the restarted process re-runs the step and refunds again");
        let (refunded, records) = print_totals(ctx, &payments_path)?;
        if refunded > REFUND_CENTS {
            ctx.say("Paid twice.");
        }
        ctx.print(
            json!({
                "ok": true, "mode": mode.name(), "dir": dir.display().to_string(),
                "refunded_cents": refunded, "refund_records": records,
                "paid_twice": refunded > REFUND_CENTS,
            }),
            format_args!(
                "final {} refunded for one approved {}",
                dollars(refunded),
                dollars(REFUND_CENTS)
            ),
        );
        return Ok(0);
    };

    let before = last_state(&receipt_json(ctx, &at, &effect)?);
    // Another process (another machine, on a shared journal) recovers.
    let rec = run_self(
        ctx,
        &[
            "--json",
            "recover",
            path_str(&at)?,
            "--payments",
            path_str(&payments_path)?,
        ],
    )?;
    // `recover` exits 1 for an AMBIGUOUS effect: that is a result here, not a failure.
    if !matches!(rec.status.code(), Some(0 | 1)) {
        return Err(Failure::new(
            1,
            "demo_failed",
            format!("recovery failed:\n{}", child_text(&rec)),
        ));
    }
    let outcomes: Value = serde_json::from_slice(&rec.stdout)
        .with_context(|| format!("`recover --json` printed no JSON:\n{}", child_text(&rec)))?;
    let reason = outcomes
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["effect_id"] == effect.as_str())
        .and_then(|o| o["reason"].as_str())
        .map(str::to_string);
    let receipt = receipt_json(ctx, &at, &effect)?;
    let (state, via) = last_state(&receipt);
    let said = match before.0.as_str() {
        "DISPATCHED" => "DISPATCHED with no COMMITTED".to_string(),
        other => other.to_string(),
    };
    let mut how = Vec::new();
    how.extend(via.as_ref().map(|v| format!("via {v}")));
    how.extend(reason.clone());
    let how = if how.is_empty() {
        String::new()
    } else {
        format!(" ({})", how.join(", "))
    };
    ctx.say(format_args!("journal says {said} → recovery: {state}{how}"));
    let (refunded, records) = print_totals(ctx, &payments_path)?;
    ctx.say("journal:");
    for entry in receipt["entries"].as_array().into_iter().flatten() {
        let s = entry["state"].as_str().unwrap_or("?");
        let via = entry["via"].as_str().unwrap_or("");
        ctx.say(format_args!(
            "  {}",
            format!("{s:<11} {effect} {via}").trim_end()
        ));
    }
    ctx.say(format_args!(
        "receipt: final {}, executed {}, attempts {}; full JSON: interlock receipt {} {effect}",
        receipt["final"].as_str().unwrap_or("?"),
        receipt["executed"].as_str().unwrap_or("?"),
        receipt["attempts"],
        at.display()
    ));
    ctx.print(
        json!({
            "ok": true, "mode": mode.name(), "dir": dir.display().to_string(),
            "effect_id": effect, "journal_before": before.0, "final": state, "via": via,
            "reason": reason, "refunded_cents": refunded, "refund_records": records,
        }),
        format_args!("final {state}"),
    );
    Ok(0)
}

/// The child processes: they really die (abort), as a crashed agent does.
fn demo_child(ctx: &Ctx, dir: &Path, phase: Phase, journal: Option<&Path>) -> Result<u8, Failure> {
    let payments_path = dir.join("payments.json");
    let mut payments = open_payments(&payments_path)?;
    match phase {
        Phase::Send => {
            let proposal = std::fs::read_to_string(dir.join("proposal.json"))?;
            let mut gate = ctx.gate(journal.unwrap_or(dir))?;
            gate.crash_at(CrashPoint::AfterSend, CrashAction::Abort);
            let mut target = PaymentsTarget::new(payments, ctx.clock.clone());
            let outcome = gate.submit(&proposal, &mut target)?;
            Err(Failure::new(
                1,
                "demo_failed",
                format!(
                    "the send ended {} without reaching the service",
                    state_name(outcome.state)
                ),
            ))
        }
        Phase::NaiveSend => {
            payments.refund(ORDER, REFUND_CENTS, None, None, ctx.clock.now_ms())?;
            std::process::abort();
        }
        Phase::NaiveRerun => {
            payments.refund(ORDER, REFUND_CENTS, None, None, ctx.clock.now_ms())?;
            Ok(0)
        }
    }
}

fn fresh_demo_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)?.next().is_none();
        if !empty && !dir.join(DEMO_MARKER).exists() {
            bail!(
                "{} is not empty and not a demo folder; the demo wipes its folder, pick another",
                dir.display()
            );
        }
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot wipe {}", dir.display()))?;
    }
    owner_only_dir(dir)?;
    std::fs::write(
        dir.join(DEMO_MARKER),
        "made by `interlock demo`; wiped by the next one\n",
    )?;
    Ok(())
}

/// Makes a journal folder that is missing, and its missing parents (`.interlock/mcp`),
/// owner-only (0700) as every journal folder is; an existing one is left as it is.
fn make_journal_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// Makes `dir` and its missing parents readable by their owner only (0700), as journal
/// folders are: the demo's folder holds a journal, a proposal and a payments state. An
/// existing `dir` is made owner-only too.
fn owner_only_dir(dir: &Path) -> Result<()> {
    make_journal_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot make {} owner-only", dir.display()))?;
    }
    Ok(())
}

/// Runs this program again with the same global flags, as a new process.
fn run_self(ctx: &Ctx, args: &[&str]) -> Result<std::process::Output> {
    let exe = std::env::current_exe().context("cannot find this program to restart it")?;
    let mut cmd = Command::new(exe);
    if let Some(ms) = ctx.clock_ms {
        cmd.arg("--clock-ms").arg(ms.to_string());
    }
    if let Some(w) = &ctx.wasm {
        cmd.arg("--wasm").arg(w);
    }
    cmd.arg("--lock-wait-ms")
        .arg(ctx.lock_wait.as_millis().to_string());
    cmd.args(args)
        .output()
        .context("cannot start a child process")
}

fn child_text(out: &std::process::Output) -> String {
    format!(
        "status {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn path_str(p: &Path) -> Result<&str> {
    p.to_str()
        .ok_or_else(|| anyhow!("{} is not UTF-8", p.display()))
}

fn receipt_json(ctx: &Ctx, dir: &Path, effect: &str) -> Result<Value, Failure> {
    let text = ctx.gate(dir)?.receipt(effect, None)?;
    Ok(serde_json::from_str(&text).context("the receipt is not JSON")?)
}

/// The state and `via` of a receipt's last journal entry.
fn last_state(receipt: &Value) -> (String, Option<String>) {
    let last = receipt["entries"].as_array().and_then(|e| e.last());
    let state = last
        .and_then(|e| e["state"].as_str())
        .or(receipt["state"].as_str())
        .unwrap_or("?")
        .to_string();
    let via = last.and_then(|e| e["via"].as_str()).map(str::to_string);
    (state, via)
}

fn print_totals(ctx: &Ctx, payments_path: &Path) -> Result<(u64, usize), Failure> {
    let payments = open_payments(payments_path)?;
    let refunded = payments.refunded_cents(ORDER);
    let records = payments.refunds(ORDER).len();
    ctx.say(format_args!(
        "refunded on order #881: {} ({records} refund record(s))",
        dollars(refunded),
    ));
    Ok((refunded, records))
}

fn dollars(cents: u64) -> String {
    if cents.is_multiple_of(100) {
        format!("${}", cents / 100)
    } else {
        format!("${}.{:02}", cents / 100, cents % 100)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("48h"), Ok(48 * 3_600_000));
        assert_eq!(parse_duration("30m"), Ok(1_800_000));
        assert_eq!(parse_duration("10s"), Ok(10_000));
        assert_eq!(parse_duration("250ms"), Ok(250));
        assert_eq!(parse_duration("2d"), Ok(172_800_000));
        for bad in [
            "",
            "48",
            "h",
            "-1h",
            "1.5h",
            "1 h",
            "1w",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
