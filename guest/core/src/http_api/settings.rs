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
    /// The Ed25519 signer key (`INTERLOCK_SIGNING_KEY`, C2SP signed-note `PRIVATE+KEY+...`):
    /// receipts, bundles and the log's checkpoints are signed with it, and anyone checks
    /// them with its public key (`GET .../key`).
    pub signing_key: Option<String>,
    /// Strict authority (`INTERLOCK_STRICT_AUTHORITY=1`): a proposal naming no lease or
    /// approval is refused (400 `invalid-field` at `/authority`) instead of running under
    /// its agent's standing lease.
    pub strict_authority: bool,
    /// The people who decide inbox items, each with their own bearer token (plain, or
    /// `sha256:<hex>` of it): `INTERLOCK_DECIDERS`, `{"alice@shop": "<token>"}`. A decider's
    /// token opens the inbox, the scoreboard and their own decisions, nothing else.
    pub deciders: BTreeMap<String, String>,
    /// The secret each service signs its webhooks with: `INTERLOCK_WEBHOOK_SECRETS`,
    /// `{"stripe": "whsec_...", "standard-webhooks": "whsec_..."}`. A webhook route is
    /// authenticated by its signature, not by a bearer token.
    pub webhook_secrets: BTreeMap<String, String>,
    /// The secret notices to a route's `notify_url` are signed with (Standard Webhooks,
    /// `whsec_<base64>`): `INTERLOCK_NOTIFY_SECRET`.
    pub notify_secret: Option<String>,
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
        let deciders = match nonempty("INTERLOCK_DECIDERS") {
            None => BTreeMap::new(),
            Some(text) => parse_names(&text, "the deciders (name -> token)", |_| Ok(()))
                .map_err(|e| format!("INTERLOCK_DECIDERS: {e}"))?,
        };
        let webhook_secrets = match nonempty("INTERLOCK_WEBHOOK_SECRETS") {
            None => BTreeMap::new(),
            Some(text) => parse_names(&text, "the webhook secrets (scheme -> secret)", |k| {
                crate::webhooks::Scheme::parse(k)
                    .map(|_| ())
                    .ok_or_else(|| {
                        format!("{k:?} is not a webhook scheme (stripe, standard-webhooks)")
                    })
            })
            .map_err(|e| format!("INTERLOCK_WEBHOOK_SECRETS: {e}"))?,
        };
        let signing_key = nonempty("INTERLOCK_SIGNING_KEY");
        if let Some(k) = &signing_key {
            // Checked here, so a bad key stops the start; its text is never repeated.
            crate::proof::Signer::parse(k).map_err(|e| format!("INTERLOCK_SIGNING_KEY: {e}"))?;
        }
        if signing_key.is_some() && nonempty("INTERLOCK_RECEIPT_KEY").is_some() {
            return Err("set one of INTERLOCK_SIGNING_KEY (Ed25519: anyone checks with the public key) and INTERLOCK_RECEIPT_KEY (HMAC: only the key's holders can), not both".into());
        }
        let notify_secret = nonempty("INTERLOCK_NOTIFY_SECRET");
        if let Some(s) = &notify_secret {
            crate::webhooks::standard_secret(s)
                .map_err(|e| format!("INTERLOCK_NOTIFY_SECRET: {e}"))?;
        }
        Ok(Settings {
            token: nonempty("INTERLOCK_TOKEN"),
            targets,
            receipt_key: nonempty("INTERLOCK_RECEIPT_KEY"),
            signing_key,
            strict_authority,
            deciders,
            webhook_secrets,
            notify_secret,
        })
    }
}

/// A JSON object of names to non-empty text (`check` vets each name).
fn parse_names(
    text: &str,
    what: &str,
    check: impl Fn(&str) -> Result<(), String>,
) -> Result<BTreeMap<String, String>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(m) = v else {
        return Err(format!("must be a JSON object: {what}"));
    };
    let mut out = BTreeMap::new();
    for (k, v) in m {
        check(&k)?;
        match v {
            Value::String(s) if !s.is_empty() => {
                out.insert(k, s);
            }
            _ => return Err(format!("/{k} must be non-empty text")),
        }
    }
    Ok(out)
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
