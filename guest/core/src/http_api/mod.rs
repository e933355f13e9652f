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
use crate::webhooks::{Delivery, Scheme};
use crate::{Ask, ClaimWait, Gate, GateError, Journal, Notice, Outcome, Reply, Step};

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
    /// `POST .../notices`: each notice due, delivered in turn.
    Notify {
        notices: Vec<Notice>,
        at: usize,
        done: Vec<Value>,
    },
}

/// What a parked request waits for: the target's answer to this gate step, or the end of
/// the sleep it asks (the gate waiting out a live claim); or a notice receiver's answer.
enum Wait {
    Gate(Step),
    Notice,
}

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

/// One request as its route sees it.
struct Call<'a> {
    method: &'a str,
    parts: &'a [&'a str],
    body: &'a str,
    who: &'a Caller,
    headers: &'a [(String, String)],
}

/// What a route leads to.
enum Routed {
    Respond(Response),
    Start(Job, Result<Step, GateError>),
    /// Deliver notices (no gate operation).
    Notify(Job),
}

/// How long a notice's receiver may take to answer, in ms.
pub const NOTICE_TIMEOUT_MS: u64 = 10_000;

fn done_json(v: Value) -> ApiStep {
    done(Response::json(200, &v))
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
    /// in `problem`): 401 without a token the route takes, else 413 or 400; nothing recorded.
    pub fn unreadable(
        &self,
        path: &str,
        authorization: Option<&str>,
        too_large: bool,
        problem: &str,
    ) -> Response {
        if let Some(r) = self.refusal(path, authorization) {
            r
        } else if too_large {
            failure(413, "too-large", format!("the request body is {problem}"))
        } else {
            invalid_body(problem)
        }
    }

    /// The answer refusing a request to `path` without a token its route takes (401; 403
    /// for a decider's token on a route that is not theirs; 500 while the settings are
    /// wrong), or `None`: what `handle` checks first, for a front that routes to one server
    /// per journal and must not reach a journal for a refused request. A webhook route
    /// takes no token: its signature is checked when it is handled.
    pub fn refusal(&self, path: &str, authorization: Option<&str>) -> Option<Response> {
        let s = match &self.settings {
            Err(p) => return Some(server_failure(p)),
            Ok(s) => s,
        };
        match (access(path), caller(s, authorization)) {
            (Access::Signed, _) => None,
            (_, Caller::Nobody) => Some(unauthorized()),
            (Access::Operator, Caller::Decider(name)) => Some(forbidden(
                "forbidden",
                format!(
                    "{name}'s token opens only the inbox, the scoreboard and their own decisions"
                ),
            )),
            _ => None,
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
        if let Some(r) = self.refusal(req.path, req.authorization) {
            return done(r);
        }
        let who = match &self.settings {
            Ok(s) => caller(s, req.authorization),
            Err(_) => unreachable!("a misconfigured server was refused above"),
        };
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
        let call = Call {
            method: req.method,
            parts: &parts,
            body,
            who: &who,
            headers: req.headers,
        };
        match self.route(j, now, call) {
            Ok(Routed::Respond(r)) => done(r),
            Ok(Routed::Start(job, first)) => self.advance(j, now, job, first),
            Ok(Routed::Notify(job)) => self.notify_next(now, job),
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
        let s = match wait {
            Wait::Gate(s) => s,
            Wait::Notice => return self.notified(j, now, job, answer),
        };
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
        if let Some((_, Wait::Gate(s))) = self.pending.remove(&id) {
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
                return self.park(job, Wait::Gate(s), Next::Sleep(ms));
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
                Ok(fetch) => return self.park(job, Wait::Gate(s), Next::Fetch(fetch)),
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
            Job::Notify { .. } => unreachable!("delivering notices runs no gate operation"),
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

    /// Delivers the next notice of a `Notify` job, or answers what was delivered.
    fn notify_next(&mut self, now: u64, job: Job) -> ApiStep {
        let Job::Notify { notices, at, done } = job else {
            unreachable!("only a notify job delivers notices")
        };
        let Some(n) = notices.get(at) else {
            return done_json(Value::Array(done));
        };
        let secret = match &self.settings {
            Ok(s) => s.notify_secret.clone().unwrap_or_default(),
            Err(_) => unreachable!("a misconfigured server starts no job"),
        };
        let ts = now / 1000;
        let signature = crate::webhooks::sign_standard(&secret, &n.id, ts, n.body.as_bytes())
            .expect("the notify secret was checked when the settings were read");
        let fetch = Fetch {
            method: "POST".into(),
            url: n.url.clone(),
            headers: Vec::from([
                ("content-type".to_string(), "application/json".to_string()),
                ("webhook-id".to_string(), n.id.clone()),
                ("webhook-timestamp".to_string(), ts.to_string()),
                ("webhook-signature".to_string(), signature),
            ]),
            body: Some(n.body.clone()),
            timeout_ms: Some(NOTICE_TIMEOUT_MS),
        };
        self.park(
            Job::Notify { notices, at, done },
            Wait::Notice,
            Next::Fetch(fetch),
        )
    }

    /// A notice receiver answered (2xx: delivered, recorded; else it is due again later).
    fn notified(
        &mut self,
        j: &mut dyn Journal,
        now: u64,
        job: Job,
        answer: Option<Result<Fetched, String>>,
    ) -> ApiStep {
        let Job::Notify {
            notices,
            at,
            mut done,
        } = job
        else {
            unreachable!("only a notify job waits for a notice")
        };
        let n = &notices[at];
        let mut v = json!({"id": n.id, "item": n.item, "event": n.event, "url": n.url});
        match answer.unwrap_or_else(|| Err("no answer was given".into())) {
            Ok(f) if (200..300).contains(&f.status) => {
                match self.gate.notice_delivered(j, now, &n.item, &n.id) {
                    Ok(()) => v["delivered"] = json!(true),
                    Err(e) => {
                        v["delivered"] = json!(true);
                        v["error"] = error_json(&e)["error"].clone();
                    }
                }
                v["status"] = json!(f.status);
            }
            Ok(f) => {
                v["delivered"] = json!(false);
                v["status"] = json!(f.status);
            }
            Err(e) => {
                v["delivered"] = json!(false);
                v["error"] = json!(e);
            }
        }
        done.push(v);
        let next = Job::Notify {
            notices,
            at: at + 1,
            done,
        };
        self.notify_next(now, next)
    }

    /// The server's Ed25519 signer (`INTERLOCK_SIGNING_KEY`, checked at start).
    fn signer(&self) -> Option<crate::proof::Signer> {
        let text = self.settings.as_ref().ok()?.signing_key.as_deref()?;
        crate::proof::Signer::parse(text).ok()
    }

    /// A check's body `{"<what>": document, "public_key"?}`: the document's JSON text and
    /// the key (the server's own public key when none is given).
    fn document_and_key(
        &self,
        body: &str,
        what: &str,
    ) -> Result<Result<(String, crate::proof::Verifier), Response>, GateError> {
        let b: Value =
            serde_json::from_str(body).map_err(|e| GateError::InvalidJson(e.to_string()))?;
        let doc = match b.get(what) {
            Some(Value::String(t)) => t.clone(),
            Some(v @ Value::Object(_)) => v.to_string(),
            _ => {
                return Err(invalid(
                    &format!("/{what}"),
                    "is required: the document to check",
                ))
            }
        };
        let key = match b.get("public_key") {
            Some(Value::String(k)) => crate::proof::Verifier::parse(k),
            None | Some(Value::Null) => match self.signer() {
                Some(s) => Ok(s.verifier()),
                None => return Ok(Err(no_signing_key())),
            },
            Some(_) => return Err(invalid("/public_key", "is the public key's text")),
        };
        Ok(key.map(|k| (doc, k)).map_err(|e| proof_failure(&e)))
    }

    fn route(
        &mut self,
        j: &mut dyn Journal,
        now: u64,
        call: Call<'_>,
    ) -> Result<Routed, GateError> {
        let Call {
            method,
            parts,
            body,
            who,
            headers,
        } = call;
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
                if let Some(signer) = self.signer() {
                    return match self.gate.signed_receipt(j, id, &signer) {
                        Ok(text) => Ok(Routed::Respond(Response::text(
                            200,
                            "application/json",
                            text,
                        ))),
                        Err(e) => proved(Err(e)),
                    };
                }
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
                let mut v = report_json(&r);
                v.as_object_mut().map(|o| o.remove("ok"));
                ok(v)
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
            ("GET", ["inbox"]) => ok(self.gate.inbox(j, now)?),
            ("POST", ["inbox", item, "decision"]) => {
                let Caller::Decider(name) = who else {
                    let r = forbidden(
                        "decider-required",
                        "a decision is made with the decider's own token (INTERLOCK_DECIDERS), never the server's",
                    );
                    return Ok(Routed::Respond(r));
                };
                let mut d = match json_body()? {
                    Value::Object(d) => d,
                    _ => return Err(invalid("", "must be a JSON object: the decision")),
                };
                if let Some(given) = d.get("decider").filter(|g| g.as_str() != Some(name)) {
                    let r = forbidden(
                        "not-your-name",
                        format!("this token is {name}'s; it cannot decide as {given}"),
                    );
                    return Ok(Routed::Respond(r));
                }
                if d.get("item").is_some_and(|i| i.as_str() != Some(*item)) {
                    return Err(invalid("/item", "differs from the item in the path"));
                }
                d.insert("item".into(), json!(item));
                d.insert("decider".into(), json!(name));
                ok(self.gate.decide(j, now, &Value::Object(d).to_string())?)
            }
            ("GET", ["approval-rules"]) => ok(self.gate.approval_rules(j)?),
            ("PUT", ["approval-rules"]) => {
                self.gate.set_approval_rules(j, now, body)?;
                ok(self.gate.approval_rules(j)?)
            }
            ("GET", ["scoreboard"]) => ok(self.gate.scoreboard(j, now)?),
            ("POST", ["webhooks", scheme]) => {
                let Some(sch) = Scheme::parse(scheme) else {
                    let r = failure(
                        404,
                        "not-found",
                        format!("no webhook scheme {scheme:?} (stripe, standard-webhooks)"),
                    );
                    return Ok(Routed::Respond(r));
                };
                let secret = match &self.settings {
                    Ok(s) => s.webhook_secrets.get(*scheme),
                    Err(_) => unreachable!("a misconfigured server routes nothing"),
                };
                let Some(secret) = secret.cloned() else {
                    let r = failure(
                        404,
                        "not-found",
                        format!("this server takes no {scheme} webhooks: no secret for it in INTERLOCK_WEBHOOK_SECRETS"),
                    );
                    return Ok(Routed::Respond(r));
                };
                let delivery = Delivery {
                    scheme: sch,
                    headers,
                    body: body.as_bytes(),
                };
                ok(self.gate.webhook(j, now, delivery, &secret, None)?)
            }
            ("POST", ["notices"]) => {
                let configured = matches!(&self.settings, Ok(s) if s.notify_secret.is_some());
                if !configured {
                    let r = failure(
                        409,
                        "notify-secret-missing",
                        "notices are signed: set INTERLOCK_NOTIFY_SECRET (whsec_<base64>) to deliver them",
                    );
                    return Ok(Routed::Respond(r));
                }
                let notices = self.gate.notices(j, now)?;
                Ok(Routed::Notify(Job::Notify {
                    notices,
                    at: 0,
                    done: Vec::new(),
                }))
            }
            ("GET", ["key"]) => match self.signer() {
                Some(s) => ok(json!({"public_key": s.verifier().text()})),
                None => Ok(Routed::Respond(no_signing_key())),
            },
            ("POST", ["check-receipt"]) => {
                let (doc, verifier) = match self.document_and_key(body, "receipt")? {
                    Ok(x) => x,
                    Err(r) => return Ok(Routed::Respond(r)),
                };
                proved(
                    self.gate
                        .check_signed_receipt(j, &doc, &verifier)
                        .map(|r| report_json(&r)),
                )
            }
            ("POST", ["check-bundle"]) => {
                let (doc, verifier) = match self.document_and_key(body, "bundle")? {
                    Ok(x) => x,
                    Err(r) => return Ok(Routed::Respond(r)),
                };
                proved(crate::proof::check_bundle(&doc, &verifier))
            }
            ("POST", ["checkpoint"]) => match self.signer() {
                Some(s) => proved(self.gate.checkpoint(j, now, &s)),
                None => Ok(Routed::Respond(no_signing_key())),
            },
            ("GET", ["checkpoint"]) => match self.gate.latest_checkpoint(j) {
                Ok(Some(note)) => Ok(Routed::Respond(Response::text(
                    200,
                    "text/plain; charset=utf-8",
                    note,
                ))),
                Ok(None) => Ok(Routed::Respond(failure(
                    404,
                    "no-checkpoint",
                    "the log has no checkpoint yet: POST .../checkpoint",
                ))),
                Err(e) => proved(Err(e)),
            },
            ("GET", ["proofs", "inclusion", id]) => {
                proved_text(self.gate.prove_inclusion(j, id, None))
            }
            ("GET", ["proofs", "consistency", old]) => {
                let Some(old) = old
                    .parse::<u64>()
                    .ok()
                    .filter(|_| old.bytes().all(|b| b.is_ascii_digit()))
                else {
                    return Err(invalid("/old_size", "is not a tree size (a whole number)"));
                };
                proved_text(self.gate.prove_consistency(j, old, None))
            }
            ("POST", ["bundle"]) => {
                let Some(signer) = self.signer() else {
                    return Ok(Routed::Respond(no_signing_key()));
                };
                let b = if body.trim().is_empty() {
                    json!({})
                } else {
                    json_body()?
                };
                let ms = |k: &str| -> Result<Option<u64>, GateError> {
                    match b.get(k) {
                        None | Some(Value::Null) => Ok(None),
                        Some(v) => v
                            .as_u64()
                            .filter(|v| *v < (1 << 53))
                            .map(Some)
                            .ok_or_else(|| invalid(&format!("/{k}"), "is not a Unix time in ms")),
                    }
                };
                let (from, to) = (ms("from_ms")?.unwrap_or(0), ms("to_ms")?.unwrap_or(now + 1));
                proved_text(self.gate.bundle(j, now, from, to, &signer))
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

/// A proof call's JSON answer, or its error's.
fn proved(r: Result<Value, crate::proof::ProofError>) -> Result<Routed, GateError> {
    match r {
        Ok(v) => Ok(Routed::Respond(Response::json(200, &v))),
        Err(crate::proof::ProofError::Gate(g)) => Err(g),
        Err(e) => Ok(Routed::Respond(proof_failure(&e))),
    }
}

/// A proof call's JSON text (as the gate wrote it), or its error's.
fn proved_text(r: Result<String, crate::proof::ProofError>) -> Result<Routed, GateError> {
    match r {
        Ok(t) => Ok(Routed::Respond(Response::text(200, "application/json", t))),
        Err(e) => proved(Err(e)),
    }
}

fn no_signing_key() -> Response {
    failure(
        409,
        "signing-key-missing",
        "this server signs nothing with Ed25519: set INTERLOCK_SIGNING_KEY (interlock keygen makes one)",
    )
}

fn report_json(r: &crate::VerifyReport) -> Value {
    json!({
        "ok": r.problems.is_empty(),
        "streams": r.streams,
        "entries": r.entries,
        "problems": r.problems.iter().map(|p| json!({
            "stream": p.stream, "seq": p.seq, "kind": p.kind.as_str(), "detail": p.detail,
        })).collect::<Vec<_>>(),
    })
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
