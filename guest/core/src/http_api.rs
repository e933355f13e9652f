//! The gate's HTTP API (docs/http-api.yaml) as the wasi:http component serves it: routing,
//! the bearer token, the JSON of steps, replies, outcomes and errors, and the table by
//! which a server performs an HTTP target. Sans-IO like the gate: the request comes in as
//! text, the network and the clock go out through [`Io`], storage through [`Journal`].
//!
//! `interlock serve` (hosts/cli) runs it inside the component; any wasi:http runtime that
//! provides the journal import can. The Cloudflare Worker (hosts/edge/src/api.js) serves the
//! same API, held to the same tests (hosts/edge/test, run against both servers).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::defaults::{CLAIM_WAIT_MAX_POLLS, CLAIM_WAIT_POLL_MS};
use crate::tools::outcome_json;
use crate::{Ask, Gate, GateError, Journal, JournalError, Outcome, Reason, Reply, State, Step};

/// A request as the server received it. `path` has no query.
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub authorization: Option<&'a str>,
    pub body: &'a str,
}

/// The answer: a status, a content type and a body (empty for 204).
#[derive(Debug, PartialEq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// 401: send `WWW-Authenticate: Bearer`.
    pub challenge: bool,
}

impl Response {
    fn json(status: u16, v: &Value) -> Response {
        Response {
            status,
            content_type: "application/json",
            body: v.to_string(),
            challenge: false,
        }
    }
    fn text(status: u16, content_type: &'static str, body: String) -> Response {
        Response {
            status,
            content_type,
            body,
            challenge: false,
        }
    }
    fn empty() -> Response {
        Response::text(204, "", String::new())
    }
}

/// An outgoing HTTP request of a target step.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetch {
    pub method: String,
    pub url: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    /// Give up waiting for the answer after this long (the send's `timeout_ms`).
    pub timeout_ms: Option<u64>,
}

/// The target's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    pub status: u16,
    pub body: String,
}

/// What the server needs from its runtime besides the journal.
pub trait Io {
    /// Performs `req`; `Err` is a failure with no answer (refused, lost, timed out).
    fn fetch(&mut self, req: &Fetch) -> Result<Fetched, String>;
    fn sleep_ms(&mut self, ms: u64);
    fn now_ms(&mut self) -> u64;
}

/// One endpoint of an HTTP target: a URL template, `{effect_id}` and `{member}` (a member
/// of the effect) filled in URL-encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub url: String,
    pub method: Option<String>,
}

/// A target the server performs itself.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpTarget {
    pub apply: Endpoint,
    pub lookup: Option<Endpoint>,
    pub premises: Option<Endpoint>,
    pub check: Option<Endpoint>,
}

/// The server's settings (in a runtime: the environment variables `INTERLOCK_TOKEN`,
/// `INTERLOCK_TARGETS`, `INTERLOCK_RECEIPT_KEY`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// The bearer token; none configured means every request is refused.
    pub token: Option<String>,
    pub targets: BTreeMap<String, HttpTarget>,
    pub receipt_key: Option<String>,
}

impl Settings {
    /// From the environment's values; a bad `INTERLOCK_TARGETS` says where it is wrong.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
        let nonempty = |k: &str| get(k).filter(|v| !v.is_empty());
        let targets = match nonempty("INTERLOCK_TARGETS") {
            None => BTreeMap::new(),
            Some(text) => parse_targets(&text).map_err(|e| format!("INTERLOCK_TARGETS: {e}"))?,
        };
        Ok(Settings {
            token: nonempty("INTERLOCK_TOKEN"),
            targets,
            receipt_key: nonempty("INTERLOCK_RECEIPT_KEY"),
        })
    }
}

/// `{"name": {"apply": {"url", "method"?}, "lookup"?: {"url"}, "premises"?: ..., "check"?: ...}}`.
pub fn parse_targets(text: &str) -> Result<BTreeMap<String, HttpTarget>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v.as_object().ok_or("is not an object of targets")?;
    let mut out = BTreeMap::new();
    for (name, t) in obj {
        let t = t
            .as_object()
            .ok_or_else(|| format!("/{name} is not an object"))?;
        for k in t.keys() {
            if !["apply", "lookup", "premises", "check"].contains(&k.as_str()) {
                return Err(format!(
                    "/{name}/{k} is not one of apply, lookup, premises, check"
                ));
            }
        }
        let endpoint = |k: &str| -> Result<Option<Endpoint>, String> {
            let Some(e) = t.get(k) else { return Ok(None) };
            let url = e
                .get("url")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("/{name}/{k}/url is not a string"))?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("/{name}/{k}/url is not an http(s) URL"));
            }
            let method = match e.get("method") {
                None => None,
                Some(Value::String(m)) if !m.is_empty() => Some(m.clone()),
                Some(_) => return Err(format!("/{name}/{k}/method is not a method")),
            };
            Ok(Some(Endpoint {
                url: url.into(),
                method,
            }))
        };
        let apply = endpoint("apply")?.ok_or_else(|| format!("/{name}/apply is required"))?;
        out.insert(
            name.clone(),
            HttpTarget {
                apply,
                lookup: endpoint("lookup")?,
                premises: endpoint("premises")?,
                check: endpoint("check")?,
            },
        );
    }
    Ok(out)
}

/// The server of one journal: two gate instances over it, as any two workers. `gate`
/// performs the configured targets (routes: only those), `stepper` hands steps of any
/// target to the caller. Compare-and-append keeps them honest.
pub struct Server {
    gate: Gate,
    stepper: Gate,
    settings: Settings,
}

/// The gate error's HTTP status (the rest are the server's own).
fn status_of(e: &GateError) -> u16 {
    match e {
        GateError::InvalidJson(_) | GateError::InvalidField { .. } => 400,
        GateError::TooLarge(_) => 413,
        GateError::UnknownEffect(_) | GateError::UnknownOperation(_) => 404,
        GateError::UnexpectedReply(_) => 409,
        GateError::Journal(_) | GateError::CorruptJournal(_) | GateError::Contention(_) => 503,
    }
}

fn journal_error_json(e: &JournalError) -> Value {
    match e {
        JournalError::Conflict(n) => json!({"tag": "conflict", "val": n}),
        JournalError::Io(m) => json!({"tag": "io", "val": m}),
        JournalError::Corrupt(m) => json!({"tag": "corrupt", "val": m}),
        JournalError::TornTail(m) => json!({"tag": "torn-tail", "val": m}),
        JournalError::Other(m) => json!({"tag": "other", "val": m}),
    }
}

/// `{"error": {"kind", "message", "value"}}`: the gate error's case and payload.
pub fn error_json(e: &GateError) -> Value {
    let (kind, value) = match e {
        GateError::InvalidJson(m) => ("invalid-json", json!(m)),
        GateError::InvalidField { field, problem } => {
            ("invalid-field", json!({"field": field, "problem": problem}))
        }
        GateError::TooLarge(n) => ("too-large", json!(n)),
        GateError::UnknownEffect(id) => ("unknown-effect", json!(id)),
        GateError::UnknownOperation(op) => ("unknown-operation", json!(op)),
        GateError::UnexpectedReply(m) => ("unexpected-reply", json!(m)),
        GateError::Journal(j) => ("journal", journal_error_json(j)),
        GateError::CorruptJournal(m) => ("corrupt-journal", json!(m)),
        GateError::Contention(m) => ("contention", json!(m)),
    };
    json!({"error": {"kind": kind, "message": e.to_string(), "value": value}})
}

fn gate_failure(e: &GateError) -> Response {
    Response::json(status_of(e), &error_json(e))
}

/// A server's own error: `kind` is not a gate error case.
fn failure(status: u16, kind: &str, message: impl Into<String>) -> Response {
    Response::json(
        status,
        &json!({"error": {"kind": kind, "message": message.into()}}),
    )
}

fn invalid(field: &str, problem: &str) -> GateError {
    GateError::InvalidField {
        field: field.into(),
        problem: problem.into(),
    }
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

/// A step as JSON: the request's members in snake_case, its effect parsed.
pub fn step_json(s: &Step) -> Value {
    let base = |effect_id: &str, target: &str, effect: &str| {
        let mut m = Map::new();
        m.insert("effect_id".into(), json!(effect_id));
        m.insert("target".into(), json!(target));
        m.insert("effect".into(), parsed(effect));
        m
    };
    let (ask, request) = match &s.ask {
        Ask::Done(o) => return json!({"op": s.op, "ask": "done", "outcome": outcome_json(o)}),
        Ask::Capture {
            effect_id,
            target,
            effect,
            names,
        } => {
            let mut m = base(effect_id, target, effect);
            m.insert("names".into(), json!(names));
            ("capture", m)
        }
        Ask::Authorize {
            effect_id,
            target,
            effect,
            agent,
        } => {
            let mut m = base(effect_id, target, effect);
            m.insert("agent".into(), json!(agent));
            ("authorize", m)
        }
        Ask::Apply {
            effect_id,
            target,
            effect,
            idempotency_key,
            attempt,
        } => {
            let mut m = base(effect_id, target, effect);
            m.insert("idempotency_key".into(), json!(idempotency_key));
            m.insert("attempt".into(), json!(attempt));
            ("apply", m)
        }
        Ask::Query {
            effect_id,
            target,
            effect,
        } => ("query", base(effect_id, target, effect)),
    };
    json!({"op": s.op, "ask": ask, "request": request})
}

/// The reply a JSON reply `{"reply": ..., "value": ...}` names.
pub fn reply_of(body: &str) -> Result<Reply, GateError> {
    let v: Value = serde_json::from_str(body).map_err(|e| GateError::InvalidJson(e.to_string()))?;
    let obj = v
        .as_object()
        .ok_or_else(|| invalid("", "is not an object {\"reply\": ..., \"value\": ...}"))?;
    if let Some(extra) = obj.keys().find(|k| *k != "reply" && *k != "value") {
        return Err(invalid(&format!("/{extra}"), "is not a member of a reply"));
    }
    let value = obj.get("value");
    let text = |tag: &str| match value {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(invalid(
            "/value",
            &format!("is not a string (the message of {tag})"),
        )),
    };
    let json_value = |tag: &str| match value {
        Some(v) => Ok(v.to_string()),
        None => Err(invalid("/value", &format!("is required with {tag} (JSON)"))),
    };
    Ok(match obj.get("reply").and_then(Value::as_str) {
        Some("captured") => Reply::Captured(json_value("captured")?),
        Some("applied") => Reply::Applied(json_value("applied")?),
        Some("found") => Reply::Found(json_value("found")?),
        Some("allowed") => match value {
            Some(Value::Bool(b)) => Reply::Allowed(*b),
            _ => return Err(invalid("/value", "is not a boolean")),
        },
        Some("rejected") => Reply::Rejected(text("rejected")?),
        Some("unknown") => Reply::Unknown(text("unknown")?),
        Some("failed") => Reply::Failed(text("failed")?),
        Some("not-found") if value.is_none() => Reply::NotFound,
        Some("not-found") => return Err(invalid("/value", "is not taken by not-found")),
        _ => return Err(invalid(
            "/reply",
            "is not one of captured, allowed, applied, rejected, unknown, found, not-found, failed",
        )),
    })
}

/// `encodeURIComponent`: every byte but the unreserved marks percent-encoded.
fn encode_component(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `%XX` decoded (a path segment); `None` when it is not UTF-8 or not well formed.
fn decode_component(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `template` with `{effect_id}` and `{member}` filled in, URL-encoded (a string member as
/// it is, anything else as JSON, a missing one empty).
pub fn fill(template: &str, effect_id: &str, effect: &Value) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close)
                if close > 0
                    && after[..close]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                let name = &after[..close];
                let v = if name == "effect_id" {
                    effect_id.into()
                } else {
                    match effect.get(name) {
                        None => String::new(),
                        Some(Value::String(s)) => s.clone(),
                        Some(v) => v.to_string(),
                    }
                };
                out.push_str(&encode_component(&v));
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A body as JSON text: empty is `null`; not JSON is `Err`.
fn body_json(body: &str) -> Result<String, String> {
    if body.trim().is_empty() {
        return Ok("null".into());
    }
    serde_json::from_str::<Value>(body)
        .map(|v| v.to_string())
        .map_err(|e| format!("the answer is not JSON: {e}"))
}

fn cut(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The table of docs/http-api.yaml: how a configured HTTP target performs one step, and
/// what its answer means. Never a made-up reply: a part that is not configured, or an
/// answer that does not say, is `failed` (the effect stays open).
pub fn perform(
    targets: &BTreeMap<String, HttpTarget>,
    step: &Ask,
    timeout_ms: u64,
    io: &mut dyn Io,
) -> Reply {
    let get = |e: &Endpoint, effect_id: &str, effect: &str| Fetch {
        method: "GET".into(),
        url: fill(&e.url, effect_id, &parsed(effect)),
        headers: vec![],
        body: None,
        timeout_ms: None,
    };
    // The gate asks only for routed targets, and only configured ones are routed.
    let target = |name: &str| targets.get(name);
    match step {
        Ask::Capture {
            effect_id,
            target: name,
            effect,
            ..
        } => {
            let Some(e) = target(name).and_then(|t| t.premises.as_ref()) else {
                return Reply::Failed(format!("target {name} has no premises endpoint configured"));
            };
            match io.fetch(&get(e, effect_id, effect)) {
                Ok(r) if r.status == 200 => match body_json(&r.body) {
                    Ok(j) => Reply::Captured(j),
                    Err(m) => Reply::Failed(format!("premises: {m}")),
                },
                Ok(r) => Reply::Failed(format!("premises: HTTP {}", r.status)),
                Err(m) => Reply::Failed(format!("premises: {m}")),
            }
        }
        Ask::Authorize {
            effect_id,
            target: name,
            effect,
            agent,
        } => {
            let Some(e) = target(name).and_then(|t| t.check.as_ref()) else {
                return Reply::Failed(format!("target {name} has no check endpoint configured"));
            };
            let body = json!({"effect_id": effect_id, "agent": agent, "effect": parsed(effect)});
            let req = Fetch {
                method: "POST".into(),
                url: fill(&e.url, effect_id, &parsed(effect)),
                headers: vec![("content-type".into(), "application/json".into())],
                body: Some(body.to_string()),
                timeout_ms: None,
            };
            match io.fetch(&req) {
                Ok(r) => {
                    let allowed = (r.status == 200)
                        .then(|| serde_json::from_str::<Value>(&r.body).ok())
                        .flatten()
                        .and_then(|v| v.get("allowed").and_then(Value::as_bool));
                    match allowed {
                        Some(b) => Reply::Allowed(b),
                        None => Reply::Failed(format!(
                            "check: HTTP {}, no {{\"allowed\": bool}}",
                            r.status
                        )),
                    }
                }
                Err(m) => Reply::Failed(format!("check: {m}")),
            }
        }
        Ask::Apply {
            effect_id,
            target: name,
            effect,
            idempotency_key,
            ..
        } => {
            let Some(t) = target(name) else {
                return Reply::Unknown(format!("target {name} is not configured"));
            };
            let req = Fetch {
                method: t.apply.method.clone().unwrap_or_else(|| "POST".into()),
                url: fill(&t.apply.url, effect_id, &parsed(effect)),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("idempotency-key".into(), idempotency_key.clone()),
                ],
                body: Some(effect.clone()),
                timeout_ms: Some(timeout_ms),
            };
            match io.fetch(&req) {
                Ok(r) if (200..300).contains(&r.status) => Reply::Applied(
                    // The target answered, not in JSON: keep its words.
                    body_json(&r.body).unwrap_or_else(|_| json!(r.body).to_string()),
                ),
                Ok(r) if (400..500).contains(&r.status) => {
                    Reply::Rejected(format!("HTTP {}: {}", r.status, cut(&r.body, 500)))
                }
                Ok(r) => Reply::Unknown(format!("HTTP {}", r.status)),
                Err(m) => Reply::Unknown(m),
            }
        }
        Ask::Query {
            effect_id,
            target: name,
            effect,
        } => {
            let Some(e) = target(name).and_then(|t| t.lookup.as_ref()) else {
                return Reply::Failed(format!("target {name} has no lookup endpoint configured"));
            };
            match io.fetch(&get(e, effect_id, effect)) {
                Ok(r) if r.status == 404 => Reply::NotFound,
                Ok(r) if r.status == 200 => match body_json(&r.body) {
                    Ok(j) => Reply::Found(j),
                    Err(m) => Reply::Failed(format!("lookup: {m}")),
                },
                Ok(r) => Reply::Failed(format!("lookup: HTTP {}", r.status)),
                Err(m) => Reply::Failed(format!("lookup: {m}")),
            }
        }
        Ask::Done(_) => Reply::Failed("the gate is done; nothing to perform".into()),
    }
}

/// A journal's name in the path: 1 to 64 of `[A-Za-z0-9._-]`, not `.` or `..`.
pub fn journal_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && name != "."
        && name != ".."
}

/// The journal a path names (`/v1/journals/{journal}/...`), if well formed: a runtime that
/// keeps one instance per journal routes by it.
pub fn journal_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v1/journals/")?;
    let name = rest.split('/').next()?;
    journal_name_ok(name).then_some(name)
}

/// Whether `authorization` carries the token (compared as SHA-256 digests, in constant
/// time). No token configured: nothing is authorized.
pub fn authorized(token: Option<&str>, authorization: Option<&str>) -> bool {
    let (Some(token), Some(h)) = (token, authorization) else {
        return false;
    };
    let Some(given) = h.strip_prefix("Bearer ") else {
        return false;
    };
    if given.is_empty() || given.contains(char::is_whitespace) {
        return false;
    }
    let (a, b) = (
        Sha256::digest(given.as_bytes()),
        Sha256::digest(token.as_bytes()),
    );
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

fn unauthorized() -> Response {
    let mut r = failure(
        401,
        "unauthorized",
        "a bearer token is required (Authorization: Bearer <token>)",
    );
    r.challenge = true;
    r
}

fn recover_json(r: Result<Outcome, GateError>, id: &str) -> Value {
    match r {
        Ok(o) => json!({"effect_id": id, "outcome": outcome_json(&o)}),
        Err(e) => json!({"effect_id": id, "error": error_json(&e)}),
    }
}

/// Every request while the settings are wrong: 500, saying what to fix (nothing is read or
/// recorded).
pub fn server_failure(problem: &str) -> Response {
    failure(
        500,
        "server-config",
        format!("the server's settings are wrong: {problem}"),
    )
}

impl Server {
    /// A request whose body could not be read (`too_large`: past the server's limit, given
    /// in `problem`): 401 without the token, else 413 or 400; nothing recorded.
    pub fn unreadable(
        &self,
        authorization: Option<&str>,
        too_large: bool,
        problem: &str,
    ) -> Response {
        if !authorized(self.settings.token.as_deref(), authorization) {
            return unauthorized();
        }
        if too_large {
            failure(413, "too-large", format!("the request body is {problem}"))
        } else {
            failure(
                400,
                "invalid-body",
                format!("the request body cannot be read: {problem}"),
            )
        }
    }

    pub fn new(settings: Settings) -> Server {
        let mut gate = Gate::new();
        // This server performs only the targets it is configured with; another target's
        // open effect stays open for a host that reaches it (the caller, through submit).
        gate.set_routes(settings.targets.keys().cloned());
        Server {
            gate,
            stepper: Gate::new(),
            settings,
        }
    }

    /// Answers one request. `journal` is the journal the path names (the runtime picked it).
    pub fn handle(&mut self, j: &mut dyn Journal, io: &mut dyn Io, req: &Request) -> Response {
        if !authorized(self.settings.token.as_deref(), req.authorization) {
            return unauthorized();
        }
        let Some(rest) = req.path.strip_prefix("/v1/journals/") else {
            return failure(
                404,
                "not-found",
                format!("no route {} {}", req.method, req.path),
            );
        };
        let (name, sub) = rest.split_once('/').unwrap_or((rest, ""));
        if !journal_name_ok(name) {
            return failure(
                404,
                "not-found",
                format!("not a journal name: {name:?} (1 to 64 of A-Z a-z 0-9 . _ -)"),
            );
        }
        let mut parts = Vec::new();
        for p in sub.split('/').filter(|p| !p.is_empty()) {
            match decode_component(p) {
                Some(p) => parts.push(p),
                None => return failure(404, "not-found", format!("not a path segment: {p:?}")),
            }
        }
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        match self.route(j, io, req.method, &parts, req.body) {
            Ok(r) => r,
            Err(e) => gate_failure(&e),
        }
    }

    fn drive(
        &mut self,
        j: &mut dyn Journal,
        io: &mut dyn Io,
        mut step: Step,
    ) -> Result<Outcome, GateError> {
        loop {
            if let Ask::Done(o) = step.ask {
                return Ok(o);
            }
            let timeout_ms = match &step.ask {
                Ask::Apply { effect_id, .. } => self.gate.send_timeout_ms(j, effect_id)?,
                _ => 0,
            };
            let reply = perform(&self.settings.targets, &step.ask, timeout_ms, io);
            let now = io.now_ms();
            step = self.gate.resume(j, now, step.op, reply)?;
        }
    }

    /// Recovers one effect; while another worker's claim is live, waits it out (the
    /// gate's defaults), as every host's recovery does.
    fn recover(
        &mut self,
        j: &mut dyn Journal,
        io: &mut dyn Io,
        id: &str,
    ) -> Result<Outcome, GateError> {
        let mut polls = 0;
        loop {
            let now = io.now_ms();
            let first = self.gate.recover(j, now, id)?;
            let o = self.drive(j, io, first)?;
            let live = o.state == State::Dispatched && o.reason == Some(Reason::ClaimLive);
            if !live || polls >= CLAIM_WAIT_MAX_POLLS {
                return Ok(o);
            }
            polls += 1;
            io.sleep_ms(o.retry_after_ms.map_or(CLAIM_WAIT_POLL_MS, |ms| ms + 1));
        }
    }

    fn route(
        &mut self,
        j: &mut dyn Journal,
        io: &mut dyn Io,
        method: &str,
        parts: &[&str],
        body: &str,
    ) -> Result<Response, GateError> {
        let ok = |v: Value| Ok(Response::json(200, &v));
        let json_body = || -> Result<Value, GateError> {
            serde_json::from_str(body).map_err(|e| GateError::InvalidJson(e.to_string()))
        };
        let now = io.now_ms();
        match (method, parts) {
            ("POST", ["submit"]) => {
                // The caller performs the target: submit never asks before it returns.
                let step = self.stepper.submit(j, now, body)?;
                ok(step_json(&step))
            }
            (m, ["ops", op]) if m == "POST" || m == "DELETE" => {
                let Some(op) = op
                    .parse::<u64>()
                    .ok()
                    .filter(|_| op.len() <= 15 && op.bytes().all(|b| b.is_ascii_digit()))
                else {
                    return Ok(failure(404, "not-found", format!("no operation {op}")));
                };
                if m == "DELETE" {
                    self.stepper.cancel(op);
                    return Ok(Response::empty());
                }
                let reply = reply_of(body)?;
                let step = self.stepper.resume(j, now, op, reply)?;
                ok(step_json(&step))
            }
            ("POST", ["effects"]) => {
                // Only a readable proposal's target is checked here; the gate judges the rest.
                let name = serde_json::from_str::<Value>(body).ok().and_then(|v| {
                    v.get("target")
                        .and_then(|t| t.get("name"))
                        .and_then(Value::as_str)
                        .map(String::from)
                });
                if let Some(name) = name {
                    if !self.settings.targets.contains_key(&name) {
                        let configured: Vec<&String> = self.settings.targets.keys().collect();
                        // Refused before the gate sees it: nothing recorded for a target
                        // nobody here reaches.
                        return Ok(failure(
                            422,
                            "unknown-target",
                            format!(
                                "this server performs no target {}; configured: {}; use POST .../submit to perform it yourself",
                                json!(name),
                                json!(configured)
                            ),
                        ));
                    }
                }
                let first = self.gate.submit(j, now, body)?;
                let o = self.drive(j, io, first)?;
                ok(outcome_json(&o))
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
                let key = self.settings.receipt_key.clone();
                let text = self
                    .gate
                    .receipt(j, id, key.as_deref().map(str::as_bytes))?;
                Ok(Response::text(200, "application/json", text))
            }
            ("POST", ["effects", id, "recover"]) => {
                let o = self.recover(j, io, id)?;
                ok(outcome_json(&o))
            }
            ("POST", ["recover"]) => {
                let mut all = Vec::new();
                for id in self.gate.open_effects(j)? {
                    let r = self.recover(j, io, &id);
                    all.push(recover_json(r, &id));
                }
                ok(Value::Array(all))
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
                Ok(Response::empty())
            }
            ("DELETE", ["leases", lease]) => {
                self.gate.revoke_lease(j, now, lease)?;
                Ok(Response::empty())
            }
            ("POST", ["approvals"]) => {
                self.gate.approve(j, now, body)?;
                Ok(Response::empty())
            }
            ("GET", ["entries"]) => {
                // The journal import has no order across streams: stream by stream, in
                // first-append order, each in its own order (the Worker, which holds its
                // storage, answers in append order; docs/http-api.yaml says so).
                let mut text = String::new();
                for stream in j.streams()? {
                    for e in j.read(&stream, 0)? {
                        text.push_str(&e);
                        text.push('\n');
                    }
                }
                Ok(Response::text(200, "application/jsonl", text))
            }
            _ => Ok(failure(
                404,
                "not-found",
                format!("no route {method} /{}", parts.join("/")),
            )),
        }
    }
}
