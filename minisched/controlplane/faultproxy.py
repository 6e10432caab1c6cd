"""An HTTPS reverse proxy in front of the local API server that can answer for it, for fault tests:
"the API server answers 429 Too Many Requests (or 503) for a while".

    proxy = FaultProxy(cp).start()          # https://127.0.0.1:<proxy.port>, certificate from cp's CA
    proxy.fail_with(429, seconds=5)          # every request refused for 5 s, with Retry-After: 1
    proxy.refused, proxy.forwarded           # counts, to tell backoff from a busy loop
    proxy.delay(r"/events$", 0.5)            # each event write held 0.5 s before it goes on (a slow path)

TLS ends at the proxy (a serving certificate issued by the control plane's CA, so a kubeconfig with
that CA trusts it) and every request goes on to the API server as the control plane's admin, each on
a fresh connection; responses stream back as they come, so watches work through it. While failing,
it answers as kube-apiserver's priority and fairness does: a Status body, reason TooManyRequests
(or ServiceUnavailable), and Retry-After. A test tool, not a proxy to deploy.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["FaultProxy"]

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
_REASONS = {429: "TooManyRequests", 503: "ServiceUnavailable", 500: "InternalError", 504: "Timeout"}


class FaultProxy:
    def __init__(self, control_plane: Any) -> None:
        self.upstream = ("127.0.0.1", int(control_plane.apiserver_port))
        cert_dir = Path(control_plane.cert_dir)
        self._client = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
        self._client.load_cert_chain(str(cert_dir / "admin.crt"), str(cert_dir / "admin.key"))
        serving = control_plane.ca.issue_serving(dns_names=("localhost",), ip_addresses=("127.0.0.1",))
        self._dir = Path(tempfile.mkdtemp(prefix="minisched-faultproxy-"))
        (self._dir / "tls.crt").write_bytes(serving.cert_pem)
        (self._dir / "tls.key").write_bytes(serving.key_pem)
        self._server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_ctx.load_cert_chain(str(self._dir / "tls.crt"), str(self._dir / "tls.key"))
        self._lock = threading.Lock()
        self._fail_status = 0
        self._fail_until = 0.0
        self._retry_after: int | None = 1
        self._delays: list[tuple[re.Pattern[str], frozenset[str], float]] = []
        self.refused = 0
        self.forwarded = 0
        self.delayed = 0
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None, "FaultProxy is not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def fail_with(self, status: int, seconds: float, *, retry_after: int | None = 1) -> None:
        """Answer every request with `status` for `seconds` from now."""
        with self._lock:
            self._fail_status, self._fail_until, self._retry_after = status, time.monotonic() + seconds, retry_after

    def delay(self, path: str, seconds: float, methods: tuple[str, ...] = ("POST", "PUT", "PATCH")) -> None:
        """Hold each request with one of `methods` whose path (query string excluded) matches the
        regular expression `path` for `seconds` before forwarding it; requests are held side by side,
        so a client writing one at a time is slowed to one per `seconds`. `seconds` 0 removes it."""
        if seconds < 0:
            raise ValueError(f"FaultProxy.delay: seconds must not be negative, got {seconds!r}")
        pattern = re.compile(path)
        with self._lock:
            self._delays = [d for d in self._delays if d[0].pattern != path]
            if seconds:
                self._delays.append((pattern, frozenset(m.upper() for m in methods), seconds))

    def _delay_for(self, method: str, path: str) -> float:
        path = path.split("?", 1)[0]
        with self._lock:
            pause = max((s for p, ms, s in self._delays if method in ms and p.search(path)), default=0.0)
            if pause:
                self.delayed += 1
        return pause

    def _failing(self) -> tuple[int, int | None] | None:
        with self._lock:
            if self._fail_status and time.monotonic() < self._fail_until:
                self.refused += 1
                return self._fail_status, self._retry_after
            self.forwarded += 1
            return None

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                failing = proxy._failing()
                if failing is not None:
                    self._refuse(*failing)
                    return
                pause = proxy._delay_for(self.command, self.path)
                if pause:
                    time.sleep(pause)
                proxy._forward(self, body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815

            def _refuse(self, status: int, retry_after: int | None) -> None:
                reason = _REASONS.get(status, "InternalError")
                payload = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                      "message": f"injected by FaultProxy: {reason}", "reason": reason,
                                      "details": {"retryAfterSeconds": retry_after or 0}, "code": status}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                if retry_after is not None:
                    self.send_header("Retry-After", str(retry_after))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.socket = self._server_ctx.wrap_socket(self._httpd.socket, server_side=True)
        threading.Thread(target=self._httpd.serve_forever, name="fault-proxy", daemon=True).start()
        return self

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes | None) -> None:
        conn = http.client.HTTPSConnection(*self.upstream, context=self._client, timeout=120)
        try:
            headers = {k: v for k, v in handler.headers.items()
                       if k.lower() not in _HOP_BY_HOP and k.lower() not in ("host", "authorization")}
            conn.request(handler.command, handler.path, body=body, headers=headers)
            resp = conn.getresponse()
            handler.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in _HOP_BY_HOP:
                    handler.send_header(k, v)
            chunked = resp.getheader("Transfer-Encoding", "").lower() == "chunked"
            if not chunked:
                data = resp.read()
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data)
                return
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            while chunk := resp.read1(65536):
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
        except (OSError, http.client.HTTPException):  # either side gone (e.g. a watch cut at a client's exit)
            handler.close_connection = True
        finally:
            conn.close()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
