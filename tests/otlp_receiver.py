"""A tiny OTLP/HTTP trace receiver for tests: the sidecar's real OTLP exporter posts
protobuf ExportTraceServiceRequests to it; spans are decoded with opentelemetry-proto
and kept in memory (with attributes as plain Python values)."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import known_secrets
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

KINDS = {
    PbSpan.SPAN_KIND_SERVER: "SERVER",
    PbSpan.SPAN_KIND_CLIENT: "CLIENT",
    PbSpan.SPAN_KIND_INTERNAL: "INTERNAL",
}


def value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@dataclass
class Span:
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    links: list[tuple[str, str]]
    status_code: int
    resource: dict[str, Any] = field(default_factory=dict)


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.bodies: list[bytes] = []  # every request body, decompressed
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver.lock:
                    receiver.bodies.append(body)  # as exported, for greps (test_secrets)
                if self.path == "/v1/traces":
                    receiver._add(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _add(self, request: ExportTraceServiceRequest) -> None:
        with self.lock:
            for rs in request.resource_spans:
                resource = {a.key: value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append(
                            Span(
                                s.name,
                                KINDS.get(s.kind, str(s.kind)),
                                s.trace_id.hex(),
                                s.span_id.hex(),
                                s.parent_span_id.hex(),
                                {a.key: value(a.value) for a in s.attributes},
                                [(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                                s.status.code,
                                resource,
                            )
                        )

    def wait_for(self, match: Callable[[Span], bool], timeout: float = 15.0) -> list[Span]:
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                found = [s for s in self.spans if match(s)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    def children(self, parent: Span) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.parent_span_id == parent.span_id]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            known_secrets.output_text(f"spans exported to {self.endpoint}", b"".join(self.bodies))
