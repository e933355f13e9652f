//! How the CLI reports: text for a person, or with `--json` one JSON document on stdout, and
//! failures typed by kind so a script can tell bad input from a journal that fails its check.
//!
//! Names are derived from the generated WIT enums (their Debug), so a new WIT case needs no
//! change here, and spelled as the journal spells them: states upper case, reasons with
//! underscores.

use interlock_cli::bindings::interlock::gate::types::{Outcome, State};
use interlock_cli::{Error as CallError, GateError, VerifyReport};
use interlock_file_journal::Error as FileError;
use serde_json::{json, Value};

/// Why a command failed, with its exit code.
#[derive(Debug)]
pub struct Failure {
    /// 1: the journal fails verification, or an outcome needs a person; 2: bad input or
    /// the command could not do its work.
    pub code: u8,
    /// Stable, for scripts: `invalid_json`, `invalid_field`, `no_journal`, ...
    pub kind: &'static str,
    pub message: String,
    /// For `invalid_field`: the gate's JSON pointer to the field and what is wrong with it.
    pub field: Option<String>,
    pub problem: Option<String>,
}

impl Failure {
    pub fn new(code: u8, kind: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            code,
            kind,
            message: message.into(),
            field: None,
            problem: None,
        }
    }

    pub fn with_code(mut self, code: u8) -> Failure {
        self.code = code;
        self
    }

    /// Prefixes the message with what was being done.
    pub fn context(mut self, what: impl std::fmt::Display) -> Failure {
        self.message = format!("{what}: {}", self.message);
        self
    }

    pub fn to_json(&self) -> Value {
        let mut e = json!({"kind": self.kind, "message": self.message, "field": self.field});
        if let Some(p) = &self.problem {
            e["problem"] = json!(p);
        }
        json!({ "error": e })
    }
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        classify(&error.into())
    }
}

/// Types an error by the first cause in its chain this host knows.
fn classify(e: &anyhow::Error) -> Failure {
    let message = format!("{e:#}");
    for cause in e.chain() {
        if let Some(c) = cause.downcast_ref::<CallError>() {
            return match c {
                CallError::Gate(g) => gate_failure(g, message),
                CallError::Trap(_) => Failure::new(2, "trap", message),
                CallError::Crashed(_) => Failure::new(2, "crashed", message),
                CallError::Journal(j) => Failure::new(2, journal_kind(j, false), message),
                CallError::Proof(p) => proof_failure(p, message),
            };
        }
        if let Some(f) = cause.downcast_ref::<FileError>() {
            return Failure::new(2, file_kind(f), message);
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            let kind = match io.kind() {
                std::io::ErrorKind::NotFound => "not_found",
                _ => "io",
            };
            return Failure::new(2, kind, message);
        }
        if cause
            .downcast_ref::<interlock_payments_sim::Error>()
            .is_some()
        {
            return Failure::new(2, "payments", message);
        }
    }
    Failure::new(2, "error", message)
}

pub fn file_kind(f: &FileError) -> &'static str {
    match f {
        FileError::Locked { .. } => "locked",
        FileError::Io(_) => "io",
        FileError::Corrupt { .. } => "corrupt_journal",
        FileError::TornTail { .. } => "torn_journal",
        FileError::Conflict { .. } | FileError::InvalidEntry { .. } => "journal",
        FileError::Format(_) => "journal_format",
    }
}

/// The kind of a journal that did not open (`journal-admin.open`); `url`: a shared journal.
pub fn journal_kind(e: &interlock_cli::JournalError, url: bool) -> &'static str {
    use interlock_cli::JournalError as J;
    match e {
        J::TornTail(_) => "torn_journal",
        J::Corrupt(_) => "corrupt_journal",
        // A journal of a newer or unreadable format is refused with `other`.
        J::Other(_) if url => "format",
        J::Other(_) => "journal_format",
        J::Io(_) => "io",
        J::Conflict(_) => "journal",
    }
}

/// A proof error: a check that fails is exit 1 (as a journal that fails `verify`); a bad
/// key or document is input, exit 2.
fn proof_failure(p: &interlock_cli::proof::ProofError, message: String) -> Failure {
    use interlock_cli::proof::ProofError as P;
    match p {
        P::BadKey(_) => Failure::new(2, "bad_key", message),
        P::BadSignature(_) => Failure::new(1, "bad_signature", message),
        P::Malformed(_) => Failure::new(2, "malformed", message),
        P::UnknownVersion(_) => Failure::new(2, "unknown_version", message),
        P::ProofFailed(_) => Failure::new(1, "proof_failed", message),
        P::Gate(g) => gate_failure(g, message),
    }
}

fn gate_failure(g: &GateError, message: String) -> Failure {
    let kind = match g {
        GateError::InvalidJson(_) => "invalid_json",
        GateError::InvalidField(_) => "invalid_field",
        GateError::TooLarge(_) => "too_large",
        GateError::UnknownEffect(_) => "unknown_effect",
        GateError::UnknownOperation(_) => "unknown_operation",
        GateError::UnexpectedReply(_) => "unexpected_reply",
        GateError::Journal(_) => "journal",
        GateError::CorruptJournal(_) => "corrupt_journal",
        GateError::Contention(_) => "contention",
    };
    let mut f = Failure::new(2, kind, message);
    if let GateError::InvalidField(fe) = g {
        f.field = Some(fe.field.clone());
        f.problem = Some(fe.problem.clone());
    }
    f
}

/// An outcome as the journal spells it, for `recover --json`.
pub fn outcome_json(o: &Outcome) -> Value {
    json!({
        "effect_id": o.effect_id,
        "state": state_name(o.state),
        "reason": o.reason.map(|r| words(format!("{r:?}"), '_')),
        "executed": words(format!("{:?}", o.executed), '_'),
        "replayed": o.replayed,
        "retry_after_ms": o.retry_after_ms,
        "result": o.result.as_deref().map(embed),
        "changed": o.changed.iter().map(|c| json!({
            "name": c.name, "was": embed(&c.was), "now": embed(&c.now),
        })).collect::<Vec<_>>(),
        "return_to": o.return_to,
    })
}

/// A `verify-report`, with problem kinds as WIT spells them (`hash-mismatch`).
pub fn report_json(r: &VerifyReport) -> Value {
    json!({
        "ok": r.problems.is_empty(),
        "streams": r.streams,
        "entries": r.entries,
        "problems": r.problems.iter().map(|p| json!({
            "stream": p.stream,
            "seq": p.seq,
            "kind": words(format!("{:?}", p.kind), '-'),
            "detail": p.detail,
        })).collect::<Vec<_>>(),
    })
}

/// JSON text from the gate, embedded as JSON (kept as a string should it not parse).
fn embed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

/// The state as spelled in JSON (upper case).
pub fn state_name(s: State) -> String {
    variant_name(format!("{s:?}")).to_uppercase()
}

/// `Reason::ClaimLive` (the generated Debug) -> `ClaimLive`.
fn variant_name(debug: String) -> String {
    debug.rsplit("::").next().unwrap_or_default().to_string()
}

/// The reason as its JSON code (`no_dedupe_no_lookup`), or `-`.
pub fn reason_text(o: &Outcome) -> String {
    o.reason
        .map_or_else(|| "-".to_string(), |r| words(format!("{r:?}"), '_'))
}

/// `Reason::NoDedupeNoLookup` (the generated Debug) -> `no_dedupe_no_lookup` with `sep`
/// `_`, as WIT spells it with `-`.
pub fn words(debug: String, sep: char) -> String {
    let mut out = String::new();
    for (i, c) in variant_name(debug).chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push(sep);
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The URL schemes of the shared journals (`adapters/sql-journal`).
pub const JOURNAL_SCHEMES: [&str; 3] = ["sqlite", "postgres", "postgresql"];

/// Whether a journal argument names a shared journal by URL (a scheme of
/// [`JOURNAL_SCHEMES`]) rather than a folder.
pub fn is_journal_url(dir: &std::path::Path) -> bool {
    let s = dir.to_string_lossy();
    s.split_once("://")
        .is_some_and(|(scheme, _)| JOURNAL_SCHEMES.contains(&scheme))
}

/// A journal argument that names something by a URL no journal has (`file://`, `s3://`):
/// as a path it would silently become a folder named `file:`.
pub fn refuse_url(dir: &std::path::Path) -> Result<(), Failure> {
    let s = dir.to_string_lossy();
    let Some((scheme, _)) = s.split_once("://") else {
        return Ok(());
    };
    if JOURNAL_SCHEMES.contains(&scheme) {
        return Ok(());
    }
    let is_scheme = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !is_scheme {
        return Ok(());
    }
    Err(Failure::new(
        2,
        "unsupported_journal",
        format!(
            "{s} is a URL, and {scheme}:// names no journal: give a journal folder, \
             sqlite:///path/to/journal.db or postgres://user@host/db"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn urls_of_no_journal_are_refused_and_paths_and_journal_urls_are_not() {
        for url in ["file:///tmp/j", "S3+x.y-z://b", "mysql://u@h/db"] {
            let f = refuse_url(Path::new(url)).unwrap_err();
            assert_eq!((f.code, f.kind), (2, "unsupported_journal"), "{url}");
            assert!(f.message.contains("sqlite:///"), "{}", f.message);
        }
        for path in ["j", "/tmp/j", "./a:b", "dir/x://y", "://x", "1a://x"] {
            assert!(refuse_url(Path::new(path)).is_ok(), "{path}");
            assert!(!is_journal_url(Path::new(path)), "{path}");
        }
        for url in [
            "postgres://u@h/db",
            "postgresql://h/db",
            "sqlite:///tmp/j.db",
        ] {
            assert!(refuse_url(Path::new(url)).is_ok(), "{url}");
            assert!(is_journal_url(Path::new(url)), "{url}");
        }
    }
}
