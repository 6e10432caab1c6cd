"""One small HTTP server for a scheduler: /metrics, /healthz, /livez, /readyz.

It behaves like the endpoints of kube-scheduler (k8s.io/apiserver/pkg/server/healthz):

- every endpoint is a list of named checks; 200 "ok" when all pass, 500 when one fails;
- `?verbose` lists each check as "[+]name ok" or "[-]name failed: reason";
- `/healthz/<check>` runs one check alone;
- /livez answers "is the process worth keeping?" (restart it if not), /readyz "should it get
  work?", /healthz is the older name that kube-scheduler keeps for liveness.

Readiness here is the one the book asks for: informers synced AND leadership state known (this
instance leads, or it knows who does). A follower is ready: it is healthy and waiting, and marking
it unready (the book's OUT_OF_SERVICE idea) would only make Kubernetes restart or unroute a standby
that is doing its job. Losing the lease is handled by the elector (the scheduler stops), not by a probe.

The server binds 127.0.0.1 only (port 0 picks a free port) and runs on a daemon thread. In a cluster
it serves as kube-scheduler's secure port does: TLS (`ssl_context`) and an `authorizer` asked about
every request (minisched.observability.auth.DelegatedAuth: TokenReview + SubjectAccessReview for
/metrics; the health endpoints stay open to probes).
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["Check", "HealthServer", "informers_synced", "leadership_known"]

# A check returns None (or True) when healthy; returns a reason string, returns False or raises
# when not.
Check = Callable[[], "str | bool | None"]
# (path, request headers) -> None to serve, or (HTTP status, message) to refuse.
Authorizer = Callable[[str, Mapping[str, str]], "tuple[int, str] | None"]


def _run_check(check: Check) -> str | None:
    """None when the check passes, else the reason it failed."""
    try:
        outcome = check()
    except Exception as exc:  # a crashing check is a failing check, with its message
        return f"{type(exc).__name__}: {exc}"
    if outcome is None or outcome is True:
        return None
    if outcome is False:
        return "check returned False"
    return str(outcome)


def informers_synced(*has_synced: Callable[[], bool]) -> Check:
    """A readiness check: every informer has finished its first list (client-go HasSynced)."""

    def check() -> str | None:
        pending = [i for i, synced in enumerate(has_synced) if not synced()]
        return f"informers not synced yet: {pending}" if pending else None

    return check


def leadership_known(elector: Any) -> Check:
    """A readiness check: the elector knows who leads (itself or another), i.e. it has read the
    Lease at least once. `elector` needs `leader()` -> identity or None (LeaderElector has it)."""

    def check() -> str | None:
        return None if elector.leader() is not None else "leadership state not known yet"

    return check


class HealthServer:
    """/metrics for `registry` and the three health endpoints. Use as a context manager or start()/stop()."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        authorizer: Authorizer | None = None,
    ) -> None:
        # Loopback, or every interface when asked (in a pod, the kubelet probes the pod's IP).
        if host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::"):
            raise ValueError(
                f"HealthServer binds loopback (127.0.0.1, ::1) or all interfaces (0.0.0.0, ::), not {host!r}"
            )
        self.registry = registry
        self._host, self._port = host, port
        self.ssl_context = ssl_context
        self.authorizer = authorizer
        self._checks: dict[str, dict[str, Check]] = {"livez": {}, "readyz": {}}
        self._checks["livez"]["ping"] = lambda: None
        self._checks["readyz"]["ping"] = lambda: None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- checks --------------------------------------------------------------------------------------

    def add_liveness_check(self, name: str, check: Check) -> None:
        """A check for /livez and /healthz (and /readyz: a dead process is not ready either)."""
        self._add("livez", name, check)
        self._add("readyz", name, check)

    def add_readiness_check(self, name: str, check: Check) -> None:
        self._add("readyz", name, check)

    def _add(self, endpoint: str, name: str, check: Check) -> None:
        if not name or "/" in name:
            raise ValueError(f"a check name must be non-empty without '/', got {name!r}")
        if name in self._checks[endpoint]:
            raise ValueError(f"/{endpoint} already has a check named {name!r}")
        self._checks[endpoint][name] = check

    def evaluate(self, endpoint: str, only: str | None = None, verbose: bool = False) -> tuple[int, str]:
        """(HTTP status, body) for /healthz, /livez or /readyz; usable without HTTP."""
        endpoint = "livez" if endpoint == "healthz" else endpoint
        checks = self._checks[endpoint]
        if only is not None:
            if only not in checks:
                return 404, f"no check named {only!r} on /{endpoint}\n"
            checks = {only: checks[only]}
        failures = {name: why for name, check in checks.items() if (why := _run_check(check)) is not None}
        ok = not failures
        if not verbose and ok:
            return 200, "ok"
        lines = [f"[+]{name} ok" if name not in failures else f"[-]{name} failed: {failures[name]}" for name in checks]
        lines.append(f"{endpoint} check passed" if ok else f"{endpoint} check failed")
        return (200 if ok else 500), "\n".join(lines) + "\n"

    # -- serving -------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("HealthServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://{self._host}:{self.port}"

    @property
    def serving(self) -> bool:
        return self._httpd is not None

    def start(self) -> HealthServer:
        if self._httpd is not None:
            return self
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                refused = None
                if server.authorizer is not None:
                    path = urlsplit(self.path).path.rstrip("/") or "/"
                    refused = server.authorizer(path, dict(self.headers.items()))
                if refused is not None:
                    code, message = refused
                    status, ctype, body = code, "text/plain; charset=utf-8", (message + "\n").encode()
                else:
                    status, ctype, body = server._respond(self.path)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Content-Type-Options", "nosniff")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # probes every few seconds would drown the structured log

        self._httpd = ThreadingHTTPServer((self._host, self._port), Handler)
        self._httpd.daemon_threads = True
        if self.ssl_context is not None:
            self._httpd.socket = self.ssl_context.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="health-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._httpd, self._thread = None, None

    def __enter__(self) -> HealthServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _respond(self, raw_path: str) -> tuple[int, str, bytes]:
        parts = urlsplit(raw_path)
        path = parts.path.rstrip("/") or "/"
        verbose = "verbose" in parts.query.split("&") or parts.query.startswith("verbose")
        if path == "/metrics":
            if self.registry is None:
                return 404, "text/plain; charset=utf-8", b"no metrics registry configured\n"
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        head, _, only = path.lstrip("/").partition("/")
        if head in ("healthz", "livez", "readyz"):
            status, body = self.evaluate(head, only or None, verbose)
            return status, "text/plain; charset=utf-8", body.encode()
        return 404, "text/plain; charset=utf-8", f"not found: {path} (try /metrics, /healthz, /livez, /readyz)\n".encode()
