"""RealCluster's own HTTP/1.1 path (minisched.cluster.http11) against a scripted server on loopback,
no control plane: each test says, per accepted connection, what the server answers and when it
hangs up. Pinned: Content-Length, chunked (split lines, extensions, trailers) and read-to-close
bodies; keep-alive reuse; a connection the server closed while idle is replaced, one it closed
after reading a request is an error (never re-sent: a bind could land twice); a malformed status
line, a read timeout, a refused connection and HTTP errors each raise what they raised through
urllib3; the pool's size, discard and clear semantics."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from minisched.cluster import http11
from minisched.cluster.real import RealCluster
from minisched.errors import Conflict, Expired, InternalError, ServiceUnavailable, Timeout, TooManyRequests

Handler = Callable[[int, socket.socket, "ScriptedServer"], None]


class ScriptedServer:
    """Accepts connections; the i-th is handed to handler(i, sock, server) on its own thread."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self.requests: list[tuple[int, str, bytes]] = []  # (connection, request line, body)
        self.release = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            index = self.accepted
            self.accepted += 1
            threading.Thread(target=self._run, args=(index, sock), daemon=True).start()

    def _run(self, index: int, sock: socket.socket) -> None:
        try:
            self.handler(index, sock, self)
        except OSError:
            pass
        finally:
            sock.close()

    def read_request(self, index: int, sock: socket.socket) -> str | None:
        """One request off the connection (head and Content-Length body); None at EOF."""
        data = b""
        while b"\r\n\r\n" not in data:
            piece = sock.recv(65536)
            if not piece:
                return None
            data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        length = next((int(v) for k, _, v in (h.partition(": ") for h in lines[1:])
                       if k.lower() == "content-length"), 0)
        while len(body) < length:
            body += sock.recv(65536)
        self.requests.append((index, lines[0], body))
        return lines[0]

    def close(self) -> None:
        self.release.set()
        self.listener.close()


def _answer(status: int, body: Any, *, extra: str = "") -> bytes:
    data = json.dumps(body).encode()
    return (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            f"{extra}\r\n").encode() + data


def _status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code,
            "message": f"{reason} says the server"}


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(handler: Handler) -> ScriptedServer:
        servers.append(ScriptedServer(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _cluster(server: ScriptedServer, **options: Any) -> RealCluster:
    from kubernetes import client

    return RealCluster(client.Configuration(host=f"http://127.0.0.1:{server.port}"), **options)


def _keep_alive(answers: Callable[[str], bytes]) -> Handler:
    def handle(index: int, sock: socket.socket, server: ScriptedServer) -> None:
        while (line := server.read_request(index, sock)) is not None:
            sock.sendall(answers(line))

    return handle


def test_one_connection_carries_every_request_and_chunked_bodies_are_joined(serve: Any) -> None:
    body = json.dumps({"kind": "Pod", "metadata": {"name": "p"}}).encode()

    def answers(line: str) -> bytes:
        if line.startswith("GET"):  # chunked, with a chunk extension and a trailer
            return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + b"5;ext=1\r\n" + body[:5] + b"\r\n"
                    + f"{len(body) - 5:x}\r\n".encode() + body[5:] + b"\r\n"
                    + b"0\r\nX-Trailer: t\r\n\r\n")
        return _answer(201, {"kind": "Binding"})

    server = serve(_keep_alive(answers))
    with _cluster(server) as cluster:
        for i in range(5):
            assert cluster.get("pods", "p", "ns")["metadata"]["name"] == "p"
            cluster.bind("ns", f"p{i}", "node-1")
    assert server.accepted == 1
    assert [line.split()[0] for _, line, _ in server.requests] == ["GET", "POST"] * 5
    assert json.loads(server.requests[1][2])["target"]["name"] == "node-1"


def test_a_connection_the_server_closed_while_idle_is_replaced(serve: Any) -> None:
    def handle(index: int, sock: socket.socket, server: ScriptedServer) -> None:
        server.read_request(index, sock)
        sock.sendall(_answer(201, {"kind": "Binding"}))  # then hang up, as an idle timeout would

    server = serve(handle)
    with _cluster(server) as cluster:
        cluster.bind("ns", "a", "node-1")
        deadline = time.monotonic() + 10
        while server.accepted < 1 or len(server.requests) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.2)  # the FIN has arrived
        cluster.bind("ns", "b", "node-1")
    assert server.accepted == 2 and len(server.requests) == 2


def test_connection_close_and_read_to_the_end_are_not_reused(serve: Any) -> None:
    def handle(index: int, sock: socket.socket, server: ScriptedServer) -> None:
        line = server.read_request(index, sock)
        if line and line.startswith("GET"):  # no length, no chunks: the body ends with the connection
            sock.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{"kind": "Pod"}')
        else:
            sock.sendall(_answer(201, {"kind": "Binding"}, extra="Connection: close\r\n"))
            server.release.wait(10)  # keep the socket open: only the header says not to reuse it

    server = serve(handle)
    with _cluster(server) as cluster:
        assert cluster.get("pods", "p", "ns") == {"kind": "Pod"}
        cluster.bind("ns", "a", "node-1")
        cluster.bind("ns", "b", "node-1")
    assert server.accepted == 3


def test_a_request_the_server_read_and_dropped_is_an_error_and_not_sent_twice(serve: Any) -> None:
    def handle(index: int, sock: socket.socket, server: ScriptedServer) -> None:
        server.read_request(index, sock)  # read it, then close without a word

    server = serve(handle)
    with _cluster(server) as cluster:
        with pytest.raises(ServiceUnavailable, match="closed the connection without answering"):
            cluster.bind("ns", "a", "node-1")
        with pytest.raises(ServiceUnavailable, match="without answering"):
            cluster.get("pods", "a", "ns")
    assert [line.split()[0] for _, line, _ in server.requests] == ["POST", "GET"]


def test_a_malformed_status_line_is_a_clear_error(serve: Any) -> None:
    server = serve(_keep_alive(lambda line: b"HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n"))
    with _cluster(server) as cluster, pytest.raises(ServiceUnavailable, match="malformed status line b'HTTP/2 200 OK'"):
        cluster.get("pods", "p", "ns")
    server = serve(_keep_alive(lambda line: b"SSH-2.0-OpenSSH_9.6\r\n\r\n"))
    with _cluster(server) as cluster, pytest.raises(ServiceUnavailable, match="malformed status line"):
        cluster.bind("ns", "p", "n")
    server = serve(_keep_alive(lambda line: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"))
    with _cluster(server) as cluster, pytest.raises(ServiceUnavailable, match="malformed chunk size line"):
        cluster.get("pods", "p", "ns")


def test_a_read_timeout_is_timeout_for_a_bind_and_service_unavailable_for_a_get(serve: Any) -> None:
    def handle(index: int, sock: socket.socket, server: ScriptedServer) -> None:
        server.read_request(index, sock)
        server.release.wait(30)  # never answers

    server = serve(handle)
    with _cluster(server, request_timeout=0.5) as cluster:
        with pytest.raises(Timeout, match="read timed out"):
            cluster.bind("ns", "a", "node-1")
        with pytest.raises(ServiceUnavailable, match="read timed out"):
            cluster.get("pods", "a", "ns")


def test_http_errors_keep_their_exceptions_and_the_connection(serve: Any) -> None:
    answers = iter([_answer(409, _status(409, "Conflict")), _answer(410, _status(410, "Expired")),
                    _answer(429, _status(429, "TooManyRequests")),
                    b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops",
                    _answer(503, _status(503, "ServiceUnavailable")), b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnot"])
    server = serve(_keep_alive(lambda line: next(answers)))
    with _cluster(server) as cluster:
        for expected in (Conflict, Expired, TooManyRequests):
            with pytest.raises(expected, match="says the server"):
                cluster.bind("ns", "a", "node-1")
        with pytest.raises(InternalError, match="oops"):
            cluster.get("pods", "a", "ns")
        with pytest.raises(ServiceUnavailable, match="says the server"):
            cluster.get("pods", "a", "ns")
        with pytest.raises(InternalError, match="response is not JSON"):
            cluster.get("pods", "a", "ns")
    assert server.accepted == 1


def test_a_refused_connection_is_service_unavailable() -> None:
    from kubernetes import client

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with RealCluster(client.Configuration(host=f"http://127.0.0.1:{port}")) as cluster, \
            pytest.raises(ServiceUnavailable, match="cannot reach .*refused"):
        cluster.bind("ns", "a", "node-1")


def test_watch_events_split_across_chunks_or_sharing_one(serve: Any) -> None:
    def event(name: str, kind: str = "ADDED") -> bytes:
        return json.dumps({"type": kind, "object": {"metadata": {"name": name}}}).encode() + b"\n"

    stream = event("a") + event("b") + event("c", "MODIFIED") + event("d", "DELETED")
    pieces = [stream[:10], stream[10:len(event("a")) + 5], stream[len(event("a")) + 5:-1], stream[-1:]]

    def handle(index: int, sock: socket.socket, server: ScriptedServer) -> None:
        server.read_request(index, sock)
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in pieces:
            sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        sock.sendall(b"0\r\n\r\n")

    server = serve(handle)
    with _cluster(server) as cluster:
        events = list(cluster.watch("pods", "ns", resource_version="1"))
    assert [(e["type"], e["object"]["metadata"]["name"], e["object"]["kind"]) for e in events] == [
        ("ADDED", "a", "Pod"), ("ADDED", "b", "Pod"), ("MODIFIED", "c", "Pod"), ("DELETED", "d", "Pod")]
    assert "watch=true" in server.requests[0][1]


def test_a_watch_stopped_from_another_thread_ends_promptly(serve: Any) -> None:
    def handle(index: int, sock: socket.socket, server: ScriptedServer) -> None:
        server.read_request(index, sock)
        sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        server.release.wait(30)

    server = serve(handle)
    with _cluster(server) as cluster:
        watch = cluster.watch("pods", "ns", resource_version="1")
        threading.Timer(0.3, watch.stop).start()
        started = time.monotonic()
        assert list(watch) == []
        assert time.monotonic() - started < 20 and not watch.dead


def test_the_pool_keeps_at_most_maxsize_idle_and_clear_closes_those_in_use(serve: Any) -> None:
    server = serve(_keep_alive(lambda line: b""))
    pool = http11.ConnectionPool(http11.Endpoint("http", "127.0.0.1", server.port), maxsize=1)
    a, b = pool.get(), pool.get()
    pool.put(a)
    pool.put(b)  # full: closed, counted
    assert pool.discarded == 1 and b.sock.fileno() < 0 and pool.get() is a
    pool.clear()
    pool.put(a)  # in use at the clear: closed on return, not pooled, not counted as a discard
    assert a.sock.fileno() < 0 and pool.discarded == 1
    assert pool.get() is not a
    with pytest.raises(ValueError, match="unsupported scheme"):
        http11.Endpoint("ftp", "h", 1)


def test_a_gzipped_body_is_inflated_and_an_unknown_coding_named(serve: Any) -> None:
    import gzip

    packed = gzip.compress(b'{"kind": "Pod"}')
    answers = iter([b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed) + packed,
                    b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\n{}"])
    server = serve(_keep_alive(lambda line: next(answers)))
    with _cluster(server) as cluster:
        assert cluster.get("pods", "p", "ns") == {"kind": "Pod"}
        with pytest.raises(ServiceUnavailable, match="unsupported Content-Encoding 'br'"):
            cluster.get("pods", "p", "ns")
