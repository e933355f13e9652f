//! The friendly host API's loop as a sans-IO machine: an effect defined by a host's
//! functions (the original's `@gate.effect(key=..., premises=..., allowed=...,
//! lookup=...)`, Node's `gate.effect(def, fn)`) and how one call of it becomes a proposal
//! and the gate's steps. Written once: a host only calls the function it is told (by its
//! role) with the effect it is told, in its language's calling convention, and hands back
//! what came back; or sleeps when told.
//!
//! A call: the effect object is the call's values by parameter name; the key, the lease,
//! the bounds and the cap are the definition's values or its functions' answers; the
//! effect id comes from the proposal without bounds (they name premises not read yet);
//! the premises are read with that id (so a premise can leave the effect's own result
//! out); then the proposal is submitted and the gate's steps become calls: a re-check
//! calls `premises` (the names the gate asks for must all be there) and `allowed`, a send
//! calls the effect itself with the gate's idempotency key, a lookup calls `lookup` (no
//! value, `null` or `false`: not found).
//!
//! A definition may name a built-in target instead (`"builtin": "stripe.refund"`,
//! `crate::targets`): its premise read, its send and its lookup are then that target's, and
//! each becomes one or more service calls ([`Next::Request`]) the host makes with the
//! service's SDK and answers with what came back ([`EffectSession::answer`]).
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::{json, Map, Value};

use crate::canon::canonical;
use crate::journal::Journal;
use crate::proposal::{check_safe_numbers, parse_input, parse_json};
use crate::schema::{field_err, Obj};
use crate::targets::{self, Phase, ServiceAnswer, Target, Turn};
use crate::types::{Ask, CallAnswer, ClaimWait, CrashPoint, GateError, Outcome, Reply, Step};
use crate::Gate;

/// The functions a definition may give, by role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// `(effect) -> key`: the approved request's key.
    Key,
    /// `(effect) -> lease name`.
    Lease,
    /// `(effect) -> bounds`.
    Bounds,
    /// `(effect) -> cap`.
    Cap,
    /// `(effect, effect id) -> {name: value}`: the premises, read fresh, this effect's own
    /// result left out.
    Premises,
    /// `(effect, agent, effect id) -> bool`: the host's own authority check.
    Allowed,
    /// `(effect, idempotency key, effect id, attempt) -> result`: the effect itself.
    Apply,
    /// `(effect, effect id) -> result or null/false`: whether it already happened.
    Lookup,
}

impl Role {
    pub const ALL: [Role; 8] = [
        Role::Key,
        Role::Lease,
        Role::Bounds,
        Role::Cap,
        Role::Premises,
        Role::Allowed,
        Role::Apply,
        Role::Lookup,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Key => "key",
            Role::Lease => "lease",
            Role::Bounds => "bounds",
            Role::Cap => "cap",
            Role::Premises => "premises",
            Role::Allowed => "allowed",
            Role::Apply => "apply",
            Role::Lookup => "lookup",
        }
    }

    fn parse(s: &str) -> Option<Role> {
        Role::ALL.iter().copied().find(|r| r.as_str() == s)
    }
}

/// One call the host makes of a definition's function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub id: u64,
    /// The definition (its target's name).
    pub target: String,
    pub role: Role,
    /// The effect object (JSON text): the call's values by parameter name.
    pub effect: String,
    /// For `premises`, `allowed`, `apply`, `lookup`.
    pub effect_id: Option<String>,
    /// For `apply`: the idempotency key to pass the target (the effect id).
    pub idempotency_key: Option<String>,
    /// For `apply`: 0 for the first send, then 1, 2, ...
    pub attempt: u32,
    /// For `allowed`: who proposes.
    pub agent: Option<String>,
    /// For `apply`: give up waiting after this long and answer `Failed` (its fate is
    /// then unknown; the gate settles it by the target's tier).
    pub timeout_ms: Option<u64>,
}

/// One call of a service's SDK the host makes for a built-in target
/// ([`crate::targets::ServiceCall`], with where to send it).
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub id: u64,
    /// The definition (its target's name): which of the host's clients to use.
    pub target: String,
    /// The built-in target's service (`stripe`).
    pub service: String,
    pub call: targets::ServiceCall,
}

/// What the host does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    Call(Call),
    /// Make this call with the service's SDK, then `answer(id, what came back)`.
    Request(Request),
    /// Wait this long (another worker's send is still in flight), then `resume(id, Slept)`.
    Sleep {
        id: u64,
        ms: u64,
    },
    /// The proposal asked for with `propose` (JSON text), nothing submitted.
    Proposed(String),
    /// The gate's outcome.
    Done(Outcome),
    /// For tests (`Gate::crash_at`): stop here as a killed process would.
    Crash(CrashPoint),
}

/// An effect's definition, as a host gives it.
#[derive(Clone, Debug)]
struct Definition {
    target: String,
    /// The names of the call's values; `None`: the one value is the effect object.
    params: Option<Vec<String>>,
    /// The roles given as functions.
    functions: Vec<Role>,
    /// Values given as is.
    key: Option<Value>,
    lease: Option<String>,
    approval: Option<String>,
    bounds: Option<Value>,
    cap: Option<Value>,
    dedupes: bool,
    dedupe_window_ms: Option<u64>,
    timeout_ms: Option<u64>,
    agent: Option<String>,
    /// The built-in target whose premise read, send and lookup these are.
    builtin: Option<&'static dyn Target>,
}

/// The roles a built-in target performs itself.
const BUILTIN_ROLES: [Role; 3] = [Role::Premises, Role::Apply, Role::Lookup];

const DEFINITION_FIELDS: &[&str] = &[
    "builtin",
    "target",
    "params",
    "functions",
    "key",
    "lease",
    "approval",
    "bounds",
    "cap",
    "dedupes",
    "dedupe_window_ms",
    "timeout_ms",
    "agent",
];

const OVERRIDE_FIELDS: &[&str] = &["key", "lease", "approval", "premises"];

impl Definition {
    fn parse(text: &str) -> Result<Definition, GateError> {
        let v = parse_input(text, "")?;
        let d = Obj::strict(&v, "", "an effect definition", DEFINITION_FIELDS)?;
        let params = match d.get_some("params") {
            None => None,
            Some(_) => Some(d.names("params", "the names of the call's values, in order")?),
        };
        let functions = match d.get_some("functions") {
            None => Vec::new(),
            Some(Value::Array(list)) => list
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    r.as_str().and_then(Role::parse).ok_or_else(|| {
                        field_err(
                            &format!("/functions/{i}"),
                            "is not a role: key, lease, bounds, cap, premises, allowed, apply, lookup",
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(field_err("/functions", "must be a list of roles")),
        };
        let builtin = match d.opt_name("builtin", "")? {
            None => None,
            Some(name) => Some(Self::builtin(&d, &name, &params, &functions)?),
        };
        let tier = builtin.map(|b| b.tier());
        let dedupes = d.bool_or("dedupes", tier.is_some_and(|t| t.dedupes))?;
        let mut dedupe_window_ms = d.opt_u64("dedupe_window_ms")?;
        if let Some(t) = tier {
            // A definition may say its service does less (a stand-in that ignores
            // idempotency keys), never more.
            if dedupes && !t.dedupes {
                return Err(field_err("/dedupes", "this built-in target cannot dedupe"));
            }
            if let (Some(w), Some(most)) = (dedupe_window_ms, t.dedupe_window_ms) {
                if w > most {
                    return Err(field_err(
                        "/dedupe_window_ms",
                        format!("this built-in target dedupes for at most {most} ms"),
                    ));
                }
            }
            dedupe_window_ms = dedupe_window_ms.or(t.dedupe_window_ms.filter(|_| dedupes));
        }
        Ok(Definition {
            target: d.name("target", "the effect's target (recovery routes by it)")?,
            params,
            functions,
            key: d.get_some("key").cloned(),
            lease: d.opt_name("lease", "")?,
            approval: d.opt_name("approval", "")?,
            bounds: d.get_some("bounds").cloned(),
            cap: d.get_some("cap").cloned(),
            dedupes,
            dedupe_window_ms,
            timeout_ms: d.opt_u64("timeout_ms")?,
            agent: d.opt_name("agent", "")?,
            builtin,
        })
    }

    /// The built-in target `name`, checked against the rest of the definition: its effect
    /// is one object (no `params`), and its premise read, send and lookup are its own.
    fn builtin(
        d: &Obj<'_, '_>,
        name: &str,
        params: &Option<Vec<String>>,
        functions: &[Role],
    ) -> Result<&'static dyn Target, GateError> {
        let b = targets::builtin(name, "/builtin")?;
        if params.is_some() {
            return Err(field_err(
                "/params",
                format!(
                    "{name}'s effect is one object (the target checks its fields): give no params"
                ),
            ));
        }
        if let Some(i) = functions.iter().position(|r| BUILTIN_ROLES.contains(r)) {
            return Err(field_err(
                &format!("/functions/{i}"),
                format!(
                    "{} is {name}'s own: give no function for it",
                    functions[i].as_str()
                ),
            ));
        }
        let _ = d;
        Ok(b)
    }

    /// Whether the definition has `role`: a function of the host's, or its built-in
    /// target's own (its lookup only when the target can be looked up).
    fn has(&self, role: Role) -> bool {
        match self.builtin {
            Some(b) if BUILTIN_ROLES.contains(&role) => role != Role::Lookup || b.tier().lookup,
            _ => self.functions.contains(&role),
        }
    }

    /// The effect object of a call's values.
    fn effect(&self, values: &Value) -> Result<Value, GateError> {
        let list = values
            .as_array()
            .ok_or_else(|| field_err("/values", "must be a list of the call's values"))?;
        match &self.params {
            None => {
                if list.len() != 1 {
                    return Err(field_err(
                        "/effect",
                        format!(
                            "effect {} takes 1 argument (the effect object), got {}",
                            self.target,
                            list.len()
                        ),
                    ));
                }
                Obj::any(&list[0], "/effect", "the effect")?;
                Ok(list[0].clone())
            }
            Some(params) => {
                if list.len() != params.len() {
                    return Err(field_err(
                        "/effect",
                        format!(
                            "effect {} takes {} argument{} ({}), got {}",
                            self.target,
                            params.len(),
                            if params.len() == 1 { "" } else { "s" },
                            params.join(", "),
                            list.len()
                        ),
                    ));
                }
                Ok(Value::Object(
                    params.iter().cloned().zip(list.iter().cloned()).collect(),
                ))
            }
        }
    }
}

/// A call being made into a proposal: what is known so far.
#[derive(Clone, Debug)]
struct Draft {
    target: String,
    effect: Value,
    overrides: Map<String, Value>,
    key: Option<Value>,
    lease: Option<String>,
    bounds: Option<Value>,
    cap: Option<Value>,
    effect_id: Option<String>,
    premises: Option<Value>,
    /// Only the proposal is wanted (`propose`), not a submit.
    propose_only: bool,
}

#[derive(Clone, Debug)]
enum Pending {
    /// A function the proposal needs (key, lease, bounds, cap, premises).
    Draft(Draft, Role),
    /// A gate step performed as a call (or a sleep).
    Step(Step),
    /// A built-in target's service calls, for a draft's premises or a gate step.
    Service(Conversation, After),
}

/// A built-in target's step in progress: what it is about and the answers so far.
#[derive(Clone, Debug)]
struct Conversation {
    builtin: &'static dyn Target,
    target: String,
    phase: Phase,
    effect: Value,
    effect_id: String,
    idempotency_key: String,
    names: Vec<String>,
    timeout_ms: Option<u64>,
    /// The premise read a proposal is made from (not a re-check).
    decision: bool,
    answers: Vec<ServiceAnswer>,
}

impl Conversation {
    fn turn(&self) -> Turn {
        let cx = targets::Context {
            effect: &self.effect,
            effect_id: &self.effect_id,
            idempotency_key: &self.idempotency_key,
            names: &self.names,
            timeout_ms: self.timeout_ms,
            decision: self.decision,
        };
        self.builtin.turn(self.phase, &cx, &self.answers)
    }
}

/// What a conversation's reply goes to.
#[derive(Clone, Debug)]
enum After {
    /// The premises a proposal is made from.
    Draft(Draft),
    /// The gate's step.
    Step(Step),
}

/// The machine: the definitions, the defaults, the calls in progress.
#[derive(Debug)]
pub struct EffectSession {
    defs: BTreeMap<String, Definition>,
    /// The agent of definitions that name none.
    agent: String,
    /// Written into every proposal's target when set.
    clock_skew_ms: Option<u64>,
    wait: ClaimWait,
    pending: BTreeMap<u64, Pending>,
    next_id: u64,
}

impl Default for EffectSession {
    fn default() -> Self {
        EffectSession::empty()
    }
}

impl EffectSession {
    /// No definitions yet, the agent `agent`, the gate's claim wait.
    pub const fn empty() -> EffectSession {
        EffectSession {
            defs: BTreeMap::new(),
            agent: String::new(),
            clock_skew_ms: None,
            wait: ClaimWait {
                poll_ms: crate::defaults::CLAIM_WAIT_POLL_MS,
                max_polls: crate::defaults::CLAIM_WAIT_MAX_POLLS,
            },
            pending: BTreeMap::new(),
            next_id: 0,
        }
    }

    pub fn new(agent: &str, clock_skew_ms: Option<u64>, wait: ClaimWait) -> EffectSession {
        EffectSession {
            agent: agent.into(),
            clock_skew_ms,
            wait,
            ..EffectSession::empty()
        }
    }

    /// Defines an effect (or replaces its definition); the gate is told it routes it.
    /// Returns the name of the agent whose standing lease the effect runs under when it
    /// names no authority (for the host's notice), if it names none.
    pub fn define(
        &mut self,
        gate: &mut Gate,
        definition: &str,
    ) -> Result<Option<String>, GateError> {
        let d = Definition::parse(definition)?;
        let agent = d.agent.clone().unwrap_or_else(|| self.agent.clone());
        crate::schema::check_name(&agent, "/agent")?;
        let standing = (d.lease.is_none() && d.approval.is_none() && !d.has(Role::Lease))
            .then(|| agent.clone());
        self.defs.insert(d.target.clone(), d);
        gate.set_routes(self.defs.keys().cloned());
        Ok(standing)
    }

    /// One call of the effect `target` with `values` (a JSON list, in parameter order),
    /// `overrides` (`{"key", "lease", "approval", "premises"}`, any of them): its
    /// proposal, submitted.
    pub fn call(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        target: &str,
        values: &str,
        overrides: &str,
    ) -> Result<Next, GateError> {
        let draft = self.draft(target, values, overrides, false)?;
        self.advance(gate, j, now_ms, draft)
    }

    /// The proposal such a call would submit (the original's `fn.proposal(...)`): its
    /// functions are asked as for a call; nothing is submitted or recorded.
    pub fn propose(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        target: &str,
        values: &str,
        overrides: &str,
    ) -> Result<Next, GateError> {
        let draft = self.draft(target, values, overrides, true)?;
        self.advance(gate, j, now_ms, draft)
    }

    /// Submits a proposal made earlier (or by hand) and performs its steps through the
    /// definitions of its target.
    pub fn submit(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        proposal: &str,
    ) -> Result<Next, GateError> {
        let step = gate.submit(j, now_ms, proposal)?;
        self.follow(gate, j, now_ms, step)
    }

    /// Recovers one open effect, waiting out a live claim.
    pub fn recover(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        effect_id: &str,
    ) -> Result<Next, GateError> {
        let step = gate.recover_waiting(j, now_ms, effect_id, self.wait)?;
        self.follow(gate, j, now_ms, step)
    }

    /// Continues call `id` with what its function did.
    pub fn resume(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        id: u64,
        answer: CallAnswer,
    ) -> Result<Next, GateError> {
        let pending = self
            .pending
            .remove(&id)
            .ok_or(GateError::UnknownOperation(id))?;
        match pending {
            Pending::Draft(mut draft, role) => {
                let value = match answer {
                    CallAnswer::Returned(text) => {
                        parse_input(&text, &format!("/{}", role.as_str()))?
                    }
                    CallAnswer::Refused(m) | CallAnswer::Failed(m) => {
                        return Err(GateError::InvalidField {
                            field: format!("/{}", role.as_str()),
                            problem: format!(
                                "{}'s {} function failed: {m}; nothing was recorded",
                                draft.target,
                                role.as_str()
                            ),
                        })
                    }
                    CallAnswer::Slept => {
                        return Err(GateError::UnexpectedReply(format!(
                            "call {id} waits for the {} function's answer, got a sleep",
                            role.as_str()
                        )))
                    }
                };
                match role {
                    Role::Key => draft.key = Some(value),
                    Role::Lease => {
                        draft.lease = match value {
                            Value::Null => None,
                            Value::String(s) => Some(s),
                            _ => return Err(field_err("/lease", "must be a lease's name or null")),
                        }
                    }
                    Role::Bounds => draft.bounds = Some(value).filter(|v| !v.is_null()),
                    Role::Cap => draft.cap = Some(value).filter(|v| !v.is_null()),
                    Role::Premises => {
                        Obj::any(&value, "/premises", "the premises (name -> value)")?;
                        draft.premises = Some(value);
                    }
                    _ => unreachable!("only the proposal's roles are drafted"),
                }
                self.advance(gate, j, now_ms, draft)
            }
            Pending::Step(step) => {
                let reply = self.reply_to(&step.ask, answer);
                let next = gate.resume(j, now_ms, step.op, reply)?;
                self.follow(gate, j, now_ms, next)
            }
            p @ Pending::Service(..) => {
                self.pending.insert(id, p);
                Err(GateError::UnexpectedReply(format!(
                    "call {id} is a service call: answer it with what the service answered"
                )))
            }
        }
    }

    /// Continues service call `id` (a [`Next::Request`]) with what the service's SDK did.
    pub fn answer(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        id: u64,
        answer: ServiceAnswer,
    ) -> Result<Next, GateError> {
        match self.pending.remove(&id) {
            Some(Pending::Service(mut conv, after)) => {
                conv.answers.push(answer);
                self.converse(gate, j, now_ms, conv, after)
            }
            Some(other) => {
                self.pending.insert(id, other);
                Err(GateError::UnexpectedReply(format!(
                    "call {id} is a function's call, not a service call: resume it"
                )))
            }
            None => Err(GateError::UnknownOperation(id)),
        }
    }

    /// Drops call `id` (the host will not finish it).
    pub fn cancel(&mut self, gate: &mut Gate, id: u64) {
        if let Some(Pending::Step(step) | Pending::Service(_, After::Step(step))) =
            self.pending.remove(&id)
        {
            gate.cancel(step.op);
        }
    }

    /// The next service call of a built-in target's step, or, once it replies, where the
    /// reply goes: the gate's step, or the draft's premises.
    fn converse(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        conv: Conversation,
        after: After,
    ) -> Result<Next, GateError> {
        match conv.turn() {
            Turn::Call(call) => {
                let id = self.take_id();
                let request = Request {
                    id,
                    target: conv.target.clone(),
                    service: conv.builtin.service().into(),
                    call,
                };
                self.pending.insert(id, Pending::Service(conv, after));
                Ok(Next::Request(request))
            }
            Turn::Reply(reply) => match after {
                After::Step(step) => {
                    let next = gate.resume(j, now_ms, step.op, reply)?;
                    self.follow(gate, j, now_ms, next)
                }
                After::Draft(mut draft) => match reply {
                    Reply::Captured(text) => {
                        draft.premises = Some(parse_json(&text)?);
                        self.advance(gate, j, now_ms, draft)
                    }
                    other => Err(GateError::InvalidField {
                        field: "/premises".into(),
                        problem: format!(
                            "{}'s premises could not be read ({}); nothing was recorded",
                            draft.target,
                            match other {
                                Reply::Failed(m) => m,
                                r => r.kind().into(),
                            }
                        ),
                    }),
                },
            },
        }
    }

    /// Starts a built-in target's step.
    #[allow(clippy::too_many_arguments)]
    fn start_conversation(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        builtin: &'static dyn Target,
        target: &str,
        phase: Phase,
        effect: &str,
        effect_id: &str,
        idempotency_key: &str,
        names: Vec<String>,
        timeout_ms: Option<u64>,
        after: After,
    ) -> Result<Next, GateError> {
        let conv = Conversation {
            builtin,
            target: target.into(),
            phase,
            effect: parse_json(effect)?,
            effect_id: effect_id.into(),
            idempotency_key: idempotency_key.into(),
            names,
            timeout_ms,
            decision: matches!(after, After::Draft(_)),
            answers: Vec::new(),
        };
        self.converse(gate, j, now_ms, conv, after)
    }

    fn def(&self, target: &str) -> Result<&Definition, GateError> {
        self.defs.get(target).ok_or_else(|| {
            field_err(
                "/target",
                format!("{target:?} is not a defined effect: define it first"),
            )
        })
    }

    fn draft(
        &self,
        target: &str,
        values: &str,
        overrides: &str,
        propose_only: bool,
    ) -> Result<Draft, GateError> {
        let d = self.def(target)?;
        // A value that JSON would not carry exactly is named at its place in the effect
        // (`/effect/<param>`), not in the list of values that carries it.
        let values = parse_json(values)?;
        let effect = d.effect(&values)?;
        check_safe_numbers(&effect, &mut String::from("/effect"))?;
        if let Some(b) = d.builtin {
            b.check_effect(&effect)?;
        }
        let overrides = match parse_input(overrides, "/overrides")? {
            Value::Null => Map::new(),
            v => Obj::strict(&v, "/overrides", "a call's overrides", OVERRIDE_FIELDS)?
                .map()
                .clone(),
        };
        Ok(Draft {
            target: target.into(),
            effect,
            key: overrides.get("key").cloned().or_else(|| d.key.clone()),
            lease: None,
            bounds: d.bounds.clone(),
            cap: d.cap.clone(),
            effect_id: None,
            premises: overrides.get("premises").cloned(),
            overrides,
            propose_only,
        })
    }

    /// Asks the next function the proposal needs, or submits it.
    fn advance(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        draft: Draft,
    ) -> Result<Next, GateError> {
        let d = self.def(&draft.target)?.clone();
        let needs = |role: Role, have: bool| d.has(role) && !have;
        let named_authority =
            draft.overrides.contains_key("lease") || draft.overrides.contains_key("approval");
        let role = if needs(
            Role::Key,
            draft.key.is_some() || draft.overrides.contains_key("key"),
        ) {
            Some(Role::Key)
        } else if needs(Role::Lease, draft.lease.is_some() || named_authority) {
            Some(Role::Lease)
        } else if needs(Role::Bounds, draft.bounds.is_some()) {
            Some(Role::Bounds)
        } else if needs(Role::Cap, draft.cap.is_some()) {
            Some(Role::Cap)
        } else {
            None
        };
        if let Some(role) = role {
            return Ok(self.ask_for(&d, draft, role));
        }
        let mut draft = draft;
        if draft.effect_id.is_none() {
            // The id does not depend on the bounds, and bounds without the premises they
            // bound are refused: the id of the proposal without them.
            let mut p = self.proposal(&d, &draft);
            if let Some(m) = p.as_object_mut() {
                m.remove("bounds");
            }
            draft.effect_id = Some(gate.effect_id_of(&canonical(&p))?);
        }
        if draft.premises.is_none() && d.has(Role::Premises) {
            if let Some(b) = d.builtin {
                let (effect, id) = (canonical(&draft.effect), draft.effect_id.clone());
                let names = b.premises_of(&draft.effect);
                let id = id.unwrap_or_default();
                return self.start_conversation(
                    gate,
                    j,
                    now_ms,
                    b,
                    &d.target,
                    Phase::Premises,
                    &effect,
                    &id,
                    "",
                    names,
                    None,
                    After::Draft(draft),
                );
            }
            return Ok(self.ask_for(&d, draft, Role::Premises));
        }
        let proposal = canonical(&self.proposal(&d, &draft));
        if draft.propose_only {
            gate.effect_id_of(&proposal)?; // checked in full, recorded nowhere
            return Ok(Next::Proposed(proposal));
        }
        let step = gate.submit(j, now_ms, &proposal)?;
        self.follow(gate, j, now_ms, step)
    }

    fn ask_for(&mut self, d: &Definition, draft: Draft, role: Role) -> Next {
        let id = self.take_id();
        let call = Call {
            id,
            target: d.target.clone(),
            role,
            effect: canonical(&draft.effect),
            effect_id: draft.effect_id.clone(),
            idempotency_key: None,
            attempt: 0,
            agent: None,
            timeout_ms: None,
        };
        self.pending.insert(id, Pending::Draft(draft, role));
        Next::Call(call)
    }

    /// The proposal (ARCHITECTURE.md, "Proposal") of a drafted call.
    fn proposal(&self, d: &Definition, draft: &Draft) -> Value {
        let mut target = Map::new();
        target.insert("name".into(), json!(d.target));
        target.insert("dedupes".into(), json!(d.dedupes));
        target.insert("lookup".into(), json!(d.has(Role::Lookup)));
        // Left out unless given: the gate's defaults apply.
        if let Some(ms) = d.dedupe_window_ms {
            target.insert("dedupe_window_ms".into(), json!(ms));
        }
        if let Some(ms) = d.timeout_ms {
            target.insert("timeout_ms".into(), json!(ms));
        }
        if let Some(ms) = self.clock_skew_ms {
            target.insert("clock_skew_ms".into(), json!(ms));
        }
        let o = &draft.overrides;
        let lease = o
            .get("lease")
            .and_then(Value::as_str)
            .map(String::from)
            .or_else(|| draft.lease.clone())
            .or_else(|| d.lease.clone());
        let approval = o
            .get("approval")
            .and_then(Value::as_str)
            .map(String::from)
            .or_else(|| {
                if lease.is_none() {
                    d.approval.clone()
                } else {
                    None
                }
            });
        // No lease and no approval named: the gate runs the proposal under the agent's
        // standing lease (or refuses it, under strict authority).
        let mut authority = Map::new();
        match (approval, lease) {
            (Some(a), _) => {
                authority.insert("approval".into(), json!(a));
            }
            (None, Some(l)) => {
                authority.insert("lease".into(), json!(l));
            }
            (None, None) => {}
        }
        if d.has(Role::Allowed) {
            authority.insert("host_check".into(), json!(true));
        }
        let mut p = Map::new();
        p.insert(
            "agent".into(),
            json!(d.agent.clone().unwrap_or_else(|| self.agent.clone())),
        );
        p.insert("target".into(), Value::Object(target));
        if let Some(k) = &draft.key {
            p.insert("key".into(), k.clone());
        }
        p.insert("effect".into(), draft.effect.clone());
        if !authority.is_empty() {
            p.insert("authority".into(), Value::Object(authority));
        }
        if let Some(pr) = &draft.premises {
            p.insert("premises".into(), pr.clone());
        }
        if let Some(b) = &draft.bounds {
            p.insert("bounds".into(), b.clone());
        }
        if let Some(c) = &draft.cap {
            p.insert("cap".into(), c.clone());
        }
        Value::Object(p)
    }

    /// Turns gate steps into calls of the definitions' functions until one needs the host.
    fn follow(
        &mut self,
        gate: &mut Gate,
        j: &mut dyn Journal,
        now_ms: u64,
        mut step: Step,
    ) -> Result<Next, GateError> {
        loop {
            let (target, effect, effect_id) = match &step.ask {
                Ask::Done(o) => return Ok(Next::Done(o.clone())),
                Ask::Crash(point) => return Ok(Next::Crash(*point)),
                Ask::Sleep(ms) => {
                    let (id, ms) = (self.take_id(), *ms);
                    self.pending.insert(id, Pending::Step(step));
                    return Ok(Next::Sleep { id, ms });
                }
                Ask::Capture {
                    target,
                    effect,
                    effect_id,
                    ..
                }
                | Ask::Authorize {
                    target,
                    effect,
                    effect_id,
                    ..
                }
                | Ask::Apply {
                    target,
                    effect,
                    effect_id,
                    ..
                }
                | Ask::Query {
                    target,
                    effect,
                    effect_id,
                } => (target.clone(), effect.clone(), effect_id.clone()),
            };
            // The gate asks only for routed targets, which are the defined ones.
            let Some(d) = self.defs.get(&target) else {
                return Err(GateError::UnexpectedReply(format!(
                    "the gate asked for target {target:?}, which is not defined here"
                )));
            };
            let (role, missing) = match &step.ask {
                Ask::Capture { .. } => (Role::Premises, "defines no premises"),
                Ask::Authorize { .. } => (Role::Allowed, "defines no allowed() check"),
                Ask::Query { .. } => (Role::Lookup, "has no lookup"),
                _ => (Role::Apply, ""),
            };
            if let Some(b) = d.builtin.filter(|_| BUILTIN_ROLES.contains(&role)) {
                if d.has(role) {
                    let (phase, key, names, timeout) = match &step.ask {
                        Ask::Capture { names, .. } => (Phase::Premises, "", names.clone(), None),
                        Ask::Apply {
                            idempotency_key, ..
                        } => (
                            Phase::Send,
                            idempotency_key.as_str(),
                            Vec::new(),
                            Some(gate.send_timeout_ms(j, &effect_id)?),
                        ),
                        _ => (Phase::Lookup, "", Vec::new(), None),
                    };
                    let key = String::from(key);
                    let target = target.clone();
                    return self.start_conversation(
                        gate,
                        j,
                        now_ms,
                        b,
                        &target,
                        phase,
                        &effect,
                        &effect_id,
                        &key,
                        names,
                        timeout,
                        After::Step(step),
                    );
                }
            }
            if role != Role::Apply && !d.has(role) {
                // Asked for something nobody installed: it cannot be done, which is not an
                // empty read, nor a "no".
                let reply = Reply::Failed(format!("{target} {missing}"));
                step = gate.resume(j, now_ms, step.op, reply)?;
                continue;
            }
            let id = self.take_id();
            let mut call = Call {
                id,
                target,
                role,
                effect,
                effect_id: Some(effect_id.clone()),
                idempotency_key: None,
                attempt: 0,
                agent: None,
                timeout_ms: None,
            };
            match &step.ask {
                Ask::Apply {
                    idempotency_key,
                    attempt,
                    ..
                } => {
                    call.idempotency_key = Some(idempotency_key.clone());
                    call.attempt = *attempt;
                    call.timeout_ms = Some(gate.send_timeout_ms(j, &effect_id)?);
                }
                Ask::Authorize { agent, .. } => call.agent = Some(agent.clone()),
                _ => {}
            }
            self.pending.insert(id, Pending::Step(step));
            return Ok(Next::Call(call));
        }
    }

    /// What a function's answer means for the step it answers.
    fn reply_to(&self, ask: &Ask, answer: CallAnswer) -> Reply {
        let returned = |answer: CallAnswer| match answer {
            CallAnswer::Returned(text) => {
                serde_json::from_str::<Value>(&text).map_err(|e| format!("answered no JSON: {e}"))
            }
            CallAnswer::Refused(m) | CallAnswer::Failed(m) => Err(m),
            CallAnswer::Slept => Err("answered with a sleep".into()),
        };
        match ask {
            Ask::Sleep(_) => match answer {
                CallAnswer::Slept => Reply::Slept,
                other => Reply::Failed(format!("waited for a sleep, got {other:?}")),
            },
            Ask::Capture { target, names, .. } => match returned(answer) {
                Ok(Value::Object(all)) => {
                    let missing: Vec<&String> =
                        names.iter().filter(|n| !all.contains_key(*n)).collect();
                    if !missing.is_empty() {
                        return Reply::Failed(format!(
                            "premises of {target} did not return {missing:?}"
                        ));
                    }
                    let picked: Map<String, Value> =
                        names.iter().map(|n| (n.clone(), all[n].clone())).collect();
                    Reply::Captured(canonical(&Value::Object(picked)))
                }
                Ok(other) => Reply::Failed(format!(
                    "premises of {target} must return an object, got {}",
                    crate::schema::kind(&other)
                )),
                Err(m) => Reply::Failed(m),
            },
            Ask::Authorize { target, .. } => match returned(answer) {
                Ok(Value::Bool(b)) => Reply::Allowed(b),
                Ok(other) => Reply::Failed(format!(
                    "allowed of {target} must return true or false, got {}",
                    crate::schema::kind(&other)
                )),
                Err(m) => Reply::Failed(m),
            },
            Ask::Apply { .. } => match answer {
                CallAnswer::Returned(text) => match serde_json::from_str::<Value>(&text) {
                    Ok(v) => Reply::Applied(canonical(&v)),
                    Err(e) => Reply::Unknown(format!("the effect answered no JSON: {e}")),
                },
                CallAnswer::Refused(m) => Reply::Rejected(m),
                CallAnswer::Failed(m) => Reply::Unknown(m),
                CallAnswer::Slept => Reply::Unknown("the send was answered with a sleep".into()),
            },
            Ask::Query { .. } => match returned(answer) {
                Ok(Value::Null | Value::Bool(false)) => Reply::NotFound,
                Ok(v) => Reply::Found(canonical(&v)),
                Err(m) => Reply::Failed(m),
            },
            Ask::Crash(_) | Ask::Done(_) => Reply::Failed("nothing was asked here".into()),
        }
    }

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

#[cfg(test)]
mod tests;
