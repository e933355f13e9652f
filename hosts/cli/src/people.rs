//! The people's commands: the inbox, decisions, the approval rules, and a service's signed
//! confirmations. Every rule is the gate's; this prints what it answers.
use std::io::Read;
use std::path::Path;

use serde_json::{json, Value};

use interlock_cli::gate::WebhookScheme;

use crate::cli::{Person, Scheme};
use crate::output::Failure;
use crate::{read_input, Ctx};

pub(crate) fn inbox(ctx: &Ctx, dir: &Path) -> Result<u8, Failure> {
    let text = ctx.gate(dir)?.inbox()?;
    let items: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let list = items.as_array().cloned().unwrap_or_default();
    let mut lines = vec![format!(
        "{} item{} for a person",
        list.len(),
        if list.len() == 1 { "" } else { "s" }
    )];
    for it in &list {
        lines.push(line(it));
    }
    ctx.print(items, lines.join("\n"));
    Ok(0)
}

pub(crate) fn scoreboard(ctx: &Ctx, dir: &Path) -> Result<u8, Failure> {
    let text = ctx.gate(dir)?.scoreboard()?;
    let b: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let share = b["share_approved_by_rule"]
        .as_f64()
        .map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0));
    let mut lines = vec![format!(
        "{} approval request{}, {} approved by rule ({share}); effects settled by a person: {}, waiting: {}",
        n(&b, "requests"),
        if n(&b, "requests") == 1 { "" } else { "s" },
        n(&b, "approved_by_rule"),
        n(&b, "effects_settled_by_a_person"),
        n(&b, "effects_waiting_for_a_person"),
    )];
    let minutes = |v: &Value| {
        v.as_u64().map_or("-".to_string(), |ms| {
            format!("{:.1} min", ms as f64 / 60_000.0)
        })
    };
    for (route, r) in b["routes"].as_object().into_iter().flatten() {
        lines.push(format!(
            "route {route}: {} items ({} pending, {} escalated, {} approved, {} rejected, {} expired); time to decision: median {}, max {}; deadlines missed: {}",
            n(r, "items"),
            n(r, "pending"),
            n(r, "escalated"),
            n(r, "approved"),
            n(r, "rejected"),
            n(r, "expired"),
            minutes(&r["median_time_to_decision_ms"]),
            minutes(&r["max_time_to_decision_ms"]),
            n(r, "deadlines_missed"),
        ));
    }
    ctx.print(b, lines.join("\n"));
    Ok(0)
}

/// One inbox item on one line, then what can be done.
fn line(it: &Value) -> String {
    let s = |k: &str| it.get(k).and_then(Value::as_str).unwrap_or("");
    let mut out = format!("{}  {}", s("item"), s("kind"));
    if let Some(st) = it.get("status").and_then(Value::as_str) {
        out.push_str(&format!(" ({st})"));
    }
    if let Some(st) = it.get("state").and_then(Value::as_str) {
        out.push_str(&format!(" {st} {}", s("reason")));
    }
    out.push_str(&format!(
        "  {} on {}: {}",
        s("agent"),
        it.pointer("/target/name")
            .and_then(Value::as_str)
            .unwrap_or(""),
        it.get("effect").map(Value::to_string).unwrap_or_default()
    ));
    if !s("route").is_empty() {
        let who: Vec<&str> = it
            .get("approvers")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        out.push_str(&format!(
            "\n    route {} ({}), {} of {} approvals",
            s("route"),
            who.join(", "),
            it.get("approved_by")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
            it.get("approvals_needed")
                .and_then(Value::as_u64)
                .unwrap_or(1)
        ));
        if let Some(at) = it.get("expires_at_ms").and_then(Value::as_u64) {
            out.push_str(&format!(", expires at {at} ms"));
        }
    }
    if let Some(c) = it.get("changed").and_then(Value::as_array) {
        for ch in c {
            out.push_str(&format!(
                "\n    changed: {} was {} now {}",
                ch["name"].as_str().unwrap_or(""),
                ch["was"],
                ch["now"]
            ));
        }
    }
    let actions: Vec<&str> = it
        .get("actions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    out.push_str(&format!("\n    actions: {}", actions.join(", ")));
    out
}

pub(crate) fn decide(
    ctx: &Ctx,
    dir: &Path,
    item: &str,
    verdict: &str,
    person: &Person,
    evidence: Option<&str>,
) -> Result<u8, Failure> {
    let Some(decider) = &person.decider else {
        return Err(Failure::new(
            2,
            "usage",
            "say who decides: --as NAME (a person with a live lease in their name)",
        ));
    };
    let mut d = json!({"item": item, "decider": decider, "verdict": verdict});
    if let Some(w) = &person.why {
        d["why"] = w.clone().into();
    }
    if let Some(e) = evidence {
        d["evidence"] = serde_json::from_str(e)
            .map_err(|e| Failure::new(2, "invalid_json", format!("--evidence is not JSON: {e}")))?;
    }
    let after = ctx
        .gate(dir)?
        .decide(&d.to_string())
        .map_err(|e| Failure::from(e).context("not recorded"))?;
    let v: Value = serde_json::from_str(&after).unwrap_or(Value::Null);
    let status = v
        .get("status")
        .or_else(|| v.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or("recorded");
    ctx.print(
        json!({"ok": true, "item": v}),
        format!("{verdict} by {decider} recorded; item {item}: {status}"),
    );
    Ok(0)
}

pub(crate) fn rules(ctx: &Ctx, dir: &Path, file: Option<&Path>) -> Result<u8, Failure> {
    let mut gate = ctx.gate(dir)?;
    match file {
        None => {
            let text = gate.approval_rules()?;
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let pretty = serde_json::to_string_pretty(&v).unwrap_or(text);
            ctx.print(v, pretty);
        }
        Some(f) => {
            let text = read_input(f)?;
            gate.set_approval_rules(&text)
                .map_err(|e| Failure::from(e).context("cannot record the rules"))?;
            ctx.print(json!({"ok": true}), "approval rules recorded");
        }
    }
    Ok(0)
}

pub(crate) fn confirm(
    ctx: &Ctx,
    dir: &Path,
    scheme: Scheme,
    secret_env: &str,
    headers: &[String],
    body: &Path,
) -> Result<u8, Failure> {
    let secret = std::env::var(secret_env).map_err(|_| {
        Failure::new(
            2,
            "usage",
            format!("set {secret_env}: the webhook secret is read from the environment"),
        )
    })?;
    let headers = headers
        .iter()
        .map(|h| {
            h.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| {
                    Failure::new(2, "usage", format!("--header {h:?} is not `Name: value`"))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut bytes = Vec::new();
    let read = if body == Path::new("-") {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::read(body).map(|b| bytes = b)
    };
    read.map_err(|e| Failure::from(e).context(format!("cannot read {}", body.display())))?;
    let scheme = match scheme {
        Scheme::Stripe => WebhookScheme::Stripe,
        Scheme::StandardWebhooks => WebhookScheme::StandardWebhooks,
    };
    let text = ctx
        .gate(dir)?
        .webhook(scheme, &headers, &bytes, &secret, None)
        .map_err(|e| Failure::from(e).context("webhook not recorded"))?;
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let line = format!(
        "event {} for effect {}: {}",
        v["event"].as_str().unwrap_or(""),
        v["effect_id"].as_str().unwrap_or(""),
        v["recorded"].as_str().unwrap_or("")
    );
    ctx.print(v, line);
    Ok(0)
}
