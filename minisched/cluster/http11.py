"""A lean HTTP/1.1 client for RealCluster: keep-alive connections over TCP or TLS, requests written
as bytes, responses parsed only as far as the framing needs.

Why not urllib3 (the Python client's HTTP library, which RealCluster used before): measured against
a local kube-apiserver, a bind cost ~650 µs of client CPU through urllib3 and http.client, of which
the socket reads and writes (TLS included) were ~75 µs; the rest was building the request through
putrequest/putheader and parsing every response's headers with the email package
(bench/realclient_bench.py; bench/README.md, "Client CPU per call"). This module does what the API
server's answers need and no more:

- the status line and headers are read with BufferedReader.readline (C), each header split once;
- bodies framed by Content-Length, chunked transfer coding, or the end of the connection;
- a connection is reused only after a complete response that allows it (HTTP/1.1 without
  `Connection: close`), and checked before reuse: one the server closed while idle (readable or
  at EOF) is dropped, as urllib3's is_connection_dropped does;
- failures come back as four exceptions that RealCluster maps onto minisched.errors:
  `ConnectFailed` (TCP or TLS never established: nothing sent, safe to retry any method),
  `Unsent` (writing the request failed: the server cannot have a complete request, safe to retry),
  `ReadTimedOut` (no answer within the read timeout: the server may have acted) and
  `ResponseFailed` (the connection broke after the request was sent, or the answer is not HTTP/1.x).

Pool semantics are urllib3's, which RealCluster relied on: idle connections are kept up to
`maxsize` and reused newest first; past it a connection is closed when returned (counted in
`discarded`, with a warning); `clear()` closes the idle ones, and connections in use at that moment
are closed when they come back instead of being pooled.
"""

from __future__ import annotations

import contextlib
import io
import logging
import select
import socket
import ssl
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

MAX_LINE = 65536  # the longest status or header line accepted
MAX_HEADERS = 100
# The headers a response is parsed for: how its body is framed and whether the connection stays open.
_FRAMING = {name.encode(): name for name in ("content-length", "transfer-encoding", "connection", "content-encoding")}


class HttpFailure(Exception):
    """A request that got no HTTP answer."""


class ConnectFailed(HttpFailure):
    """The TCP connection or the TLS handshake failed: the request was never sent."""


class Unsent(HttpFailure):
    """Writing the request failed: the server cannot have received all of it."""


class ReadTimedOut(HttpFailure):
    """No answer (or no more of it) within the read timeout."""


class ResponseFailed(HttpFailure):
    """The connection broke after the request was sent, or the answer is not HTTP/1.x."""


@dataclass(frozen=True)
class Endpoint:
    """Where to connect and how: scheme http or https, host, port, the TLS context and name."""

    scheme: str
    host: str
    port: int
    ssl_context: ssl.SSLContext | None = None
    server_hostname: str | None = None  # SNI and hostname check; default: host
    assert_hostname: str | None = None  # check the certificate against this name instead (urllib3's option)
    connect_timeout: float = 10.0
    socket_options: tuple[tuple[int, int, int], ...] = ()
    host_header: str = field(init=False, default="")

    def __post_init__(self) -> None:
        if self.scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme {self.scheme!r}: http or https")
        if self.scheme == "https" and self.ssl_context is None:
            raise ValueError("an https endpoint needs an ssl_context")
        default_port = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        object.__setattr__(self, "host_header", host if self.port == default_port else f"{host}:{self.port}")

    def connect(self) -> Connection:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as err:
            raise ConnectFailed(f"cannot connect to {self.host}:{self.port}: {err}") from err
        try:
            for level, option, value in self.socket_options:
                sock.setsockopt(level, option, value)
            if self.ssl_context is not None:
                sock = self.ssl_context.wrap_socket(sock, server_hostname=self.server_hostname or self.host)
                if self.assert_hostname:
                    _match_hostname(sock, self.assert_hostname)
        except (OSError, ssl.CertificateError, ValueError) as err:
            with contextlib.suppress(OSError):
                sock.close()
            raise ConnectFailed(f"TLS with {self.host}:{self.port} failed: {err}") from err
        return Connection(sock)


def _match_hostname(sock: Any, name: str) -> None:
    from urllib3.util.ssl_match_hostname import match_hostname

    match_hostname(sock.getpeercert(), name)


class Connection:
    """One keep-alive connection. Not thread-safe: one request at a time, by whoever holds it."""

    __slots__ = ("sock", "rfile", "generation", "used")

    def __init__(self, sock: socket.socket, generation: int = 0) -> None:
        self.sock = sock
        self.rfile: io.BufferedReader = sock.makefile("rb", buffering=65536)  # type: ignore[assignment]
        self.generation = generation
        self.used = False  # has carried a request before: reuse is what can meet a stale connection

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.rfile.close()
        with contextlib.suppress(OSError):
            self.sock.close()

    def dropped(self) -> bool:
        """True when an idle connection cannot carry a request: the peer closed it (EOF is readable)
        or sent something unasked. urllib3's is_connection_dropped, for the same reason."""
        try:
            if self.sock.fileno() < 0:
                return True
            poller = select.poll()  # not select(): it fails past file descriptor 1023
            poller.register(self.sock, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True

    def send(self, data: bytes, timeout: float | None) -> None:
        try:
            self.sock.settimeout(timeout)
            self.sock.sendall(data)
        except OSError as err:  # TimeoutError included: a peer not reading for that long
            self.close()
            raise Unsent(f"sending the request failed: {err}") from err

    # ------------------------------------------------------------------ reading

    def _reading(self, read: Callable[[int], bytes], size: int) -> bytes:
        """`read(size)` on the response stream, its failures named as this module's errors."""
        try:
            return read(size)
        except TimeoutError as err:
            raise ReadTimedOut(f"read timed out ({self.sock.gettimeout()} s)") from err
        except (OSError, ValueError) as err:
            raise ResponseFailed(f"the connection broke: {err}") from err

    def _line(self) -> bytes:
        line = self._reading(self.rfile.readline, MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise ResponseFailed(f"a line longer than {MAX_LINE} bytes: {line[:100]!r}")
        return line

    def _read(self, size: int) -> bytes:
        data = self._reading(self.rfile.read, size)
        if len(data) < size:
            raise ResponseFailed(f"the connection closed {size - len(data)} bytes short of the body")
        return data

    def _head_lines(self) -> list[bytes]:
        """The status line and header lines of a response, line ends removed. Usually the whole head
        is in the buffer already (one TLS record): cut it out at once; otherwise line by line."""
        buffered = self._reading(self.rfile.peek, MAX_LINE)
        if not buffered:
            raise ResponseFailed("the server closed the connection without answering")
        end = buffered.find(b"\r\n\r\n")
        if end >= 0:
            lines = self.rfile.read(end + 4)[:-4].split(b"\r\n")
            if len(lines) > MAX_HEADERS + 1:
                raise ResponseFailed(f"more than {MAX_HEADERS} headers")
            return lines
        lines = []
        while True:
            line = self._line()
            if line in (b"\r\n", b"\n"):
                return lines
            if not line:
                raise ResponseFailed("the connection closed in the middle of the headers" if lines
                                     else "the server closed the connection without answering")
            if len(lines) > MAX_HEADERS:
                raise ResponseFailed(f"more than {MAX_HEADERS} headers")
            lines.append(line.rstrip(b"\r\n"))

    def read_head(self, method: str) -> Response:
        """The status line and headers of the next response (1xx ones skipped)."""
        while True:
            lines = self._head_lines()
            line = lines[0]
            # "HTTP/1.1 200 OK": version, a space, three digits, then a space or the line's end
            if not (line.startswith(b"HTTP/1.") and line[8:9] == b" " and line[9:12].isdigit()
                    and line[12:13] in (b" ", b"")):
                raise ResponseFailed(f"malformed status line {line[:100]!r}")
            status = int(line[9:12])
            headers: dict[str, str] = {}
            for header in lines[1:]:
                name, sep, value = header.partition(b":")
                if not sep:
                    raise ResponseFailed(f"malformed header line {header[:100]!r}")
                key = _FRAMING.get(name.strip().lower())
                if key is not None:  # the rest (Audit-Id, Date, the flow-control UIDs...) is not read
                    text = value.strip().decode("latin-1")
                    headers[key] = f"{headers[key]}, {text}" if key in headers else text
            if 100 <= status < 200 and status != 101:
                continue  # 100 Continue and friends: the real answer follows
            return Response(self, method, status, line[5:8] == b"1.1", headers)


class Response:
    """A response whose head has been read (`headers`: the framing ones, lower-case names); its body
    is read once, whole (`read`) or in pieces (`chunks`). The connection goes back to its pool (or is closed) once the body has been read."""

    __slots__ = ("_conn", "status", "headers", "_length", "_chunked", "_keep_alive", "_decoder", "_done")

    def __init__(self, conn: Connection, method: str, status: int, http11: bool, headers: dict[str, str]) -> None:
        self._conn: Connection | None = conn
        self.status = status
        self.headers = headers
        connection = headers.get("connection", "").lower()
        self._keep_alive = ("close" not in connection) if http11 else ("keep-alive" in connection)
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._length: int | None = None
        if method == "HEAD" or status in (204, 304):
            self._length = 0
        elif not self._chunked and "content-length" in headers:
            try:
                self._length = int(headers["content-length"].split(",")[0])
            except ValueError:
                raise ResponseFailed(f"bad Content-Length {headers['content-length']!r}") from None
            if self._length < 0:
                raise ResponseFailed(f"bad Content-Length {headers['content-length']!r}")
        elif not self._chunked:
            self._keep_alive = False  # the body ends when the connection does
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            self._decoder: Any = zlib.decompressobj(47 if "gzip" in encoding else zlib.MAX_WBITS)
        elif encoding == "identity":
            self._decoder = None
        else:
            raise ResponseFailed(f"unsupported Content-Encoding {encoding!r}")
        self._done = False

    @property
    def connection(self) -> Connection | None:
        return self._conn

    def read(self) -> tuple[bytes, bool]:
        """The whole body, and whether the connection may carry another request."""
        conn = self._conn
        if conn is None:
            raise ValueError("the body was read already")
        if self._length is not None:
            body = conn._read(self._length) if self._length else b""
        else:
            body = b"".join(self._raw_chunks(conn))
        self._done = True
        if self._decoder is not None:
            body = self._decoder.decompress(body) + self._decoder.flush()
        return body, self._keep_alive

    def chunks(self) -> Iterator[bytes]:
        """The body as it arrives: a chunk of the chunked coding, or what one read returns. Raises
        ReadTimedOut or ResponseFailed; ends at the body's end."""
        conn = self._conn
        if conn is None:
            raise ValueError("the body was read already")
        decoder = self._decoder
        if self._chunked:
            pieces = self._raw_chunks(conn)
        elif self._length is not None:
            pieces = self._sized(conn, self._length)
        else:
            pieces = self._to_eof(conn)
        for piece in pieces:
            if decoder is not None:
                piece = decoder.decompress(piece)
                if not piece:
                    continue
            yield piece
        self._done = True

    def _raw_chunks(self, conn: Connection) -> Iterator[bytes]:
        if not self._chunked:
            yield from self._to_eof(conn)
            return
        while True:
            line = conn._line()
            if not line:
                raise ResponseFailed("the connection closed in the middle of a chunked body")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ResponseFailed(f"malformed chunk size line {line[:100]!r}") from None
            if size < 0:
                raise ResponseFailed(f"malformed chunk size line {line[:100]!r}")
            if size == 0:
                while (trailer := conn._line()) not in (b"\r\n", b"\n"):  # trailers, then the blank line
                    if not trailer:
                        raise ResponseFailed("the connection closed in a chunked body's trailers")
                return
            data = conn._read(size + 2)
            if data[-2:] != b"\r\n":
                raise ResponseFailed(f"a chunk of {size} bytes not followed by CRLF")
            yield data[:-2]

    @staticmethod
    def _sized(conn: Connection, length: int) -> Iterator[bytes]:
        left = length
        while left > 0:
            piece = _read1(conn, min(left, 65536))
            if not piece:
                raise ResponseFailed(f"the connection closed {left} bytes short of the body")
            left -= len(piece)
            yield piece

    @staticmethod
    def _to_eof(conn: Connection) -> Iterator[bytes]:
        while piece := _read1(conn, 65536):
            yield piece

    def finished(self) -> bool:
        """The whole body was read and the connection may carry another request."""
        return self._done and self._keep_alive


def _read1(conn: Connection, size: int) -> bytes:
    return conn._reading(conn.rfile.read1, size)


class ConnectionPool:
    """Idle keep-alive connections to one endpoint, newest first, at most `maxsize` of them."""

    def __init__(self, endpoint: Endpoint, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize}")
        self.endpoint = endpoint
        self.maxsize = maxsize
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._generation = 0
        self.discarded = 0  # connections closed on return because the pool was full

    def get(self) -> Connection:
        """An idle connection that still looks alive, or a new one (ConnectFailed if it cannot be made)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
                generation = self._generation
            if conn is None:
                fresh = self.endpoint.connect()
                fresh.generation = generation
                return fresh
            if not conn.dropped():
                return conn
            conn.close()

    def put(self, conn: Connection) -> None:
        with self._lock:
            if conn.generation == self._generation and len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
            full = conn.generation == self._generation
            if full:
                self.discarded += 1
        conn.close()
        if full:
            log.warning("Connection pool is full, discarding connection: %s (maxsize %d)",
                        self.endpoint.host_header, self.maxsize)

    def clear(self) -> None:
        """Close the idle connections; those in use are closed when they come back."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
        for conn in idle:
            conn.close()
