//! Which journal a path names, and the bearer token.

use sha2::{Digest, Sha256};

use super::*;

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

/// Who a request's bearer token says is asking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The server's token: every route but a decision.
    Operator,
    /// A decider's own token (`INTERLOCK_DECIDERS`): the inbox, the scoreboard, and
    /// decisions in their own name.
    Decider(String),
    /// No token, or one nobody holds.
    Nobody,
}

/// Who `authorization` names: the server's token, a decider's, or nobody (each compared
/// in constant time; a decider's token may be given as `sha256:<hex>` of it).
pub fn caller(settings: &Settings, authorization: Option<&str>) -> Caller {
    if authorized(settings.token.as_deref(), authorization) {
        return Caller::Operator;
    }
    for (name, token) in &settings.deciders {
        let held = match token.strip_prefix("sha256:") {
            Some(hex_digest) => bearer(authorization).is_some_and(|given| {
                let d = Sha256::digest(given.as_bytes());
                same(
                    hex::encode(d).as_bytes(),
                    hex_digest.to_ascii_lowercase().as_bytes(),
                )
            }),
            None => authorized(Some(token), authorization),
        };
        if held {
            return Caller::Decider(name.clone());
        }
    }
    Caller::Nobody
}

/// What a route asks of its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The server's token.
    Operator,
    /// The server's token or a decider's (reading the inbox, the scoreboard).
    Reader,
    /// A decider's own token (a decision in their name).
    Decider,
    /// No bearer token: the body's signature is checked instead (a service's webhook).
    Signed,
}

/// What the route of `path` asks (any method: a wrong method is answered 404 after).
pub fn access(path: &str) -> Access {
    let sub: Vec<&str> = path
        .strip_prefix("/v1/journals/")
        .and_then(|rest| rest.split_once('/'))
        .map(|(_, sub)| sub.split('/').filter(|p| !p.is_empty()).collect())
        .unwrap_or_default();
    match sub.as_slice() {
        ["webhooks", _] => Access::Signed,
        ["inbox"] | ["scoreboard"] => Access::Reader,
        ["inbox", _, "decision"] => Access::Decider,
        _ => Access::Operator,
    }
}

/// `Bearer <token>`'s token: the scheme in any case, one or more spaces before it (RFC
/// 9110, 11.1 and 11.4), no whitespace in it.
fn bearer(authorization: Option<&str>) -> Option<&str> {
    let (scheme, given) = authorization?.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let given = given.trim_start_matches(' ');
    (!given.is_empty() && !given.contains(char::is_whitespace)).then_some(given)
}

fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `authorization` carries the token: `Bearer <token>`, the scheme in any case and
/// one or more spaces before the token (RFC 9110, 11.1 and 11.4), compared as SHA-256
/// digests, in constant time. No token configured: nothing is authorized.
pub fn authorized(token: Option<&str>, authorization: Option<&str>) -> bool {
    let (Some(token), Some(given)) = (token, bearer(authorization)) else {
        return false;
    };
    same(
        &Sha256::digest(given.as_bytes()),
        &Sha256::digest(token.as_bytes()),
    )
}

pub(super) fn forbidden(kind: &str, message: impl Into<String>) -> Response {
    failure(403, kind, message)
}

pub(super) fn unauthorized() -> Response {
    let mut r = failure(
        401,
        "unauthorized",
        "a bearer token is required (Authorization: Bearer <token>)",
    );
    r.challenge = true;
    r
}
