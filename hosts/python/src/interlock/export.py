"""Export of the journal to the tools operators run (ARCHITECTURE.md, "Export").

The component decides what each sink receives and where an export resumes (its
``exporter`` interface); this module only hands each batch to the sink's official library
and says when the receiver took it:

* ``otlp=URL``: OpenTelemetry's Python SDK (``ReadableSpan``, ``MetricsData``) through its
  OTLP/HTTP exporters (``opentelemetry-exporter-otlp-proto-http``);
* ``bigquery``, ``cloud-logging``, ``siem``: JSON lines appended to ``out`` and fsynced.

``python -m interlock.export JOURNAL --to otlp=http://127.0.0.1:4318`` runs it from the
command line, as ``interlock export`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from wasmtime.component import Variant

from .errors import InterlockError
from .gate import GateHost


class ExportError(InterlockError):
    """The component refused an export call (the WIT ``export-error``; ``case`` is its
    spelling, e.g. ``unknown-sink``, ``file-mismatch``). Nothing was recorded."""

    def __init__(self, case: str, message: str):
        super().__init__(f"{case}: {message}")
        self.case = case


class ExportFailed(InterlockError):
    """The sink did not take a batch (a receiver that answered an error or is down, a file
    that could not be written). The position stays: the batch is sent again next time."""


@dataclass
class ExportReport:
    """What one export run did."""

    sink: str
    destination: str
    stream: str
    #: Journal entries exported, in all (this run and earlier ones).
    exported: int
    batches: int = 0
    records: int = 0
    #: Records of a batch in doubt sent again (the same records, the same ids).
    resent: int = 0


def _message(payload: Any) -> str:
    if hasattr(payload, "given"):
        return str(payload.message)
    if isinstance(payload, Variant):
        return f"{payload.tag}: {payload.payload}"
    return str(payload)


def _call(host: GateHost, name: str, *args: Any) -> Any:
    r = host.raw(f"exporter.{name}", *args)
    if isinstance(r, Variant):
        raise ExportError(r.tag, _message(r.payload))
    return r


class _Otlp:
    """Spans and metrics through the OpenTelemetry SDK's OTLP/HTTP exporters."""

    def __init__(self, host: GateHost, traces_url: str, metrics_url: str, timeout_s: float):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        meta = json.loads(host.raw("exporter.otlp-resource"))
        self.resource = Resource(meta["resource"])
        self.scope = InstrumentationScope(meta["scope"]["name"], meta["scope"]["version"])
        self.url = traces_url
        self.spans = OTLPSpanExporter(endpoint=traces_url, timeout=timeout_s)
        self.metrics = OTLPMetricExporter(endpoint=metrics_url, timeout=timeout_s)

    def send(self, records: List[Dict[str, Any]]) -> None:
        from opentelemetry.sdk.metrics.export import MetricExportResult
        from opentelemetry.sdk.trace.export import SpanExportResult

        spans = [self._span(r) for r in records if r["kind"] == "span"]
        metrics = [r for r in records if r["kind"] == "metric"]
        if spans and self.spans.export(spans) is not SpanExportResult.SUCCESS:
            raise ExportFailed(f"the OTLP receiver at {self.url} did not take {len(spans)} spans")
        if metrics and self.metrics.export(self._metrics(metrics)) is not MetricExportResult.SUCCESS:
            raise ExportFailed(f"the OTLP receiver did not take the metric batch ({self.metrics._endpoint})")

    def _span(self, r: Dict[str, Any]) -> Any:
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        def context(span_id: str) -> SpanContext:
            return SpanContext(int(r["trace_id"], 16), int(span_id, 16), is_remote=False,
                               trace_flags=TraceFlags(TraceFlags.SAMPLED))

        parent = context(r["parent_span_id"]) if r.get("parent_span_id") else None
        status = (Status(StatusCode.ERROR, r.get("status_message")) if r["status"] == "error"
                  else Status(StatusCode.UNSET))
        return ReadableSpan(
            name=r["name"], context=context(r["span_id"]), parent=parent, resource=self.resource,
            attributes=r["attributes"], kind=SpanKind.INTERNAL, status=status,
            events=[Event(e["name"], e["attributes"], e["time_ms"] * 1_000_000) for e in r["events"]],
            start_time=r["start_ms"] * 1_000_000, end_time=r["end_ms"] * 1_000_000,
            instrumentation_scope=self.scope)

    def _metrics(self, records: List[Dict[str, Any]]) -> Any:
        from opentelemetry.sdk.metrics.export import (
            AggregationTemporality,
            Histogram,
            HistogramDataPoint,
            Metric,
            MetricsData,
            ResourceMetrics,
            ScopeMetrics,
        )

        metrics = [Metric(name=m["name"], description=m["description"], unit=m["unit"], data=Histogram(
            data_points=[HistogramDataPoint(
                attributes=p["attributes"], start_time_unix_nano=m["start_ms"] * 1_000_000,
                time_unix_nano=m["time_ms"] * 1_000_000, count=p["count"], sum=p["sum"],
                bucket_counts=p["bucket_counts"], explicit_bounds=m["bounds"], min=p["min"], max=p["max"],
                exemplars=[]) for p in m["points"]],
            aggregation_temporality=AggregationTemporality.CUMULATIVE)) for m in records]
        return MetricsData([ResourceMetrics(self.resource, [ScopeMetrics(self.scope, metrics, "")], "")])


def run(host: GateHost, to: str, out: Optional[str] = None, *, name: Optional[str] = None,
        content: bool = False, max_records: int = 512, timeout_s: float = 10.0) -> ExportReport:
    """Exports what the journal holds past the position ``export:<name>`` to ``to``
    (``otlp=URL``, ``bigquery``, ``cloud-logging``, ``siem``; a file sink writes JSON lines
    to ``out``). Resumes where the last run stopped; a batch a crash left in doubt is sent
    again first, the same records under the same ids. ``content``: OTLP spans carry the
    tool's arguments and result (opt-in in the conventions)."""
    length = os.path.getsize(out) if out is not None and os.path.exists(out) else None
    opened = _call(host, "open", to, out, name, content, length)
    sink = str(opened.sink)
    report = ExportReport(sink, opened.destination, opened.stream, opened.exported)
    # wasmtime-py keeps the WIT's kebab-case field names.
    otlp = (_Otlp(host, getattr(opened, "traces-url"), getattr(opened, "metrics-url"), timeout_s)
            if sink == "otlp" else None)
    fd = None
    if out is not None:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o600)
        cut = getattr(opened, "truncate-to")
        if cut is not None:
            os.ftruncate(fd, cut)
            os.fsync(fd)
    try:
        while True:
            batch = _call(host, "next", max_records)
            if batch is None:
                return report
            if otlp is not None:
                otlp.send([json.loads(r) for r in batch.records])
                _call(host, "sent", batch.id, None)
            else:
                assert fd is not None
                os.lseek(fd, 0, os.SEEK_END)
                os.write(fd, "".join(r + "\n" for r in batch.records).encode())
                os.fsync(fd)
                _call(host, "sent", batch.id, os.fstat(fd).st_size)
            report.batches += 1
            report.records += len(batch.records)
            report.resent += len(batch.records) if batch.resend else 0
            report.exported = batch.exported
    finally:
        if fd is not None:
            os.close(fd)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m interlock.export", description=(
        "Export a journal to OpenTelemetry (OTLP/HTTP), BigQuery, Cloud Logging or a SIEM (OCSF), "
        "resuming from the position recorded in the journal."))
    p.add_argument("journal", help="a journal folder, or sqlite:///path.db, postgres://...")
    p.add_argument("--to", required=True, help="otlp=URL, bigquery, cloud-logging or siem")
    p.add_argument("--out", help="the JSON lines file of bigquery, cloud-logging and siem")
    p.add_argument("--name", help="the position's name (default: the sink's)")
    p.add_argument("--content", action="store_true", help="OTLP spans carry the tool's arguments and result")
    p.add_argument("--batch", type=int, default=512, help="records per batch (default 512)")
    a = p.parse_args(argv)
    # By their package names: run as __main__, this module's own classes are another copy.
    from interlock import Interlock
    from interlock.export import ExportError, ExportFailed

    gate = Interlock(a.journal)
    try:
        r = gate.export(a.to, a.out, name=a.name, content=a.content, max_records=a.batch)
    except (ExportError, ExportFailed) as e:
        sys.stderr.write(f"interlock export: {e}\n")
        return 2 if isinstance(e, ExportError) else 1
    finally:
        gate.close()
    sys.stdout.write(json.dumps({"sink": r.sink, "destination": r.destination, "stream": r.stream,
                                 "exported": r.exported, "batches": r.batches, "records": r.records,
                                 "resent": r.resent}, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
