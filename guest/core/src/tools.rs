//! Tool gating (issue 14): which of an agent's tool calls are effects, and how a call becomes
//! a proposal, a premise read, a send and a lookup. The MCP proxy and `protect()` in every
//! host map calls through these rules only, so a call means the same effect everywhere.
//!
//! The configuration is the original's, as is:
//! ```json
//! {"journal_dir": ".interlock/mcp",
//!  "tools": {"create_refund": {
//!    "key": ["order_id"],
//!    "premises": {"tool": "get_order", "arguments": {"order_id": "order_id"}, "fields": ["refunded_total"]},
//!    "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"},
//!    "idempotency_argument": "reference",
//!    "dedupes": false}}}
//! ```
//! In `premises.arguments` and `lookup.arguments` each value names an argument of the call,
//! or is `$effect_id` (the effect's id: a premise tool can then leave the effect's own
//! refund out, and a lookup find it). A tool may also give `authority` (`{"lease": name}` or
//! `{"approval": id}`), `timeout_ms`,
//! `dedupe_window_ms`, `clock_skew_ms`, `bounds` (as a proposal's) and `cap` (`{"name",
//! "limit_cents", "amount_argument"}`). Every other member is refused, at its JSON pointer.
//!
//! The effect is the call's arguments without the idempotency argument (which is the
//! gate's to fill at the send); the key is `[tool, the key arguments' values...]`, so the
//! same call under another payload is the same effect with a conflicting payload.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::{json, Map, Value};

use crate::canon::{canonical, effect_id_for};
use crate::proposal::{field_err, parse_input, Proposal};
use crate::types::{GateError, Outcome, Reason, State};

/// The one value of a mapped argument that is not the name of a call argument.
pub const EFFECT_ID: &str = "$effect_id";

/// A call the host makes on the agent's behalf: a premise read, the send, a lookup.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub tool: String,
    /// A JSON object.
    pub arguments: Value,
}

#[derive(Clone, Debug)]
struct Mapped {
    tool: String,
    /// Argument of the mapped tool -> an argument of the call, or [`EFFECT_ID`].
    arguments: BTreeMap<String, String>,
}

#[derive(Clone, Debug)]
struct Spec {
    key: Vec<String>,
    premises: Option<(Mapped, Vec<String>)>,
    lookup: Option<(Mapped, String)>,
    idempotency_argument: Option<String>,
    dedupes: bool,
    authority: Option<Value>,
    target_extra: Map<String, Value>,
    bounds: Option<Value>,
    cap: Option<(String, u64, String)>,
}

/// A checked configuration.
#[derive(Clone, Debug)]
pub struct ToolsConfig {
    tools: BTreeMap<String, Spec>,
}

const TOP: [&str; 2] = ["journal_dir", "tools"];
const TOOL: [&str; 11] = [
    "key",
    "premises",
    "lookup",
    "idempotency_argument",
    "dedupes",
    "authority",
    "timeout_ms",
    "dedupe_window_ms",
    "clock_skew_ms",
    "bounds",
    "cap",
];

fn object<'v>(v: &'v Value, at: &str) -> Result<&'v Map<String, Value>, GateError> {
    v.as_object()
        .ok_or_else(|| field_err(at, "must be an object"))
}

fn only(m: &Map<String, Value>, allowed: &[&str], at: &str) -> Result<(), GateError> {
    match m.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(field_err(&format!("{at}/{k}"), "is not a field here")),
        None => Ok(()),
    }
}

fn string(v: Option<&Value>, at: &str) -> Result<String, GateError> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(_) => Err(field_err(at, "must be a non-empty string")),
        None => Err(field_err(at, "is required")),
    }
}

fn strings(v: Option<&Value>, at: &str) -> Result<Vec<String>, GateError> {
    let list = match v {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(_) => return Err(field_err(at, "must be a non-empty list of names")),
        None => return Err(field_err(at, "is required")),
    };
    list.iter()
        .enumerate()
        .map(|(i, x)| string(Some(x), &format!("{at}/{i}")))
        .collect()
}

fn mapped(v: &Value, at: &str, extra: &[&str]) -> Result<Mapped, GateError> {
    let m = object(v, at)?;
    let mut allowed = alloc::vec!["tool", "arguments"];
    allowed.extend_from_slice(extra);
    only(m, &allowed, at)?;
    let tool = string(m.get("tool"), &format!("{at}/tool"))?;
    let mut arguments = BTreeMap::new();
    if let Some(a) = m.get("arguments") {
        for (k, src) in object(a, &format!("{at}/arguments"))? {
            arguments.insert(
                k.clone(),
                string(Some(src), &format!("{at}/arguments/{k}"))?,
            );
        }
    }
    Ok(Mapped { tool, arguments })
}

fn u64_of(v: &Value, at: &str) -> Result<u64, GateError> {
    v.as_u64()
        .ok_or_else(|| field_err(at, "must be a whole number of milliseconds"))
}

impl ToolsConfig {
    /// Checks a configuration; every problem is `invalid-field` at its JSON pointer.
    pub fn parse(text: &str) -> Result<ToolsConfig, GateError> {
        let v = parse_input(text, "")?;
        let top = object(&v, "")?;
        only(top, &TOP, "")?;
        if let Some(d) = top.get("journal_dir") {
            string(Some(d), "/journal_dir")?;
        }
        let mut tools = BTreeMap::new();
        let listed = object(
            top.get("tools")
                .ok_or_else(|| field_err("/tools", "is required"))?,
            "/tools",
        )?;
        for (name, spec) in listed {
            let at = format!("/tools/{name}");
            tools.insert(name.clone(), Self::spec(spec, &at)?);
        }
        Ok(ToolsConfig { tools })
    }

    fn spec(v: &Value, at: &str) -> Result<Spec, GateError> {
        let m = object(v, at)?;
        only(m, &TOOL, at)?;
        let premises = match m.get("premises") {
            None => None,
            Some(p) => {
                let pat = format!("{at}/premises");
                let fields = strings(object(p, &pat)?.get("fields"), &format!("{pat}/fields"))?;
                Some((mapped(p, &pat, &["fields"])?, fields))
            }
        };
        let lookup = match m.get("lookup") {
            None => None,
            Some(l) => {
                let lat = format!("{at}/lookup");
                let found = string(object(l, &lat)?.get("found"), &format!("{lat}/found"))?;
                Some((mapped(l, &lat, &["found"])?, found))
            }
        };
        let authority = match m.get("authority") {
            None => None,
            Some(a) => {
                let aat = format!("{at}/authority");
                let am = object(a, &aat)?;
                only(am, &["lease", "approval"], &aat)?;
                if am.len() != 1 {
                    return Err(field_err(&aat, "names one lease or one approval"));
                }
                for (k, x) in am {
                    string(Some(x), &format!("{aat}/{k}"))?;
                }
                Some(a.clone())
            }
        };
        let mut target_extra = Map::new();
        for k in ["timeout_ms", "dedupe_window_ms", "clock_skew_ms"] {
            if let Some(x) = m.get(k) {
                target_extra.insert(k.into(), json!(u64_of(x, &format!("{at}/{k}"))?));
            }
        }
        let cap = match m.get("cap") {
            None => None,
            Some(c) => {
                let cat = format!("{at}/cap");
                let cm = object(c, &cat)?;
                only(cm, &["name", "limit_cents", "amount_argument"], &cat)?;
                let limit = cm
                    .get("limit_cents")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| {
                        field_err(
                            &format!("{cat}/limit_cents"),
                            "must be a whole number of cents",
                        )
                    })?;
                Some((
                    string(cm.get("name"), &format!("{cat}/name"))?,
                    limit,
                    string(cm.get("amount_argument"), &format!("{cat}/amount_argument"))?,
                ))
            }
        };
        if let Some(b) = m.get("bounds") {
            object(b, &format!("{at}/bounds"))?;
        }
        Ok(Spec {
            key: strings(m.get("key"), &format!("{at}/key"))?,
            premises,
            lookup,
            idempotency_argument: match m.get("idempotency_argument") {
                None => None,
                some => Some(string(some, &format!("{at}/idempotency_argument"))?),
            },
            dedupes: match m.get("dedupes") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => {
                    return Err(field_err(&format!("{at}/dedupes"), "must be true or false"))
                }
            },
            authority,
            target_extra,
            bounds: m.get("bounds").cloned(),
            cap,
        })
    }

    /// Checks that every gated tool has authority: its own, else the host's `authority`
    /// (`{"lease": name}` or `{"approval": id}`). A host calls it at start, so a missing
    /// authority is refused before the first call, not at it.
    pub fn check_authority(&self, authority: Option<&Value>) -> Result<(), GateError> {
        if let Some(a) = authority {
            let am = object(a, "/authority")?;
            only(am, &["lease", "approval"], "/authority")?;
            if am.len() != 1 {
                return Err(field_err("/authority", "names one lease or one approval"));
            }
        }
        match self
            .tools
            .iter()
            .find(|(_, s)| s.authority.is_none() && authority.is_none())
        {
            Some((tool, _)) => Err(field_err(
                &format!("/tools/{tool}/authority"),
                "no authority: name a lease or an approval for the tool, or give the host's",
            )),
            None => Ok(()),
        }
    }

    /// Checks that every tool the configuration names (each gated tool, and the premise and
    /// lookup tools it calls) is among `available` (the functions a host was given, or an
    /// upstream server's tools): a missing one would only be found at a re-check or a
    /// recovery, with the effect already in flight. A host calls it at start.
    pub fn check_tools(&self, available: &[String]) -> Result<(), GateError> {
        let given = |t: &str| available.iter().any(|a| a == t);
        for (tool, spec) in &self.tools {
            if !given(tool) {
                return Err(field_err(
                    &format!("/tools/{tool}"),
                    "is gated by the configuration, but no such tool was given",
                ));
            }
            let named = [
                ("premises", spec.premises.as_ref().map(|(m, _)| &m.tool)),
                ("lookup", spec.lookup.as_ref().map(|(m, _)| &m.tool)),
            ];
            for (part, named) in named {
                if let Some(t) = named.filter(|t| !given(t)) {
                    return Err(field_err(
                        &format!("/tools/{tool}/{part}/tool"),
                        format!("names {t:?}, but no such tool was given"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The tools this configuration gates; every other tool passes through untouched.
    pub fn gated(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    fn spec_of(&self, tool: &str) -> Result<&Spec, GateError> {
        self.tools
            .get(tool)
            .ok_or_else(|| field_err("/tool", format!("{tool:?} is not a gated tool")))
    }

    /// The effect a call of `tool` with `arguments` is: its key and effect, and its id.
    fn effect(&self, tool: &str, arguments: &Value) -> Result<(Value, Value, String), GateError> {
        let spec = self.spec_of(tool)?;
        let args = object(arguments, "/arguments")?;
        let mut key = alloc::vec![json!(tool)];
        for k in &spec.key {
            let v = args.get(k).ok_or_else(|| {
                field_err(
                    &format!("/arguments/{k}"),
                    "is required: it is part of the effect's key",
                )
            })?;
            key.push(v.clone());
        }
        let key = Value::Array(key);
        let mut effect = args.clone();
        if let Some(i) = &spec.idempotency_argument {
            effect.remove(i);
        }
        let effect = Value::Object(effect);
        let id = effect_id_for(Some(&key), &effect);
        Ok((key, effect, id))
    }

    fn call(
        m: &Mapped,
        args: &Map<String, Value>,
        id: &str,
        at: &str,
    ) -> Result<ToolCall, GateError> {
        let mut out = Map::new();
        for (name, src) in &m.arguments {
            let v = if src == EFFECT_ID {
                json!(id)
            } else {
                args.get(src).cloned().ok_or_else(|| {
                    field_err(
                        &format!("/arguments/{src}"),
                        format!("is required: {at} passes it"),
                    )
                })?
            };
            out.insert(name.clone(), v);
        }
        Ok(ToolCall {
            tool: m.tool.clone(),
            arguments: Value::Object(out),
        })
    }

    /// The premise read to make before a call of `tool`, if its configuration names one.
    pub fn premise_call(
        &self,
        tool: &str,
        arguments: &Value,
    ) -> Result<Option<ToolCall>, GateError> {
        let (_, _, id) = self.effect(tool, arguments)?;
        let spec = self.spec_of(tool)?;
        let args = object(arguments, "/arguments")?;
        spec.premises
            .as_ref()
            .map(|(m, _)| Self::call(m, args, &id, "the premise tool"))
            .transpose()
    }

    /// The premises in the premise tool's `answer`: its fields the configuration names, as
    /// a proposal records them and as a re-check (`reply.captured`) answers them.
    pub fn premises(&self, tool: &str, answer: &Value) -> Result<Value, GateError> {
        let spec = self.spec_of(tool)?;
        let (_, fields) = spec.premises.as_ref().ok_or_else(|| {
            field_err(
                &format!("/tools/{tool}/premises"),
                "this tool has no premise tool",
            )
        })?;
        let answer = object(answer, "/premises")?;
        let mut picked = Map::new();
        for f in fields {
            let v = answer.get(f).ok_or_else(|| {
                field_err(
                    &format!("/premises/{f}"),
                    "the premise tool's answer has no such field",
                )
            })?;
            picked.insert(f.clone(), v.clone());
        }
        Ok(Value::Object(picked))
    }

    /// The proposal for a call of `tool` with `arguments`, the premise tool's answer in
    /// `premises` (when the configuration names one), proposed by `agent` under the tool's
    /// authority, else under `authority` (the host's). The gate checks it in full.
    pub fn proposal(
        &self,
        tool: &str,
        arguments: &Value,
        premises: Option<&Value>,
        agent: &str,
        authority: Option<&Value>,
    ) -> Result<String, GateError> {
        let spec = self.spec_of(tool)?;
        let (key, effect, _) = self.effect(tool, arguments)?;
        let mut target = Map::new();
        target.insert("name".into(), json!(tool));
        target.insert("dedupes".into(), json!(spec.dedupes));
        target.insert("lookup".into(), json!(spec.lookup.is_some()));
        target.extend(spec.target_extra.clone());
        let authority = spec
            .authority
            .clone()
            .or_else(|| authority.cloned())
            .ok_or_else(|| {
                field_err(
                    &format!("/tools/{tool}/authority"),
                    "no authority: name a lease or an approval for the tool, or give the host's",
                )
            })?;
        let mut p = json!({"agent": agent, "target": target, "key": key, "effect": effect, "authority": authority});
        if spec.premises.is_some() {
            let answer = premises
                .ok_or_else(|| field_err("/premises", "the premise tool's answer is required"))?;
            p["premises"] = self.premises(tool, answer)?;
        }
        if let Some(b) = &spec.bounds {
            p["bounds"] = b.clone();
        }
        if let Some((name, limit, amount_arg)) = &spec.cap {
            let amount = effect
                .get(amount_arg)
                .and_then(Value::as_u64)
                .ok_or_else(|| {
                    field_err(
                        &format!("/arguments/{amount_arg}"),
                        "must be a whole number of cents: the cap counts it",
                    )
                })?;
            p["cap"] = json!({"name": name, "limit_cents": limit, "amount_cents": amount});
        }
        let text = canonical(&p);
        Proposal::parse(&text)?;
        Ok(text)
    }

    /// The send: the call itself, with the gate's idempotency key in the tool's idempotency
    /// argument (when it has one) in place of anything the agent put there.
    pub fn send_call(
        &self,
        tool: &str,
        arguments: &Value,
        idempotency_key: &str,
    ) -> Result<ToolCall, GateError> {
        let spec = self.spec_of(tool)?;
        let (_, mut effect, _) = self.effect(tool, arguments)?;
        if let (Some(i), Some(m)) = (&spec.idempotency_argument, effect.as_object_mut()) {
            m.insert(i.clone(), json!(idempotency_key));
        }
        Ok(ToolCall {
            tool: tool.to_string(),
            arguments: effect,
        })
    }

    /// The lookup for effect `effect_id` of `tool` (its recorded `effect`: the call's
    /// arguments), if the configuration names one.
    pub fn lookup_call(
        &self,
        tool: &str,
        effect_id: &str,
        effect: &Value,
    ) -> Result<Option<ToolCall>, GateError> {
        let spec = self.spec_of(tool)?;
        let args = object(effect, "/effect")?;
        spec.lookup
            .as_ref()
            .map(|(m, _)| Self::call(m, args, effect_id, "the lookup tool"))
            .transpose()
    }

    /// Whether the lookup tool's `answer` says the effect was found: its `found` field is
    /// present and neither null nor false.
    pub fn found(&self, tool: &str, answer: &Value) -> Result<bool, GateError> {
        let spec = self.spec_of(tool)?;
        let (_, field) = spec.lookup.as_ref().ok_or_else(|| {
            field_err(&format!("/tools/{tool}/lookup"), "this tool has no lookup")
        })?;
        Ok(!matches!(
            answer.get(field),
            None | Some(Value::Null) | Some(Value::Bool(false))
        ))
    }
}

/// What an MCP tool result (`CallToolResult`) answers, as the mapping reads it: its
/// `structuredContent` when it has one, else its first text content parsed as JSON (or that
/// text as a JSON string). `is_error` is its `isError`: the tool reported a failure.
#[derive(Clone, Debug, PartialEq)]
pub struct McpAnswer {
    pub is_error: bool,
    pub value: Value,
}

/// Reads an MCP `CallToolResult` (MCP 2025-06-18 schema).
pub fn mcp_answer(result: &Value) -> Result<McpAnswer, GateError> {
    let r = object(result, "/result")?;
    let is_error = match r.get("isError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(field_err("/result/isError", "must be true or false")),
    };
    if let Some(v) = r.get("structuredContent").filter(|v| !v.is_null()) {
        return Ok(McpAnswer {
            is_error,
            value: v.clone(),
        });
    }
    let content = match r.get("content") {
        Some(Value::Array(c)) => c,
        Some(_) => return Err(field_err("/result/content", "must be a list")),
        None => return Err(field_err("/result/content", "is required")),
    };
    let text = content
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("text"))
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str);
    let value = match text {
        Some(t) => serde_json::from_str(t).unwrap_or_else(|_| json!(t)),
        None => Value::Null,
    };
    Ok(McpAnswer { is_error, value })
}

/// What a gated tool call answers the model: whether it is an error, a message the model
/// can act on (what happened, what changed, who to ask) and the outcome as JSON (the
/// proxy's `structuredContent`, `protect()`'s `out["outcome"]`).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolReply {
    pub is_error: bool,
    pub message: String,
    pub outcome: Value,
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

/// The outcome as JSON, spelled as the journal spells it.
pub fn outcome_json(o: &Outcome) -> Value {
    json!({
        "effect_id": o.effect_id,
        "state": o.state.as_str(),
        "reason": o.reason.map(Reason::as_str),
        "executed": o.executed.as_str(),
        "result": o.result.as_deref().map(parsed),
        "changed": o.changed.iter().map(|c| json!({"name": c.name, "was": parsed(&c.was), "now": parsed(&c.now)})).collect::<Vec<_>>(),
        "return_to": o.return_to,
        "replayed": o.replayed,
        "retry_after_ms": o.retry_after_ms,
    })
}

/// The reply to the model for a gated call of `tool` that ended in `o`. One wording for
/// the proxy and `protect()` in every host (the original's "refusal-and-repair message").
pub fn reply(tool: &str, o: &Outcome) -> ToolReply {
    let id = &o.effect_id;
    let result = o
        .result
        .as_deref()
        .map(|r| format!(" Result: {r}"))
        .unwrap_or_default();
    let changed = o
        .changed
        .iter()
        .map(|c| format!("{} was {}, is now {}", c.name, c.was, c.now))
        .collect::<Vec<_>>()
        .join("; ");
    let not_done = format!("{tool} was NOT done (effect {id}): ");
    let message = match (o.state, o.reason) {
        (State::Committed | State::Confirmed, _) if o.replayed => format!(
            "{tool} was already done by an earlier identical call; it happened once (effect {id}).{result}"
        ),
        (State::Committed | State::Confirmed, _) => {
            format!("{tool} done; it happened once (effect {id}).{result}")
        }
        (State::Ambiguous, _) => format!(
            "It is UNKNOWN whether {tool} happened (effect {id}): the send's reply was lost and the service can neither dedupe a retry nor be looked up{}. Do not retry and do not do it another way: a person must check at the service and settle it.",
            if o.reason == Some(Reason::DedupeWindowPassed) { " within its dedupe window" } else { "" }
        ),
        (_, Some(Reason::PremiseChanged)) => format!(
            "{not_done}what the decision rested on changed: {changed}. Re-read the facts and decide again; do not repeat the same call."
        ),
        (_, Some(Reason::ApprovalStale)) => format!(
            "{not_done}the facts the approver saw changed ({changed}); it goes back to {} to approve again.",
            o.return_to.as_deref().unwrap_or("the approver")
        ),
        (_, Some(Reason::ConflictingPayload)) => format!(
            "{not_done}an earlier call with the same key had other arguments, and that decision stands. If a different effect is meant, ask a person; do not retry with these arguments."
        ),
        (_, Some(r @ (Reason::LeaseMissing | Reason::LeaseExpired | Reason::LeaseRevoked | Reason::NotAllowed))) => format!(
            "{not_done}the agent is no longer allowed ({}). Ask the person who grants this authority; do not retry.",
            r.as_str()
        ),
        (_, Some(r @ (Reason::ApprovalMissing | Reason::ApprovalExpired | Reason::ApprovalRevoked))) => format!(
            "{not_done}its approval does not hold ({}). Ask the approver for a new approval; do not retry.",
            r.as_str()
        ),
        (_, Some(Reason::CapExceeded)) => format!(
            "{not_done}it would exceed a shared spending cap. Ask a person to raise the cap or decide; do not retry."
        ),
        (_, Some(Reason::TargetRejected)) => {
            format!("{not_done}the service refused it and applied nothing.{result}")
        }
        (State::Dispatched, reason) => format!(
            "{tool} is not finished (effect {id}, {}): it may or may not have happened yet. Call it again with the same arguments{}; it will not be sent twice.",
            reason.map(Reason::as_str).unwrap_or("open"),
            o.retry_after_ms.map(|ms| format!(" after {ms} ms")).unwrap_or_default()
        ),
        (_, reason) => format!(
            "{not_done}{}.",
            reason.map(Reason::as_str).unwrap_or("refused")
        ),
    };
    ToolReply {
        is_error: !matches!(o.state, State::Committed | State::Confirmed),
        message,
        outcome: outcome_json(o),
    }
}

/// The same functions with JSON text in and out (the component's exports): a call is
/// `(tool, canonical JSON of its arguments)`.
pub mod text {
    use super::*;

    fn call(c: ToolCall) -> (String, String) {
        (c.tool, canonical(&c.arguments))
    }

    /// The tools a configuration gates.
    pub fn check_config(config: &str) -> Result<Vec<String>, GateError> {
        Ok(ToolsConfig::parse(config)?.gated())
    }

    pub fn premise_call(
        config: &str,
        tool: &str,
        arguments: &str,
    ) -> Result<Option<(String, String)>, GateError> {
        let args = parse_input(arguments, "/arguments")?;
        Ok(ToolsConfig::parse(config)?
            .premise_call(tool, &args)?
            .map(call))
    }

    pub fn proposal(
        config: &str,
        tool: &str,
        arguments: &str,
        premises: Option<&str>,
        agent: &str,
        authority: Option<&str>,
    ) -> Result<String, GateError> {
        let args = parse_input(arguments, "/arguments")?;
        let premises = premises.map(|p| parse_input(p, "/premises")).transpose()?;
        let authority = authority
            .map(|a| parse_input(a, "/authority"))
            .transpose()?;
        ToolsConfig::parse(config)?.proposal(
            tool,
            &args,
            premises.as_ref(),
            agent,
            authority.as_ref(),
        )
    }

    pub fn send_call(
        config: &str,
        tool: &str,
        arguments: &str,
        idempotency_key: &str,
    ) -> Result<(String, String), GateError> {
        let args = parse_input(arguments, "/arguments")?;
        Ok(call(ToolsConfig::parse(config)?.send_call(
            tool,
            &args,
            idempotency_key,
        )?))
    }

    pub fn lookup_call(
        config: &str,
        tool: &str,
        effect_id: &str,
        recorded_effect: &str,
    ) -> Result<Option<(String, String)>, GateError> {
        let effect = parse_input(recorded_effect, "/effect")?;
        Ok(ToolsConfig::parse(config)?
            .lookup_call(tool, effect_id, &effect)?
            .map(call))
    }

    pub fn check_authority(config: &str, authority: Option<&str>) -> Result<(), GateError> {
        let authority = authority
            .map(|a| parse_input(a, "/authority"))
            .transpose()?;
        ToolsConfig::parse(config)?.check_authority(authority.as_ref())
    }

    pub fn check_tools(config: &str, available: &[String]) -> Result<(), GateError> {
        ToolsConfig::parse(config)?.check_tools(available)
    }

    pub fn premises(config: &str, tool: &str, answer: &str) -> Result<String, GateError> {
        let answer = parse_input(answer, "/premises")?;
        Ok(canonical(
            &ToolsConfig::parse(config)?.premises(tool, &answer)?,
        ))
    }

    /// An MCP tool result: whether it is an error, and its answer as canonical JSON.
    pub fn mcp_answer(result: &str) -> Result<(bool, String), GateError> {
        let a = super::mcp_answer(&parse_input(result, "/result")?)?;
        Ok((a.is_error, canonical(&a.value)))
    }

    pub fn found(config: &str, tool: &str, answer: &str) -> Result<bool, GateError> {
        let answer = parse_input(answer, "/answer")?;
        ToolsConfig::parse(config)?.found(tool, &answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"{"journal_dir": ".interlock/mcp",
      "tools": {"create_refund": {
        "key": ["order_id"],
        "premises": {"tool": "get_order", "arguments": {"order_id": "order_id", "excluding": "$effect_id"}, "fields": ["refunded_total"]},
        "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"},
        "idempotency_argument": "reference",
        "dedupes": false,
        "authority": {"lease": "case-4471"},
        "timeout_ms": 5000}}}"#;

    fn config() -> ToolsConfig {
        ToolsConfig::parse(CONFIG).unwrap()
    }

    fn pointer(e: GateError) -> String {
        match e {
            GateError::InvalidField { field, .. } => field,
            other => panic!("not invalid-field: {other:?}"),
        }
    }

    #[test]
    fn a_call_maps_to_a_premise_read_a_proposal_a_send_and_a_lookup() {
        let c = config();
        let args = json!({"order_id": "o1", "amount_cents": 2000, "reference": "agent-made"});
        let read = c.premise_call("create_refund", &args).unwrap().unwrap();
        let id = read.arguments["excluding"].as_str().unwrap().to_string();
        assert_eq!(read.tool, "get_order");
        assert_eq!(read.arguments["order_id"], "o1");
        let p = c
            .proposal(
                "create_refund",
                &args,
                Some(&json!({"refunded_total": 0, "other": 1})),
                "agent",
                None,
            )
            .unwrap();
        let p: Value = serde_json::from_str(&p).unwrap();
        assert_eq!(p["key"], json!(["create_refund", "o1"]));
        // The agent's idempotency argument is not part of the effect; the gate fills it.
        assert_eq!(p["effect"], json!({"order_id": "o1", "amount_cents": 2000}));
        assert_eq!(p["premises"], json!({"refunded_total": 0}));
        assert_eq!(
            p["target"],
            json!({"name": "create_refund", "dedupes": false, "lookup": true, "timeout_ms": 5000})
        );
        assert_eq!(Proposal::parse(&p.to_string()).unwrap().effect_id(), id);
        let send = c.send_call("create_refund", &args, &id).unwrap();
        assert_eq!(
            send.arguments,
            json!({"order_id": "o1", "amount_cents": 2000, "reference": id})
        );
        let look = c
            .lookup_call("create_refund", &id, &p["effect"])
            .unwrap()
            .unwrap();
        assert_eq!(
            look,
            ToolCall {
                tool: "find_refund".into(),
                arguments: json!({"reference": id})
            }
        );
        assert!(c
            .found("create_refund", &json!({"found": {"id": "re_1"}}))
            .unwrap());
        assert!(!c.found("create_refund", &json!({"found": null})).unwrap());
        assert!(!c.found("create_refund", &json!({})).unwrap());
    }

    #[test]
    fn the_same_key_with_another_payload_is_the_same_effect() {
        let c = config();
        let a = c
            .premise_call(
                "create_refund",
                &json!({"order_id": "o1", "amount_cents": 2000}),
            )
            .unwrap()
            .unwrap();
        let b = c
            .premise_call(
                "create_refund",
                &json!({"order_id": "o1", "amount_cents": 3000}),
            )
            .unwrap()
            .unwrap();
        assert_eq!(a.arguments["excluding"], b.arguments["excluding"]);
    }

    #[test]
    fn a_bad_config_is_refused_at_the_json_pointer_of_the_problem() {
        for (text, at) in [
            (r#"[]"#, ""),
            (r#"{"tools": {}, "jorunal_dir": "x"}"#, "/jorunal_dir"),
            (r#"{}"#, "/tools"),
            (r#"{"tools": {"t": {}}}"#, "/tools/t/key"),
            (r#"{"tools": {"t": {"key": []}}}"#, "/tools/t/key"),
            (r#"{"tools": {"t": {"key": ["a", 3]}}}"#, "/tools/t/key/1"),
            (
                r#"{"tools": {"t": {"key": ["a"], "premise": {}}}}"#,
                "/tools/t/premise",
            ),
            (
                r#"{"tools": {"t": {"key": ["a"], "premises": {"tool": "g"}}}}"#,
                "/tools/t/premises/fields",
            ),
            (
                r#"{"tools": {"t": {"key": ["a"], "premises": {"tool": "g", "fields": ["f"], "arguments": {"x": 1}}}}}"#,
                "/tools/t/premises/arguments/x",
            ),
            (
                r#"{"tools": {"t": {"key": ["a"], "lookup": {"tool": "f"}}}}"#,
                "/tools/t/lookup/found",
            ),
            (
                r#"{"tools": {"t": {"key": ["a"], "dedupes": "yes"}}}"#,
                "/tools/t/dedupes",
            ),
            (
                r#"{"tools": {"t": {"key": ["a"], "timeout_ms": -1}}}"#,
                "/tools/t/timeout_ms",
            ),
            (
                r#"{"tools": {"t": {"key": ["a"], "authority": {"lease": "l", "approval": "a"}}}}"#,
                "/tools/t/authority",
            ),
            (
                r#"{"tools": {"t": {"key": ["a"], "cap": {"name": "c", "limit_cents": 100}}}}"#,
                "/tools/t/cap/amount_argument",
            ),
        ] {
            assert_eq!(pointer(ToolsConfig::parse(text).unwrap_err()), at, "{text}");
        }
    }

    #[test]
    fn bad_calls_are_refused_at_their_pointer_before_anything_is_asked() {
        let c = config();
        // A key argument is missing.
        let e = c
            .premise_call("create_refund", &json!({"amount_cents": 2000}))
            .unwrap_err();
        assert_eq!(pointer(e), "/arguments/order_id");
        // The premise tool's answer lacks a field the proposal rests on.
        let args = json!({"order_id": "o1", "amount_cents": 2000});
        let e = c
            .proposal(
                "create_refund",
                &args,
                Some(&json!({"total": 0})),
                "agent",
                None,
            )
            .unwrap_err();
        assert_eq!(pointer(e), "/premises/refunded_total");
        // A tool the configuration does not gate.
        assert_eq!(
            pointer(c.send_call("get_order", &args, "k").unwrap_err()),
            "/tool"
        );
        // No authority anywhere: never a silent default.
        let bare = ToolsConfig::parse(r#"{"tools": {"t": {"key": ["a"]}}}"#).unwrap();
        let e = bare
            .proposal("t", &json!({"a": 1}), None, "agent", None)
            .unwrap_err();
        assert_eq!(pointer(e), "/tools/t/authority");
        let p = bare
            .proposal(
                "t",
                &json!({"a": 1}),
                None,
                "agent",
                Some(&json!({"lease": "host-lease"})),
            )
            .unwrap();
        assert!(p.contains("host-lease"), "{p}");
    }

    #[test]
    fn a_cap_counts_the_named_argument() {
        let c = ToolsConfig::parse(
            r#"{"tools": {"refund": {"key": ["order"], "authority": {"lease": "l"},
                "cap": {"name": "order-cap", "limit_cents": 3000, "amount_argument": "amount"}}}}"#,
        )
        .unwrap();
        let p: Value = serde_json::from_str(
            &c.proposal(
                "refund",
                &json!({"order": "o", "amount": 2000}),
                None,
                "agent",
                None,
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            p["cap"],
            json!({"name": "order-cap", "limit_cents": 3000, "amount_cents": 2000})
        );
        let e = c
            .proposal(
                "refund",
                &json!({"order": "o", "amount": "20"}),
                None,
                "agent",
                None,
            )
            .unwrap_err();
        assert_eq!(pointer(e), "/arguments/amount");
    }

    #[test]
    fn an_mcp_result_answers_its_structured_content_else_its_text() {
        let a = mcp_answer(&json!({"content": [], "structuredContent": {"found": null}})).unwrap();
        assert_eq!(
            a,
            McpAnswer {
                is_error: false,
                value: json!({"found": null})
            }
        );
        let a =
            mcp_answer(&json!({"content": [{"type": "text", "text": "{\"refunded_total\": 0}"}]}))
                .unwrap();
        assert_eq!(a.value, json!({"refunded_total": 0}));
        let a = mcp_answer(
            &json!({"content": [{"type": "text", "text": "card declined"}], "isError": true}),
        )
        .unwrap();
        assert_eq!(
            a,
            McpAnswer {
                is_error: true,
                value: json!("card declined")
            }
        );
        assert_eq!(
            pointer(mcp_answer(&json!({"isError": "yes", "content": []})).unwrap_err()),
            "/result/isError"
        );
    }

    #[test]
    fn every_tool_the_configuration_names_must_be_given() {
        let c = config();
        let all: Vec<String> = ["create_refund", "get_order", "find_refund"]
            .map(String::from)
            .to_vec();
        c.check_tools(&all).unwrap();
        assert_eq!(
            pointer(c.check_tools(&all[1..]).unwrap_err()),
            "/tools/create_refund"
        );
        assert_eq!(
            pointer(c.check_tools(&all[..2]).unwrap_err()),
            "/tools/create_refund/lookup/tool"
        );
        assert_eq!(
            pointer(
                c.check_tools(&[all[0].clone(), all[2].clone()])
                    .unwrap_err()
            ),
            "/tools/create_refund/premises/tool"
        );
    }

    #[test]
    fn every_gated_tool_needs_authority_its_own_or_the_hosts() {
        let bare = r#"{"tools": {"create_refund": {"key": ["order_id"]}}}"#;
        let c = ToolsConfig::parse(bare).unwrap();
        assert_eq!(
            pointer(c.check_authority(None).unwrap_err()),
            "/tools/create_refund/authority"
        );
        c.check_authority(Some(&json!({"lease": "L"}))).unwrap();
        assert_eq!(
            pointer(
                c.check_authority(Some(&json!({"lease": "L", "approval": "A"})))
                    .unwrap_err()
            ),
            "/authority"
        );
        config().check_authority(None).unwrap();
    }

    #[test]
    fn the_reply_says_what_changed_and_is_an_error_unless_it_happened() {
        let mut o = Outcome {
            effect_id: "e1".into(),
            state: State::Refused,
            reason: Some(Reason::PremiseChanged),
            executed: crate::types::Executed::No,
            result: None,
            changed: alloc::vec![crate::types::PremiseChange {
                name: "refunded_total".into(),
                was: "0".into(),
                now: "2000".into()
            }],
            return_to: None,
            replayed: false,
            retry_after_ms: None,
        };
        let r = reply("create_refund", &o);
        assert!(r.is_error);
        assert!(
            r.message.contains("refunded_total was 0, is now 2000"),
            "{}",
            r.message
        );
        assert_eq!(r.outcome["changed"][0]["now"], json!(2000));
        o.state = State::Committed;
        o.reason = None;
        o.changed.clear();
        o.result = Some("{\"id\":\"re_1\"}".into());
        let r = reply("create_refund", &o);
        assert!(
            !r.is_error && r.message.contains("happened once"),
            "{}",
            r.message
        );
        assert_eq!(r.outcome["result"], json!({"id": "re_1"}));
        o.state = State::Ambiguous;
        o.reason = Some(Reason::NoDedupeNoLookup);
        assert!(reply("create_refund", &o).message.contains("UNKNOWN"));
    }
}
