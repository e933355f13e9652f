//! Export of the journal to the tools operators run (OpenTelemetry over OTLP, BigQuery,
//! Cloud Logging, a SIEM), incrementally: what each sink receives is written here once,
//! and so is the position an exporter resumes from after a crash.
//!
//! The exporter walks the journal in its append order ([`InOrder`]) and turns entries into
//! the records of one sink (`records.rs`: a BigQuery row, a Cloud Logging `LogEntry`, an
//! OCSF API Activity event; `otlp.rs`: a span per effect and the tool-duration metric). A
//! host hands a batch to the official library of its sink and says when the receiver took
//! it ([`Exporter::sent`]).
//!
//! The position lives in the journal, on the exporter's own stream `export:<name>`, as two
//! entries per batch, the way the gate records a send: SENDING (durable) before the batch
//! leaves, with the range it covers and the SHA-256 of its records, and SENT (durable)
//! after the receiver acknowledged it. After a crash the last entry says where things
//! stand: SENT, nothing is in doubt; SENDING, the batch may or may not have arrived, and it
//! is sent again, rebuilt from the same range and checked against its recorded hash, so
//! the resend carries the same records under the same ids (span and trace ids from the
//! effect id, `insertId` and OCSF `metadata.uid` from the entry's hash). A file sink's
//! SENDING records the file's length before the batch: a restart truncates the file to it
//! and writes the batch again, so a file holds every record exactly once.
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use serde_json::{Map, Value};

use sha2::{Digest, Sha256};

use crate::canon::{canonical, canonical_without, is_with_member, sha256_hex};
use crate::entry::{Spelled, Stream};
use crate::fields;
use crate::journal::{Journal, JournalError};
use crate::types::GateError;

mod otlp;
mod records;

pub use otlp::{resource_json, Histogram, DURATION_BOUNDS_MS};
pub use records::rfc3339_ms;

/// The journal in its append order, across streams: what an exporter walks.
pub trait InOrder {
    /// At most `max` entries after `cursor`, in append order, each with the cursor just
    /// after it (a backend's own measure: a file journal's byte offset, a SQL journal's
    /// ordinal). Cursor 0 is the journal's start. Only entries that can never be preceded
    /// by a later commit are returned (a SQL journal whose ordinals are not handed out in
    /// commit order waits out the appends in flight first).
    fn read_in_order(
        &mut self,
        cursor: u64,
        max: usize,
    ) -> Result<Vec<(u64, String)>, JournalError>;
}

/// A journal an exporter can walk and record its position in.
pub trait ExportJournal: Journal + InOrder {}
impl<T: Journal + InOrder + ?Sized> ExportJournal for T {}

/// Where records go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    /// OpenTelemetry over OTLP/HTTP: spans and the tool-duration metric.
    Otlp,
    /// JSON lines for `bq load` (schema: docs/export/bigquery-schema.json).
    Bigquery,
    /// JSON lines of Cloud Logging `LogEntry` objects.
    CloudLogging,
    /// JSON lines of OCSF API Activity events (class 6003).
    Siem,
}

impl Sink {
    pub const ALL: [Sink; 4] = [Sink::Otlp, Sink::Bigquery, Sink::CloudLogging, Sink::Siem];

    pub fn as_str(self) -> &'static str {
        match self {
            Sink::Otlp => "otlp",
            Sink::Bigquery => "bigquery",
            Sink::CloudLogging => "cloud-logging",
            Sink::Siem => "siem",
        }
    }

    /// Whether the host writes the records to a file (one line each).
    pub fn is_file(self) -> bool {
        self != Sink::Otlp
    }
}

/// How an export call failed. A failed call records nothing, and the position stays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExportError {
    /// `--to` names no sink; carries what was given.
    UnknownSink(String),
    /// The destination is not usable (a bad URL, a missing or extra file path).
    InvalidDestination(String),
    /// The position's name is not usable.
    InvalidName(String),
    /// The position was recorded for another destination.
    Elsewhere {
        recorded: String,
        given: String,
    },
    /// The file does not hold what the position says was written to it.
    FileMismatch(String),
    /// `sent` named a batch that is not the one handed out.
    UnknownBatch(u64),
    /// No export was opened in this instance.
    NotOpen,
    Journal(JournalError),
    /// An entry or the exporter's own stream fails verification.
    CorruptJournal(String),
    /// Another exporter advanced the same position meanwhile.
    Contention(String),
}

impl From<JournalError> for ExportError {
    fn from(e: JournalError) -> Self {
        ExportError::Journal(e)
    }
}

impl From<GateError> for ExportError {
    fn from(e: GateError) -> Self {
        match e {
            GateError::Journal(j) => ExportError::Journal(j),
            GateError::Contention(m) => ExportError::Contention(m),
            other => ExportError::CorruptJournal(other.to_string()),
        }
    }
}

impl core::fmt::Display for ExportError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ExportError::UnknownSink(s) => write!(
                f,
                "unknown sink {s:?}: the sinks are otlp=URL, bigquery, cloud-logging and siem"
            ),
            ExportError::InvalidDestination(m) => write!(f, "invalid destination: {m}"),
            ExportError::InvalidName(m) => write!(f, "invalid export name: {m}"),
            ExportError::Elsewhere { recorded, given } => write!(
                f,
                "this position was recorded for {recorded}, not {given}: name another position (--name) to export there from the start"
            ),
            ExportError::FileMismatch(m) => f.write_str(m),
            ExportError::UnknownBatch(id) => write!(f, "batch {id} is not the batch handed out"),
            ExportError::NotOpen => f.write_str("no export is open (export.open first)"),
            ExportError::Journal(e) => write!(f, "journal: {e}"),
            ExportError::CorruptJournal(m) => write!(f, "journal fails verification: {m}"),
            ExportError::Contention(m) => f.write_str(m),
        }
    }
}

/// Where the next batch starts: entries walked, the backend's cursor after them, and what
/// the sink holds after them (a file's length; OTLP's cumulative duration histogram).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Position {
    pub entries: u64,
    pub cursor: u64,
    pub file_length: Option<u64>,
    pub histogram: Histogram,
}

impl Position {
    fn to_json(&self) -> Value {
        let mut m = fields!("entries" => self.entries, "cursor" => self.cursor);
        if let Some(l) = self.file_length {
            m.insert("file_length".into(), l.into());
        }
        if !self.histogram.is_empty() {
            m.insert("histogram".into(), self.histogram.to_json());
        }
        Value::Object(m)
    }

    fn from_json(v: &Value) -> Option<Position> {
        Some(Position {
            entries: v.get("entries")?.as_u64()?,
            cursor: v.get("cursor")?.as_u64()?,
            file_length: v.get("file_length").and_then(Value::as_u64),
            histogram: match v.get("histogram") {
                Some(h) => Histogram::from_json(h)?,
                None => Histogram::default(),
            },
        })
    }
}

/// The exporter's marks on its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    Sending,
    Sent,
}

impl Spelled for Mark {
    fn spelling(self) -> &'static str {
        match self {
            Mark::Sending => "SENDING",
            Mark::Sent => "SENT",
        }
    }
}

/// What `--to` and `--out` name, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub sink: Sink,
    /// The OTLP base URL, or the file's path.
    pub destination: String,
}

/// OTLP/HTTP's signal paths under a base URL (the `OTEL_EXPORTER_OTLP_ENDPOINT` rule).
pub fn otlp_urls(base: &str) -> (String, String) {
    let b = base.trim_end_matches('/');
    (format!("{b}/v1/traces"), format!("{b}/v1/metrics"))
}

/// Reads `--to` (`otlp=URL`, `bigquery`, `cloud-logging`, `siem`) and `--out` (the file of
/// a file sink; none for OTLP).
pub fn parse_target(to: &str, out: Option<&str>) -> Result<Target, ExportError> {
    let (name, url) = match to.split_once('=') {
        Some((n, u)) => (n, Some(u)),
        None => (to, None),
    };
    let sink = Sink::ALL
        .into_iter()
        .find(|s| s.as_str() == name)
        .ok_or_else(|| ExportError::UnknownSink(to.into()))?;
    let destination = match (sink, url, out) {
        (Sink::Otlp, Some(u), None) => check_url(u)?,
        (Sink::Otlp, None, _) => {
            return Err(ExportError::InvalidDestination(
                "otlp needs the receiver's URL: --to otlp=http://127.0.0.1:4318".into(),
            ))
        }
        (Sink::Otlp, Some(_), Some(_)) => {
            return Err(ExportError::InvalidDestination(
                "otlp sends to its URL and writes no file: leave --out out".into(),
            ))
        }
        (_, Some(_), _) => {
            return Err(ExportError::InvalidDestination(format!(
                "{} writes a file: --to {} --out PATH (no =URL)",
                sink.as_str(),
                sink.as_str()
            )))
        }
        (_, None, Some(p)) if !p.is_empty() && !p.contains('\0') => p.into(),
        (_, None, _) => {
            return Err(ExportError::InvalidDestination(format!(
                "{} writes JSON lines to a file: --out PATH",
                sink.as_str()
            )))
        }
    };
    Ok(Target { sink, destination })
}

/// An OTLP/HTTP base URL: `http` or `https`, a host, an optional port and path.
fn check_url(u: &str) -> Result<String, ExportError> {
    let bad = |why: &str| {
        ExportError::InvalidDestination(format!("{u:?} is not a URL OTLP can send to: {why}"))
    };
    let rest = u
        .strip_prefix("http://")
        .or_else(|| u.strip_prefix("https://"))
        .ok_or_else(|| bad("it must start with http:// or https://"))?;
    if u.chars().any(|c| c.is_whitespace() || c.is_control()) || u.contains(['?', '#']) {
        return Err(bad("no spaces, query or fragment"));
    }
    let authority = rest.split('/').next().unwrap_or("");
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h, Some(p)),
        _ => (authority, None),
    };
    if host.is_empty() || host.contains('@') {
        return Err(bad("it names no host"));
    }
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |n| n == 0) {
            return Err(bad("its port is not a number from 1 to 65535"));
        }
    }
    Ok(u.into())
}

/// A position's name: `export:<name>` is its stream.
fn check_name(name: &str) -> Result<(), ExportError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ExportError::InvalidName(format!(
            "{name:?}: 1 to 64 of a-z, 0-9, '-', '_', '.'"
        )))
    }
}

/// What `open` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    pub sink: Sink,
    pub destination: String,
    /// The exporter's stream, `export:<name>`.
    pub stream: String,
    /// Journal entries already exported (walked) at the recorded position.
    pub exported: u64,
    /// For a file sink: cut the file to this length before anything else (the batch in
    /// doubt is written again).
    pub truncate_to: Option<u64>,
    /// Records of a batch whose acknowledgement was not recorded: sent again first.
    pub in_doubt: Option<u64>,
}

/// One batch for the host to hand to its sink.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub id: u64,
    /// Each record as JSON text: for a file sink, the line to write (without `\n`).
    pub records: Vec<String>,
    /// True when this batch may have reached the receiver before (the same records again).
    pub resend: bool,
    /// Journal entries exported once it is sent.
    pub exported: u64,
    /// For a file sink: the file's length once the batch is written.
    pub file_length: Option<u64>,
}

/// A batch handed out, not yet acknowledged: its SENDING is durable.
#[derive(Clone, Debug)]
struct Pending {
    id: u64,
    to: Position,
    records: Vec<String>,
    resend: bool,
}

/// Entries read per call to the backend while walking.
const READ_CHUNK: usize = 512;
/// Effects whose proposal is kept while walking.
const KEPT_PROPOSALS: usize = 4096;

/// An open export: one sink, one destination, one position.
pub struct Exporter {
    sink: Sink,
    destination: String,
    /// Opt-in content on OTLP spans (`gen_ai.tool.call.arguments`, `...result`).
    content: bool,
    stream: Stream,
    /// After the last SENT (or the start).
    recorded: Position,
    /// Where the next walk starts: `recorded`, or past a tail that gave no records.
    at: Position,
    /// The SENDING found at open whose SENT is missing: (from, to, sha256, content).
    doubt: Option<(Position, Position, String, bool)>,
    pending: Option<Pending>,
    proposals: BTreeMap<String, Arc<Map<String, Value>>>,
    next_id: u64,
}

fn entry_position(e: &Map<String, Value>, key: &str) -> Result<Position, ExportError> {
    e.get(key).and_then(Position::from_json).ok_or_else(|| {
        ExportError::CorruptJournal(format!(
            "{} entry {} has no readable {key}",
            e.get("stream").and_then(Value::as_str).unwrap_or("export"),
            e.get("seq").and_then(Value::as_u64).unwrap_or(0)
        ))
    })
}

impl Exporter {
    /// Opens the position `export:<name>` (`name`: the sink's own name when none) for
    /// `target`. `file_length` is the length of the target's file now (none: no file). A
    /// position recorded for another destination, or a file that does not hold what the
    /// position says was written, is refused.
    pub fn open(
        j: &mut dyn ExportJournal,
        target: Target,
        name: Option<&str>,
        content: bool,
        file_length: Option<u64>,
    ) -> Result<(Exporter, Opened), ExportError> {
        let name = name.unwrap_or(target.sink.as_str());
        check_name(name)?;
        let stream = Stream::load(j, &format!("export:{name}"))?;
        let fresh = Position {
            file_length: target.sink.is_file().then_some(0),
            ..Position::default()
        };
        let (recorded, doubt) = match stream.last() {
            None => (fresh, None),
            Some(last) => {
                let recorded_at = last
                    .get("destination")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let recorded_sink = last.get("sink").and_then(Value::as_str).unwrap_or("");
                if recorded_sink != target.sink.as_str() || recorded_at != target.destination {
                    return Err(ExportError::Elsewhere {
                        recorded: format!("{recorded_sink} {recorded_at}"),
                        given: format!("{} {}", target.sink.as_str(), target.destination),
                    });
                }
                match Stream::spelling_of(last) {
                    "SENT" => (entry_position(last, "to")?, None),
                    "SENDING" => {
                        let from = entry_position(last, "from")?;
                        let to = entry_position(last, "to")?;
                        let sha = last.get("sha256").and_then(Value::as_str).unwrap_or("");
                        let c = last
                            .get("content")
                            .and_then(Value::as_bool)
                            .unwrap_or(false);
                        (from.clone(), Some((from, to, sha.to_string(), c)))
                    }
                    other => {
                        return Err(ExportError::CorruptJournal(format!(
                            "{}: {other} is not an exporter's entry",
                            stream.name
                        )))
                    }
                }
            }
        };
        let truncate_to = check_file(
            &target,
            &stream.name,
            &recorded,
            doubt.is_some(),
            file_length,
        )?;
        let opened = Opened {
            sink: target.sink,
            destination: target.destination.clone(),
            stream: stream.name.clone(),
            exported: recorded.entries,
            truncate_to,
            in_doubt: doubt.as_ref().map(|_| {
                stream
                    .last()
                    .and_then(|e| e.get("records"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
            }),
        };
        let exporter = Exporter {
            sink: target.sink,
            destination: target.destination,
            content,
            stream,
            at: recorded.clone(),
            recorded,
            doubt,
            pending: None,
            proposals: BTreeMap::new(),
            next_id: 1,
        };
        Ok((exporter, opened))
    }

    pub fn sink(&self) -> Sink {
        self.sink
    }

    /// The next batch of at most `max_records` records (at least 1), or none when the
    /// journal holds nothing more for this sink. A batch in doubt comes first, and a batch
    /// handed out and not acknowledged comes again, the same records, until `sent`. A new
    /// batch's SENDING is durable before it is returned. The journal is synced first, so
    /// nothing is exported that a power loss could take back.
    pub fn next(
        &mut self,
        j: &mut dyn ExportJournal,
        now_ms: u64,
        max_records: usize,
    ) -> Result<Option<Batch>, ExportError> {
        if let Some(p) = &self.pending {
            return Ok(Some(self.batch_of(p)));
        }
        j.sync()?;
        if let Some((from, to, sha, content)) = self.doubt.clone() {
            let (records, mut walked) =
                self.walk(j, &from, usize::MAX, Some(to.cursor), content)?;
            walked.file_length = grown(from.file_length, &records);
            if walked != to || records_sha256(&records) != sha {
                return Err(ExportError::CorruptJournal(format!(
                    "{}: the batch in doubt (entries {} to {}) no longer reads as it was sent",
                    self.stream.name, from.entries, to.entries
                )));
            }
            self.doubt = None;
            let p = Pending {
                id: self.take_id(),
                to: walked,
                records,
                resend: true,
            };
            let b = self.batch_of(&p);
            self.pending = Some(p);
            return Ok(Some(b));
        }
        let from = self.at.clone();
        let (records, walked) = self.walk(j, &from, max_records.max(1), None, self.content)?;
        if records.is_empty() {
            self.at = walked;
            return Ok(None);
        }
        let mut to = walked;
        to.file_length = grown(from.file_length, &records);
        let f = fields!(
            "sink" => self.sink.as_str(),
            "destination" => self.destination.clone(),
            "from" => from.to_json(),
            "to" => to.to_json(),
            "records" => records.len() as u64,
            "sha256" => records_sha256(&records),
            "content" => self.content,
        );
        self.append(j, now_ms, Mark::Sending, f)?;
        let p = Pending {
            id: self.take_id(),
            to,
            records,
            resend: false,
        };
        let b = self.batch_of(&p);
        self.pending = Some(p);
        Ok(Some(b))
    }

    /// The receiver took batch `id` (for a file sink: the file is written and synced, and
    /// `file_length` is its length now). Records SENT, durably: the position moves.
    pub fn sent(
        &mut self,
        j: &mut dyn ExportJournal,
        now_ms: u64,
        id: u64,
        file_length: Option<u64>,
    ) -> Result<(), ExportError> {
        let p = match &self.pending {
            Some(p) if p.id == id => p.clone(),
            _ => return Err(ExportError::UnknownBatch(id)),
        };
        if p.to.file_length.is_some() && file_length != p.to.file_length {
            return Err(ExportError::FileMismatch(format!(
                "{}: the file should be {} bytes long after batch {id}, and it is {}; nothing recorded",
                self.destination,
                p.to.file_length.unwrap_or(0),
                file_length.map_or_else(|| String::from("not there"), |l| format!("{l} bytes")),
            )));
        }
        let f = fields!(
            "sink" => self.sink.as_str(),
            "destination" => self.destination.clone(),
            "to" => p.to.to_json(),
            "records" => p.records.len() as u64,
        );
        self.append(j, now_ms, Mark::Sent, f)?;
        self.recorded = p.to.clone();
        self.at = p.to;
        self.pending = None;
        Ok(())
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn batch_of(&self, p: &Pending) -> Batch {
        Batch {
            id: p.id,
            records: p.records.clone(),
            resend: p.resend,
            exported: p.to.entries,
            file_length: p.to.file_length,
        }
    }

    fn append(
        &mut self,
        j: &mut dyn ExportJournal,
        now_ms: u64,
        mark: Mark,
        f: Map<String, Value>,
    ) -> Result<(), ExportError> {
        let j: &mut dyn Journal = j;
        match self.stream.append(j, alloc::vec![(mark, f)], now_ms, true, false) {
            Ok(()) => Ok(()),
            Err(JournalError::Conflict(n)) => Err(ExportError::Contention(format!(
                "{} holds {n} entries: another exporter advanced it meanwhile; nothing recorded (open it again)",
                self.stream.name
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// Walks from `from` until `max` records, the cursor `until`, or the journal's end.
    fn walk(
        &mut self,
        j: &mut dyn ExportJournal,
        from: &Position,
        max: usize,
        until: Option<u64>,
        content: bool,
    ) -> Result<(Vec<String>, Position), ExportError> {
        let mut at = from.clone();
        let mut out = Vec::new();
        'walk: while out.len() < max && until.is_none_or(|u| at.cursor < u) {
            let chunk = j.read_in_order(at.cursor, READ_CHUNK)?;
            if chunk.is_empty() {
                break;
            }
            for (cursor, line) in chunk {
                let entry = checked(&line)?;
                self.records_of(j, &entry, &line, &mut at.histogram, content, &mut out)?;
                at.entries += 1;
                at.cursor = cursor;
                if out.len() >= max || until.is_some_and(|u| at.cursor >= u) {
                    break 'walk;
                }
            }
        }
        if self.sink == Sink::Otlp && !out.is_empty() && at.histogram != from.histogram {
            out.push(otlp::metric_record(&at.histogram));
        }
        Ok((out, at))
    }

    /// The records one entry gives this sink.
    fn records_of(
        &mut self,
        j: &mut dyn ExportJournal,
        entry: &Map<String, Value>,
        line: &str,
        histogram: &mut Histogram,
        content: bool,
        out: &mut Vec<String>,
    ) -> Result<(), ExportError> {
        let stream = entry.get("stream").and_then(Value::as_str).unwrap_or("");
        if stream.starts_with("export:") {
            return Ok(());
        }
        let j: &mut dyn Journal = j;
        if self.sink == Sink::Otlp {
            if stream.starts_with("effect:") && entry.get("open") == Some(&Value::Bool(false)) {
                let s = Stream::load(j, stream)?;
                let seq = entry.get("seq").and_then(Value::as_u64).unwrap_or(0) as usize;
                if let Some(r) = otlp::span_for(&s, seq, content, histogram) {
                    out.push(r);
                }
            }
            return Ok(());
        }
        let proposal = match stream.strip_prefix("effect:") {
            Some(id) => self.proposal(j, id, stream, entry)?,
            None => None,
        };
        let fact = records::Fact::new(entry, line, proposal.as_deref());
        out.push(canonical(&match self.sink {
            Sink::Bigquery => fact.bigquery_row(),
            Sink::CloudLogging => fact.log_entry(),
            Sink::Siem => fact.ocsf_event(),
            Sink::Otlp => unreachable!("handled above"),
        }));
        Ok(())
    }

    /// The PROPOSED entry of effect `id` (the entry itself when it is one).
    fn proposal(
        &mut self,
        j: &mut dyn Journal,
        id: &str,
        stream: &str,
        entry: &Map<String, Value>,
    ) -> Result<Option<Arc<Map<String, Value>>>, ExportError> {
        if let Some(p) = self.proposals.get(id) {
            return Ok(Some(p.clone()));
        }
        let first = if entry.get("seq").and_then(Value::as_u64) == Some(0) {
            Some(Arc::new(entry.clone()))
        } else {
            Stream::load(j, stream)?.entries.first().cloned()
        };
        if let Some(p) = &first {
            if self.proposals.len() >= KEPT_PROPOSALS {
                self.proposals.clear();
            }
            self.proposals.insert(id.into(), p.clone());
        }
        Ok(first)
    }
}

/// A file's length once `records` are written to it, one line each.
fn grown(file_length: Option<u64>, records: &[String]) -> Option<u64> {
    file_length.map(|l| l + records.iter().map(|r| r.len() as u64 + 1).sum::<u64>())
}

/// The SHA-256 of records as the batch's hash covers them: each followed by `\n`.
fn records_sha256(records: &[String]) -> String {
    let mut h = Sha256::new();
    for r in records {
        h.update(r.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// One line of the journal, checked against its own hash and canonical form before
/// anything of it leaves: the check `hash_of` and `Stream` make, from one serialization
/// (the canonical text, and what of it the hash covers).
fn checked(line: &str) -> Result<Map<String, Value>, ExportError> {
    let bad = |why: &str| ExportError::CorruptJournal(format!("{why}: {}", short(line)));
    let obj = match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(o)) => o,
        _ => return Err(bad("an entry that is not a JSON object")),
    };
    let (without, at) = canonical_without(&obj, "hash");
    let Some(hash) = obj.get("hash").and_then(Value::as_str) else {
        return Err(bad(
            "an entry whose content does not match its hash (edited)",
        ));
    };
    if !is_with_member(line, &without, at, "hash", &Value::String(hash.into())) {
        return Err(bad("an entry that is not in canonical form (edited)"));
    }
    if sha256_hex(without.as_bytes()) != hash {
        return Err(bad(
            "an entry whose content does not match its hash (edited)",
        ));
    }
    Ok(obj)
}

fn short(line: &str) -> &str {
    let mut end = line.len().min(120);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// For a file sink: what the file must hold at open, and the length to cut it to.
fn check_file(
    target: &Target,
    stream: &str,
    recorded: &Position,
    in_doubt: bool,
    file_length: Option<u64>,
) -> Result<Option<u64>, ExportError> {
    if !target.sink.is_file() {
        return Ok(None);
    }
    let path = &target.destination;
    let want = recorded.file_length.unwrap_or(0);
    let have = file_length.unwrap_or(0);
    if recorded.entries == 0 && !in_doubt && have > 0 {
        return Err(ExportError::FileMismatch(format!(
            "{path} already holds {have} bytes and {stream} has exported nothing to it: export to a new file, or name another position (--name)"
        )));
    }
    if have < want {
        return Err(ExportError::FileMismatch(format!(
            "{path} is {have} bytes long, shorter than the {want} bytes {stream} wrote to it: records would be lost; restore the file, or export to a new one under another --name"
        )));
    }
    if have > want && !in_doubt {
        return Err(ExportError::FileMismatch(format!(
            "{path} is {have} bytes long, longer than the {want} bytes {stream} wrote to it: something else wrote to it; nothing is cut"
        )));
    }
    Ok((have > want).then_some(want))
}

#[cfg(test)]
mod tests;

/// The reference backend's order: its append log; the cursor is the count of entries.
impl InOrder for crate::journal::MemJournal {
    fn read_in_order(
        &mut self,
        cursor: u64,
        max: usize,
    ) -> Result<Vec<(u64, String)>, JournalError> {
        let start = usize::try_from(cursor).unwrap_or(usize::MAX);
        Ok(self
            .log
            .iter()
            .enumerate()
            .skip(start)
            .take(max)
            .map(|(i, (_, e))| (i as u64 + 1, e.clone()))
            .collect())
    }
}
