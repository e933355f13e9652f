"""A local OTLP/HTTP receiver for the export tests: it decodes every request with the
official OpenTelemetry proto package (``opentelemetry-proto``) and keeps what it got, the
way a collector would see it. It can answer an error, or kill the exporter the moment a
batch has arrived, before it answers (the batch reached the receiver; its acknowledgement
never reaches the exporter)."""

from __future__ import annotations

import os
import signal
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

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                assert self.headers.get("Content-Type") == "application/x-protobuf", self.headers
                if receiver.status is not None:
                    self.send_response(receiver.status)
                    self.end_headers()
                    return
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
                    req = ExportMetricsServiceRequest.FromString(body)
                    reply = ExportMetricsServiceResponse().SerializeToString()
                    with receiver.lock:
                        receiver.metric_requests.append(req)
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

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
