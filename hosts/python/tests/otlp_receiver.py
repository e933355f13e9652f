"""A local OTLP/HTTP receiver for the export tests: it decodes every request with the
official OpenTelemetry proto package (``opentelemetry-proto``) and keeps what it got, the
way a collector would see it. It can answer an error, or kill the exporter the moment a
batch has arrived, before it answers (the batch reached the receiver; its acknowledgement
never reaches the exporter).

It reads a body the way a collector does: by ``Content-Length`` or chunked
(``Transfer-Encoding: chunked``, as OpenTelemetry JS sends), gzip or not. A body it cannot
read is answered 400 or 411, never 200: a receiver that acknowledged a request it did not
read would let an exporter record as sent what never arrived.

Run as a program (``python otlp_receiver.py``), it serves until its stdin closes and prints
``{"url": ...}``; another host's tests drive it over HTTP: ``POST /control`` with ``{"status",
"kill_pid", "kill_at"}`` (the attributes below), ``GET /state`` for what it holds (JSON).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def value(v: Any) -> Any:
    """An AnyValue's value."""
    return getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None


def attributes(kvs: Any) -> List[Tuple[str, Any]]:
    return sorted((a.key, value(a.value)) for a in kvs)


def span_view(s: Any) -> Tuple[Any, ...]:
    """What a span says, field by field (each SDK may set other protocol flags)."""
    return (s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name, s.kind, s.start_time_unix_nano,
            s.end_time_unix_nano, s.status.code, s.status.message, attributes(s.attributes),
            [(e.name, e.time_unix_nano, attributes(e.attributes)) for e in s.events])


class BadBody(Exception):
    def __init__(self, status: int, why: str):
        super().__init__(why)
        self.status = status


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request's body, by Content-Length or chunked, decompressed when gzip."""
    length = handler.headers.get("Content-Length")
    if length is not None:
        body = handler.rfile.read(int(length))
    elif handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                break
            parts.append(handler.rfile.read(size))
            handler.rfile.readline()
        body = b"".join(parts)
    else:
        raise BadBody(411, "a POST with neither Content-Length nor chunked transfer")
    encoding = handler.headers.get("Content-Encoding", "identity").lower()
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding != "identity":
        raise BadBody(415, f"Content-Encoding {encoding}")
    return body


class Receiver:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        #: Every span delivered, in order: (trace id hex, span id hex, the Span message).
        self.deliveries: List[Tuple[str, str, Any]] = []
        #: Every span, by id (what a receiver that keys on the ids holds).
        self.spans: Dict[Tuple[str, str], Any] = {}
        self.resources: List[Any] = []
        self.metric_requests: List[Any] = []
        self.trace_requests = 0
        #: Answer this status instead of 200 (None: 200).
        self.status: Optional[int] = None
        #: SIGKILL this pid when the trace request numbered ``kill_at`` (1-based) arrives,
        #: after keeping it and before answering.
        self.kill_pid: Optional[int] = None
        self.kill_at: Optional[int] = None
        self.killed = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def answer(self, status: int, body: bytes = b"", kind: str = "application/x-protobuf") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path != "/state":
                    return self.answer(404)
                self.answer(200, json.dumps(receiver.state()).encode(), "application/json")

            def do_POST(self) -> None:
                try:
                    body = read_body(self)
                except BadBody as e:
                    self.close_connection = True
                    return self.answer(e.status, str(e).encode(), "text/plain")
                if self.path == "/control":
                    with receiver.lock:
                        for k, v in json.loads(body).items():
                            setattr(receiver, k, v)
                    return self.answer(200, b"{}", "application/json")
                if self.headers.get("Content-Type") != "application/x-protobuf":
                    return self.answer(415, b"OTLP/HTTP protobuf only", "text/plain")
                if receiver.status is not None:
                    return self.answer(receiver.status)
                if self.path == "/v1/traces":
                    req = ExportTraceServiceRequest.FromString(body)
                    reply = ExportTraceServiceResponse().SerializeToString()
                    with receiver.lock:
                        receiver.trace_requests += 1
                        n = receiver.trace_requests
                        for rs in req.resource_spans:
                            receiver.resources.append(rs.resource)
                            for ss in rs.scope_spans:
                                for s in ss.spans:
                                    key = (s.trace_id.hex(), s.span_id.hex())
                                    receiver.deliveries.append((key[0], key[1], s))
                                    receiver.spans[key] = s
                        kill = receiver.kill_pid if receiver.kill_at == n else None
                    if kill is not None:
                        os.kill(kill, signal.SIGKILL)
                        receiver.killed += 1
                        self.close_connection = True
                        return
                elif self.path == "/v1/metrics":
                    metrics = ExportMetricsServiceRequest.FromString(body)
                    reply = ExportMetricsServiceResponse().SerializeToString()
                    with receiver.lock:
                        receiver.metric_requests.append(metrics)
                else:
                    return self.answer(404)
                self.answer(200, reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def histogram(self) -> Dict[str, int]:
        """The last cumulative point of gen_ai.execute_tool.duration: count by state."""
        counts: Dict[str, int] = {}
        for req in self.metric_requests[-1:]:
            for rm in req.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        assert m.name == "gen_ai.execute_tool.duration" and m.unit == "s", m
                        for p in m.histogram.data_points:
                            state = next(a.value.string_value for a in p.attributes if a.key == "interlock.state")
                            counts[state] = counts.get(state, 0) + p.count
        return counts

    def state(self) -> Dict[str, Any]:
        """What it holds, as JSON for another host's tests: each delivery's ids and the
        SHA-256 of its bytes, each span by id as ``span_view`` gives it (nanosecond times
        as strings: JSON numbers lose them in JavaScript)."""
        with self.lock:
            big = lambda x: str(x) if isinstance(x, int) and not isinstance(x, bool) and x > 2**53 else x  # noqa: E731
            spans = []
            for s in self.spans.values():
                v = span_view(s)
                spans.append({
                    "trace_id": v[0], "span_id": v[1], "parent_span_id": v[2], "name": v[3], "kind": v[4],
                    "start": big(v[5]), "end": big(v[6]), "status": {"code": v[7], "message": v[8]},
                    "attributes": dict(v[9]),
                    "events": [{"name": n, "time": big(t), "attributes": dict(a)} for n, t, a in v[10]],
                })
            return {
                "trace_requests": self.trace_requests, "metric_requests": len(self.metric_requests),
                "killed": self.killed,
                "deliveries": [[t, s, hashlib.sha256(m.SerializeToString(deterministic=True)).hexdigest()]
                               for t, s, m in self.deliveries],
                "spans": spans,
                "resource": dict(attributes(self.resources[0].attributes)) if self.resources else None,
                "histogram": self.histogram() if self.metric_requests else {},
            }


def main() -> None:
    r = Receiver()
    sys.stdout.write(json.dumps({"url": r.url}) + "\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the test that started it closes stdin, or exits
    r.close()


if __name__ == "__main__":
    main()
