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

use crate::schema::Obj;
use crate::tools::outcome_json;
use crate::{Ask, ClaimWait, Gate, GateError, Journal, JournalError, Outcome, Reply, Step};

/// A request as the server received it. `path` has no query; `body` is the bytes as they
/// came: decoded here, strictly, as UTF-8 (not UTF-8: 400 `invalid-body`, nothing
/// recorded), so every server treats the same bytes alike.
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub authorization: Option<&'a str>,
    pub body: &'a [u8],
}

/// The largest request body a server reads, in bytes (a proposal's own limit, the gate's
/// `MAX_INPUT_BYTES`, is smaller): past it, [`Server::unreadable`] with `too_large`.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// How long a server waits for a request's whole body, in ms, before it answers
/// [`Server::unreadable`] (400 `invalid-body`): a client that sends too slowly holds no
/// journal meanwhile.
pub const BODY_DEADLINE_MS: u64 = 10_000;

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
    /// Strict authority (`INTERLOCK_STRICT_AUTHORITY=1`): a proposal naming no lease or
    /// approval is refused (400 `invalid-field` at `/authority`) instead of running under
    /// its agent's standing lease.
    pub strict_authority: bool,
}

impl Settings {
    /// From the environment's values; a bad `INTERLOCK_TARGETS` says where it is wrong.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
        let nonempty = |k: &str| get(k).filter(|v| !v.is_empty());
        let targets = match nonempty("INTERLOCK_TARGETS") {
            None => BTreeMap::new(),
            Some(text) => parse_targets(&text).map_err(|e| format!("INTERLOCK_TARGETS: {e}"))?,
        };
        let strict_authority = match nonempty("INTERLOCK_STRICT_AUTHORITY").as_deref() {
            None | Some("0") => false,
            Some("1") => true,
            Some(v) => {
                return Err(format!(
                    "INTERLOCK_STRICT_AUTHORITY: {v:?} is neither 1 (named authority only) nor 0"
                ))
            }
        };
        Ok(Settings {
            token: nonempty("INTERLOCK_TOKEN"),
            targets,
            receipt_key: nonempty("INTERLOCK_RECEIPT_KEY"),
            strict_authority,
        })
    }
}

/// `{"name": {"apply": {"url", "method"?}, "lookup"?: {"url"}, "premises"?: ..., "check"?: ...}}`,
/// read by the one schema reader: an unknown member at any depth is refused at its pointer.
pub fn parse_targets(text: &str) -> Result<BTreeMap<String, HttpTarget>, String> {
    parse_targets_checked(text).map_err(|e| match e {
        GateError::InvalidField { field, problem } => format!("{field} {problem}"),
        GateError::InvalidJson(m) => format!("not JSON: {m}"),
        other => format!("{other:?}"),
    })
}

fn parse_targets_checked(text: &str) -> Result<BTreeMap<String, HttpTarget>, GateError> {
    let v: Value = serde_json::from_str(text).map_err(|e| GateError::InvalidJson(e.to_string()))?;
    let all = Obj::any(&v, "", "the targets (name -> target)")?;
    let mut out = BTreeMap::new();
    for (name, t) in all.map() {
        let at = all.at(name);
        crate::schema::check_name(name, &at)?;
        let t = Obj::strict(
            t,
            &at,
            "an HTTP target",
            &["apply", "lookup", "premises", "check"],
        )?;
        let endpoint = |k: &str| -> Result<Option<Endpoint>, GateError> {
            let Some(e) = t.get(k) else { return Ok(None) };
            let eat = t.at(k);
            let e = Obj::strict(e, &eat, "an endpoint", &["url", "method"])?;
            let url = match e.required("url", "the endpoint's http(s) URL")? {
                Value::String(u) if u.starts_with("http://") || u.starts_with("https://") => u,
                _ => {
                    return Err(crate::schema::field_err(
                        &e.at("url"),
                        "must be an http:// or https:// URL",
                    ))
                }
            };
            Ok(Some(Endpoint {
                url: url.clone(),
                method: e.opt_name("method", "")?,
            }))
        };
        let apply = endpoint("apply")?.ok_or_else(|| {
            crate::schema::field_err(
                &t.at("apply"),
                "is required: the request that does the effect",
            )
        })?;
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
        Ask::Sleep(ms) => return json!({"op": s.op, "ask": "sleep", "ms": ms}),
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
        Some("slept") if value.is_none() => Reply::Slept,
        Some("slept") => return Err(invalid("/value", "is not taken by slept")),
        Some("not-found") if value.is_none() => Reply::NotFound,
        Some("not-found") => return Err(invalid("/value", "is not taken by not-found")),
        _ => return Err(invalid(
            "/reply",
            "is not one of captured, allowed, applied, rejected, unknown, found, not-found, failed, slept",
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

/// The table of docs/http-api.yaml, first half: the request that performs gate step `ask`
/// on a configured HTTP target (`timeout_ms`: the send's). `Err` is the reply when there is
/// nothing to send: a part that is not configured is `failed` (the effect stays open),
/// never a made-up answer.
pub fn target_request(
    targets: &BTreeMap<String, HttpTarget>,
    ask: &Ask,
    timeout_ms: u64,
) -> Result<Fetch, Reply> {
    let get = |e: &Endpoint, effect_id: &str, effect: &str| Fetch {
        method: "GET".into(),
        url: fill(&e.url, effect_id, &parsed(effect)),
        headers: vec![],
        body: None,
        timeout_ms: None,
    };
    // The gate asks only for routed targets, and only configured ones are routed.
    let endpoint = |name: &str, part: &str, e: Option<&Endpoint>| {
        e.cloned().ok_or_else(|| {
            Reply::Failed(format!("target {name} has no {part} endpoint configured"))
        })
    };
    let target = |name: &str| targets.get(name);
    match ask {
        Ask::Capture {
            effect_id,
            target: name,
            effect,
            ..
        } => {
            let e = endpoint(
                name,
                "premises",
                target(name).and_then(|t| t.premises.as_ref()),
            )?;
            Ok(get(&e, effect_id, effect))
        }
        Ask::Authorize {
            effect_id,
            target: name,
            effect,
            agent,
        } => {
            let e = endpoint(name, "check", target(name).and_then(|t| t.check.as_ref()))?;
            let body = json!({"effect_id": effect_id, "agent": agent, "effect": parsed(effect)});
            Ok(Fetch {
                method: "POST".into(),
                url: fill(&e.url, effect_id, &parsed(effect)),
                headers: vec![("content-type".into(), "application/json".into())],
                body: Some(body.to_string()),
                timeout_ms: None,
            })
        }
        Ask::Apply {
            effect_id,
            target: name,
            effect,
            idempotency_key,
            ..
        } => {
            let t = target(name)
                .ok_or_else(|| Reply::Failed(format!("target {name} is not configured")))?;
            Ok(Fetch {
                method: t.apply.method.clone().unwrap_or_else(|| "POST".into()),
                url: fill(&t.apply.url, effect_id, &parsed(effect)),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("idempotency-key".into(), idempotency_key.clone()),
                ],
                body: Some(effect.clone()),
                timeout_ms: Some(timeout_ms),
            })
        }
        Ask::Query {
            effect_id,
            target: name,
            effect,
        } => {
            let e = endpoint(name, "lookup", target(name).and_then(|t| t.lookup.as_ref()))?;
            Ok(get(&e, effect_id, effect))
        }
        Ask::Done(_) | Ask::Sleep(_) => Err(Reply::Failed(
            "the gate asks no target request here; nothing to perform".into(),
        )),
    }
}

/// The table's second half: what the target's answer to step `ask` means. `Err`: no answer
/// (refused, lost, timed out).
pub fn target_reply(ask: &Ask, answer: Result<&Fetched, &str>) -> Reply {
    match ask {
        Ask::Capture { .. } => match answer {
            Ok(r) if r.status == 200 => match body_json(&r.body) {
                Ok(j) => Reply::Captured(j),
                Err(m) => Reply::Failed(format!("premises: {m}")),
            },
            Ok(r) => Reply::Failed(format!("premises: HTTP {}", r.status)),
            Err(m) => Reply::Failed(format!("premises: {m}")),
        },
        Ask::Authorize { .. } => match answer {
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
        },
        Ask::Apply { .. } => match answer {
            Ok(r) if (200..300).contains(&r.status) => Reply::Applied(
                // The target answered, not in JSON: keep its words.
                body_json(&r.body).unwrap_or_else(|_| json!(r.body).to_string()),
            ),
            Ok(r) if (400..500).contains(&r.status) => {
                Reply::Rejected(format!("HTTP {}: {}", r.status, cut(&r.body, 500)))
            }
            Ok(r) => Reply::Unknown(format!("HTTP {}", r.status)),
            Err(m) => Reply::Unknown(m.into()),
        },
        Ask::Query { .. } => match answer {
            Ok(r) if r.status == 404 => Reply::NotFound,
            Ok(r) if r.status == 200 => match body_json(&r.body) {
                Ok(j) => Reply::Found(j),
                Err(m) => Reply::Failed(format!("lookup: {m}")),
            },
            Ok(r) => Reply::Failed(format!("lookup: HTTP {}", r.status)),
            Err(m) => Reply::Failed(format!("lookup: {m}")),
        },
        Ask::Sleep(_) => Reply::Slept,
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

/// Whether `authorization` carries the token: `Bearer <token>`, the scheme in any case and
/// one or more spaces before the token (RFC 9110, 11.1 and 11.4), compared as SHA-256
/// digests, in constant time. No token configured: nothing is authorized.
pub fn authorized(token: Option<&str>, authorization: Option<&str>) -> bool {
    let (Some(token), Some(h)) = (token, authorization) else {
        return false;
    };
    let Some((scheme, given)) = h.split_once(' ') else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return false;
    }
    let given = given.trim_start_matches(' ');
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
mod tests {
    use super::*;
    use crate::MemJournal;
    use alloc::string::ToString;

    const T0: u64 = 1_800_000_000_000;
    const TARGETS: &str = r#"{"payments": {
        "apply": {"url": "http://pay.test/refunds"},
        "lookup": {"url": "http://pay.test/refunds?reference={effect_id}"},
        "premises": {"url": "http://pay.test/orders/{order}/premises?excluding={effect_id}"}}}"#;

    fn server() -> Server {
        let env = |k: &str| match k {
            "INTERLOCK_TOKEN" => Some("tok".to_string()),
            "INTERLOCK_TARGETS" => Some(TARGETS.to_string()),
            _ => None,
        };
        Server::new(Settings::from_env(env))
    }

    fn req<'a>(method: &'a str, path: &'a str, body: &'a str) -> Request<'a> {
        Request {
            method,
            path,
            authorization: Some("Bearer tok"),
            body: body.as_bytes(),
        }
    }

    fn refund(key: &str) -> String {
        json!({"agent": "a", "key": key, "target": {"name": "payments", "dedupes": true, "lookup": true},
            "effect": {"order": "o 1", "amount_cents": 2000}, "authority": {"lease": "l"},
            "premises": {"refunded_cents": 0}})
        .to_string()
    }

    /// Answers every step the server asks for as a payments service would; counts applies.
    fn answer(
        s: &mut Server,
        j: &mut MemJournal,
        mut step: ApiStep,
        applies: &mut u32,
    ) -> Response {
        loop {
            let answer = match step.next {
                Next::Respond(r) => return r,
                Next::Sleep(_) => None,
                Next::Fetch(f) if f.method == "POST" => {
                    *applies += 1;
                    let key = f
                        .headers
                        .iter()
                        .find(|(k, _)| k == "idempotency-key")
                        .unwrap();
                    Some(Ok(Fetched {
                        status: 200,
                        body: json!({"reference": key.1}).to_string(),
                    }))
                }
                Next::Fetch(_) => Some(Ok(Fetched {
                    status: 200,
                    body: r#"{"refunded_cents": 0}"#.into(),
                })),
            };
            step = s.resume(j, T0, step.id, answer);
        }
    }

    #[test]
    fn the_target_table_maps_http_answers_to_replies() {
        let apply = Ask::Apply {
            effect_id: "e".into(),
            target: "payments".into(),
            effect: "{}".into(),
            idempotency_key: "k".into(),
            attempt: 0,
        };
        let ok = |status, body: &str| Fetched {
            status,
            body: body.into(),
        };
        assert_eq!(
            target_reply(&apply, Ok(&ok(201, ""))),
            Reply::Applied("null".into())
        );
        assert_eq!(
            target_reply(&apply, Ok(&ok(200, "done"))),
            Reply::Applied("\"done\"".into())
        );
        assert!(matches!(
            target_reply(&apply, Ok(&ok(422, "no"))),
            Reply::Rejected(_)
        ));
        assert!(matches!(
            target_reply(&apply, Ok(&ok(503, ""))),
            Reply::Unknown(_)
        ));
        assert!(matches!(
            target_reply(&apply, Err("timed out")),
            Reply::Unknown(_)
        ));
        let query = Ask::Query {
            effect_id: "e".into(),
            target: "payments".into(),
            effect: "{}".into(),
        };
        assert_eq!(target_reply(&query, Ok(&ok(404, ""))), Reply::NotFound);
        assert!(matches!(
            target_reply(&query, Ok(&ok(500, ""))),
            Reply::Failed(_)
        ));
        let targets = parse_targets(TARGETS).unwrap();
        let f = target_request(&targets, &apply, 1500).unwrap();
        assert_eq!((f.method.as_str(), f.timeout_ms), ("POST", Some(1500)));
        assert!(f.headers.contains(&("idempotency-key".into(), "k".into())));
        // A part that is not configured: failed, never a made-up answer.
        let authorize = Ask::Authorize {
            effect_id: "e".into(),
            target: "payments".into(),
            effect: "{}".into(),
            agent: "a".into(),
        };
        assert!(matches!(
            target_request(&targets, &authorize, 0),
            Err(Reply::Failed(_))
        ));
        assert_eq!(
            fill(
                "http://x/{order}?r={effect_id}&m={missing}",
                "e1",
                &json!({"order": "o 1/2"})
            ),
            "http://x/o%201%2F2?r=e1&m="
        );
    }

    #[test]
    fn targets_and_settings_are_read_strictly() {
        let at = |t: &str| parse_targets(t).unwrap_err();
        let e = at(r#"{"p": {"apply": {"url": "http://x", "methd": "POST"}}}"#);
        assert!(
            e.starts_with("/p/apply/methd is not a field of an endpoint"),
            "{e}"
        );
        assert!(e.contains("did you mean \"method\"?"), "{e}");
        assert!(at(r#"{"p": {"aply": {"url": "http://x"}}}"#).starts_with("/p/aply "));
        assert!(at(r#"{"p": {"apply": {"url": "ftp://x"}}}"#).starts_with("/p/apply/url "));
        let strict = |v: &str| {
            Settings::from_env(|k| (k == "INTERLOCK_STRICT_AUTHORITY").then(|| v.to_string()))
        };
        assert!(strict("1").unwrap().strict_authority);
        assert!(!strict("0").unwrap().strict_authority);
        assert!(strict("yes").is_err());
    }

    #[test]
    fn bad_settings_and_missing_tokens_are_refused_before_anything_is_read() {
        let bad = Server::new(Settings::from_env(|k| {
            (k == "INTERLOCK_TARGETS").then(|| r#"{"p": {}}"#.into())
        }));
        assert_eq!(bad.refusal(Some("Bearer x")).unwrap().status, 500);
        let mut s = server();
        let mut j = MemJournal::new();
        for auth in [
            None,
            Some("Bearer tok2"),
            Some("Basic tok"),
            Some("Bearer "),
        ] {
            let r = Request {
                authorization: auth,
                ..req("PUT", "/v1/journals/a/leases/l", r#"{"expires_at_ms": 1}"#)
            };
            let step = s.handle(&mut j, T0, &r);
            assert!(matches!(
                step.next,
                Next::Respond(Response {
                    status: 401,
                    challenge: true,
                    ..
                })
            ));
        }
        assert!(j.to_jsonl().is_empty(), "nothing recorded");
        let step = s.handle(&mut j, T0, &req("GET", "/v1/journals/../entries", ""));
        assert!(matches!(
            step.next,
            Next::Respond(Response { status: 404, .. })
        ));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_takes_spaces_before_the_token() {
        let t = Some("tok");
        for ok in [
            "Bearer tok",
            "bearer tok",
            "BEARER tok",
            "bEaReR tok",
            "Bearer   tok",
        ] {
            assert!(authorized(t, Some(ok)), "{ok:?}");
        }
        for no in [
            "Bearer",
            "Bearer ",
            "Bearer  ",
            "Bearertok",
            "Bearer\ttok",
            "Bearer tok x",
            "Bearer tok2",
            "Bearer to",
            " Bearer tok",
            "Basic tok",
            "Bearers tok",
            "tok",
        ] {
            assert!(!authorized(t, Some(no)), "{no:?}");
        }
        assert!(!authorized(None, Some("Bearer tok")), "no token configured");
        assert!(!authorized(t, None));
        let mut s = server();
        let mut j = MemJournal::new();
        let far = r#"{"expires_at_ms": 4102444800000}"#;
        let r = Request {
            authorization: Some("bearer  tok"),
            ..req("PUT", "/v1/journals/a/leases/l", far)
        };
        let step = s.handle(&mut j, T0, &r);
        assert!(matches!(
            step.next,
            Next::Respond(Response { status: 204, .. })
        ));
    }

    #[test]
    fn a_body_that_is_not_utf8_is_refused_and_nothing_is_recorded() {
        let mut s = server();
        let mut j = MemJournal::new();
        let far = br#"{"expires_at_ms": 4102444800000}"#;
        let step = s.handle(
            &mut j,
            T0,
            &Request {
                body: far,
                ..req("PUT", "/v1/journals/a/leases/l", "")
            },
        );
        answer(&mut s, &mut j, step, &mut 0);
        let before = j.to_jsonl();
        let mut body = refund("k9").into_bytes();
        let at = body.windows(3).position(|w| w == b"\"a\"").unwrap() + 1;
        body.splice(at..at + 1, [0xff, 0xfe]);
        for path in ["/v1/journals/a/effects", "/v1/journals/a/submit"] {
            let step = s.handle(
                &mut j,
                T0,
                &Request {
                    body: &body,
                    ..req("POST", path, "")
                },
            );
            let Next::Respond(r) = step.next else {
                panic!("{step:?}")
            };
            assert_eq!(r.status, 400, "{}", r.body);
            let e: Value = serde_json::from_str(&r.body).unwrap();
            assert_eq!(e["error"]["kind"], "invalid-body", "{}", r.body);
            assert!(
                e["error"]["message"].as_str().unwrap().contains("UTF-8"),
                "{}",
                r.body
            );
        }
        assert_eq!(j.to_jsonl(), before, "nothing recorded");
    }

    #[test]
    fn a_served_effect_is_sent_once_and_replayed() {
        let mut s = server();
        let mut j = MemJournal::new();
        let far = r#"{"expires_at_ms": 4102444800000}"#;
        let step = s.handle(&mut j, T0, &req("PUT", "/v1/journals/a/leases/l", far));
        let r = answer(&mut s, &mut j, step, &mut 0);
        assert_eq!(r.status, 204);
        let mut applies = 0;
        let body = refund("k1");
        for _ in 0..2 {
            let step = s.handle(&mut j, T0, &req("POST", "/v1/journals/a/effects", &body));
            let r = answer(&mut s, &mut j, step, &mut applies);
            let o: Value = serde_json::from_str(&r.body).unwrap();
            assert_eq!(
                (r.status, o["state"].as_str()),
                (200, Some("COMMITTED")),
                "{}",
                r.body
            );
        }
        assert_eq!(
            applies, 1,
            "the same request again is answered from the journal"
        );
        let other = json!({"target": {"name": "mail"}}).to_string();
        let step = s.handle(&mut j, T0, &req("POST", "/v1/journals/a/effects", &other));
        assert!(matches!(
            step.next,
            Next::Respond(Response { status: 422, .. })
        ));
    }

    #[test]
    fn a_crash_after_the_send_is_recovered_by_lookup() {
        let mut s = server();
        let mut j = MemJournal::new();
        let far = r#"{"expires_at_ms": 4102444800000}"#;
        let step = s.handle(&mut j, T0, &req("PUT", "/v1/journals/a/leases/l", far));
        answer(&mut s, &mut j, step, &mut 0);
        // Run the request to its send, then drop the server: the process died.
        let mut step = s.handle(
            &mut j,
            T0,
            &req("POST", "/v1/journals/a/effects", &refund("k2")),
        );
        while !matches!(&step.next, Next::Fetch(f) if f.method == "POST") {
            let ok = Fetched {
                status: 200,
                body: r#"{"refunded_cents": 0}"#.into(),
            };
            step = s.resume(&mut j, T0, step.id, Some(Ok(ok)));
        }
        drop(s);
        let mut s = server();
        let later = T0 + 60_000; // the claim has expired
        let step = s.handle(&mut j, later, &req("POST", "/v1/journals/a/recover", ""));
        let Next::Fetch(lookup) = &step.next else {
            panic!("{step:?}")
        };
        assert_eq!(lookup.method, "GET");
        let found = Fetched {
            status: 200,
            body: r#"{"reference": "x"}"#.into(),
        };
        let step = s.resume(&mut j, later, step.id, Some(Ok(found)));
        let Next::Respond(r) = step.next else {
            panic!("{step:?}")
        };
        let all: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(all[0]["outcome"]["state"], "COMMITTED", "{}", r.body);
    }
}
