//! The loops around the gate (`interlock:gate/tools`, `interlock:gate/effects`): WIT in,
//! the core's machines (`tools::session`, `effects`), WIT out. No rule lives here.
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use interlock_core as core_;
use interlock_core::effects::{self as fx, EffectSession};
use interlock_core::tools::session::{self as ts, ToolSession};

use crate::exports::interlock::gate::effects as ef;
use crate::exports::interlock::gate::gate as g;
use crate::exports::interlock::gate::tools as tl;
use crate::interlock::gate::target as t;
use crate::interlock::gate::targets as tg;
use crate::{crash_point, err, outcome, with_gate, Component};

/// The instance's tool gating (one configuration) and its effect definitions. Wasm
/// components are single-threaded, so a RefCell suffices.
struct Loops(RefCell<(Option<ToolSession>, EffectSession)>);
unsafe impl Sync for Loops {}
static LOOPS: Loops = Loops(RefCell::new((None, EffectSession::empty())));

fn wait_of(w: Option<g::ClaimWait>) -> core_::ClaimWait {
    w.map_or_else(core_::ClaimWait::default, |w| core_::ClaimWait {
        poll_ms: w.poll_ms,
        max_polls: w.max_polls,
    })
}

fn answer(a: t::CallAnswer) -> core_::CallAnswer {
    match a {
        t::CallAnswer::Returned(j) => core_::CallAnswer::Returned(j),
        t::CallAnswer::Refused(m) => core_::CallAnswer::Refused(m),
        t::CallAnswer::Failed(m) => core_::CallAnswer::Failed(m),
        t::CallAnswer::Slept => core_::CallAnswer::Slept,
    }
}

// ---- tools

fn tool_step(n: ts::ToolNext) -> tl::ToolStep {
    match n {
        ts::ToolNext::Call {
            id,
            call,
            timeout_ms,
        } => tl::ToolStep::Call(tl::ToolRequest {
            id,
            call: tl::ToolCall {
                tool: call.tool,
                arguments: core_::canonical(&call.arguments),
            },
            timeout_ms,
        }),
        ts::ToolNext::Sleep { id, ms } => tl::ToolStep::Sleep((id, ms)),
        ts::ToolNext::Ask { id, request } => tl::ToolStep::Ask(tl::PersonQuestion {
            id,
            request: core_::canonical(&request),
        }),
        ts::ToolNext::Crash(p) => tl::ToolStep::Crash(crash_point(p)),
        ts::ToolNext::Done(d) => tl::ToolStep::Done(tl::ToolDone {
            tool: d.tool,
            reply: tl::ToolReply {
                is_error: d.reply.is_error,
                message: d.reply.message,
                outcome: core_::canonical(&d.reply.outcome),
            },
            outcome: d.outcome.map(outcome),
        }),
    }
}

/// The instance's tool session, or the error a call before `start` gets.
fn with_tools<R>(
    f: impl FnOnce(
        &mut ToolSession,
        &mut core_::Gate,
        &mut dyn core_::Journal,
        u64,
    ) -> Result<R, core_::GateError>,
) -> Result<R, g::GateError> {
    let mut loops = LOOPS.0.borrow_mut();
    let session = loops.0.as_mut().ok_or_else(|| {
        err(core_::GateError::InvalidField {
            field: String::from("/config"),
            problem: String::from("no tool configuration: call tools.start first"),
        })
    })?;
    with_gate(|gate, j, now| f(session, gate, j, now)).map_err(err)
}

impl tl::Guest for Component {
    fn start(config: String, options: tl::ToolOptions) -> Result<tl::Started, g::GateError> {
        let authority = options
            .authority
            .as_deref()
            .map(|a| core_::parse_input(a, "/authority"))
            .transpose()
            .map_err(err)?;
        let (session, started) = ToolSession::start(
            &config,
            ts::Options {
                agent: options.agent,
                authority,
                strict: options.strict,
                results: match options.results {
                    tl::Results::Mcp => ts::Results::Mcp,
                    tl::Results::Plain => ts::Results::Plain,
                },
                wait: wait_of(options.wait),
            },
        )
        .map_err(err)?;
        with_gate(|gate, _, _| {
            gate.set_strict_authority(options.strict);
            gate.set_routes(started.gated.clone());
        });
        LOOPS.0.borrow_mut().0 = Some(session);
        Ok(tl::Started {
            gated: started.gated,
            standing: started.standing,
            journal_dir: started.journal_dir,
        })
    }
    fn check_tools(available: Vec<String>) -> Result<(), g::GateError> {
        with_tools(|s, _, _, _| s.config().check_tools(&available))
    }
    fn call(tool: String, arguments: String) -> Result<tl::ToolStep, g::GateError> {
        with_tools(|s, gate, j, now| s.call(gate, j, now, &tool, &arguments)).map(tool_step)
    }
    fn recover(effect: String) -> Result<tl::ToolStep, g::GateError> {
        with_tools(|s, gate, j, now| s.recover(gate, j, now, &effect)).map(tool_step)
    }
    fn resume(id: u64, a: t::CallAnswer) -> Result<tl::ToolStep, g::GateError> {
        with_tools(|s, gate, j, now| s.resume(gate, j, now, id, answer(a))).map(tool_step)
    }
    fn cancel(id: u64) {
        let _ = with_tools(|s, gate, _, _| {
            s.cancel(gate, id);
            Ok(())
        });
    }
}

// ---- effects

fn role(r: fx::Role) -> ef::Role {
    match r {
        fx::Role::Key => ef::Role::Key,
        fx::Role::Lease => ef::Role::Lease,
        fx::Role::Bounds => ef::Role::Bounds,
        fx::Role::Cap => ef::Role::Cap,
        fx::Role::Premises => ef::Role::Premises,
        fx::Role::Allowed => ef::Role::Allowed,
        fx::Role::Apply => ef::Role::Apply,
        fx::Role::Lookup => ef::Role::Lookup,
    }
}

fn effect_step(n: fx::Next) -> ef::EffectStep {
    match n {
        fx::Next::Call(c) => ef::EffectStep::Call(ef::EffectCall {
            id: c.id,
            target: c.target,
            role: role(c.role),
            effect: c.effect,
            effect_id: c.effect_id,
            idempotency_key: c.idempotency_key,
            attempt: c.attempt,
            agent: c.agent,
            timeout_ms: c.timeout_ms,
        }),
        fx::Next::Sleep { id, ms } => ef::EffectStep::Sleep((id, ms)),
        fx::Next::Proposed(p) => ef::EffectStep::Proposed(p),
        fx::Next::Done(o) => ef::EffectStep::Done(outcome(o)),
        fx::Next::Crash(p) => ef::EffectStep::Crash(crash_point(p)),
        fx::Next::Request(r) => ef::EffectStep::Request(tg::ServiceCall {
            id: r.id,
            target: r.target,
            service: r.service,
            operation: r.call.operation,
            params: core_::canonical(&r.call.params),
            options: core_::canonical(&r.call.options),
            timeout_ms: r.call.timeout_ms,
        }),
    }
}

fn service_answer(a: tg::ServiceAnswer) -> core_::targets::ServiceAnswer {
    use core_::targets::{ServiceAnswer as A, ServiceError};
    match a {
        tg::ServiceAnswer::Returned(j) => A::returned(&j),
        tg::ServiceAnswer::Raised(e) => A::Raised(ServiceError {
            error_type: e.error_type,
            status: e.status,
            code: e.code,
            message: e.message,
        }),
        tg::ServiceAnswer::NoAnswer(m) => A::NoAnswer(m),
    }
}

fn with_effects<R>(
    f: impl FnOnce(
        &mut EffectSession,
        &mut core_::Gate,
        &mut dyn core_::Journal,
        u64,
    ) -> Result<R, core_::GateError>,
) -> Result<R, g::GateError> {
    let mut loops = LOOPS.0.borrow_mut();
    with_gate(|gate, j, now| f(&mut loops.1, gate, j, now)).map_err(err)
}

fn overrides(o: Option<String>) -> String {
    o.unwrap_or_else(|| String::from("null"))
}

impl ef::Guest for Component {
    fn configure(
        agent: String,
        clock_skew_ms: Option<u64>,
        wait: Option<g::ClaimWait>,
    ) -> Result<(), g::GateError> {
        core_::defaults::standing_lease_name(&agent).map_err(err)?;
        LOOPS.0.borrow_mut().1 = EffectSession::new(&agent, clock_skew_ms, wait_of(wait));
        Ok(())
    }
    fn define(definition: String) -> Result<Option<String>, g::GateError> {
        with_effects(|s, gate, _, _| s.define(gate, &definition))
    }
    fn call(
        target: String,
        values: String,
        o: Option<String>,
    ) -> Result<ef::EffectStep, g::GateError> {
        with_effects(|s, gate, j, now| s.call(gate, j, now, &target, &values, &overrides(o)))
            .map(effect_step)
    }
    fn propose(
        target: String,
        values: String,
        o: Option<String>,
    ) -> Result<ef::EffectStep, g::GateError> {
        with_effects(|s, gate, j, now| s.propose(gate, j, now, &target, &values, &overrides(o)))
            .map(effect_step)
    }
    fn submit(proposal: String) -> Result<ef::EffectStep, g::GateError> {
        with_effects(|s, gate, j, now| s.submit(gate, j, now, &proposal)).map(effect_step)
    }
    fn recover(effect: String) -> Result<ef::EffectStep, g::GateError> {
        with_effects(|s, gate, j, now| s.recover(gate, j, now, &effect)).map(effect_step)
    }
    fn resume(id: u64, a: t::CallAnswer) -> Result<ef::EffectStep, g::GateError> {
        with_effects(|s, gate, j, now| s.resume(gate, j, now, id, answer(a))).map(effect_step)
    }
    fn answer(id: u64, a: tg::ServiceAnswer) -> Result<ef::EffectStep, g::GateError> {
        with_effects(|s, gate, j, now| s.answer(gate, j, now, id, service_answer(a)))
            .map(effect_step)
    }
    fn builtins() -> String {
        core_::targets::describe()
    }
    fn cancel(id: u64) {
        let _ = with_effects(|s, gate, _, _| {
            s.cancel(gate, id);
            Ok(())
        });
    }
}
