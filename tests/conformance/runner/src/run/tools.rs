//! Tool-gating vectors (issue 14): the agent's tool calls, run as every host's MCP proxy and
//! `protect()` run them (ARCHITECTURE.md, "Tool gating", the loop every host runs): the
//! premise read, the proposal, the gate's steps answered by calling tools, and the reply to
//! the model. Every mapping is the gate's `tools` (imported, forwarded by the host to the
//! current worker's gate instance); only the calling of tools is here.
//!
//! The world's tools are the payments service's, as an MCP server offers them, each
//! answering an MCP `CallToolResult`: `get_order {order_id, excluding?}` -> `{order_id,
//! eligible, refunded_total}` (refunds whose reference is `excluding` left out),
//! `create_refund {order_id, amount_cents, reference?}` -> `{refund_id, order_id,
//! amount_cents}` (the reference is the service's idempotency key where the tier dedupes),
//! `find_refund {reference}` -> `{found: refund | null}`. A failure is `isError` with the
//! service's code.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::{json, Value};

use super::{check, gate_error_case, Crash, Run, Stop, Task};
use crate::interlock::conformance::driver;
use crate::interlock::gate::gate::GateError;
use crate::interlock::gate::target::{Ask, Reply};
use crate::interlock::gate::tools::{self as gt, ToolAnswer, ToolCall};
use crate::interlock::gate::types::Outcome;
use crate::world::{note, World};
use crate::{field, str_field, Res};

/// Who proposes a tool-gating vector's calls (the proxy's `--agent`).
const AGENT: &str = "refund-agent";

/// A tool-gating vector's side of the world: its configuration, the tools it gates, and
/// every tool call the service received.
pub struct ToolWorld {
    /// The configuration as JSON text, given to every mapping call as is.
    pub config: String,
    pub gated: Vec<String>,
    /// `{"tool", "arguments"}` for each call the service received, in order.
    pub calls: Vec<Value>,
}

/// How a call ended for the model.
pub(super) enum Played {
    /// The gate decided (and the reply to the model is the component's).
    Outcome(Outcome),
    /// Refused before the gate was asked (a bad call, a failed premise read), or not gated
    /// and passed through: nothing recorded. As the vectors spell it.
    Before(Value),
}

/// A gate error as the vectors spell it: its case, and the JSON pointer of an invalid field.
fn error_json(e: &GateError) -> Value {
    match e {
        GateError::InvalidField(f) => json!({"case": "invalid-field", "field": f.field}),
        other => json!({"case": gate_error_case(other)}),
    }
}

fn ok_result(value: Value) -> Value {
    json!({"content": [{"type": "text", "text": value.to_string()}],
           "structuredContent": value, "isError": false})
}

fn error_result(code: &str) -> Value {
    json!({"content": [{"type": "text", "text": code}], "isError": true})
}

/// A tool's answer as text for a reply: a JSON string's own text, else the JSON.
fn answer_text(value: &str) -> String {
    match serde_json::from_str::<Value>(value) {
        Ok(Value::String(s)) => s,
        _ => value.to_string(),
    }
}

impl World {
    /// A call of `tool` at the service: its MCP `CallToolResult`.
    pub fn call_tool(&mut self, tool: &str, arguments: &Value, now_ms: u64) -> Value {
        if let Some(t) = self.tools.as_mut() {
            t.calls.push(json!({"tool": tool, "arguments": arguments}));
        }
        let result = self.tool_result(tool, arguments, now_ms);
        note(
            json!({"kind": "tool", "tool": tool, "arguments": arguments, "result": result,
                    "refunded_cents": self.refunded_cents()}),
        );
        result
    }

    fn tool_result(&mut self, tool: &str, args: &Value, now_ms: u64) -> Value {
        let s = |k: &str| args.get(k).and_then(Value::as_str);
        match tool {
            "get_order" => {
                let Some(order) = s("order_id") else {
                    return error_result("invalid_arguments: field=\"/order_id\"");
                };
                if self.failing_reads > 0 {
                    self.failing_reads -= 1;
                    return error_result("unavailable: the order system did not answer");
                }
                match self.payments.premises(order, s("excluding")) {
                    Ok(p) => ok_result(json!({"order_id": order, "eligible": p["eligible"],
                                              "refunded_total": p["refunded_by_others_cents"]})),
                    Err(e) => error_result(&e.detail()),
                }
            }
            "create_refund" => {
                let amount = args.get("amount_cents").and_then(Value::as_u64);
                let (Some(order), Some(amount)) = (s("order_id"), amount) else {
                    return error_result("invalid_arguments: order_id and amount_cents");
                };
                let reference = s("reference");
                match self
                    .payments
                    .refund(order, amount, reference, reference, now_ms)
                {
                    Ok(r) => ok_result(json!({"refund_id": r.id, "order_id": r.order,
                                              "amount_cents": r.amount_cents})),
                    Err(e) => error_result(&e.detail()),
                }
            }
            "find_refund" => {
                let Some(reference) = s("reference") else {
                    return error_result("invalid_arguments: field=\"/reference\"");
                };
                match self.payments.find_by_reference(reference) {
                    Ok(found) => ok_result(json!({"found": found.map(|r| json!({
                        "refund_id": r.id, "order_id": r.order, "amount_cents": r.amount_cents}))})),
                    Err(e) => error_result(&e.detail()),
                }
            }
            other => error_result(&format!("unknown_tool: name={other:?}")),
        }
    }

    /// Calls `call` at the service and reads its result as the mapping reads answers
    /// (`mcp-answer`).
    fn answer_of(&mut self, call: &ToolCall, now_ms: u64) -> Result<ToolAnswer, String> {
        let args: Value = serde_json::from_str(&call.arguments)
            .map_err(|e| format!("the mapping gave arguments that are not JSON: {e}"))?;
        let result = self.call_tool(&call.tool, &args, now_ms);
        gt::mcp_answer(&result.to_string()).map_err(|e| format!("mcp-answer: {e:?}"))
    }

    /// The gate's step for a gated tool's effect, answered by calling tools through the
    /// gate's mapping, row by row as ARCHITECTURE.md's table says; `None` when the step is
    /// not about a gated tool.
    pub fn answer_by_tools(&mut self, ask: &Ask, now_ms: u64) -> Option<Reply> {
        let t = self.tools.as_ref()?;
        let target = match ask {
            Ask::Capture(r) => &r.target,
            Ask::Apply(r) => &r.target,
            Ask::Query(r) => &r.target,
            Ask::Authorize(_) | Ask::Sleep(_) | Ask::Crash(_) | Ask::Done(_) => return None,
        };
        if !t.gated.contains(target) {
            return None;
        }
        let config = t.config.clone();
        let failed = |e: GateError| Reply::Failed(format!("{e:?}"));
        Some(match ask {
            Ask::Capture(r) => match gt::premise_call(&config, &r.target, &r.effect) {
                Err(e) => failed(e),
                Ok(None) => Reply::Failed("the tool has no premise tool".into()),
                Ok(Some(call)) => match self.answer_of(&call, now_ms) {
                    Err(why) => Reply::Failed(why),
                    Ok(a) if a.is_error => Reply::Failed(answer_text(&a.value)),
                    Ok(a) => match gt::premises(&config, &r.target, &a.value) {
                        Ok(p) => Reply::Captured(p),
                        Err(e) => failed(e),
                    },
                },
            },
            Ask::Apply(r) => {
                match gt::send_call(&config, &r.target, &r.effect, &r.idempotency_key) {
                    // Nothing was sent.
                    Err(e) => Reply::Rejected(format!("{e:?}")),
                    Ok(call) => match self.answer_of(&call, now_ms) {
                        // The service's answer is unreadable: it may have applied.
                        Err(why) => Reply::Unknown(why),
                        Ok(a) if a.is_error => Reply::Rejected(answer_text(&a.value)),
                        Ok(a) => Reply::Applied(a.value),
                    },
                }
            }
            Ask::Query(r) => match gt::lookup_call(&config, &r.target, &r.effect_id, &r.effect) {
                Err(e) => failed(e),
                Ok(None) => Reply::Failed("the tool has no lookup tool".into()),
                Ok(Some(call)) => match self.answer_of(&call, now_ms) {
                    Err(why) => Reply::Failed(why),
                    Ok(a) if a.is_error => Reply::Failed(answer_text(&a.value)),
                    Ok(a) => match gt::found(&config, &r.target, &a.value) {
                        Ok(true) => Reply::Found(a.value),
                        Ok(false) => Reply::NotFound,
                        Err(e) => failed(e),
                    },
                },
            },
            Ask::Authorize(_) | Ask::Sleep(_) | Ask::Crash(_) | Ask::Done(_) => {
                unreachable!("answered above")
            }
        })
    }
}

impl Run {
    fn tools_config(&self) -> Res<String> {
        self.world
            .tools
            .as_ref()
            .map(|t| t.config.clone())
            .ok_or_else(|| "a tool call needs the vector's `config`".to_string())
    }

    /// The tool a gated effect is a call of (its target's name), if the vector gates tools.
    pub(super) fn tool_of(&self, o: &Outcome) -> Res<Option<String>> {
        let Some(t) = self.world.tools.as_ref() else {
            return Ok(None);
        };
        let receipt = crate::interlock::gate::gate::receipt(&o.effect_id, None)
            .map_err(|e| format!("receipt: {e:?}"))?;
        let r: Value = serde_json::from_str(&receipt).map_err(|e| format!("receipt: {e}"))?;
        Ok(r["target"]["name"]
            .as_str()
            .filter(|n| t.gated.iter().any(|g| g == n))
            .map(ToString::to_string))
    }

    /// The reply to the model for `o`, a call of `tool`, added to the outcome as the
    /// vectors spell it: `is_error`, `message` and `reply_outcome`.
    pub(super) fn add_reply(&self, tool: &str, o: &Outcome, seen: &mut Value) {
        let r = gt::reply(tool, o);
        seen["is_error"] = json!(r.is_error);
        seen["message"] = json!(r.message);
        seen["reply_outcome"] = serde_json::from_str(&r.outcome).unwrap_or(Value::Null);
    }

    /// The model calls `tool` with `arguments` (its task's call): the host's loop.
    pub(super) fn play_call(&mut self, name: &str, crash: Option<Crash>) -> Result<Played, Stop> {
        let (tool, args) = self.tasks[name]
            .call
            .clone()
            .ok_or_else(|| format!("task {name:?} is not a tool call"))?;
        let config = self.tools_config()?;
        self.host();
        let now = driver::now_ms();
        let gated = self
            .world
            .tools
            .as_ref()
            .is_some_and(|t| t.gated.contains(&tool));
        if !gated {
            // Not an effect: the call goes to the service untouched.
            let result = self.world.call_tool(&tool, &args, now);
            return Ok(Played::Before(json!({"passed_through": result})));
        }
        let args_text = args.to_string();
        let before = |e: GateError| Ok(Played::Before(json!({"error": error_json(&e)})));
        let premises = match gt::premise_call(&config, &tool, &args_text) {
            Err(e) => return before(e),
            Ok(None) => None,
            Ok(Some(call)) => match self.world.answer_of(&call, now) {
                Err(why) => return Err(Stop::Failed(why)),
                Ok(a) if a.is_error => {
                    let answer = answer_text(&a.value);
                    return Ok(Played::Before(
                        json!({"error": {"case": "premise-tool", "answer": answer}}),
                    ));
                }
                Ok(a) => Some(a.value),
            },
        };
        let authority = self.host_authority.as_ref().map(Value::to_string);
        let proposal = match gt::proposal(
            &config,
            &tool,
            &args_text,
            premises.as_deref(),
            AGENT,
            authority.as_deref(),
        ) {
            Err(e) => return before(e),
            Ok(p) => p,
        };
        if let Some(t) = self.tasks.get_mut(name) {
            t.proposal = serde_json::from_str(&proposal).unwrap_or(Value::Null);
        }
        let first = match self.submit_step(&proposal) {
            Err(e) => return before(e),
            Ok(s) => s,
        };
        Ok(Played::Outcome(self.drive(first, crash, false)?))
    }

    /// The task's last result when the gate was never asked (a bad call, a pass-through).
    pub(super) fn record_before(&mut self, name: &str, v: &Value) {
        let t = self.tasks.get_mut(name).expect("a known task");
        t.finished = true;
        t.last = Some(v.clone());
    }

    /// `call`: the model calls a tool (a new task, or its task's call again).
    pub(super) fn tool_call(&mut self, step: &Value) -> Res<()> {
        let name = str_field(step, "task")?.to_string();
        let call = (
            str_field(step, "tool")?.to_string(),
            field(step, "arguments")?.clone(),
        );
        match self.tasks.get_mut(&name) {
            Some(t) => t.call = Some(call),
            None => {
                let task = Task {
                    proposal: Value::Null,
                    finished: false,
                    last: None,
                    call: Some(call),
                };
                self.tasks.insert(name.clone(), task);
                self.order.push(name.clone());
            }
        }
        let crash = match step.get("crash").and_then(Value::as_str) {
            None => None,
            Some("before_intent") => {
                self.die();
                return Ok(());
            }
            Some("after_intent") => Some(Crash::AfterIntent),
            Some("after_commit") => Some(Crash::AfterCommit),
            Some(other) => return Err(format!("unknown crash point {other:?}")),
        };
        let journal = self.journal_sha256();
        let refunds = self.world.payments.refund_count();
        let got = match self.play_call(&name, crash) {
            Err(Stop::Crashed) => {
                self.die();
                return Ok(());
            }
            Err(Stop::Failed(e)) => return Err(format!("call {name}: {e}")),
            Ok(Played::Outcome(o)) => {
                if crash.is_some() {
                    self.failures
                        .push(format!("call {name}: the crash point was never reached"));
                }
                self.record(&name, &o)?
            }
            Ok(Played::Before(v)) => {
                if self.journal_sha256() != journal {
                    self.failures.push(format!(
                        "call {name}: refused before the gate, yet the journal changed"
                    ));
                }
                if self.world.payments.refund_count() != refunds {
                    self.failures.push(format!(
                        "call {name}: refused before the gate, yet a refund was made"
                    ));
                }
                self.record_before(&name, &v);
                v
            }
        };
        if let Some(want) = step.get("expect") {
            self.failures
                .extend(check(&format!("call {name}"), &got, want));
        }
        Ok(())
    }

    /// `check_config`: the configuration is checked as a host checks it at start
    /// (`check-config`, then `check-authority` when the step gives the host's authority);
    /// nothing is recorded.
    pub(super) fn check_config(&mut self, step: &Value) -> Res<()> {
        let config = match field(step, "config")? {
            Value::String(text) => text.clone(),
            v => v.to_string(),
        };
        let journal = self.journal_sha256();
        self.host();
        // With `authority` (the host's; `null`: none), also whether every gated tool has one.
        let authority = step
            .get("authority")
            .map(|a| (!a.is_null()).then(|| a.to_string()));
        // `strict`: checked as a host with strict authority checks it.
        let strict = step.get("strict") == Some(&Value::Bool(true)) || self.strict;
        let checked = gt::check_config(&config).and_then(|gated| match &authority {
            Some(a) => gt::check_authority(&config, a.as_deref(), strict).map(|_| gated),
            None => Ok(gated),
        });
        let got = match checked {
            Ok(gated) => json!({"gated": gated}),
            Err(e) => json!({"error": error_json(&e)}),
        };
        note(
            json!({"kind": "gate", "worker": self.worker, "name": "tools.checkConfig",
                    "args": [config], "out": got}),
        );
        if let Some(want) = step.get("expect") {
            self.failures.extend(check("check_config", &got, want));
        }
        if self.journal_sha256() != journal {
            self.failures
                .push("check_config: the journal changed".into());
        }
        Ok(())
    }

    /// A tool-gating vector's world: its configuration checked (by the gate), the gated
    /// tools routed.
    pub(super) fn start_tools(&mut self, config: &Value) -> Res<()> {
        let text = config.to_string();
        let gated = gt::check_config(&text).map_err(|e| format!("the vector's config: {e:?}"))?;
        let authority = self.host_authority.as_ref().map(Value::to_string);
        gt::check_authority(&text, authority.as_deref(), self.strict)
            .map_err(|e| format!("the vector's config has a tool without authority: {e:?}"))?;
        self.world.tools = Some(ToolWorld {
            config: text,
            gated,
            calls: Vec::new(),
        });
        crate::interlock::gate::gate::set_routes(&self.world.routes());
        Ok(())
    }
}
