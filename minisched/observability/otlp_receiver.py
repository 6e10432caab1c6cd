"""A small OTLP/HTTP trace receiver on loopback: what a collector does first, enough to read spans back.

    with OtlpReceiver() as receiver:           # listens on 127.0.0.1, a free port
        provider = otlp_provider(receiver.endpoint)
        ...
        receiver.wait_for(lambda spans: len(spans) >= 10)
        receiver.spans                         # ReceivedSpan, in arrival order

It answers POST /v1/traces with an ExportTraceServiceRequest in protobuf (the OTLP/HTTP exporter's
encoding; gzip accepted) and keeps the spans. No collector binary is needed (none is available
offline), and nothing listens beyond loopback.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # hex
    span_id: str
    parent_span_id: str  # "" for a root
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    status_code: int = 0  # 0 unset, 1 ok, 2 error
    service: str = ""

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ExportTraceServiceRequest."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    out = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                out.append(ReceivedSpan(
                    s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                    s.start_time_unix_nano, s.end_time_unix_nano,
                    {kv.key: _value(kv.value) for kv in s.attributes}, s.status.code,
                    str(resource.get("service.name", "")),
                ))
    return out


class OtlpReceiver:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError(f"the receiver listens on loopback only, not {host!r}")
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server API)
                if self.path != TRACES_PATH:
                    self.send_error(404, f"only {TRACES_PATH} is served")
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                try:
                    spans = decode(body)
                except Exception as err:  # a malformed request is the sender's problem: say so
                    self.send_error(400, f"not an ExportTraceServiceRequest: {err}")
                    return
                with receiver._cond:
                    receiver.spans.extend(spans)
                    receiver.requests += 1
                    receiver._cond.notify_all()
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        """The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> OtlpReceiver:
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_for(self, cond: Callable[[list[ReceivedSpan]], bool], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not cond(self.spans):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True


__all__ = ["OtlpReceiver", "ReceivedSpan", "TRACES_PATH", "decode"]
