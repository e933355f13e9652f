//! `interlock effect`: one effect of a built-in target (postgres.insert, git.commit,
//! git.merge, git.push, smtp.send) gated from the command line, or the open effects of one
//! recovered. The component's `effects` machine makes every decision; this command opens the
//! journal and the service client and prints the outcome.

use interlock_cli::gate::EffectStep;
#[cfg(feature = "sql")]
use interlock_cli::services::Postgres;
use interlock_cli::services::{GitRepository, Service, Smtp};
use interlock_cli::{CrashAction, CrashPoint, Outcome, State};
use serde_json::{json, Value};

use crate::cli::{CrashAt, EffectArgs};
use crate::output::{outcome_json, reason_text, state_name, Failure};
use crate::Ctx;

/// Where the service calls go: the one client the command line names.
fn service(args: &EffectArgs) -> Result<Box<dyn Service>, Failure> {
    match (&args.postgres, &args.repo, &args.smtp) {
        #[cfg(feature = "sql")]
        (Some(url), None, None) => Ok(Box::new(Postgres::new(url))),
        #[cfg(not(feature = "sql"))]
        (Some(_), None, None) => Err(Failure::new(2, "usage", interlock_cli::WITHOUT_SQL)),
        (None, Some(path), None) => Ok(Box::new(GitRepository { path: path.clone() })),
        (None, None, Some(addr)) => Ok(Box::new(Smtp::new(addr))),
        _ => Err(Failure::new(
            2,
            "usage",
            "name the service the target's calls go to: one of --postgres URL, --repo DIR, --smtp HOST:PORT",
        )),
    }
}

/// JSON given on the command line: the text itself, or `@FILE`.
fn json_arg(arg: &str, what: &str) -> Result<String, Failure> {
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| {
            Failure::new(2, "usage", format!("cannot read {what} from {path}: {e}"))
        })?,
        None => arg.to_owned(),
    };
    serde_json::from_str::<Value>(&text)
        .map_err(|e| Failure::new(2, "invalid_json", format!("{what} is not JSON: {e}")))?;
    Ok(text)
}

pub(crate) fn effect(ctx: &Ctx, req: EffectArgs) -> Result<u8, Failure> {
    let mut service = service(&req)?;
    let dir = req.dir.as_path();
    let definition = json_arg(&req.definition, "--definition")?;
    let target = serde_json::from_str::<Value>(&definition).unwrap_or_default()["target"]
        .as_str()
        .map(String::from);
    let mut gate = ctx.gate(dir)?;
    if let Some(point) = req.crash_at {
        gate.crash_at(
            match point {
                CrashAt::BeforeSend => CrashPoint::BeforeSend,
                CrashAt::AfterSend => CrashPoint::AfterSend,
                CrashAt::InRecovery => CrashPoint::InRecovery,
            },
            CrashAction::Abort,
        );
    }
    gate.effects().configure(&req.agent)?;
    if let Some(agent) = gate.effects().define(&definition)? {
        eprintln!("{}", gate.standing_notice(&agent)?);
    }
    let one = req.effect.is_some() || req.proposal.is_some();
    let mut effects = gate.effects();
    let outcomes = match (req.effect, req.proposal) {
        (Some(effect), None) => {
            let effect = json_arg(&effect, "the effect")?;
            let mut overrides = serde_json::Map::new();
            if let Some(k) = &req.key {
                // A key is JSON when it parses as JSON, else the text itself.
                overrides.insert(
                    "key".into(),
                    serde_json::from_str(k).unwrap_or_else(|_| json!(k)),
                );
            }
            for (name, v) in [("lease", &req.lease), ("approval", &req.approval)] {
                if let Some(v) = v {
                    overrides.insert(name.into(), json!(v));
                }
            }
            let overrides = (!overrides.is_empty()).then(|| Value::Object(overrides).to_string());
            let (target, values) = (target.unwrap_or_default(), format!("[{effect}]"));
            if req.propose {
                let first = effects.call(&target, &values, overrides.as_deref(), true)?;
                return match effects.drive(first, service.as_mut())? {
                    EffectStep::Proposed(p) => {
                        println!("{p}");
                        Ok(0)
                    }
                    _ => Err(Failure::new(1, "component", "propose answered no proposal")),
                };
            }
            let first = effects.call(&target, &values, overrides.as_deref(), false)?;
            vec![effects.drive(first, service.as_mut())?]
        }
        (None, Some(proposal)) => {
            let first = effects.submit(&json_arg(&proposal, "--proposal")?)?;
            vec![effects.drive(first, service.as_mut())?]
        }
        (Some(_), Some(_)) => {
            return Err(Failure::new(
                2,
                "usage",
                "give an EFFECT or a --proposal, not both",
            ))
        }
        (None, None) => {
            let mut all = Vec::new();
            for id in gate.open_effects()? {
                let first = gate.effects().recover(&id)?;
                all.push(gate.effects().drive(first, service.as_mut())?);
            }
            all
        }
    };
    let outcomes: Vec<Outcome> = outcomes
        .into_iter()
        .map(|s| match s {
            EffectStep::Done(o) => Ok(o),
            _ => Err(Failure::new(
                1,
                "component",
                "the effect ended with no outcome",
            )),
        })
        .collect::<Result<_, _>>()?;
    let mut code = 0;
    for o in &outcomes {
        ctx.say(format_args!(
            "{} {} {}",
            state_name(o.state),
            o.effect_id,
            reason_text(o)
        ));
        if !matches!(o.state, State::Committed | State::Confirmed) {
            code = 1;
        }
    }
    if ctx.json {
        let mut list: Vec<Value> = outcomes.iter().map(outcome_json).collect();
        println!(
            "{}",
            if one {
                list.remove(0)
            } else {
                Value::Array(list)
            }
        );
    }
    Ok(code)
}
