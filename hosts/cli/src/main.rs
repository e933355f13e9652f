//! `interlock`: the command-line host of the Interlock gate.
//!
//! Every decision is the gate component's; this binary opens journals and services, runs
//! the gate, and prints what it decided.

mod cli;
mod demo;
mod effect;
mod export;
mod operator;
mod output;
mod people;
mod proofs;

use std::fmt::Display;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
#[cfg(feature = "mcp-proxy")]
use interlock_cli::mcp_proxy;
#[cfg(feature = "serve")]
use interlock_cli::{runtime, serve};
use interlock_cli::{Clock, GateHost, Runtime, Storage};
use interlock_file_journal::StdFiles;
use interlock_payments_sim::Payments;
use serde_json::Value;

use cli::{Cli, Cmd, LeaseCmd, ProveCmd};
use demo::{demo, demo_child};
use operator::{
    approve, lease_grant, lease_revoke, receipt, recover, repair, revoke_approval, verify,
};
use output::{file_kind, is_journal_url, journal_kind, refuse_url, Failure};

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
        | Cmd::Reject { dir, .. }
        | Cmd::Resolve { dir, .. }
        | Cmd::Inbox { dir }
        | Cmd::Export { dir, .. }
        | Cmd::Scoreboard { dir }
        | Cmd::Rules { dir, .. }
        | Cmd::Confirm { dir, .. }
        | Cmd::RevokeApproval { dir, .. }
        | Cmd::DemoChild { dir, .. }
        | Cmd::Lease {
            action: LeaseCmd::Grant { dir, .. } | LeaseCmd::Revoke { dir, .. },
        } => Some(dir),
        Cmd::Effect(args) => Some(&args.dir),
        Cmd::Checkpoint { dir, .. }
        | Cmd::Bundle { dir, .. }
        | Cmd::Prove {
            what: ProveCmd::Inclusion { dir, .. } | ProveCmd::Consistency { dir, .. },
        } => Some(dir),
        Cmd::McpProxy { journal, .. } | Cmd::CheckReceipt { journal, .. } => journal.as_deref(),
        Cmd::Serve { journals, .. } => Some(journals),
        Cmd::Keygen { .. }
        | Cmd::CheckInclusion { .. }
        | Cmd::CheckConsistency { .. }
        | Cmd::CheckBundle { .. } => None,
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
        Cmd::Verify {
            dir,
            receipts,
            checkpoints,
        } => verify(ctx, &dir, &receipts, &checkpoints),
        Cmd::Receipt {
            dir,
            effect,
            key_file,
            signing,
        } => match proofs::signing_key(&signing)? {
            Some(key) => proofs::signed_receipt(ctx, &dir, &effect, &key),
            None => receipt(ctx, &dir, &effect, key_file.as_deref()),
        },
        Cmd::Keygen {
            name,
            private_key,
            public_key,
        } => proofs::keygen(ctx, &name, &private_key, public_key.as_deref()),
        Cmd::CheckReceipt {
            receipt,
            public,
            key_file,
            journal,
        } => proofs::check_receipt(
            ctx,
            &receipt,
            &public,
            key_file.as_deref(),
            journal.as_deref(),
        ),
        Cmd::Checkpoint { dir, signing } => proofs::checkpoint(ctx, &dir, &signing),
        Cmd::Prove { what } => proofs::prove(ctx, what),
        Cmd::CheckInclusion {
            proof,
            public,
            checkpoint,
        } => proofs::check_inclusion(ctx, &proof, &public, checkpoint.as_deref()),
        Cmd::CheckConsistency {
            proof,
            old_checkpoint,
            public,
        } => proofs::check_consistency(ctx, &proof, &old_checkpoint, &public),
        Cmd::Bundle {
            dir,
            from_ms,
            to_ms,
            signing,
        } => proofs::bundle(ctx, &dir, from_ms, to_ms, &signing),
        Cmd::CheckBundle { bundle, public } => proofs::check_bundle(ctx, &bundle, &public),
        Cmd::Repair { dir } => repair(ctx, &dir),
        Cmd::Lease {
            action: LeaseCmd::Grant { dir, name, until },
        } => lease_grant(ctx, &dir, &name, &until),
        Cmd::Lease {
            action: LeaseCmd::Revoke { dir, name },
        } => lease_revoke(ctx, &dir, &name),
        Cmd::Approve { dir, file, person } => match person.decider {
            Some(_) => people::decide(ctx, &dir, &file.to_string_lossy(), "approve", &person, None),
            None => approve(ctx, &dir, &file),
        },
        Cmd::Reject { dir, item, person } => {
            people::decide(ctx, &dir, &item, "reject", &person, None)
        }
        Cmd::Resolve {
            dir,
            item,
            verdict,
            evidence,
            person,
        } => people::decide(
            ctx,
            &dir,
            &item,
            verdict.as_str(),
            &person,
            evidence.as_deref(),
        ),
        Cmd::Inbox { dir } => people::inbox(ctx, &dir),
        Cmd::Export {
            dir,
            to,
            out,
            name,
            content,
            batch,
        } => export::export(
            ctx,
            &dir,
            export::Args {
                to,
                out,
                name,
                content,
                batch,
            },
        ),
        Cmd::Scoreboard { dir } => people::scoreboard(ctx, &dir),
        Cmd::Rules { dir, file } => people::rules(ctx, &dir, file.as_deref()),
        Cmd::Confirm {
            dir,
            scheme,
            secret_env,
            headers,
            body,
        } => people::confirm(ctx, &dir, scheme, &secret_env, &headers, &body),
        Cmd::RevokeApproval { dir, id } => revoke_approval(ctx, &dir, &id),
        Cmd::Effect(args) => effect::effect(ctx, args),
        Cmd::DemoChild {
            dir,
            phase,
            journal,
        } => demo_child(ctx, &dir, phase, journal.as_deref()),
        #[cfg(feature = "serve")]
        Cmd::Serve {
            journals,
            listen,
            targets,
            name,
            component,
            notify_every,
        } => serve(
            &journals,
            listen,
            targets.as_deref(),
            name,
            component.as_deref(),
            notify_every,
        ),
        #[cfg(not(feature = "serve"))]
        Cmd::Serve { .. } => Err(without("serve", "serve")),
        #[cfg(not(feature = "mcp-proxy"))]
        Cmd::McpProxy { .. } => Err(without("mcp-proxy", "mcp-proxy")),
        #[cfg(feature = "mcp-proxy")]
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

/// A command this build left out (scripts/demo.sh builds the CLI without its features).
#[cfg(not(all(feature = "serve", feature = "mcp-proxy")))]
fn without(command: &str, feature: &str) -> Failure {
    Failure::new(
        2,
        "usage",
        format!(
            "`interlock {command}` is not in this build (feature `{feature}`): \
             cargo build -p interlock-cli --features {feature}"
        ),
    )
}

#[cfg(feature = "mcp-proxy")]
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

#[cfg(feature = "serve")]
fn serve(
    journals: &Path,
    listen: std::net::SocketAddr,
    targets: Option<&Path>,
    name: String,
    component: Option<&Path>,
    notify_every: Option<u64>,
) -> Result<u8, Failure> {
    let mut env: Vec<(String, String)> = [
        "INTERLOCK_TOKEN",
        "INTERLOCK_TARGETS",
        "INTERLOCK_RECEIPT_KEY",
        "INTERLOCK_SIGNING_KEY",
        "INTERLOCK_STRICT_AUTHORITY",
        "INTERLOCK_DECIDERS",
        "INTERLOCK_WEBHOOK_SECRETS",
        "INTERLOCK_NOTIFY_SECRET",
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
    if notify_every.is_some() && settings.notify_secret.is_none() {
        return Err(Failure::new(
            2,
            "usage",
            "--notify-every needs INTERLOCK_NOTIFY_SECRET (whsec_<base64>): notices are signed",
        ));
    }
    if notify_every == Some(0) {
        return Err(Failure::new(
            2,
            "usage",
            "--notify-every takes 1 second or more",
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
            notify_every: notify_every.map(std::time::Duration::from_secs),
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
            open_database(dir)?
        } else {
            open_folder(dir, self.lock_wait)?.into()
        };
        GateHost::new(&self.runtime()?, storage, self.clock.clone()).map_err(|e| match e {
            interlock_cli::Error::Journal(j) => not_open(dir, url, &j),
            other => Failure::from(other),
        })
    }

    /// A gate over an empty journal in memory: for the checks that record nothing (a proxy's
    /// configuration, keys, proofs and bundles).
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
#[cfg(not(feature = "sql"))]
fn open_database(_: &Path) -> Result<Storage, Failure> {
    Err(Failure::new(2, "usage", interlock_cli::WITHOUT_SQL))
}

/// The database a shared journal's URL names, connected.
#[cfg(feature = "sql")]
fn open_database(url: &Path) -> Result<Storage, Failure> {
    let store = interlock_sql_journal::SqlStore::open_url(&url.to_string_lossy()).map_err(|e| {
        let kind = match e {
            interlock_sql_journal::Error::BadUrl { .. } => "usage",
            interlock_sql_journal::Error::Format(_) => "format",
            interlock_sql_journal::Error::Open(_) => "journal",
        };
        Failure::new(2, kind, format!("cannot open the journal: {e}"))
    })?;
    Ok(store.into())
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
