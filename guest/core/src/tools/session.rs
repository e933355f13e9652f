//! The tool-gating loop as a sans-IO machine: the loop every host ran around the gate (the
//! MCP proxies, `protect()`, the framework bindings) written once. A host only calls the
//! tool it is told, with the arguments it is told, and hands back what came back; or sleeps
//! when told. Which tool answers what, what an answer means, the messages to the model:
//! all here.
//!
//! One gated call: the premise tool is read (when the configuration names one), the
//! proposal is made from the call and that answer, and the gate's steps become tool calls:
//! a re-check calls the premise tool again on the recorded effect, a send calls the tool
//! itself with the gate's idempotency key, a lookup calls the lookup tool. A call that
//! cannot be proposed (a bad argument, a premise read that failed) ends before the gate is
//! asked, nothing recorded.
//!
//! A call that waits for a person's approval, when the configuration names a `decider` who
//! may decide it now, asks them (`ToolNext::Ask`: an MCP elicitation, form mode) what the
//! call is and what they decide; their answer is recorded as their decision (`gate.decide`,
//! checked against their own lease and the route as every decision is), and the call goes
//! on from there: approved, it is sent (once); rejected, the model is told who and why. No
//! answer (declined, cancelled, a client that cannot be asked), or a decision the gate
//! refuses: the call answers pending, as without a decider (with why, for a refusal).
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde_json::{json, Value};

use super::{mcp_answer, reply, ToolCall, ToolReply, ToolsConfig};
use crate::canon::canonical;
use crate::journal::Journal;
use crate::proposal::parse_input;
use crate::types::{
    Ask, CallAnswer, ClaimWait, CrashPoint, GateError, Outcome, Reason, Reply, State, Step,
};
use crate::Gate;

/// How the host's tools answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Results {
    /// An MCP `CallToolResult` (its `isError` is the tool refusing).
    Mcp,
    /// A plain function's return value as JSON.
    Plain,
}

/// What the host does next for a gated call (or a recovery).
#[derive(Clone, Debug, PartialEq)]
pub enum ToolNext {
    /// Call `call.tool` with `call.arguments` (a JSON object), then `resume(id, answer)`.
    /// `timeout_ms`: a send; give up waiting after this long and answer `Failed` (its fate
    /// is then unknown, and the gate settles it by the tool's tier).
    Call {
        id: u64,
        call: ToolCall,
        timeout_ms: Option<u64>,
    },
    /// Wait this long (another worker's send is still in flight), then `resume(id, Slept)`.
    Sleep { id: u64, ms: u64 },
    /// Ask the person at the client (the configuration's `decider`): `request` is an MCP
    /// `elicitation/create` request's params, form mode (`mode`, `message`, a flat
    /// `requestedSchema`). Then `resume(id, answer)`: `Returned` with the client's
    /// `ElicitResult` as JSON (`{"action": "accept", "content": {...}}`), or `Failed` (or
    /// `Refused`) when no one could be asked (the client declared no `elicitation`): the
    /// call then answers pending.
    Ask { id: u64, request: Value },
    /// The call is over: what to answer the model.
    Done(ToolDone),
    /// For tests (`Gate::crash_at`): stop here as a killed process would.
    Crash(CrashPoint),
}

/// How a gated call ended.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDone {
    pub tool: String,
    /// The answer for the model: `message` as text, `is_error` unless it happened, and
    /// `outcome` (the gate's outcome as JSON, or `{"error": ...}` when the call ended
    /// before the gate was asked, nothing recorded).
    pub reply: ToolReply,
    /// The gate's outcome, when the gate was asked.
    pub outcome: Option<Outcome>,
}

/// What a call waits for.
#[derive(Clone, Debug)]
enum Pending {
    /// The premise read a new call's proposal needs.
    PremiseRead { tool: String, arguments: Value },
    /// A gate step performed as a tool call (or a sleep). `waiting`: the operation already
    /// waits out live claims (a recovery, or a call that met one).
    Step {
        tool: String,
        step: Step,
        waiting: bool,
    },
    /// A person asked to decide the call's approval: the call's proposal (submitted again
    /// once decided), the pending outcome, who decides.
    Person {
        tool: String,
        proposal: String,
        pending: Outcome,
        decider: String,
    },
}

/// The machine: one configuration, the agent, the host's authority, and the calls in
/// progress.
#[derive(Debug)]
pub struct ToolSession {
    config: ToolsConfig,
    agent: String,
    authority: Option<Value>,
    results: Results,
    wait: ClaimWait,
    pending: BTreeMap<u64, Pending>,
    next_id: u64,
}

/// A session's options (hosts give them once, at start).
#[derive(Clone, Debug)]
pub struct Options {
    pub agent: String,
    /// The host's authority for gated tools whose configuration names none.
    pub authority: Option<Value>,
    /// Strict authority: a gated tool with no authority at all is refused at start.
    pub strict: bool,
    pub results: Results,
    pub wait: ClaimWait,
}

/// What a configured session says at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    /// The tools it gates; every other tool passes through untouched.
    pub gated: Vec<String>,
    /// The gated tools that run under the agent's standing lease (the host prints
    /// `standing_notice` once when there are any).
    pub standing: Vec<String>,
    /// Where the journal is: the configuration's `journal_dir`, else
    /// [`crate::defaults::TOOLS_JOURNAL_DIR`] (a host may be given another).
    pub journal_dir: String,
}

impl ToolSession {
    /// Checks the configuration and the authority (every problem at its JSON pointer).
    pub fn start(config: &str, options: Options) -> Result<(ToolSession, Started), GateError> {
        let parsed = ToolsConfig::parse(config)?;
        let standing = parsed.check_authority(options.authority.as_ref(), options.strict)?;
        crate::defaults::standing_lease_name(&options.agent)?;
        let started = Started {
            gated: parsed.gated(),
            standing,
            journal_dir: parsed
                .journal_dir
                .clone()
                .unwrap_or_else(|| crate::defaults::TOOLS_JOURNAL_DIR.into()),
        };
        Ok((
            ToolSession {
                config: parsed,
                agent: options.agent,
                authority: options.authority,
                results: options.results,
                wait: options.wait,
                pending: BTreeMap::new(),
                next_id: 0,
            },
            started,
        ))
    }

    pub fn config(&self) -> &ToolsConfig {
        &self.config
    }

    /// One gated call of `tool` with `arguments` (a JSON object as text).
    pub fn call(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        tool: &str,
        arguments: &str,
    ) -> Result<ToolNext, GateError> {
        let args = match parse_input(arguments, "/arguments") {
            Ok(a) => a,
            Err(e) => return Ok(self.refused(tool, &e)),
        };
        match self.config.premise_call(tool, &args) {
            Err(e) => Ok(self.refused(tool, &e)),
            Ok(Some(read)) => Ok(self.ask(
                Pending::PremiseRead {
                    tool: tool.into(),
                    arguments: args,
                },
                read,
                None,
            )),
            Ok(None) => self.propose(gate, j, now_ms, tool, &args, None),
        }
    }

    /// Recovers one open effect of a gated tool, waiting out a live claim.
    pub fn recover(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        effect_id: &str,
    ) -> Result<ToolNext, GateError> {
        // The target of an effect of tool gating is its tool.
        let tool = gate.effect_target(j, effect_id)?;
        let step = gate.recover_waiting(j, now_ms, effect_id, self.wait)?;
        self.follow(gate, j, now_ms, tool, step, true)
    }

    /// Continues call `id` with what its tool did.
    pub fn resume(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        id: u64,
        answer: CallAnswer,
    ) -> Result<ToolNext, GateError> {
        let pending = self
            .pending
            .remove(&id)
            .ok_or(GateError::UnknownOperation(id))?;
        match pending {
            Pending::PremiseRead { tool, arguments } => {
                let read = match self.read(answer) {
                    Ok(v) => v,
                    Err(no) => return Ok(self.unread(&tool, no)),
                };
                self.propose(gate, j, now_ms, &tool, &arguments, Some(read))
            }
            Pending::Step {
                tool,
                step,
                waiting,
            } => {
                let reply = self.reply_to(&tool, &step.ask, answer);
                let next = gate.resume(j, now_ms, step.op, reply)?;
                self.follow(gate, j, now_ms, tool, next, waiting)
            }
            Pending::Person {
                tool,
                proposal,
                pending,
                decider,
            } => self.decided(gate, j, now_ms, tool, &proposal, &pending, &decider, answer),
        }
    }

    /// Drops call `id` (the host will not finish it): what is durable stays, and recovery
    /// resumes the effect once its claim expires.
    pub fn cancel(&mut self, gate: &mut Gate, id: u64) {
        if let Some(Pending::Step { step, .. }) = self.pending.remove(&id) {
            gate.cancel(step.op);
        }
    }

    fn propose(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        tool: &str,
        args: &Value,
        premises: Option<Value>,
    ) -> Result<ToolNext, GateError> {
        let proposal = match self.config.proposal(
            tool,
            args,
            premises.as_ref(),
            &self.agent,
            self.authority.as_ref(),
        ) {
            Ok(p) => p,
            Err(e) => return Ok(self.refused(tool, &e)),
        };
        match gate.submit(j, now_ms, &proposal) {
            Ok(Step {
                ask: Ask::Done(o), ..
            }) if matches!(
                o.reason,
                Some(Reason::ApprovalPending | Reason::ApprovalStale)
            ) =>
            {
                self.ask_person(gate, j, now_ms, tool, args, proposal, o)
            }
            Ok(step) => self.follow(gate, j, now_ms, tool.into(), step, false),
            // Refused as input (strict authority, say): nothing was recorded.
            Err(e @ (GateError::InvalidField { .. } | GateError::InvalidJson(_))) => {
                Ok(self.refused(tool, &e))
            }
            Err(e) => Err(e),
        }
    }

    /// Turns gate steps into tool calls until one needs the host. A call that meets
    /// another worker's live claim on its effect (a duplicate call in flight) waits it out
    /// as a recovery does, then reports what happened.
    fn follow(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        tool: String,
        mut step: Step,
        mut waiting: bool,
    ) -> Result<ToolNext, GateError> {
        loop {
            if let Ask::Done(o) = &step.ask {
                if !waiting && o.state == State::Dispatched && o.reason == Some(Reason::ClaimLive) {
                    let id = o.effect_id.clone();
                    step = gate.recover_waiting(j, now_ms, &id, self.wait)?;
                    waiting = true;
                    continue;
                }
            }
            let call = match &step.ask {
                Ask::Crash(point) => return Ok(ToolNext::Crash(*point)),
                Ask::Done(o) => {
                    let mut r = reply(&tool, o);
                    if o.reason == Some(Reason::ApprovalRejected) {
                        if let Some(why) = rejected_why(gate, j, now_ms, &o.effect_id)? {
                            r.message.push_str(&format!(" Their reason: \"{why}\"."));
                        }
                    }
                    return Ok(ToolNext::Done(ToolDone {
                        tool,
                        reply: r,
                        outcome: Some(o.clone()),
                    }));
                }
                Ask::Sleep(ms) => {
                    let ms = *ms;
                    let id = self.wait_on(tool, step, waiting);
                    return Ok(ToolNext::Sleep { id, ms });
                }
                // A tool's authority is a lease or an approval, never a host check.
                Ask::Authorize { .. } => Err(Reply::Failed(
                    "tool gating installs no host authority check".into(),
                )),
                Ask::Capture { target, effect, .. } => {
                    self.recorded(target, effect).and_then(|e| {
                        // The recorded effect is the call's arguments less the idempotency
                        // argument: the same effect id, the same premise read.
                        match self.config.premise_call(target, &e) {
                            Ok(Some(c)) => Ok((c, None)),
                            Ok(None) => Err(Reply::Failed(format!("{target} has no premise tool"))),
                            Err(err) => Err(Reply::Failed(err.to_string())),
                        }
                    })
                }
                Ask::Apply {
                    target,
                    effect,
                    idempotency_key,
                    effect_id,
                    ..
                } => self.recorded(target, effect).and_then(|e| {
                    let timeout = gate
                        .send_timeout_ms(j, effect_id)
                        .map_err(|err| Reply::Unknown(err.to_string()))?;
                    match self.config.send_call(target, &e, idempotency_key) {
                        Ok(c) => Ok((c, Some(timeout))),
                        // Nothing can have been sent: the call was never made.
                        Err(err) => Err(Reply::Rejected(err.to_string())),
                    }
                }),
                Ask::Query {
                    target,
                    effect,
                    effect_id,
                } => self.recorded(target, effect).and_then(|e| {
                    match self.config.lookup_call(target, effect_id, &e) {
                        Ok(Some(c)) => Ok((c, None)),
                        Ok(None) => Err(Reply::Failed(format!("{target} has no lookup tool"))),
                        Err(err) => Err(Reply::Failed(err.to_string())),
                    }
                }),
            };
            match call {
                Ok((call, timeout_ms)) => {
                    let id = self.wait_on(tool, step, waiting);
                    return Ok(ToolNext::Call {
                        id,
                        call,
                        timeout_ms,
                    });
                }
                Err(reply) => step = gate.resume(j, now_ms, step.op, reply)?,
            }
        }
    }

    /// A call waiting for a person's approval (`o`: PROPOSED `approval_pending`, or
    /// `approval_stale`, back to its approvers on premises that changed): when the
    /// configuration names a decider who may decide its item now, the question for them;
    /// else the pending answer (with why no one was asked, when a decider is named).
    #[allow(clippy::too_many_arguments)]
    fn ask_person(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        tool: &str,
        args: &Value,
        proposal: String,
        o: Outcome,
    ) -> Result<ToolNext, GateError> {
        let Some(decider) = self.config.decider().map(String::from) else {
            return Ok(pending_reply(tool, &o, None));
        };
        let item = match gate.item(j, now_ms, &o.effect_id)? {
            Some(i) if i["kind"] == "approval" => i,
            _ => return Ok(pending_reply(tool, &o, None)),
        };
        let names = |k: &str| -> Vec<String> {
            item[k]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default()
        };
        // Who may decide now is the gate's (the item's route); one who may not is not asked.
        let approvers = names("approvers");
        if !approvers.contains(&decider) {
            let note = format!(
                "{decider}, who decides at the client, is not among its approvers now ({})",
                approvers.join(", ")
            );
            return Ok(pending_reply(tool, &o, Some(note)));
        }
        if names("approved_by").contains(&decider) {
            let note = format!("{decider} approved it already; it needs another approver");
            return Ok(pending_reply(tool, &o, Some(note)));
        }
        let request = question(tool, args, &item, &decider);
        let id = self.take_id();
        self.pending.insert(
            id,
            Pending::Person {
                tool: tool.into(),
                proposal,
                pending: o,
                decider,
            },
        );
        Ok(ToolNext::Ask { id, request })
    }

    /// The person's answer: recorded as their decision, then the call goes on as the
    /// agent's next call would (the proposal submitted again): approved, it is sent (once,
    /// re-checked as any other); rejected, the model is told who and why; still pending
    /// (more approvers needed, or the decision refused), the pending answer.
    #[allow(clippy::too_many_arguments)]
    fn decided(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        tool: String,
        proposal: &str,
        pending: &Outcome,
        decider: &str,
        answer: CallAnswer,
    ) -> Result<ToolNext, GateError> {
        let (verdict, why) = match person_answer(answer) {
            Ok(Some(d)) => d,
            // Declined, cancelled, or no one could be asked: it waits, as before.
            Ok(None) => return Ok(pending_reply(&tool, pending, None)),
            Err(bad) => {
                let note = format!("the answer at the client was not a decision ({bad})");
                return Ok(pending_reply(&tool, pending, Some(note)));
            }
        };
        let mut decision =
            json!({"item": pending.effect_id, "decider": decider, "verdict": verdict});
        if let Some(w) = why {
            decision["why"] = json!(w);
        }
        let refused = match gate.decide(j, now_ms, &canonical(&decision)) {
            Ok(_) => None,
            // Refused (no live lease, not an approver, decided meanwhile): nothing recorded.
            Err(e @ (GateError::InvalidField { .. } | GateError::InvalidJson(_))) => Some(format!(
                "{decider}'s decision at the client was not recorded: {}",
                describe(&e)
            )),
            Err(e) => return Err(e),
        };
        let step = match gate.submit(j, now_ms, proposal) {
            Ok(s) => s,
            Err(e @ (GateError::InvalidField { .. } | GateError::InvalidJson(_))) => {
                return Ok(self.refused(&tool, &e))
            }
            Err(e) => return Err(e),
        };
        let next = self.follow(gate, j, now_ms, tool, step, false)?;
        Ok(match (next, refused) {
            (ToolNext::Done(mut d), Some(note))
                if d.outcome.as_ref().and_then(|o| o.reason) == Some(Reason::ApprovalPending) =>
            {
                let o = d.outcome.take().expect("matched");
                pending_reply(&d.tool, &o, Some(note))
            }
            (next, _) => next,
        })
    }

    /// The recorded effect of a step, as a JSON value.
    fn recorded(&self, target: &str, effect: &str) -> Result<Value, Reply> {
        serde_json::from_str(effect)
            .map_err(|e| Reply::Failed(format!("the recorded effect of {target}: {e}")))
    }

    /// What a tool's answer means for the step it answers.
    fn reply_to(&self, tool: &str, ask: &Ask, answer: CallAnswer) -> Reply {
        match ask {
            Ask::Sleep(_) => match answer {
                CallAnswer::Slept => Reply::Slept,
                other => Reply::Failed(format!("waited for a sleep, got {other:?}")),
            },
            Ask::Capture { target, .. } => match self.value(answer) {
                Ok(v) => match self.config.premises(target, &v) {
                    Ok(p) => Reply::Captured(canonical(&p)),
                    Err(e) => Reply::Failed(e.to_string()),
                },
                Err(why) => Reply::Failed(why),
            },
            Ask::Apply { .. } => match answer {
                CallAnswer::Returned(text) => match self.results {
                    Results::Plain => match serde_json::from_str::<Value>(&text) {
                        Ok(v) => Reply::Applied(canonical(&v)),
                        Err(e) => Reply::Unknown(format!("{tool} answered no JSON: {e}")),
                    },
                    Results::Mcp => match read_mcp(&text) {
                        // The tool's own error: it refused, and applied nothing.
                        Ok((true, v)) => Reply::Rejected(canonical(&v)),
                        Ok((false, v)) => Reply::Applied(canonical(&v)),
                        Err(why) => Reply::Unknown(why),
                    },
                },
                CallAnswer::Refused(m) => Reply::Rejected(m),
                CallAnswer::Failed(m) => Reply::Unknown(m),
                CallAnswer::Slept => Reply::Unknown("the send was answered with a sleep".into()),
            },
            Ask::Query { target, .. } => match self.value(answer) {
                Ok(v) => match self.config.found(target, &v) {
                    Ok(true) => Reply::Found(canonical(&v)),
                    Ok(false) => Reply::NotFound,
                    Err(e) => Reply::Failed(e.to_string()),
                },
                Err(why) => Reply::Failed(why),
            },
            Ask::Authorize { .. } | Ask::Crash(_) | Ask::Done(_) => {
                Reply::Failed("nothing was asked of a tool here".into())
            }
        }
    }

    /// A read's answer as a value, or why there is none (the tool's own error, no answer).
    fn read(&self, answer: CallAnswer) -> Result<Value, Unread> {
        match answer {
            CallAnswer::Returned(text) => match self.results {
                Results::Plain => serde_json::from_str(&text)
                    .map_err(|e| Unread::NoAnswer(format!("answered no JSON: {e}"))),
                Results::Mcp => match read_mcp(&text).map_err(Unread::NoAnswer)? {
                    (true, v) => Err(Unread::ToolError(v)),
                    (false, v) => Ok(v),
                },
            },
            CallAnswer::Refused(m) => Err(Unread::ToolError(Value::String(m))),
            CallAnswer::Failed(m) => Err(Unread::NoAnswer(m)),
            CallAnswer::Slept => Err(Unread::NoAnswer("answered with a sleep".into())),
        }
    }

    fn value(&self, answer: CallAnswer) -> Result<Value, String> {
        self.read(answer).map_err(|no| match no {
            Unread::ToolError(v) => format!("answered an error: {}", text_of(&v)),
            Unread::NoAnswer(m) => m,
        })
    }

    fn ask(&mut self, pending: Pending, call: ToolCall, timeout_ms: Option<u64>) -> ToolNext {
        let id = self.take_id();
        self.pending.insert(id, pending);
        ToolNext::Call {
            id,
            call,
            timeout_ms,
        }
    }

    /// Keeps `step` until the host answers it; the id to answer with.
    fn wait_on(&mut self, tool: String, step: Step, waiting: bool) -> u64 {
        let id = self.take_id();
        self.pending.insert(
            id,
            Pending::Step {
                tool,
                step,
                waiting,
            },
        );
        id
    }

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A call refused before the gate was asked: nothing recorded, nothing sent.
    fn refused(&self, tool: &str, e: &GateError) -> ToolNext {
        let detail = match e {
            GateError::InvalidField { field, problem } => {
                json!({"kind": "invalid_field", "field": field, "problem": problem})
            }
            other => json!({"kind": "gate_error", "message": other.to_string()}),
        };
        done_before_gate(
            tool,
            format!(
                "{tool} was NOT done and nothing was recorded: {}. Fix the call and try again.",
                describe(e)
            ),
            detail,
        )
    }

    /// A call whose premise read failed: nothing recorded, nothing sent.
    fn unread(&self, tool: &str, no: Unread) -> ToolNext {
        let premise_tool = self
            .config
            .premise_tool(tool)
            .unwrap_or_else(|| "the premise tool".into());
        let (m, detail) = match no {
            Unread::ToolError(v) => (
                format!("{premise_tool} answered an error: {}", text_of(&v)),
                json!({"kind": "premise_tool_error", "tool": premise_tool, "answer": v}),
            ),
            Unread::NoAnswer(why) => {
                let m = format!("{premise_tool} {why}");
                (
                    m.clone(),
                    json!({"kind": "premise_read_failed", "message": m}),
                )
            }
        };
        done_before_gate(
            tool,
            format!(
                "{tool} was NOT done and nothing was recorded: the facts it rests on could not be read ({m}). Try again later."
            ),
            detail,
        )
    }
}

/// The answer for a call still pending a person's approval, with `note` (why no person's
/// decision was recorded at the client) when there is one.
fn pending_reply(tool: &str, o: &Outcome, note: Option<String>) -> ToolNext {
    let mut r = reply(tool, o);
    if let Some(n) = note {
        r.message.push_str(&format!(" ({n}.)"));
    }
    ToolNext::Done(ToolDone {
        tool: tool.into(),
        reply: r,
        outcome: Some(o.clone()),
    })
}

/// Why the person who rejected effect `id` rejected it (the item's last rejection), when
/// they said.
fn rejected_why(
    gate: &mut Gate,
    j: &mut dyn Journal,
    now_ms: u64,
    id: &str,
) -> Result<Option<String>, GateError> {
    let Some(item) = gate.item(j, now_ms, id)? else {
        return Ok(None);
    };
    Ok(item["decisions"]
        .as_array()
        .and_then(|ds| ds.iter().rev().find(|d| d["verdict"] == "reject"))
        .and_then(|d| d["why"].as_str())
        .filter(|w| !w.trim().is_empty())
        .map(String::from))
}

/// The question for the person who decides a call's approval at the client: an MCP
/// `elicitation/create` request's params, form mode, with a flat schema (MCP 2025-06-18
/// and 2025-11-25): what the call is (the tool, its arguments, the premises it rests on,
/// the item's rule and route), a verdict (approve or reject) and why (required when the
/// route requires a justification).
fn question(tool: &str, args: &Value, item: &Value, decider: &str) -> Value {
    let text = |k: &str| item[k].as_str().unwrap_or("?").to_string();
    let mut message = format!(
        "{agent} asks to call {tool} with {args}. Rule {rule} sends it to a person: route {route}, item {id}.",
        agent = text("agent"),
        args = canonical(args),
        rule = text("rule"),
        route = text("route"),
        id = text("item"),
    );
    if let Some(p) = item["premises_seen"].as_object().filter(|p| !p.is_empty()) {
        message.push_str(&format!(
            " It rests on {}.",
            canonical(&Value::Object(p.clone()))
        ));
    }
    if let Some(c) = item["changed"].as_array().filter(|c| !c.is_empty()) {
        let changed: Vec<String> = c
            .iter()
            .map(|c| {
                format!(
                    "{} was {}, is now {}",
                    text_of(&c["name"]),
                    c["was"],
                    c["now"]
                )
            })
            .collect();
        message.push_str(&format!(
            " It was approved before, and what it rests on changed since: {}.",
            changed.join("; ")
        ));
    }
    let needed = item["approvals_needed"].as_u64().unwrap_or(1);
    if needed > 1 {
        message.push_str(&format!(" It needs {needed} approvers."));
    }
    message.push_str(&format!(
        " You decide as {decider}: approve it (it is then sent, once) or reject it (it is not sent), and say why."
    ));
    let justification = item["justification_required"] == true;
    let required = if justification {
        json!(["verdict", "why"])
    } else {
        json!(["verdict"])
    };
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "verdict": {"type": "string", "title": "Your decision", "enum": ["approve", "reject"]},
                "why": {"type": "string", "title": "Why", "description": "recorded with your decision"},
            },
            "required": required,
        },
    })
}

/// The person's answer (an MCP `ElicitResult` as JSON): their verdict and why, `None` when
/// they gave none (declined, cancelled, or no one could be asked), or why it is no answer.
fn person_answer(answer: CallAnswer) -> Result<Option<(String, Option<String>)>, String> {
    let text = match answer {
        CallAnswer::Returned(t) => t,
        CallAnswer::Refused(_) | CallAnswer::Failed(_) | CallAnswer::Slept => return Ok(None),
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("no JSON: {e}"))?;
    match v.get("action").and_then(Value::as_str) {
        Some("accept") => {}
        Some("decline" | "cancel") => return Ok(None),
        other => return Err(format!("action is {other:?}: accept, decline or cancel")),
    }
    let content = v.get("content").cloned().unwrap_or(Value::Null);
    let verdict = match content.get("verdict").and_then(Value::as_str) {
        Some(x @ ("approve" | "reject")) => x.to_string(),
        other => return Err(format!("verdict is {other:?}: approve or reject")),
    };
    let why = match content.get("why") {
        None | Some(Value::Null) => None,
        Some(Value::String(w)) if w.trim().is_empty() => None,
        Some(Value::String(w)) => Some(w.clone()),
        Some(other) => return Err(format!("why is {other}: text")),
    };
    Ok(Some((verdict, why)))
}

/// Why a premise read gave no premises.
enum Unread {
    /// The tool answered, with an error of its own (its answer).
    ToolError(Value),
    /// No answer came (it raised, the connection was lost, it answered no JSON).
    NoAnswer(String),
}

/// A JSON string's own text, else the canonical JSON.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => canonical(other),
    }
}

fn done_before_gate(tool: &str, message: String, detail: Value) -> ToolNext {
    ToolNext::Done(ToolDone {
        tool: tool.into(),
        reply: ToolReply {
            is_error: true,
            message,
            outcome: json!({ "error": detail }),
        },
        outcome: None,
    })
}

/// A gate error for the model (the same words in every host).
pub fn describe(e: &GateError) -> String {
    match e {
        GateError::InvalidJson(m) => format!("the input is not JSON: {m}"),
        GateError::InvalidField { field, problem } => {
            let at = if field.is_empty() {
                "its top level"
            } else {
                field
            };
            format!("invalid input at {at}: {problem}")
        }
        other => other.to_string(),
    }
}

/// An MCP `CallToolResult` as (is it the tool's error, its answer).
fn read_mcp(text: &str) -> Result<(bool, Value), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("no JSON: {e}"))?;
    let a = mcp_answer(&v).map_err(|e| format!("not a tool result: {e}"))?;
    Ok((a.is_error, a.value))
}

impl ToolsConfig {
    /// The name of `tool`'s premise tool, if it has one.
    fn premise_tool(&self, tool: &str) -> Option<String> {
        self.spec_of(tool)
            .ok()
            .and_then(|s| s.premises.as_ref().map(|(m, _)| m.tool.clone()))
    }
}

#[cfg(test)]
mod tests;
