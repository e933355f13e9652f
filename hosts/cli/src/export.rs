//! `interlock export`: the component's exporter (wit/export.wit) driven over a journal. The
//! component says what each sink receives and where an export resumes; this hands each
//! batch to the sink (OpenTelemetry's Rust SDK exporter, or a file appended and fsynced)
//! and says when it was taken.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use interlock_cli::bindings::exports::interlock::gate::exporter::{ExportError, Sink};
use serde_json::json;

use crate::output::Failure;
use crate::Ctx;

/// What `interlock export` was asked.
pub(crate) struct Args {
    pub to: String,
    pub out: Option<PathBuf>,
    pub name: Option<String>,
    pub content: bool,
    pub batch: u32,
}

/// The component's refusal: nothing was recorded (exit 2).
fn refused(e: ExportError) -> Failure {
    let (kind, message) = match e {
        ExportError::UnknownSink(m) => ("unknown_sink", m),
        ExportError::InvalidDestination(m) => ("invalid_destination", m),
        ExportError::InvalidName(m) => ("invalid_name", m),
        ExportError::Elsewhere(w) => ("elsewhere", w.message),
        ExportError::FileMismatch(m) => ("file_mismatch", m),
        ExportError::UnknownBatch(id) => (
            "unknown_batch",
            format!("batch {id} is not the batch handed out"),
        ),
        ExportError::NotOpen => ("not_open", "no export is open".to_string()),
        ExportError::Journal(j) => ("journal", format!("the journal failed: {j:?}")),
        ExportError::CorruptJournal(m) => ("corrupt_journal", m),
        ExportError::Contention(m) => ("contention", m),
    };
    Failure::new(2, kind, message)
}

/// The sink did not take a batch: the position stays (exit 1).
fn not_taken(message: String) -> Failure {
    Failure::new(
        1,
        "not_taken",
        format!("{message}; the position stays and the batch is sent again next time"),
    )
}

pub(crate) fn export(ctx: &Ctx, dir: &Path, a: Args) -> Result<u8, Failure> {
    let mut gate = ctx.gate(dir)?;
    let out = a.out.as_ref().map(|p| p.to_string_lossy().into_owned());
    let length = a
        .out
        .as_ref()
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|m| m.len());
    let opened = gate
        .export_open(&a.to, out.as_deref(), a.name.as_deref(), a.content, length)?
        .map_err(refused)?;
    let mut file = match &a.out {
        Some(path) => {
            // Never truncated on open: the component says how much of the file stands.
            let f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(path)?;
            if let Some(n) = opened.truncate_to {
                f.set_len(n)?;
                f.sync_all()?;
            }
            Some(f)
        }
        None => None,
    };
    #[cfg(feature = "otlp")]
    let otlp = match (&opened.sink, &opened.traces_url, &opened.metrics_url) {
        (Sink::Otlp, Some(t), Some(m)) => Some(otlp::Otlp::new(&gate.otlp_resource()?, t, m)?),
        _ => None,
    };
    #[cfg(not(feature = "otlp"))]
    if matches!(opened.sink, Sink::Otlp) {
        return Err(Failure::new(
            2,
            "usage",
            "this interlock was built without the otlp feature",
        ));
    }
    let (mut batches, mut records, mut resent, mut exported) = (0u64, 0u64, 0u64, opened.exported);
    while let Some(batch) = gate.export_next(a.batch.max(1))?.map_err(refused)? {
        let length = match &mut file {
            Some(f) => {
                f.seek(SeekFrom::End(0))?;
                let mut text = String::new();
                for r in &batch.records {
                    text.push_str(r);
                    text.push('\n');
                }
                f.write_all(text.as_bytes())
                    .and_then(|()| f.sync_all())
                    .map_err(|e| not_taken(format!("{}: {e}", opened.destination)))?;
                Some(f.metadata()?.len())
            }
            None => {
                #[cfg(feature = "otlp")]
                if let Some(o) = &otlp {
                    o.send(&batch.records).map_err(not_taken)?;
                }
                None
            }
        };
        gate.export_sent(batch.id, length)?.map_err(refused)?;
        batches += 1;
        records += batch.records.len() as u64;
        resent += if batch.resend {
            batch.records.len() as u64
        } else {
            0
        };
        exported = batch.exported;
    }
    let sink = match opened.sink {
        Sink::Otlp => "otlp",
        Sink::Bigquery => "bigquery",
        Sink::CloudLogging => "cloud-logging",
        Sink::Siem => "siem",
    };
    ctx.print(
        json!({"sink": sink, "destination": opened.destination, "stream": opened.stream,
               "exported": exported, "batches": batches, "records": records, "resent": resent}),
        format!(
            "exported {records} records in {batches} batches to {sink} {} ({resent} resent from a batch in doubt); {} now at {exported} journal entries",
            opened.destination, opened.stream
        ),
    );
    Ok(0)
}

#[cfg(feature = "otlp")]
mod otlp {
    //! Spans through opentelemetry-otlp's SpanExporter (OTLP/HTTP, protobuf), as the SDK's
    //! `SpanData`. The duration metric cannot go through opentelemetry_sdk: its point is the
    //! journal's (a fixed start time, counts summed from the journal, so a resend is the same
    //! point), and opentelemetry_sdk 0.33's metric data (`ResourceMetrics`, `ScopeMetrics`,
    //! `Metric`, `Histogram`, `HistogramDataPoint`) has crate-private fields and no public
    //! constructor, so no exporter can be handed one; its instruments aggregate what is
    //! recorded now, with their own start time. So that request is the official OTLP proto
    //! message (opentelemetry-proto's `ExportMetricsServiceRequest`), posted on the same
    //! client to the metrics URL.
    use std::borrow::Cow;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use opentelemetry::trace::{
        Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::{InstrumentationScope, KeyValue};
    use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::common::v1 as pc;
    use opentelemetry_proto::tonic::metrics::v1 as pm;
    use opentelemetry_proto::tonic::resource::v1::Resource as ProtoResource;
    use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
    use opentelemetry_sdk::Resource;
    use prost::Message;
    use serde_json::Value;

    use crate::output::Failure;

    const TIMEOUT: Duration = Duration::from_secs(10);

    pub(crate) struct Otlp {
        rt: tokio::runtime::Runtime,
        spans: opentelemetry_otlp::SpanExporter,
        scope: InstrumentationScope,
        resource: Value,
        metrics_url: String,
        http: reqwest::Client,
    }

    fn at(ms: &Value) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms.as_u64().unwrap_or(0))
    }

    fn attributes(v: &Value) -> Vec<KeyValue> {
        v.as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| match v {
                Value::String(s) => KeyValue::new(k.clone(), s.clone()),
                Value::Bool(b) => KeyValue::new(k.clone(), *b),
                Value::Number(n) if n.is_i64() || n.is_u64() => {
                    KeyValue::new(k.clone(), n.as_i64().unwrap_or(i64::MAX))
                }
                other => KeyValue::new(k.clone(), other.as_f64().unwrap_or(0.0)),
            })
            .collect()
    }

    fn proto_attributes(v: &Value) -> Vec<pc::KeyValue> {
        v.as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| pc::KeyValue {
                key: k.clone(),
                value: Some(pc::AnyValue {
                    value: Some(match v {
                        Value::Bool(b) => pc::any_value::Value::BoolValue(*b),
                        Value::Number(n) if n.is_i64() || n.is_u64() => {
                            pc::any_value::Value::IntValue(n.as_i64().unwrap_or(i64::MAX))
                        }
                        Value::Number(n) => {
                            pc::any_value::Value::DoubleValue(n.as_f64().unwrap_or(0.0))
                        }
                        other => {
                            pc::any_value::Value::StringValue(other.as_str().unwrap_or("").into())
                        }
                    }),
                }),
                ..Default::default()
            })
            .collect()
    }

    fn nanos(ms: &Value) -> u64 {
        ms.as_u64().unwrap_or(0).saturating_mul(1_000_000)
    }

    impl Otlp {
        pub(crate) fn new(
            meta: &str,
            traces_url: &str,
            metrics_url: &str,
        ) -> Result<Otlp, Failure> {
            let meta: Value = serde_json::from_str(meta)?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            // One client (its connections) for the spans and the metric.
            let http = reqwest::Client::builder().timeout(TIMEOUT).build()?;
            let mut spans = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(http.clone())
                .with_endpoint(traces_url)
                .with_timeout(TIMEOUT)
                .build()
                .map_err(|e| Failure::new(2, "otlp", format!("the OTLP exporter: {e}")))?;
            let resource = Resource::builder_empty()
                .with_attributes(attributes(&meta["resource"]))
                .build();
            spans.set_resource(&resource);
            let scope = InstrumentationScope::builder(
                meta["scope"]["name"]
                    .as_str()
                    .unwrap_or("interlock")
                    .to_owned(),
            )
            .with_version(meta["scope"]["version"].as_str().unwrap_or("").to_owned())
            .build();
            Ok(Otlp {
                rt,
                spans,
                scope,
                resource: meta["resource"].clone(),
                metrics_url: metrics_url.into(),
                http,
            })
        }

        fn id<const N: usize>(hex: &Value) -> [u8; N] {
            let mut out = [0u8; N];
            let s = hex.as_str().unwrap_or("");
            for (i, b) in out.iter_mut().enumerate() {
                *b = u8::from_str_radix(s.get(2 * i..2 * i + 2).unwrap_or("00"), 16).unwrap_or(0);
            }
            out
        }

        fn span(&self, r: &Value) -> SpanData {
            let trace = TraceId::from_bytes(Self::id::<16>(&r["trace_id"]));
            let context = SpanContext::new(
                trace,
                SpanId::from_bytes(Self::id::<8>(&r["span_id"])),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            );
            let parent = if r["parent_span_id"].is_string() {
                SpanId::from_bytes(Self::id::<8>(&r["parent_span_id"]))
            } else {
                SpanId::INVALID
            };
            // SpanEvents is non_exhaustive: its public fields set on the default.
            let mut events = SpanEvents::default();
            events.events = r["events"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    Event::new(
                        e["name"].as_str().unwrap_or("").to_owned(),
                        at(&e["time_ms"]),
                        attributes(&e["attributes"]),
                        0,
                    )
                })
                .collect();
            SpanData {
                span_context: context,
                parent_span_id: parent,
                parent_span_is_remote: false,
                span_kind: SpanKind::Internal,
                name: Cow::Owned(r["name"].as_str().unwrap_or("").to_owned()),
                start_time: at(&r["start_ms"]),
                end_time: at(&r["end_ms"]),
                attributes: attributes(&r["attributes"]),
                dropped_attributes_count: 0,
                events,
                links: SpanLinks::default(),
                status: if r["status"] == "error" {
                    Status::error(r["status_message"].as_str().unwrap_or("").to_owned())
                } else {
                    Status::Unset
                },
                instrumentation_scope: self.scope.clone(),
            }
        }

        fn metrics(&self, m: &[Value]) -> ExportMetricsServiceRequest {
            let metrics = m
                .iter()
                .map(|m| pm::Metric {
                    name: m["name"].as_str().unwrap_or("").into(),
                    description: m["description"].as_str().unwrap_or("").into(),
                    unit: m["unit"].as_str().unwrap_or("").into(),
                    data: Some(pm::metric::Data::Histogram(pm::Histogram {
                        aggregation_temporality: pm::AggregationTemporality::Cumulative as i32,
                        data_points: m["points"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|p| pm::HistogramDataPoint {
                                attributes: proto_attributes(&p["attributes"]),
                                start_time_unix_nano: nanos(&m["start_ms"]),
                                time_unix_nano: nanos(&m["time_ms"]),
                                count: p["count"].as_u64().unwrap_or(0),
                                sum: p["sum"].as_f64(),
                                bucket_counts: p["bucket_counts"]
                                    .as_array()
                                    .into_iter()
                                    .flatten()
                                    .filter_map(Value::as_u64)
                                    .collect(),
                                explicit_bounds: m["bounds"]
                                    .as_array()
                                    .into_iter()
                                    .flatten()
                                    .filter_map(Value::as_f64)
                                    .collect(),
                                min: p["min"].as_f64(),
                                max: p["max"].as_f64(),
                                ..Default::default()
                            })
                            .collect(),
                    })),
                    ..Default::default()
                })
                .collect();
            ExportMetricsServiceRequest {
                resource_metrics: vec![pm::ResourceMetrics {
                    resource: Some(ProtoResource {
                        attributes: proto_attributes(&self.resource),
                        ..Default::default()
                    }),
                    scope_metrics: vec![pm::ScopeMetrics {
                        scope: Some(pc::InstrumentationScope {
                            name: self.scope.name().into(),
                            version: self.scope.version().unwrap_or("").into(),
                            ..Default::default()
                        }),
                        metrics,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
            }
        }

        /// Sends one batch: its spans, then its metric point; an error says what failed.
        pub(crate) fn send(&self, records: &[String]) -> Result<(), String> {
            let records: Vec<Value> = records
                .iter()
                .filter_map(|r| serde_json::from_str(r).ok())
                .collect();
            let spans: Vec<SpanData> = records
                .iter()
                .filter(|r| r["kind"] == "span")
                .map(|r| self.span(r))
                .collect();
            let metrics: Vec<Value> = records
                .iter()
                .filter(|r| r["kind"] == "metric")
                .cloned()
                .collect();
            self.rt.block_on(async {
                if !spans.is_empty() {
                    let n = spans.len();
                    self.spans
                        .export(spans)
                        .await
                        .map_err(|e| format!("the OTLP receiver did not take {n} spans: {e}"))?;
                }
                if !metrics.is_empty() {
                    let body = self.metrics(&metrics).encode_to_vec();
                    let r = self
                        .http
                        .post(&self.metrics_url)
                        .header("Content-Type", "application/x-protobuf")
                        .body(body)
                        .send()
                        .await
                        .map_err(|e| {
                            format!(
                                "the OTLP receiver at {} did not take the metric: {e}",
                                self.metrics_url
                            )
                        })?;
                    if !r.status().is_success() {
                        return Err(format!(
                            "the OTLP receiver at {} answered {} to the metric",
                            self.metrics_url,
                            r.status()
                        ));
                    }
                }
                Ok(())
            })
        }
    }
}
