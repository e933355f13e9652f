//! What OpenTelemetry receives: a span per effect and the tool-duration metric, after the
//! GenAI semantic conventions for tool execution (semantic-conventions-genai v0.1.0, status
//! Development; the `execute_tool` span as in semantic-conventions v1.41.0).
//!
//! An effect's span is made when its stream first closes (a terminal entry, `open: false`):
//! `execute_tool {gen_ai.tool.name}`, kind INTERNAL, from PROPOSED to that entry, one event
//! per entry (named by its state, as the journal spells it), the outcome and reason as
//! `interlock.*` attributes. An entry appended after the close (CONFIRMED, a late
//! COMMITTED) is a span of its own, a child of the effect's. The ids are the effect's:
//! trace id = the effect id (128 bits), span id = the first 64 bits of SHA-256 over
//! `execute_tool <effect id>` (`<effect id> <seq>` for a later entry), so a resend carries
//! the same ids and a receiver can recognise it.
//!
//! The metric `gen_ai.execute_tool.duration` (histogram, unit `s`, the conventions' bucket
//! boundaries) is cumulative over the journal since the first exported effect, its state
//! kept in the position: a resent point is the same point again, never counted twice.
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde_json::{Map, Value};

use crate::canon::{canonical, sha256_hex};
use crate::entry::Stream;
use crate::fields;

/// The bucket boundaries the conventions advise for GenAI durations, in milliseconds
/// (0.01 s to 81.92 s).
pub const DURATION_BOUNDS_MS: [u64; 14] = [
    10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20480, 40960, 81920,
];

/// The resource and instrumentation scope every OTLP batch is sent under.
pub fn resource_json() -> String {
    canonical(&serde_json::json!({
        "resource": {"service.name": "interlock"},
        "scope": {"name": "interlock", "version": env!("CARGO_PKG_VERSION")},
        "semantic_conventions": "semantic-conventions-genai 0.1.0",
    }))
}

/// One series of the duration histogram.
#[derive(Clone, Debug, PartialEq)]
struct Point {
    attributes: Map<String, Value>,
    count: u64,
    sum_ms: u64,
    min_ms: u64,
    max_ms: u64,
    buckets: Vec<u64>,
}

/// The cumulative duration histogram as of a position.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    start_ms: u64,
    time_ms: u64,
    points: BTreeMap<String, Point>,
}

impl Histogram {
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    fn record(&mut self, attributes: Map<String, Value>, start_ms: u64, end_ms: u64) {
        if self.points.is_empty() {
            self.start_ms = start_ms;
        }
        self.time_ms = self.time_ms.max(end_ms);
        let d = end_ms.saturating_sub(start_ms);
        let key = canonical(&Value::Object(attributes.clone()));
        let p = self.points.entry(key).or_insert_with(|| Point {
            attributes,
            count: 0,
            sum_ms: 0,
            min_ms: d,
            max_ms: d,
            buckets: alloc::vec![0; DURATION_BOUNDS_MS.len() + 1],
        });
        p.count += 1;
        p.sum_ms = p.sum_ms.saturating_add(d);
        p.min_ms = p.min_ms.min(d);
        p.max_ms = p.max_ms.max(d);
        // Explicit buckets: (bound[i-1], bound[i]], the last one unbounded.
        let i = DURATION_BOUNDS_MS
            .iter()
            .position(|&b| d <= b)
            .unwrap_or(DURATION_BOUNDS_MS.len());
        p.buckets[i] += 1;
    }

    pub(super) fn to_json(&self) -> Value {
        let points: Vec<Value> = self
            .points
            .values()
            .map(|p| {
                Value::Object(fields!(
                    "attributes" => Value::Object(p.attributes.clone()),
                    "count" => p.count, "sum_ms" => p.sum_ms, "min_ms" => p.min_ms,
                    "max_ms" => p.max_ms, "buckets" => p.buckets.clone(),
                ))
            })
            .collect();
        Value::Object(
            fields!("start_ms" => self.start_ms, "time_ms" => self.time_ms, "points" => points),
        )
    }

    pub(super) fn from_json(v: &Value) -> Option<Histogram> {
        let mut h = Histogram {
            start_ms: v.get("start_ms")?.as_u64()?,
            time_ms: v.get("time_ms")?.as_u64()?,
            points: BTreeMap::new(),
        };
        for p in v.get("points")?.as_array()? {
            let attributes = p.get("attributes")?.as_object()?.clone();
            let buckets: Option<Vec<u64>> = p
                .get("buckets")?
                .as_array()?
                .iter()
                .map(Value::as_u64)
                .collect();
            let point = Point {
                count: p.get("count")?.as_u64()?,
                sum_ms: p.get("sum_ms")?.as_u64()?,
                min_ms: p.get("min_ms")?.as_u64()?,
                max_ms: p.get("max_ms")?.as_u64()?,
                buckets: buckets.filter(|b| b.len() == DURATION_BOUNDS_MS.len() + 1)?,
                attributes,
            };
            h.points
                .insert(canonical(&Value::Object(point.attributes.clone())), point);
        }
        Some(h)
    }
}

/// The metric record of the histogram as it stands.
pub(super) fn metric_record(h: &Histogram) -> String {
    let seconds = |ms: u64| Value::from(ms as f64 / 1000.0);
    let points: Vec<Value> = h
        .points
        .values()
        .map(|p| {
            Value::Object(fields!(
                "attributes" => Value::Object(p.attributes.clone()),
                "count" => p.count, "sum" => seconds(p.sum_ms), "min" => seconds(p.min_ms),
                "max" => seconds(p.max_ms), "bucket_counts" => p.buckets.clone(),
            ))
        })
        .collect();
    let bounds: Vec<Value> = DURATION_BOUNDS_MS.iter().map(|&b| seconds(b)).collect();
    canonical(&Value::Object(fields!(
        "kind" => "metric",
        "name" => "gen_ai.execute_tool.duration",
        "description" => "Duration of tool execution operations.",
        "unit" => "s",
        "temporality" => "cumulative",
        "start_ms" => h.start_ms,
        "time_ms" => h.time_ms,
        "bounds" => bounds,
        "points" => points,
    )))
}

fn id_hex(seed: &str, digits: usize) -> String {
    let mut h = sha256_hex(seed.as_bytes());
    h.truncate(digits);
    if h.bytes().all(|b| b == b'0') {
        // An all-zero id is invalid in OTLP; 2^-64 unlikely, but never sent.
        h.replace_range(digits - 1.., "1");
    }
    h
}

fn text(e: &Map<String, Value>, k: &str) -> Option<String> {
    e.get(k).and_then(Value::as_str).map(String::from)
}

/// An event per entry: its state, place and hash, and its scalar fields; its structured
/// fields (checks, changes, evidence) only with content.
fn event(e: &Map<String, Value>, content: bool) -> Value {
    let mut a = Map::new();
    a.insert(
        "interlock.seq".into(),
        e.get("seq").cloned().unwrap_or(Value::Null),
    );
    a.insert(
        "interlock.hash".into(),
        e.get("hash").cloned().unwrap_or(Value::Null),
    );
    for k in [
        "attempt",
        "claim_until_ms",
        "via",
        "reason",
        "executed",
        "idempotency_key",
        "return_to",
    ] {
        if let Some(v) = e.get(k).filter(|v| v.is_string() || v.is_u64()) {
            a.insert(format!("interlock.{k}"), v.clone());
        }
    }
    if content {
        for k in ["checks", "changed", "evidence"] {
            if let Some(v) = e.get(k) {
                a.insert(format!("interlock.{k}"), canonical(v).into());
            }
        }
    }
    Value::Object(fields!(
        "name" => Stream::spelling_of(e),
        "time_ms" => e.get("at_ms").cloned().unwrap_or(Value::from(0)),
        "attributes" => Value::Object(a),
    ))
}

/// What a terminal entry says happened: `executed`, COMMITTED meaning yes.
fn executed(e: &Map<String, Value>) -> String {
    text(e, "executed").unwrap_or_else(|| {
        if Stream::spelling_of(e) == "COMMITTED" {
            "yes"
        } else {
            "unknown"
        }
        .to_string()
    })
}

/// The span of entry `seq` of effect stream `s`: the effect's span when it is the stream's
/// first close (its duration recorded in `h`), a follow-up span when it comes after, none
/// before.
pub(super) fn span_for(s: &Stream, seq: usize, content: bool, h: &mut Histogram) -> Option<String> {
    let effect_id = s.name.strip_prefix("effect:")?;
    let close = s
        .entries
        .iter()
        .position(|e| e.get("open") == Some(&Value::Bool(false)))?;
    if seq < close || seq >= s.entries.len() {
        return None;
    }
    let first = &s.entries[0];
    let proposal = first.get("proposal").cloned().unwrap_or(Value::Null);
    let tool = proposal
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    let trace_id = if effect_id.len() == 32 && effect_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        effect_id.to_ascii_lowercase()
    } else {
        id_hex(effect_id, 32)
    };
    let span_id = id_hex(&format!("execute_tool {effect_id}"), 16);
    let at = |e: &Map<String, Value>| e.get("at_ms").and_then(Value::as_u64).unwrap_or(0);
    let end = &s.entries[seq];
    let state = Stream::spelling_of(end).to_string();
    if seq > close {
        let mut a = Map::new();
        a.insert("gen_ai.tool.name".into(), tool.clone().into());
        a.insert("gen_ai.tool.call.id".into(), effect_id.into());
        a.insert("interlock.state".into(), state.clone().into());
        a.insert("interlock.executed".into(), executed(end).into());
        a.insert("interlock.seq".into(), (seq as u64).into());
        return Some(canonical(&Value::Object(fields!(
            "kind" => "span",
            "name" => format!("{state} {tool}"),
            "trace_id" => trace_id,
            "span_id" => id_hex(&format!("{effect_id} {seq}"), 16),
            "parent_span_id" => span_id,
            "span_kind" => "internal",
            "start_ms" => at(end), "end_ms" => at(end),
            "status" => "unset",
            "attributes" => Value::Object(a),
            "events" => alloc::vec![event(end, content)],
        ))));
    }
    let reason = text(end, "reason");
    let ok = matches!(state.as_str(), "COMMITTED" | "CONFIRMED");
    let mut a = Map::new();
    a.insert("gen_ai.operation.name".into(), "execute_tool".into());
    a.insert("gen_ai.tool.name".into(), tool.clone().into());
    a.insert("gen_ai.tool.call.id".into(), effect_id.into());
    a.insert("interlock.state".into(), state.clone().into());
    a.insert("interlock.executed".into(), executed(end).into());
    let attempts = s.entries[..=seq]
        .iter()
        .filter(|e| Stream::spelling_of(e) == "DISPATCHED")
        .count() as u64;
    a.insert("interlock.attempts".into(), attempts.into());
    a.insert("interlock.stream".into(), s.name.clone().into());
    for (k, p) in [
        ("interlock.agent", "/agent"),
        ("interlock.lease", "/authority/lease"),
        ("interlock.approval", "/authority/approval"),
    ] {
        if let Some(v) = proposal.pointer(p).and_then(Value::as_str) {
            a.insert(k.into(), v.into());
        }
    }
    match proposal.get("key") {
        Some(Value::String(k)) => {
            a.insert("interlock.key".into(), k.clone().into());
        }
        Some(k) if !k.is_null() => {
            a.insert("interlock.key".into(), canonical(k).into());
        }
        _ => {}
    }
    if let Some(v) = text(end, "via") {
        a.insert("interlock.via".into(), v.into());
    }
    if let Some(r) = &reason {
        a.insert("interlock.reason".into(), r.clone().into());
    }
    if !ok {
        a.insert(
            "error.type".into(),
            reason.clone().unwrap_or_else(|| "_OTHER".into()).into(),
        );
    }
    if content {
        if let Some(effect) = proposal.get("effect") {
            a.insert(
                "gen_ai.tool.call.arguments".into(),
                canonical(effect).into(),
            );
        }
        if let Some(r) = end.get("result").filter(|r| !r.is_null()) {
            a.insert("gen_ai.tool.call.result".into(), canonical(r).into());
        }
    }
    let mut m = Map::new();
    m.insert("gen_ai.operation.name".into(), "execute_tool".into());
    m.insert("gen_ai.tool.name".into(), tool.clone().into());
    m.insert("interlock.state".into(), state.clone().into());
    if !ok {
        m.insert("error.type".into(), a["error.type"].clone());
    }
    h.record(m, at(first), at(end));
    let events: Vec<Value> = s.entries[..=seq]
        .iter()
        .map(|e| event(e, content))
        .collect();
    let mut span = fields!(
        "kind" => "span",
        "name" => format!("execute_tool {tool}"),
        "trace_id" => trace_id,
        "span_id" => span_id,
        "span_kind" => "internal",
        "start_ms" => at(first), "end_ms" => at(end),
        "status" => if ok { "unset" } else { "error" },
        "attributes" => Value::Object(a),
        "events" => events,
    );
    if !ok {
        let why = reason.map_or_else(|| state.clone(), |r| format!("{state} {r}"));
        span.insert("status_message".into(), why.into());
    }
    Some(canonical(&Value::Object(span)))
}
