"""RealCluster's own HTTP/1.1 path (minisched.cluster.http11) against a scripted server on loopback,
no control plane: each test says, per accepted connection, what the server answers and when it
hangs up. Pinned: Content-Length, chunked (split lines, extensions, trailers) and read-to-close
bodies; keep-alive reuse; a connection the server closed while idle is replaced; a reused one it
closes before answering is sent a replayable request again (GET, HEAD, OPTIONS, TRACE or an
Idempotency-Key, as Go's transport) and any other is an error (never re-sent: a bind could land
twice), as is a fresh one it closes; a malformed status
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

    def __init__(self, handler: Handler, tls: Any = None) -> None:
        self.handler = handler
        self.tls = tls  # a server-side ssl.SSLContext: speak TLS
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
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)
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


def test_tls_verifies_the_server_and_presents_the_client_certificate(serve: Any, tmp_path: Any) -> None:
    """The lean path's TLS settings are urllib3's: the kubeconfig's CA (a server signed by another
    is refused), the host name or IP checked unless tls_server_name / assert_hostname say which
    name to check, verify_ssl=False trusting anything, and the client certificate presented."""
    import ssl

    from kubernetes import client

    from minisched.controlplane.certs import CertificateAuthority

    ca, other = CertificateAuthority(), CertificateAuthority("someone-else")
    files = {}
    for name, data in {"ca": ca.cert_pem, "other": other.cert_pem}.items():
        files[name] = tmp_path / f"{name}.pem"
        files[name].write_bytes(data)
    user = ca.issue_client("alice")
    (tmp_path / "client.pem").write_bytes(user.cert_pem)
    (tmp_path / "client.key").write_bytes(user.key_pem)

    def server_for(serving: Any) -> ScriptedServer:
        (tmp_path / "srv.pem").write_bytes(serving.cert_pem)
        (tmp_path / "srv.key").write_bytes(serving.key_pem)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(tmp_path / "srv.pem", tmp_path / "srv.key")
        tls.verify_mode = ssl.CERT_REQUIRED  # the client must present a certificate signed by ca
        tls.load_verify_locations(files["ca"])
        server = ScriptedServer(_keep_alive(lambda line: _answer(200, {"kind": "Pod"})), tls=tls)
        servers.append(server)
        return server

    def get(server: ScriptedServer, *, ca_file: Any = files["ca"], **settings: Any) -> Any:
        configuration = client.Configuration(host=f"https://127.0.0.1:{server.port}")
        configuration.ssl_ca_cert = str(ca_file)
        configuration.cert_file = str(tmp_path / "client.pem")
        configuration.key_file = str(tmp_path / "client.key")
        for key, value in settings.items():
            setattr(configuration, key, value)
        with RealCluster(configuration) as cluster:
            return cluster.get("pods", "p", "ns")

    servers: list[ScriptedServer] = []
    try:
        by_ip = server_for(ca.issue_serving(dns_names=("localhost",), ip_addresses=("127.0.0.1",)))
        assert get(by_ip) == {"kind": "Pod"}
        with pytest.raises(ServiceUnavailable, match="certificate verify failed"):
            get(by_ip, ca_file=files["other"])
        assert get(by_ip, ca_file=files["other"], verify_ssl=False) == {"kind": "Pod"}
        by_name = server_for(ca.issue_serving(dns_names=("apiserver.test",), ip_addresses=()))
        with pytest.raises(ServiceUnavailable, match="TLS"):
            get(by_name)  # 127.0.0.1 is not in the certificate
        assert get(by_name, tls_server_name="apiserver.test") == {"kind": "Pod"}
        assert get(by_name, assert_hostname="apiserver.test") == {"kind": "Pod"}
        assert get(by_name, assert_hostname=False) == {"kind": "Pod"}
        with pytest.raises(ServiceUnavailable, match="TLS"):
            get(by_name, assert_hostname="elsewhere.test")
    finally:
        for server in servers:
            server.close()


@pytest.mark.parametrize("hang_up", ["close", "reset"])
def test_a_get_on_a_kept_alive_connection_the_server_drops_is_sent_again_and_a_bind_is_not(
        serve: Any, hang_up: str) -> None:
    """The server answers one request per connection, then hangs up on the next as it arrives (an
    idle timeout firing just as the request went out): Go's transport sends a replayable request
    again on a new connection, and so does http11; a bind is never sent twice."""
    import select
    import struct

    def handle(index: int, sock: socket.socket, server: ScriptedServer) -> None:
        server.read_request(index, sock)
        sock.sendall(_answer(200, {"kind": "Pod", "metadata": {"name": f"on-{index}"}}))
        select.select([sock], [], [], 10)  # the next request has arrived: hang up without a word
        if hang_up == "reset":  # unread bytes and no linger: the client's read fails with ECONNRESET
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            server.read_request(index, sock)

    server = serve(handle)
    with _cluster(server) as cluster:
        assert cluster.get("pods", "p", "ns")["metadata"]["name"] == "on-0"
        assert cluster.get("pods", "p", "ns")["metadata"]["name"] == "on-1"  # was ServiceUnavailable
        with pytest.raises(ServiceUnavailable, match="without answering|broke"):
            cluster.bind("ns", "a", "node-1")  # on connection 1, reused: not sent again
    assert server.accepted == 2
    assert [line.split()[0] for _, line, _ in server.requests if line.startswith("POST")] == ["POST"] * (
        hang_up == "close")


def _idle_closing_server(serve: Callable[[Handler], ScriptedServer]) -> ScriptedServer:
    """Keeps a connection alive for 0.1 s of idleness, as an API server's idle timeout would."""
    def handle(index: int, sock: socket.socket, server: ScriptedServer) -> None:
        sock.settimeout(0.1)
        while (line := server.read_request(index, sock)) is not None:
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n" + (b"" if line.startswith("HEAD") else b"ok"))

    return serve(handle)


@pytest.mark.parametrize(("method", "extra", "sent_again"), [
    ("GET", "", True), ("HEAD", "", True), ("OPTIONS", "", True),
    ("POST", "Idempotency-Key: k1\r\n", True), ("PATCH", "X-Idempotency-Key: k1\r\n", True),
    ("POST", "", False), ("PUT", "", False), ("DELETE", "", False), ("PATCH", "", False),
])
def test_only_replayable_requests_are_sent_again_after_an_idle_close(
        serve: Any, method: str, extra: str, sent_again: bool) -> None:
    """As Go's Request.isReplayable decides: GET, HEAD, OPTIONS, TRACE or an Idempotency-Key."""
    server = _idle_closing_server(serve)
    endpoint = http11.Endpoint("http", "127.0.0.1", server.port)
    request = f"{method} / HTTP/1.1\r\nHost: h\r\n{extra}Content-Length: 2\r\n\r\n{{}}".encode()
    pool = http11.ConnectionPool(endpoint, maxsize=1)
    conn = pool.get()
    conn.send(request, 5)
    assert conn.read_head(method).read() == (b"" if method == "HEAD" else b"ok", True)
    pool.put(conn)
    deadline = time.monotonic() + 10
    while not conn.dropped():  # the server's idle timeout closed it; the pool's check is skipped
        assert time.monotonic() < deadline
        time.sleep(0.01)
    conn.send(request, 5)  # as if it had gone out just before the FIN came
    if sent_again:
        assert conn.read_head(method).read()[1] and server.accepted == 2
    else:
        with pytest.raises(http11.NoResponse, match="without answering|broke"):
            conn.read_head(method)
        assert server.accepted == 1


def test_a_new_connection_the_server_drops_is_not_tried_again(serve: Any) -> None:
    server = _idle_closing_server(serve)
    conn = http11.Endpoint("http", "127.0.0.1", server.port).connect()
    deadline = time.monotonic() + 10
    while not conn.dropped():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    conn.send(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", 5)
    with pytest.raises(http11.NoResponse):  # as Go: a server hanging up on a fresh connection may mean it
        conn.read_head("GET")
    assert server.accepted == 1
