//! The gate's HTTP API (docs/http-api.yaml) as the wasi:http component serves it: routing,
//! the bearer token, the JSON of steps, replies, outcomes and errors, and the table by
//! which a server performs an HTTP target. Sans-IO like the gate: the request comes in as
//! text, the network and the clock go out through [`Io`], storage through [`Journal`].
//!
//! `interlock serve` (hosts/cli) runs it inside the component; any wasi:http runtime that
//! provides the journal import can. The Cloudflare Worker (hosts/edge/src/api.js) serves the
//! same API, held to the same tests (hosts/edge/test, run against both servers).
//!
//! By concern: `wire` (the request, the answer, a target's request and answer, [`Io`]),
//! `settings` (the token, the targets, read strictly), `auth` (the journal a path names,
//! the bearer token), `codec` (the JSON of errors, steps and replies), `targets` (the table
//! by which a target is performed), and here the router and the per-request state machine.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::{json, Value};

use crate::tools::outcome_json;
use crate::{Ask, ClaimWait, Gate, GateError, Journal, Outcome, Reply, Step};

mod auth;
mod codec;
mod settings;
mod targets;
mod wire;

pub use auth::*;
pub use codec::*;
pub use settings::*;
pub use targets::*;
pub use wire::*;

fn recover_json(r: Result<Outcome, GateError>, id: &str) -> Value {
    match r {
        Ok(o) => json!({"effect_id": id, "outcome": outcome_json(&o)}),
        Err(e) => json!({"effect_id": id, "error": error_json(&e)}),
    }
}

/// What the server asks its runtime to do next for one request.
#[derive(Debug, PartialEq)]
pub enum Next {
    /// Answer the request with this; the request is finished.
    Respond(Response),
    /// Perform this request and hand its answer to [`Server::resume`].
    Fetch(Fetch),
    /// Wait this many ms (a live claim of another worker), then [`Server::resume`].
    Sleep(u64),
}

/// The next thing to do for request `id` (the id [`Server::resume`] takes).
#[derive(Debug, PartialEq)]
pub struct ApiStep {
    pub id: u64,
    pub next: Next,
}

/// A request that performs target steps.
enum Job {
    /// `POST .../effects`: the outcome.
    Effects,
    /// `POST .../effects/{id}/recover`.
    Recover,
    /// `POST .../recover`: one item per open effect.
    RecoverAll {
        ids: Vec<String>,
        at: usize,
        done: Vec<Value>,
    },
}

/// What a parked request waits for: the target's answer to this gate step, or the end of
/// the sleep it asks (the gate waiting out a live claim).
struct Wait(Step);

/// What a finished gate operation leads to.
enum Flow {
    Respond(Response),
    Step(Job, Result<Step, GateError>),
}

/// The last step of a request: answer it.
fn done(r: Response) -> ApiStep {
    ApiStep {
        id: 0,
        next: Next::Respond(r),
    }
}

/// The step the runtime must perform next, or how the gate operation ended (its outcome,
/// or a gate error).
fn pending(step: Result<Step, GateError>) -> Result<Step, Result<Outcome, GateError>> {
    match step {
        Ok(Step {
            ask: Ask::Done(o), ..
        }) => Err(Ok(o)),
        Ok(s) => Ok(s),
        Err(e) => Err(Err(e)),
    }
}

/// What a route leads to.
enum Routed {
    Respond(Response),
    Start(Job, Result<Step, GateError>),
}

/// The server of one journal, sans-IO: [`Server::handle`] a request, then do what each
/// [`ApiStep`] asks and [`Server::resume`] until it says [`Next::Respond`]. Two gate
/// instances over the journal, as any two workers: `gate` performs the configured targets
/// (routes: only those), `stepper` hands steps of any target to the caller. Compare-and-
/// append keeps them honest.
pub struct Server {
    gate: Gate,
    stepper: Gate,
    settings: Result<Settings, String>,
    pending: BTreeMap<u64, (Job, Wait)>,
    next_id: u64,
}

/// 400 `invalid-body`: the request's body cannot be read (not UTF-8, cut short, too slow).
fn invalid_body(problem: &str) -> Response {
    failure(
        400,
        "invalid-body",
        format!("the request body cannot be read: {problem}"),
    )
}

/// Every request while the settings are wrong: 500, saying what to fix (nothing is read or
/// recorded).
fn server_failure(problem: &str) -> Response {
    failure(
        500,
        "server-config",
        format!("the server's settings are wrong: {problem}"),
    )
}

impl Server {
    /// A server with these settings (`Err`: what is wrong with them; every request is then
    /// answered 500, saying so).
    pub fn new(settings: Result<Settings, String>) -> Server {
        let mut gate = Gate::new();
        let mut stepper = Gate::new();
        if let Ok(s) = &settings {
            // This server performs only the targets it is configured with; another
            // target's open effect stays open for a host that reaches it (the caller,
            // through submit).
            gate.set_routes(s.targets.keys().cloned());
            gate.set_strict_authority(s.strict_authority);
            stepper.set_strict_authority(s.strict_authority);
        }
        Server {
            gate,
            stepper,
            settings,
            pending: BTreeMap::new(),
            next_id: 1,
        }
    }

    /// A request whose body could not be read (`too_large`: past the server's limit, given
    /// in `problem`): 401 without the token, else 413 or 400; nothing recorded.
    pub fn unreadable(
        &self,
        authorization: Option<&str>,
        too_large: bool,
        problem: &str,
    ) -> Response {
        if let Some(r) = self.refusal(authorization) {
            r
        } else if too_large {
            failure(413, "too-large", format!("the request body is {problem}"))
        } else {
            invalid_body(problem)
        }
    }

    /// The answer refusing a request without the token (401; 500 while the settings are
    /// wrong), or `None`: what `handle` checks first, for a front that routes to one server
    /// per journal and must not reach a journal for a refused request.
    pub fn refusal(&self, authorization: Option<&str>) -> Option<Response> {
        match &self.settings {
            Err(p) => Some(server_failure(p)),
            Ok(s) if !authorized(s.token.as_deref(), authorization) => Some(unauthorized()),
            Ok(_) => None,
        }
    }

    fn park(&mut self, job: Job, wait: Wait, next: Next) -> ApiStep {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, (job, wait));
        ApiStep { id, next }
    }

    /// Starts answering `req`.
    pub fn handle(&mut self, j: &mut dyn Journal, now: u64, req: &Request) -> ApiStep {
        if let Some(r) = self.refusal(req.authorization) {
            return done(r);
        }
        let Some(rest) = req.path.strip_prefix("/v1/journals/") else {
            let r = failure(
                404,
                "not-found",
                format!("no route {} {}", req.method, req.path),
            );
            return done(r);
        };
        let (name, sub) = rest.split_once('/').unwrap_or((rest, ""));
        if !journal_name_ok(name) {
            let r = failure(
                404,
                "not-found",
                format!("not a journal name: {name:?} (1 to 64 of A-Z a-z 0-9 . _ -)"),
            );
            return done(r);
        }
        let mut parts = Vec::new();
        for p in sub.split('/').filter(|p| !p.is_empty()) {
            match decode_component(p) {
                Some(p) => parts.push(p),
                None => {
                    let r = failure(404, "not-found", format!("not a path segment: {p:?}"));
                    return done(r);
                }
            }
        }
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        // Decoded here, the one place: a body that is not UTF-8 is refused, never mended.
        let body = match core::str::from_utf8(req.body) {
            Ok(body) => body,
            Err(e) => {
                let problem = format!("not UTF-8 (at byte {})", e.valid_up_to());
                return done(invalid_body(&problem));
            }
        };
        match self.route(j, now, req.method, &parts, body) {
            Ok(Routed::Respond(r)) => done(r),
            Ok(Routed::Start(job, first)) => self.advance(j, now, job, first),
            Err(e) => done(gate_failure(&e)),
        }
    }

    /// Hands request `id` what its last step asked for: the target's answer (`Err`: none,
    /// with why), or `None` after a sleep.
    pub fn resume(
        &mut self,
        j: &mut dyn Journal,
        now: u64,
        id: u64,
        answer: Option<Result<Fetched, String>>,
    ) -> ApiStep {
        let Some((job, wait)) = self.pending.remove(&id) else {
            let r = failure(
                500,
                "unknown-request",
                format!("no request {id} is waiting"),
            );
            return done(r);
        };
        let Wait(s) = wait;
        let reply = match s.ask {
            Ask::Sleep(_) => Reply::Slept,
            _ => {
                let answer = answer.unwrap_or_else(|| Err("no answer was given".into()));
                target_reply(&s.ask, answer.as_ref().map_err(String::as_str))
            }
        };
        let step = self.gate.resume(j, now, s.op, reply);
        self.advance(j, now, job, step)
    }

    /// Drops request `id` (its client went away): what the journal holds stays, and an
    /// effect left open is recovered later.
    pub fn abandon(&mut self, id: u64) {
        if let Some((_, Wait(s))) = self.pending.remove(&id) {
            self.gate.cancel(s.op);
        }
    }

    /// Runs gate steps until one needs the runtime (a fetch, a sleep) or the request ends.
    fn advance(
        &mut self,
        j: &mut dyn Journal,
        now: u64,
        mut job: Job,
        mut step: Result<Step, GateError>,
    ) -> ApiStep {
        loop {
            let s = match pending(step) {
                Ok(s) => s,
                Err(ended) => match self.finish(j, now, job, ended) {
                    Flow::Respond(r) => return done(r),
                    Flow::Step(next, st) => {
                        (job, step) = (next, st);
                        continue;
                    }
                },
            };
            if let Ask::Sleep(ms) = s.ask {
                return self.park(job, Wait(s), Next::Sleep(ms));
            }
            let timeout_ms = match &s.ask {
                Ask::Apply { effect_id, .. } => match self.gate.send_timeout_ms(j, effect_id) {
                    Ok(ms) => ms,
                    Err(e) => {
                        self.gate.cancel(s.op);
                        step = Err(e);
                        continue;
                    }
                },
                _ => 0,
            };
            let targets = match &self.settings {
                Ok(settings) => &settings.targets,
                Err(_) => unreachable!("a misconfigured server starts no job"),
            };
            match target_request(targets, &s.ask, timeout_ms) {
                Ok(fetch) => return self.park(job, Wait(s), Next::Fetch(fetch)),
                Err(reply) => step = self.gate.resume(j, now, s.op, reply),
            }
        }
    }

    /// Where a finished gate operation of `job` leads: an answer, or the next effect to
    /// recover. (A live claim was waited out already: recovery asks the gate to, with its
    /// defaults, as every host's recovery does.)
    fn finish(
        &mut self,
        j: &mut dyn Journal,
        now: u64,
        job: Job,
        r: Result<Outcome, GateError>,
    ) -> Flow {
        let answer = |r: Result<Outcome, GateError>| match r {
            Ok(o) => Response::json(200, &outcome_json(&o)),
            Err(e) => gate_failure(&e),
        };
        match job {
            Job::Effects | Job::Recover => Flow::Respond(answer(r)),
            Job::RecoverAll { ids, at, mut done } => {
                done.push(recover_json(r, &ids[at]));
                if at + 1 == ids.len() {
                    return Flow::Respond(Response::json(200, &Value::Array(done)));
                }
                let first = self
                    .gate
                    .recover_waiting(j, now, &ids[at + 1], ClaimWait::default());
                let next = Job::RecoverAll {
                    ids,
                    at: at + 1,
                    done,
                };
                Flow::Step(next, first)
            }
        }
    }

    fn route(
        &mut self,
        j: &mut dyn Journal,
        now: u64,
        method: &str,
        parts: &[&str],
        body: &str,
    ) -> Result<Routed, GateError> {
        let ok = |v: Value| Ok(Routed::Respond(Response::json(200, &v)));
        let empty = || Ok(Routed::Respond(Response::empty()));
        let json_body = || -> Result<Value, GateError> {
            serde_json::from_str(body).map_err(|e| GateError::InvalidJson(e.to_string()))
        };
        let targets = match &self.settings {
            Ok(s) => &s.targets,
            Err(_) => unreachable!("a misconfigured server routes nothing"),
        };
        match (method, parts) {
            ("POST", ["submit"]) => {
                // The caller performs the target: submit never asks before it returns.
                ok(step_json(&self.stepper.submit(j, now, body)?))
            }
            (m, ["ops", op]) if m == "POST" || m == "DELETE" => {
                let Some(op) = op
                    .parse::<u64>()
                    .ok()
                    .filter(|_| op.len() <= 15 && op.bytes().all(|b| b.is_ascii_digit()))
                else {
                    let r = failure(404, "not-found", format!("no operation {op}"));
                    return Ok(Routed::Respond(r));
                };
                if m == "DELETE" {
                    self.stepper.cancel(op);
                    return empty();
                }
                let reply = reply_of(body)?;
                ok(step_json(&self.stepper.resume(j, now, op, reply)?))
            }
            ("POST", ["effects"]) => {
                // Only a readable proposal's target is checked here; the gate judges the rest.
                let name = serde_json::from_str::<Value>(body).ok().and_then(|v| {
                    v.get("target")
                        .and_then(|t| t.get("name"))
                        .and_then(Value::as_str)
                        .map(String::from)
                });
                if let Some(name) = name.filter(|n| !targets.contains_key(n)) {
                    let configured: Vec<&String> = targets.keys().collect();
                    // Refused before the gate sees it: nothing recorded for a target
                    // nobody here reaches.
                    let r = failure(
                        422,
                        "unknown-target",
                        format!(
                            "this server performs no target {}; configured: {}; use POST .../submit to perform it yourself",
                            json!(name),
                            json!(configured)
                        ),
                    );
                    return Ok(Routed::Respond(r));
                }
                Ok(Routed::Start(Job::Effects, self.gate.submit(j, now, body)))
            }
            ("GET", ["effects", id]) => {
                let r: Value = serde_json::from_str(&self.gate.receipt(j, id, None)?)
                    .map_err(|e| GateError::CorruptJournal(e.to_string()))?;
                let field = |k: &str| r.get(k).cloned().unwrap_or(Value::Null);
                ok(json!({
                    "effect_id": id,
                    "state": field("final"),
                    "executed": field("executed"),
                    "reason": field("reason"),
                    "result": field("result"),
                }))
            }
            ("GET", ["effects", id, "receipt"]) => {
                let key = self
                    .settings
                    .as_ref()
                    .ok()
                    .and_then(|s| s.receipt_key.clone());
                let text = self
                    .gate
                    .receipt(j, id, key.as_deref().map(str::as_bytes))?;
                Ok(Routed::Respond(Response::text(
                    200,
                    "application/json",
                    text,
                )))
            }
            ("POST", ["effects", id, "recover"]) => {
                let first = self.gate.recover_waiting(j, now, id, ClaimWait::default());
                Ok(Routed::Start(Job::Recover, first))
            }
            ("POST", ["recover"]) => {
                let ids = self.gate.open_effects(j)?;
                if ids.is_empty() {
                    return ok(json!([]));
                }
                let first = self
                    .gate
                    .recover_waiting(j, now, &ids[0], ClaimWait::default());
                let job = Job::RecoverAll {
                    ids,
                    at: 0,
                    done: Vec::new(),
                };
                Ok(Routed::Start(job, first))
            }
            ("POST", ["verify"]) => {
                let anchors = if body.trim().is_empty() {
                    Vec::new()
                } else {
                    match json_body()?.get("anchors") {
                        None | Some(Value::Null) => Vec::new(),
                        Some(Value::Array(a)) => a.iter().map(Value::to_string).collect(),
                        Some(_) => return Err(invalid("/anchors", "is not an array of receipts")),
                    }
                };
                let r = self.gate.verify(j, &anchors)?;
                ok(json!({
                    "streams": r.streams,
                    "entries": r.entries,
                    "problems": r.problems.iter().map(|p| json!({
                        "stream": p.stream, "seq": p.seq, "kind": p.kind.as_str(), "detail": p.detail,
                    })).collect::<Vec<_>>(),
                }))
            }
            ("PUT", ["leases", lease]) => {
                let at = json_body()?.get("expires_at_ms").and_then(Value::as_u64);
                let Some(at) = at.filter(|at| *at < (1 << 53)) else {
                    return Err(invalid("/expires_at_ms", "is not a Unix time in ms"));
                };
                self.gate.grant_lease(j, now, lease, at)?;
                empty()
            }
            ("DELETE", ["leases", lease]) => {
                self.gate.revoke_lease(j, now, lease)?;
                empty()
            }
            ("POST", ["approvals"]) => {
                self.gate.approve(j, now, body)?;
                empty()
            }
            ("GET", ["entries"]) => {
                // The journal import has no order across streams: stream by stream, in
                // first-append order, each in its own order (docs/http-api.yaml).
                let mut text = String::new();
                for stream in j.streams()? {
                    for e in j.read(&stream, 0)? {
                        text.push_str(&e);
                        text.push('\n');
                    }
                }
                Ok(Routed::Respond(Response::text(
                    200,
                    "application/jsonl",
                    text,
                )))
            }
            _ => {
                let r = failure(
                    404,
                    "not-found",
                    format!("no route {method} /{}", parts.join("/")),
                );
                Ok(Routed::Respond(r))
            }
        }
    }
}

/// Answers one request by doing what the server asks with `io`: the whole loop of a
/// runtime that can block (the wasi:http component).
pub fn run(server: &mut Server, j: &mut dyn Journal, io: &mut dyn Io, req: &Request) -> Response {
    let now = io.now_ms();
    let mut step = server.handle(j, now, req);
    loop {
        let answer = match step.next {
            Next::Respond(r) => return r,
            Next::Fetch(f) => Some(io.fetch(&f)),
            Next::Sleep(ms) => {
                io.sleep_ms(ms);
                None
            }
        };
        let now = io.now_ms();
        step = server.resume(j, now, step.id, answer);
    }
}

#[cfg(test)]
mod tests;
