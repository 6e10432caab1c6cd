"""RealCluster's request path without a control plane: a plain HTTP server on loopback records what
arrives. Requests go through the one connection pool of the server (looked up once, not per call
through PoolManager), keep a server URL's path prefix, and still work after a dead watch made the
cluster drop its idle connections (which closes that pool)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from minisched.cluster.real import RealCluster
from minisched.errors import NotFound
from minisched.resources import PODS


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, Any]] = []

    def _answer(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append(("POST", self.path, json.loads(self.rfile.read(length) or b"null")))
        self._answer(201, {"kind": "Status", "status": "Success"})

    def do_GET(self) -> None:  # noqa: N802
        self.seen.append(("GET", self.path, None))
        self._answer(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                           "code": 404, "message": 'pods "x" not found'})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[tuple[str, str, Any]]]]:
    seen: list[tuple[str, str, Any]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def _cluster(host: str) -> RealCluster:
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = host
    return RealCluster(configuration)


def test_binds_keep_the_servers_path_prefix_and_survive_a_dropped_pool(server: Any) -> None:
    url, seen = server
    with _cluster(url + "/k8s/") as cluster:
        cluster.bind("ns", "p", "node-1", uid="u1")
        cluster._count_dead_watch()  # a dead watch drops the idle connections: the pool is closed
        cluster.bind("ns", "p", "node-2")
        with pytest.raises(NotFound, match='pods "x" not found'):
            cluster.get(PODS, "x", "ns")
    assert [(m, p) for m, p, _ in seen] == [("POST", "/k8s/api/v1/namespaces/ns/pods/p/binding")] * 2 + [
        ("GET", "/k8s/api/v1/namespaces/ns/pods/x")]
    assert seen[0][2]["target"]["name"] == "node-1" and seen[0][2]["metadata"]["uid"] == "u1"
    assert seen[1][2]["target"]["name"] == "node-2" and "uid" not in seen[1][2]["metadata"]


def test_the_query_string_reaches_the_server(server: Any) -> None:
    url, seen = server
    with _cluster(url) as cluster:
        cluster.request("POST", "/api/v1/namespaces/ns/pods", query={"dryRun": "All"}, body={"kind": "Pod"})
    assert seen == [("POST", "/api/v1/namespaces/ns/pods?dryRun=All", {"kind": "Pod"})]


class _OneChunk:
    """A watch response whose body arrives as one chunk of several events (a proxy may join them)."""

    def __init__(self, *events: Any) -> None:
        self.body = b"".join(json.dumps(e).encode() + b"\n" for e in events)

    def chunks(self) -> Iterator[bytes]:
        yield self.body

    def socket(self) -> None:
        return None

    def close(self) -> None:
        pass


def test_a_real_watch_iterated_twice_goes_on_where_the_first_loop_stopped() -> None:
    from minisched.cluster.real import RealWatch

    events = [{"type": "ADDED", "object": {"metadata": {"name": n, "resourceVersion": str(i)}}}
              for i, n in enumerate("abc", start=1)]
    watch = RealWatch(_OneChunk(*events), PODS)
    for event in watch:  # a consumer that stops after the first event (the reflector's watch-list does)
        assert event["object"]["metadata"]["name"] == "a"
        break
    assert [e["object"]["metadata"]["name"] for e in watch] == ["b", "c"]
