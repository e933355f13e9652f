//! The records of the file sinks, one per journal entry (every stream but the exporters'
//! own): a BigQuery row (docs/export/bigquery-schema.json), a Cloud Logging `LogEntry`, an
//! OCSF 1.5.0 API Activity event (class 6003). Each carries the entry's hash as its unique
//! id (`insert_id`, `insertId`, `metadata.uid`) and the entry's line itself, so a reader
//! can check it against the journal's hash chain with no Interlock code.
use alloc::format;
use alloc::string::String;
use serde_json::{Map, Value};

use crate::canon::canonical;
use crate::entry::Stream;
use crate::fields;

/// How much a person should look: one table for every sink.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Info,
    Notice,
    Warning,
    Error,
}

fn level(state: &str) -> Level {
    match state {
        "AMBIGUOUS" | "CONTRADICTED" => Level::Error,
        "REFUSED" | "EXPIRED" => Level::Warning,
        "REVOKED" | "RETURNED" | "RELEASED" => Level::Notice,
        _ => Level::Info,
    }
}

/// `at_ms` (Unix ms) as RFC 3339 in UTC with milliseconds: `2027-01-15T08:00:00.000Z` (the
/// export records' timestamps, and the Standard Webhooks payload's `timestamp`).
pub fn rfc3339_ms(at_ms: u64) -> String {
    let secs = at_ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        at_ms % 1000
    )
}

/// One entry, with its effect's proposal where it belongs to an effect.
pub(super) struct Fact<'a> {
    entry: &'a Map<String, Value>,
    line: &'a str,
    stream: &'a str,
    kind: &'a str,
    subject: &'a str,
    state: &'a str,
    at_ms: u64,
    proposal: Option<&'a Value>,
}

fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v.filter(|v| !v.is_null()) {
        m.insert(k.into(), v);
    }
}

impl<'a> Fact<'a> {
    pub(super) fn new(
        entry: &'a Map<String, Value>,
        line: &'a str,
        proposed: Option<&'a Map<String, Value>>,
    ) -> Fact<'a> {
        let stream = entry.get("stream").and_then(Value::as_str).unwrap_or("");
        let (kind, subject) = stream.split_once(':').unwrap_or((stream, ""));
        Fact {
            entry,
            line,
            stream,
            kind,
            subject,
            state: Stream::spelling_of(entry),
            at_ms: entry.get("at_ms").and_then(Value::as_u64).unwrap_or(0),
            proposal: proposed.and_then(|p| p.get("proposal")),
        }
    }

    fn get(&self, k: &str) -> Option<Value> {
        self.entry.get(k).cloned()
    }

    fn effect_id(&self) -> Option<String> {
        match self.kind {
            "effect" | "request" => Some(self.subject.into()),
            _ => self
                .entry
                .get("effect_id")
                .and_then(Value::as_str)
                .map(String::from),
        }
    }

    fn proposed(&self, pointer: &str) -> Option<Value> {
        self.proposal.and_then(|p| p.pointer(pointer)).cloned()
    }

    fn key(&self) -> Option<Value> {
        match self.proposed("/key")? {
            Value::String(s) => Some(s.into()),
            Value::Null => None,
            k => Some(canonical(&k).into()),
        }
    }

    fn executed(&self) -> Option<Value> {
        self.get("executed")
            .or_else(|| (self.state == "COMMITTED").then(|| "yes".into()))
    }

    fn is_close(&self) -> bool {
        self.kind == "effect"
            && self.entry.get("open") == Some(&Value::Bool(false))
            && matches!(self.state, "COMMITTED" | "REFUSED" | "AMBIGUOUS")
    }

    /// The fields every sink shares, flat, absent when they do not apply.
    fn summary(&self) -> Map<String, Value> {
        let mut m = fields!(
            "stream" => self.stream, "stream_kind" => self.kind, "seq" => self.get("seq"),
            "state" => self.state, "open" => self.get("open"), "at_ms" => self.at_ms,
        );
        put(&mut m, "effect_id", self.effect_id().map(Value::from));
        put(&mut m, "agent", self.proposed("/agent"));
        put(&mut m, "tool", self.proposed("/target/name"));
        put(&mut m, "key", self.key());
        put(&mut m, "executed", self.executed());
        for k in ["reason", "via", "attempt"] {
            put(&mut m, k, self.get(k));
        }
        m
    }

    /// A sentence for a person: what the entry records.
    fn message(&self) -> String {
        let mut s = match (self.kind, self.proposed("/target/name")) {
            ("effect", Some(Value::String(tool))) => {
                let agent = self
                    .proposed("/agent")
                    .and_then(|a| a.as_str().map(String::from))
                    .unwrap_or_default();
                format!("{agent} {tool} {}: {}", self.subject, self.state)
            }
            _ => format!("{} {}: {}", self.kind, self.subject, self.state),
        };
        if let Some(Value::String(r)) = self.get("reason") {
            s.push_str(&format!(" ({r})"));
        }
        if let Some(Value::String(v)) = self.get("via") {
            s.push_str(&format!(" via {v}"));
        }
        s
    }

    /// A row of docs/export/bigquery-schema.json.
    pub(super) fn bigquery_row(&self) -> Value {
        let mut m = self.summary();
        m.insert("insert_id".into(), self.get("hash").unwrap_or(Value::Null));
        m.insert("timestamp".into(), rfc3339_ms(self.at_ms).into());
        put(
            &mut m,
            "arguments",
            self.proposed("/effect").map(|e| canonical(&e).into()),
        );
        put(
            &mut m,
            "result",
            self.get("result").map(|r| canonical(&r).into()),
        );
        m.insert("hash".into(), self.get("hash").unwrap_or(Value::Null));
        m.insert("prev".into(), self.get("prev").unwrap_or(Value::Null));
        m.insert("entry".into(), self.line.into());
        Value::Object(m)
    }

    /// A Cloud Logging `LogEntry` (REST v2), its payload structured.
    pub(super) fn log_entry(&self) -> Value {
        let severity = match level(self.state) {
            Level::Info => "INFO",
            Level::Notice => "NOTICE",
            Level::Warning => "WARNING",
            Level::Error => "ERROR",
        };
        let mut payload = self.summary();
        payload.insert("message".into(), self.message().into());
        payload.insert("entry".into(), Value::Object(self.entry.clone()));
        let mut labels =
            fields!("interlock_stream" => self.stream, "interlock_state" => self.state);
        if let Some(id) = self.effect_id() {
            labels.insert("interlock_effect_id".into(), id.into());
        }
        let mut m = fields!(
            "insertId" => self.get("hash"),
            "timestamp" => rfc3339_ms(self.at_ms),
            "severity" => severity,
            "resource" => Value::Object(fields!("type" => "global")),
            "labels" => Value::Object(labels),
            "jsonPayload" => Value::Object(payload),
        );
        if self.kind == "effect" {
            let mut op = fields!("id" => self.subject, "producer" => "interlock");
            if self.entry.get("seq").and_then(Value::as_u64) == Some(0) {
                op.insert("first".into(), true.into());
            }
            if self.is_close() {
                op.insert("last".into(), true.into());
            }
            m.insert("operation".into(), Value::Object(op));
        }
        Value::Object(m)
    }

    /// An OCSF 1.5.0 API Activity event (class 6003, category 6 Application Activity):
    /// the agent (actor) asked the gate (source) to call a tool's API (`api.operation`);
    /// every entry is activity 99 (Other) named by its state.
    pub(super) fn ocsf_event(&self) -> Value {
        let (severity_id, severity) = match level(self.state) {
            Level::Info => (1, "Informational"),
            Level::Notice => (2, "Low"),
            Level::Warning => (3, "Medium"),
            Level::Error => (4, "High"),
        };
        let tool = self
            .proposed("/target/name")
            .and_then(|t| t.as_str().map(String::from));
        let agent = self
            .proposed("/agent")
            .and_then(|a| a.as_str().map(String::from));
        let mut actor = fields!("app_name" => "interlock");
        if let Some(a) = &agent {
            actor.insert(
                "user".into(),
                Value::Object(fields!("name" => a.clone(), "type" => "Other", "type_id" => 99)),
            );
        }
        let mut api = fields!("operation" => tool.clone().unwrap_or_else(|| self.kind.into()));
        if let Some(t) = &tool {
            api.insert(
                "service".into(),
                Value::Object(fields!("name" => t.clone())),
            );
        }
        if let Some(id) = self.effect_id() {
            api.insert("request".into(), Value::Object(fields!("uid" => id)));
        }
        let mut response = Map::new();
        put(&mut response, "message", self.get("reason"));
        if !response.is_empty() {
            api.insert("response".into(), Value::Object(response));
        }
        let mut metadata = fields!(
            "version" => "1.5.0",
            "product" => Value::Object(fields!("name" => "Interlock", "vendor_name" => "Interlock", "version" => env!("CARGO_PKG_VERSION"))),
            "uid" => self.get("hash"),
            "log_name" => self.stream,
            "event_code" => self.state,
            "sequence" => self.get("seq"),
        );
        if let Some(id) = self.effect_id() {
            metadata.insert("correlation_uid".into(), id.into());
        }
        let mut m = fields!(
            "class_uid" => 6003, "class_name" => "API Activity",
            "category_uid" => 6, "category_name" => "Application Activity",
            "activity_id" => 99, "activity_name" => self.state, "type_uid" => 600399,
            "type_name" => "API Activity: Other",
            "time" => self.at_ms,
            "severity_id" => severity_id, "severity" => severity,
            "message" => self.message(),
            "metadata" => Value::Object(metadata),
            "actor" => Value::Object(actor),
            "src_endpoint" => Value::Object(fields!("name" => agent.unwrap_or_else(|| "interlock".into()))),
            "api" => Value::Object(api),
            "raw_data" => self.line,
            "unmapped" => Value::Object(fields!("interlock" => Value::Object(self.summary()))),
        );
        if let Some(t) = tool {
            m.insert(
                "dst_endpoint".into(),
                Value::Object(fields!("svc_name" => t)),
            );
        }
        match self.state {
            "COMMITTED" | "CONFIRMED" => {
                m.insert("status_id".into(), 1.into());
                m.insert("status".into(), "Success".into());
            }
            "REFUSED" | "AMBIGUOUS" => {
                m.insert("status_id".into(), 2.into());
                m.insert("status".into(), "Failure".into());
                put(&mut m, "status_detail", self.get("reason"));
            }
            _ => {}
        }
        Value::Object(m)
    }
}
