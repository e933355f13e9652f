//! The HTTP exchange as the server and its runtime see it: a request, the answer, a
//! target's request and its answer, and what the server needs from its runtime.
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::Value;

/// A request as the server received it. `path` has no query; `body` is the bytes as they
/// came: decoded here, strictly, as UTF-8 (not UTF-8: 400 `invalid-body`, nothing
/// recorded), so every server treats the same bytes alike.
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub authorization: Option<&'a str>,
    /// Every header as received (a service's webhook is checked by its signature headers).
    pub headers: &'a [(String, String)],
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
    pub(super) fn json(status: u16, v: &Value) -> Response {
        Response {
            status,
            content_type: "application/json",
            body: v.to_string(),
            challenge: false,
        }
    }
    pub(super) fn text(status: u16, content_type: &'static str, body: String) -> Response {
        Response {
            status,
            content_type,
            body,
            challenge: false,
        }
    }
    pub(super) fn empty() -> Response {
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
