//! The server's settings: the token, the HTTP targets it performs (read strictly), the
//! receipt key, strict authority.
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};

use serde_json::Value;

use crate::schema::Obj;
use crate::GateError;

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

pub(super) fn parse_targets_checked(text: &str) -> Result<BTreeMap<String, HttpTarget>, GateError> {
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
