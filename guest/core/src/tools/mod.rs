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
//! At the top, `decider` (optional) names the person who decides an approval at the client
//! (`"decider": "alice@shop"`): a call that waits for a person's approval asks them there
//! (an MCP elicitation, where the client can), and records their answer as their decision
//! (`session`; ARCHITECTURE.md, "People in the loop").
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
use crate::proposal::{parse_input, Proposal};
use crate::schema::{check_name, field_err, Obj};
use crate::types::{Executed, GateError, Outcome, Reason, State};

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
    journal_dir: Option<String>,
    decider: Option<String>,
}

const TOP: [&str; 3] = ["journal_dir", "tools", "decider"];
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
    Ok(Obj::any(v, at, "this")?.map())
}

fn mapped(o: &Obj<'_, '_>, what: &str) -> Result<Mapped, GateError> {
    let tool = o.name("tool", &format!("the tool that {what}"))?;
    let mut arguments = BTreeMap::new();
    if let Some(a) = o.get("arguments") {
        let at = o.at("arguments");
        let a = Obj::any(
            a,
            &at,
            "arguments (its argument -> the call's argument, or $effect_id)",
        )?;
        for k in a.map().keys() {
            check_name(k, &a.at(k))?;
            arguments.insert(k.clone(), a.name(k, "")?);
        }
    }
    Ok(Mapped { tool, arguments })
}

impl ToolsConfig {
    /// Checks a configuration; every problem is `invalid-field` at its JSON pointer.
    pub fn parse(text: &str) -> Result<ToolsConfig, GateError> {
        let v = parse_input(text, "")?;
        let top = Obj::strict(&v, "", "a tool configuration", &TOP)?;
        let journal_dir = top.opt_name("journal_dir", "")?;
        let decider = top.opt_name("decider", "")?;
        let mut tools = BTreeMap::new();
        let listed = Obj::any(
            top.required("tools", "the tools with real effects, each by name")?,
            "/tools",
            "tools (tool name -> how it is gated)",
        )?;
        for (name, spec) in listed.map() {
            let at = listed.at(name);
            check_name(name, &at)?;
            tools.insert(name.clone(), Self::spec(spec, &at)?);
        }
        Ok(ToolsConfig {
            tools,
            journal_dir,
            decider,
        })
    }

    fn spec(v: &Value, at: &str) -> Result<Spec, GateError> {
        let m = Obj::strict(v, at, "a gated tool", &TOOL)?;
        let premises = match m.get("premises") {
            None => None,
            Some(p) => {
                let pat = m.at("premises");
                let p = Obj::strict(p, &pat, "premises", &["tool", "arguments", "fields"])?;
                let fields = p.names("fields", "the premise tool's answer fields to record")?;
                Some((mapped(&p, "reads the premises")?, fields))
            }
        };
        let lookup = match m.get("lookup") {
            None => None,
            Some(l) => {
                let lat = m.at("lookup");
                let l = Obj::strict(l, &lat, "lookup", &["tool", "arguments", "found"])?;
                let found = l.name("found", "the lookup answer's field that says it was found")?;
                Some((mapped(&l, "looks the effect up")?, found))
            }
        };
        let authority = match m.get("authority") {
            None => None,
            Some(a) => {
                let aat = m.at("authority");
                Some(Self::authority(a, &aat)?.clone())
            }
        };
        let mut target_extra = Map::new();
        for k in ["timeout_ms", "dedupe_window_ms", "clock_skew_ms"] {
            if let Some(x) = m.opt_u64(k)? {
                target_extra.insert(k.into(), json!(x));
            }
        }
        let cap = match m.get("cap") {
            None => None,
            Some(c) => {
                let cat = m.at("cap");
                let c = Obj::strict(c, &cat, "cap", &["name", "limit_cents", "amount_argument"])?;
                Some((
                    c.name("name", "the cap's name")?,
                    c.u64("limit_cents", "the most the cap lets through, in cents")?,
                    c.name(
                        "amount_argument",
                        "the call's argument that is the amount in cents",
                    )?,
                ))
            }
        };
        if let Some(b) = m.get("bounds") {
            Obj::any(b, &m.at("bounds"), "bounds (premise field -> bound)")?;
        }
        Ok(Spec {
            key: m.names("key", "the call's arguments that identify the effect")?,
            premises,
            lookup,
            idempotency_argument: m.opt_name("idempotency_argument", "")?,
            dedupes: m.bool_or("dedupes", false)?,
            authority,
            target_extra,
            bounds: m.get("bounds").cloned(),
            cap,
        })
    }

    /// An authority object: `{"lease": name}` or `{"approval": id}`.
    fn authority<'v>(a: &'v Value, at: &str) -> Result<&'v Value, GateError> {
        let am = Obj::strict(a, at, "authority", &["lease", "approval"])?;
        if am.map().len() != 1 {
            return Err(field_err(
                at,
                "names one lease ({\"lease\": \"case-4471\"}) or one approval ({\"approval\": \"apr-7\"})",
            ));
        }
        for k in am.map().keys() {
            am.name(k, "")?;
        }
        Ok(a)
    }

    /// Checks the host's `authority` (`{"lease": name}` or `{"approval": id}`), and, under
    /// strict authority, that every gated tool has authority: its own, else the host's. A
    /// host calls it at start, so a missing authority is refused before the first call,
    /// not at it. Without strict authority a tool with neither runs under the agent's
    /// standing lease (the gate grants it at first use).
    pub fn check_authority(
        &self,
        authority: Option<&Value>,
        strict: bool,
    ) -> Result<Vec<String>, GateError> {
        if let Some(a) = authority {
            Self::authority(a, "/authority")?;
        }
        match self
            .tools
            .iter()
            .find(|(_, s)| strict && s.authority.is_none() && authority.is_none())
        {
            Some((tool, _)) => Err(field_err(
                &format!("/tools/{tool}/authority"),
                "no authority, and authority is strict: name a lease or an approval for the \
                 tool ({\"authority\": {\"lease\": \"case-4471\"}}), or give the host's \
                 (--lease case-4471), granted first with `interlock lease grant JOURNAL \
                 case-4471 --for 48h`",
            )),
            // The tools that run under the agent's standing lease (a host announces it).
            None => Ok(self
                .tools
                .iter()
                .filter(|(_, s)| s.authority.is_none() && authority.is_none())
                .map(|(t, _)| t.clone())
                .collect()),
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

    /// Who decides an approval at the client, if the configuration names one.
    pub fn decider(&self) -> Option<&str> {
        self.decider.as_deref()
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
        let mut p = json!({"agent": agent, "target": target, "key": key, "effect": effect});
        // Neither the tool's nor the host's: the gate runs it under the agent's standing
        // lease, or refuses it under strict authority.
        if let Some(a) = spec.authority.as_ref().or(authority) {
            p["authority"] = a.clone();
        }
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
        Proposal::parse_input(&text)?;
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
    // "NOT done" only when the gate knows nothing was done. A refusal of a resend after a
    // send whose fate is unknown says so: a model told "not done" would tell the customer
    // so, or try another way (issue 23).
    let not_done = if o.executed == Executed::Unknown {
        format!(
            "{tool} was not sent again (effect {id}), and it is UNKNOWN whether an earlier send \
             of it happened: "
        )
    } else {
        format!("{tool} was NOT done (effect {id}): ")
    };
    let unknown_tail = if o.executed == Executed::Unknown && o.state == State::Refused {
        " Do not say it was not done, do not retry and do not do it another way: a person must \
         check at the service and settle it."
    } else {
        ""
    };
    let message = match (o.state, o.reason) {
        (State::Committed | State::Confirmed, _) if o.replayed => format!(
            "{tool} was already done by an earlier identical call; it happened once (effect {id}).{result}"
        ),
        (State::Committed | State::Confirmed, _) => {
            format!("{tool} done; it happened once (effect {id}).{result}")
        }
        (State::Ambiguous, reason) => format!(
            "It is UNKNOWN whether {tool} happened (effect {id}): {}. Do not retry and do not do it another way: a person must check at the service and settle it.",
            match reason {
                Some(Reason::DedupeWindowPassed) => "the send's reply was lost and the service can neither dedupe a retry within its dedupe window nor be looked up",
                Some(Reason::TargetRejected) => "an earlier send's reply was lost, and the service refused the retry",
                _ => "the send's reply was lost and the service can neither dedupe a retry nor be looked up",
            }
        ),
        (_, Some(Reason::PremiseChanged)) if o.executed == Executed::Unknown => format!(
            "{not_done}what the decision rested on changed since ({changed}), which may be that send itself landing.{unknown_tail}"
        ),
        (_, Some(Reason::PremiseChanged)) => format!(
            "{not_done}what the decision rested on changed: {changed}. Re-read the facts and decide again; do not repeat the same call."
        ),
        (_, Some(Reason::ApprovalPending)) => format!(
            "{tool} is pending a person's approval (item {id}, route {}): nothing was done yet. Tell the user it waits for approval; once it is approved, call it again with the same arguments: it will be sent once.",
            o.return_to.as_deref().unwrap_or("its route")
        ),
        (_, Some(Reason::ApprovalRejected)) => format!(
            "{not_done}a person ({}) rejected it. Tell the user; do not retry and do not do it another way.",
            o.return_to.as_deref().unwrap_or("an approver")
        ),
        (_, Some(Reason::ApprovalStale)) => format!(
            "{not_done}the facts the approver saw changed ({changed}); it goes back to {} to approve again.{unknown_tail}",
            o.return_to.as_deref().unwrap_or("the approver")
        ),
        (_, Some(Reason::ConflictingPayload)) => format!(
            "{not_done}an earlier call with the same key had other arguments, and that decision stands. If a different effect is meant, ask a person; do not retry with these arguments."
        ),
        (_, Some(Reason::LeaseMissing)) => format!(
            "{not_done}its lease was never granted in this journal (lease_missing). Ask the operator to grant it (interlock lease grant JOURNAL LEASE --for 48h), or run without naming a lease to use the agent's standing lease; do not retry until then.{unknown_tail}"
        ),
        (_, Some(r @ (Reason::LeaseExpired | Reason::LeaseRevoked | Reason::NotAllowed))) => format!(
            "{not_done}the agent is no longer allowed ({}). Ask the person who grants this authority; do not retry.{unknown_tail}",
            r.as_str()
        ),
        (_, Some(r @ (Reason::ApprovalMissing | Reason::ApprovalExpired | Reason::ApprovalRevoked))) => format!(
            "{not_done}its approval does not hold ({}). Ask the approver for a new approval; do not retry.{unknown_tail}",
            r.as_str()
        ),
        (_, Some(Reason::CapExceeded)) => format!(
            "{not_done}it would exceed a shared spending cap. Ask a person to raise the cap or decide; do not retry.{unknown_tail}"
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
            "{not_done}{}.{unknown_tail}",
            reason.map(Reason::as_str).unwrap_or("refused")
        ),
    };
    ToolReply {
        is_error: !matches!(o.state, State::Committed | State::Confirmed),
        message,
        outcome: outcome_json(o),
    }
}

pub mod session;

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
        // No authority anywhere: the proposal names none (the gate decides: the agent's
        // standing lease, or a refusal under strict authority).
        let bare = ToolsConfig::parse(r#"{"tools": {"t": {"key": ["a"]}}}"#).unwrap();
        let p = bare
            .proposal("t", &json!({"a": 1}), None, "agent", None)
            .unwrap();
        assert!(!p.contains("authority"), "{p}");
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
    fn a_tool_without_authority_runs_standing_unless_authority_is_strict() {
        let bare = r#"{"tools": {"create_refund": {"key": ["order_id"]}}}"#;
        let c = ToolsConfig::parse(bare).unwrap();
        assert_eq!(c.check_authority(None, false).unwrap(), ["create_refund"]);
        assert_eq!(
            pointer(c.check_authority(None, true).unwrap_err()),
            "/tools/create_refund/authority"
        );
        assert!(c
            .check_authority(Some(&json!({"lease": "L"})), true)
            .unwrap()
            .is_empty());
        for (bad, at) in [
            (json!({"lease": "L", "approval": "A"}), "/authority"),
            (json!({"leese": "L"}), "/authority/leese"),
            (json!({}), "/authority"),
        ] {
            assert_eq!(
                pointer(c.check_authority(Some(&bad), false).unwrap_err()),
                at
            );
        }
        assert!(config().check_authority(None, true).unwrap().is_empty());
        // No authority anywhere: the proposal names none, and the gate decides.
        let p: Value = serde_json::from_str(
            &c.proposal(
                "create_refund",
                &json!({"order_id": "881"}),
                None,
                "a",
                None,
            )
            .unwrap(),
        )
        .unwrap();
        assert!(p.get("authority").is_none());
    }

    #[test]
    fn unknown_fields_are_refused_at_every_depth() {
        let at = |text: &str| pointer(ToolsConfig::parse(text).unwrap_err());
        let tool = |inner: &str| format!(r#"{{"tools": {{"t": {{"key": ["k"], {inner}}}}}}}"#);
        assert_eq!(at(&tool(r#""dedupe": true"#)), "/tools/t/dedupe");
        assert_eq!(
            at(&tool(r#""authority": {"leese": "L"}"#)),
            "/tools/t/authority/leese"
        );
        assert_eq!(
            at(&tool(
                r#""cap": {"name": "c", "limit": 1, "amount_argument": "a"}"#
            )),
            "/tools/t/cap/limit"
        );
        assert_eq!(
            at(&tool(
                r#""lookup": {"tool": "f", "found": "found", "argument": {}}"#
            )),
            "/tools/t/lookup/argument"
        );
        assert_eq!(
            at(&tool(
                r#""premises": {"tool": "g", "fields": ["x"], "field": ["y"]}"#
            )),
            "/tools/t/premises/field"
        );
        assert_eq!(at(r#"{"tools": {}, "journal": "x"}"#), "/journal");
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

    #[test]
    fn a_refusal_after_a_send_of_unknown_fate_never_says_not_done() {
        let change = crate::types::PremiseChange {
            name: "refunded_total".into(),
            was: "0".into(),
            now: "2000".into(),
        };
        for reason in [
            Reason::PremiseChanged,
            Reason::LeaseRevoked,
            Reason::LeaseMissing,
            Reason::ApprovalStale,
            Reason::ApprovalRevoked,
            Reason::CapExceeded,
            Reason::NotAllowed,
        ] {
            let o = Outcome {
                effect_id: "e1".into(),
                state: State::Refused,
                reason: Some(reason),
                executed: Executed::Unknown,
                result: None,
                changed: alloc::vec![change.clone()],
                return_to: None,
                replayed: true,
                retry_after_ms: None,
            };
            let m = reply("create_refund", &o).message;
            assert!(!m.contains("NOT done"), "{m}");
            assert!(m.contains("UNKNOWN whether an earlier send"), "{m}");
            assert!(m.contains("a person must check"), "{m}");
        }
    }

    #[test]
    fn a_call_waiting_for_a_person_says_pending_never_a_made_up_refusal() {
        let mut o = Outcome {
            effect_id: "e1".into(),
            state: State::Proposed,
            reason: Some(Reason::ApprovalPending),
            executed: Executed::No,
            result: None,
            changed: alloc::vec![],
            return_to: Some("finance".into()),
            replayed: false,
            retry_after_ms: None,
        };
        let r = reply("create_refund", &o);
        assert!(r.is_error, "not done yet");
        assert!(
            r.message
                .contains("pending a person's approval (item e1, route finance)"),
            "{}",
            r.message
        );
        assert!(!r.message.contains("NOT done"), "{}", r.message);
        o.state = State::Refused;
        o.reason = Some(Reason::ApprovalRejected);
        o.return_to = Some("bob@shop".into());
        let m = reply("create_refund", &o).message;
        assert!(m.contains("a person (bob@shop) rejected it"), "{m}");
    }
}
