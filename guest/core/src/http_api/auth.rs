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

pub(super) fn unauthorized() -> Response {
    let mut r = failure(
        401,
        "unauthorized",
        "a bearer token is required (Authorization: Bearer <token>)",
    );
    r.challenge = true;
    r
}
