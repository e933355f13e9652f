//! Reading JSON inputs against their documented schema: the one reader for proposals,
//! approvals, tool configurations and the HTTP API's targets.
//!
//! Every member of an object must be one the schema names, at every depth: a misspelled
//! `host_chek` or `leese` must be refused, never accepted with its check silently gone.
//! Every problem is `invalid-field` at its JSON pointer (RFC 6901), and says what to write
//! instead (the nearest field name, the fields there are, the shape wanted).
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde_json::{Map, Value};

use crate::types::GateError;

/// Names of leases, approvals, caps, agents, targets, tools and arguments.
pub const MAX_NAME_BYTES: usize = 256;

pub fn field_err(field: &str, problem: impl Into<String>) -> GateError {
    GateError::InvalidField {
        field: field.to_string(),
        problem: problem.into(),
    }
}

/// `parent` + `/key`, the key escaped as RFC 6901 says (`~` as `~0`, `/` as `~1`).
pub fn pointer(parent: &str, key: &str) -> String {
    let mut at = String::with_capacity(parent.len() + key.len() + 1);
    at.push_str(parent);
    at.push('/');
    for c in key.chars() {
        match c {
            '~' => at.push_str("~0"),
            '/' => at.push_str("~1"),
            c => at.push(c),
        }
    }
    at
}

/// Whether `s` is a name: 1 to 256 bytes, no control characters.
fn is_name(s: &str) -> bool {
    !(s.is_empty() || s.len() > MAX_NAME_BYTES || s.chars().any(char::is_control))
}

/// A name: 1 to 256 bytes, no control characters.
pub fn check_name(s: &str, field: &str) -> Result<(), GateError> {
    if !is_name(s) {
        return Err(field_err(
            field,
            format!("must be a name of 1 to {MAX_NAME_BYTES} bytes with no control characters"),
        ));
    }
    Ok(())
}

/// An object read at a JSON pointer.
#[derive(Clone, Copy, Debug)]
pub struct Obj<'v, 'a> {
    map: &'v Map<String, Value>,
    at: &'a str,
}

impl<'v, 'a> Obj<'v, 'a> {
    /// `v` must be an object (`what` says which, for the message) whose members are all
    /// among `fields`.
    pub fn strict(
        v: &'v Value,
        at: &'a str,
        what: &str,
        fields: &[&str],
    ) -> Result<Self, GateError> {
        let o = Self::any(v, at, what)?;
        if let Some(k) = o.map.keys().find(|k| !fields.contains(&k.as_str())) {
            return Err(field_err(&pointer(at, k), unknown_field(k, what, fields)));
        }
        Ok(o)
    }

    /// `v` must be an object; its members are free (an effect, premises).
    pub fn any(v: &'v Value, at: &'a str, what: &str) -> Result<Self, GateError> {
        match v.as_object() {
            Some(map) => Ok(Obj { map, at }),
            None => Err(field_err(
                at,
                format!("{what} must be a JSON object, not {}", kind(v)),
            )),
        }
    }

    pub fn map(&self) -> &'v Map<String, Value> {
        self.map
    }

    /// The pointer to member `k`.
    pub fn at(&self, k: &str) -> String {
        pointer(self.at, k)
    }

    /// Member `k`, if present (a `null` counts as present: the schema says where it may be).
    pub fn get(&self, k: &str) -> Option<&'v Value> {
        self.map.get(k)
    }

    /// Member `k`, absent or `null` read as absent.
    pub fn get_some(&self, k: &str) -> Option<&'v Value> {
        self.map.get(k).filter(|v| !v.is_null())
    }

    pub fn required(&self, k: &str, what: &str) -> Result<&'v Value, GateError> {
        self.get(k)
            .ok_or_else(|| field_err(&self.at(k), format!("is required: {what}")))
    }

    /// A required name (see [`check_name`]).
    pub fn name(&self, k: &str, what: &str) -> Result<String, GateError> {
        match self.required(k, what)? {
            Value::String(s) if is_name(s) => Ok(s.clone()),
            Value::String(s) => check_name(s, &self.at(k)).map(|()| s.clone()),
            v => Err(field_err(
                &self.at(k),
                format!("must be a string, not {}", kind(v)),
            )),
        }
    }

    /// An optional name; `null` reads as absent.
    pub fn opt_name(&self, k: &str, what: &str) -> Result<Option<String>, GateError> {
        match self.get_some(k) {
            None => Ok(None),
            Some(_) => self.name(k, what).map(Some),
        }
    }

    pub fn bool_or(&self, k: &str, default: bool) -> Result<bool, GateError> {
        match self.get(k) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(field_err(
                &self.at(k),
                format!("must be true or false, not {}", kind(v)),
            )),
        }
    }

    pub fn opt_u64(&self, k: &str) -> Result<Option<u64>, GateError> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                field_err(
                    &self.at(k),
                    format!("must be a whole number of at least 0, not {}", kind(v)),
                )
            }),
        }
    }

    pub fn u64(&self, k: &str, what: &str) -> Result<u64, GateError> {
        self.opt_u64(k)?
            .ok_or_else(|| field_err(&self.at(k), format!("is required: {what}")))
    }

    /// A required non-empty list of names.
    pub fn names(&self, k: &str, what: &str) -> Result<Vec<String>, GateError> {
        let at = self.at(k);
        let list = match self.required(k, what)? {
            Value::Array(a) if !a.is_empty() => a,
            _ => return Err(field_err(&at, format!("must be a non-empty list: {what}"))),
        };
        list.iter()
            .enumerate()
            .map(|(i, x)| {
                let at = format!("{at}/{i}");
                match x {
                    Value::String(s) => check_name(s, &at).map(|()| s.clone()),
                    v => Err(field_err(&at, format!("must be a string, not {}", kind(v)))),
                }
            })
            .collect()
    }
}

/// The message for an unknown member `k` of a `what`: the nearest field, and the fields.
fn unknown_field(k: &str, what: &str, fields: &[&str]) -> String {
    let nearest = fields
        .iter()
        .map(|f| (distance(k, f), *f))
        .filter(|(d, f)| *d <= 2.max(f.len() / 3))
        .min();
    let hint = match nearest {
        Some((_, f)) => format!(" (did you mean \"{f}\"?)"),
        None => String::new(),
    };
    if fields.is_empty() {
        return format!("is not a field of {what}: it takes no fields{hint}");
    }
    format!(
        "is not a field of {what}{hint}; its fields are {}. A misspelled field is refused, \
         never ignored, so that it cannot drop a check",
        fields.join(", ")
    )
}

/// What kind of JSON value `v` is, for messages.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Levenshtein distance, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = (diag + usize::from(ca != *cb)).min(up + 1).min(row[j] + 1);
            diag = up;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problem(r: Result<Obj<'_, '_>, GateError>) -> (String, String) {
        match r {
            Err(GateError::InvalidField { field, problem }) => (field, problem),
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn an_unknown_member_is_refused_at_its_pointer_with_the_nearest_name() {
        let v = json!({"lease": "L", "host_chek": true});
        let (field, p) = problem(Obj::strict(
            &v,
            "/authority",
            "authority",
            &["lease", "approval", "host_check"],
        ));
        assert_eq!(field, "/authority/host_chek");
        assert!(p.contains("did you mean \"host_check\"?"), "{p}");
        assert!(p.contains("lease, approval, host_check"), "{p}");
        let v = json!({"a/b~c": 1});
        let (field, p) = problem(Obj::strict(&v, "", "a proposal", &["x"]));
        assert_eq!(field, "/a~1b~0c");
        assert!(!p.contains("did you mean"), "{p}");
    }

    #[test]
    fn types_and_names_say_what_is_wanted() {
        let v = json!({"n": "", "b": 1, "u": -1, "l": []});
        let o = Obj::strict(&v, "/t", "t", &["n", "b", "u", "l"]).unwrap();
        assert!(o.name("n", "x").is_err());
        assert!(o.name("missing", "who").is_err());
        assert!(o.bool_or("b", false).is_err());
        assert_eq!(o.bool_or("nothing", true), Ok(true));
        assert!(o.opt_u64("u").is_err());
        assert!(o.names("l", "names").is_err());
        let (field, p) = problem(Obj::any(&json!(7), "/effect", "the effect"));
        assert_eq!(
            (field.as_str(), p.as_str()),
            ("/effect", "the effect must be a JSON object, not a number")
        );
    }

    #[test]
    fn distances() {
        assert_eq!(distance("leese", "lease"), 1);
        assert_eq!(distance("host_chek", "host_check"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
