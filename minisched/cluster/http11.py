"""A lean HTTP/1.1 client for RealCluster: keep-alive connections over TCP or TLS, requests written
as bytes, responses parsed only as far as the framing needs.

Why not urllib3 (the Python client's HTTP library, which RealCluster used before): measured against
a local kube-apiserver, a bind cost ~650 µs of client CPU through urllib3 and http.client, of which
the socket reads and writes (TLS included) were ~75 µs; the rest was building the request through
putrequest/putheader and parsing every response's headers with the email package
(bench/realclient_bench.py; bench/README.md, "Client CPU per call"). This module does what the API
server's answers need and no more:

- the head is cut out of the read buffer at its blank line and checked with one compiled regex a
  line (the status line and header grammar of RFC 9112 §4 and §5, as h11 checks them);
- bodies framed by Content-Length, chunked transfer coding, or the end of the connection, chosen
  as RFC 9112 §6.3 says; what that section calls an error (conflicting Content-Length, a transfer
  coding other than chunked, Transfer-Encoding in an HTTP/1.0 answer, a chunk not ended by CRLF,
  a body cut short) is one, never a guess at the body;
- a connection is reused only after a complete response that allows it (HTTP/1.1 without
  `Connection: close`, HTTP/1.0 with `keep-alive`, not both Transfer-Encoding and Content-Length),
  and checked before reuse: one the server closed while idle (readable or at EOF) is dropped, as
  urllib3's is_connection_dropped does;
- a replayable request (GET, HEAD, OPTIONS, TRACE, or one with an Idempotency-Key) whose reused
  connection broke before the first byte of the answer (the server closed it as it went idle, just
  as the request went out) is sent again once on a new connection, as Go's net/http transport does
  (shouldRetryRequest); any other request is not: the server may have acted on it;
- failures come back as exceptions that RealCluster maps onto minisched.errors:
  `ConnectFailed` (TCP or TLS never established: nothing sent, safe to retry any method),
  `Unsent` (writing the request failed: the server cannot have a complete request, safe to retry),
  `ReadTimedOut` (no answer within the read timeout: the server may have acted) and
  `ResponseFailed` (the connection broke after the request was sent, or the answer is not HTTP/1.x;
  `NoResponse` when not one byte of it came), each message naming what was wrong.

Pool semantics are urllib3's, which RealCluster relied on: idle connections are kept up to
`maxsize` and reused newest first; past it a connection is closed when returned (counted in
`discarded`, with a warning); `clear()` closes the idle ones, and connections in use at that moment
are closed when they come back instead of being pooled.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
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
_PIECE = 1 << 20  # bodies are read at most this much at a time: a huge Content-Length or chunk size
# announces bytes that may never come, so nothing is allocated for them up front
# The headers a response is parsed for: how its body is framed and whether the connection stays open.
_FRAMING = {name.encode(): name for name in ("content-length", "transfer-encoding", "connection", "content-encoding")}
# RFC 9112's grammar, as h11 (the reference the tests compare with) spells it: a status line with an
# optional reason, `token ":" OWS field-value OWS`, a chunk size of at most 20 hex digits.
_BLANK_LINE = re.compile(rb"\n\r?\n")  # the end of a head; bare LF line ends are tolerated (RFC 9112 §2.2)
_STATUS_LINE = re.compile(rb"HTTP/([0-9]\.[0-9]) ([0-9]{3})(?: [^\x00\n\r\x0b\x0c]*)?")
# `token ":" OWS [field-value] OWS` accepts exactly the strings `token ":"` then visible characters,
# obs-text, spaces and tabs (no NUL, CR, LF, VT or FF): one character class, no backtracking.
_FIELD_LINE = rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+:[^\x00\n\r\x0b\x0c]*"
_HEADER_LINE = re.compile(_FIELD_LINE)
_HEADER_LINES = re.compile(rb"(?:%s\n)*%s" % (_FIELD_LINE, _FIELD_LINE))  # all at once: one regex call a head
# The fields read, pulled out of a checked block (lines joined by LF) by one scan rather than a loop
# over every line: the rest (Audit-Id, Date, the flow-control UIDs...) is not read.
_FRAMING_FIELDS = re.compile(
    rb"^(content-length|transfer-encoding|connection|content-encoding):[ \t]*(.*?)[ \t]*$", re.IGNORECASE | re.MULTILINE)
_CHUNK_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;[^\n]*)?[ \t]*\r\n")
_CONTENT_LENGTH = re.compile(r"[0-9]{1,20}")
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})  # Go's Request.isReplayable
_IDEMPOTENCY_KEY = re.compile(rb"\r\n(?:x-)?idempotency-key:", re.IGNORECASE)


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


class NoResponse(ResponseFailed):
    """The connection ended (closed or reset) before the first byte of the answer."""


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
        return Connection(sock, endpoint=self)


def _match_hostname(sock: Any, name: str) -> None:
    from urllib3.util.ssl_match_hostname import match_hostname

    match_hostname(sock.getpeercert(), name)


class Connection:
    """One keep-alive connection. Not thread-safe: one request at a time, by whoever holds it."""

    __slots__ = ("sock", "rfile", "generation", "used", "endpoint", "_request", "_timeout")

    def __init__(self, sock: socket.socket, generation: int = 0, endpoint: Endpoint | None = None) -> None:
        self.sock = sock
        self.rfile: io.BufferedReader = sock.makefile("rb", buffering=65536)  # type: ignore[assignment]
        self.generation = generation
        self.used = False  # carried a response before (set by the pool): only then can it be stale
        self.endpoint = endpoint  # where a replayable request goes again (None: never re-sent)
        self._request: bytes | None = None  # the request in flight, kept until its answer's head is read
        self._timeout: float | None = None

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
        self._request, self._timeout = data, timeout
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

    def _line(self, where: str) -> bytes:
        """One whole line, its LF included; `where` names the part of the response for the errors."""
        line = self._reading(self.rfile.readline, MAX_LINE + 1)
        if line[-1:] != b"\n":
            if len(line) > MAX_LINE:
                raise ResponseFailed(f"a line longer than {MAX_LINE} bytes in {where}: {line[:100]!r}")
            raise ResponseFailed(f"the connection closed in the middle of {where}")
        return line

    def _read(self, size: int, where: str = "the body") -> bytes:
        """Exactly `size` bytes (read in pieces of at most _PIECE: nothing is reserved for bytes
        that have not come)."""
        if size <= _PIECE:
            data = self._reading(self.rfile.read, size)
            if len(data) < size:
                raise ResponseFailed(f"the connection closed {size - len(data)} bytes short of {where}")
            return data
        pieces = []
        left = size
        while left:
            want = min(left, _PIECE)
            piece = self._reading(self.rfile.read, want)
            if len(piece) < want:
                raise ResponseFailed(f"the connection closed {left - len(piece)} bytes short of {where}")
            pieces.append(piece)
            left -= want
        return b"".join(pieces)

    def _head_lines(self) -> list[bytes]:
        """The status line and header lines of a response, line ends removed. Usually the whole head
        is in the buffer already (one TLS record): cut it out at once; otherwise line by line."""
        try:
            buffered = self.rfile.peek(MAX_LINE)
        except TimeoutError as err:
            raise ReadTimedOut(f"read timed out ({self.sock.gettimeout()} s)") from err
        except (OSError, ValueError) as err:
            raise NoResponse(f"the connection broke before the answer began: {err}") from err
        if not buffered:
            raise NoResponse("the server closed the connection without answering")
        if buffered[:1] == b"\n" or buffered[:2] == b"\r\n":
            raise ResponseFailed("the response starts with a blank line where the status line belongs")
        lines = None
        if (end := buffered.find(b"\r\n\r\n")) >= 0:  # the usual head: every line ends in CRLF
            lines = buffered[:end].split(b"\r\n")
            if len(lines) - 1 == buffered.count(b"\n", 0, end):
                self.rfile.read(end + 4)
            else:
                lines = None  # a bare LF: where the head ends is for the regex to say
        if lines is None and (blank := _BLANK_LINE.search(buffered)) is not None:
            head = self.rfile.read(blank.end())[:blank.start()]  # up to the last line's LF
            lines = _split_lines(head[:-1] if head[-1:] == b"\r" else head)
        if lines is not None:
            if len(lines) > MAX_HEADERS + 1:
                raise ResponseFailed(f"more than {MAX_HEADERS} headers")
            return lines
        lines = []
        while (line := self._line("the headers" if lines else "the status line")) not in (b"\r\n", b"\n"):
            if len(lines) > MAX_HEADERS:
                raise ResponseFailed(f"more than {MAX_HEADERS} headers")
            lines.append(line[:-2] if line[-2:] == b"\r\n" else line[:-1])
        if not lines:
            raise ResponseFailed("the response starts with a blank line where the status line belongs")
        return lines

    def read_head(self, method: str) -> Response:
        """The status line and headers of the next response (1xx ones skipped). A replayable request
        whose reused connection ended before the answer began is sent once more on a new one."""
        try:
            lines = self._head_lines()
        except NoResponse as err:
            if not self._replayable(method):
                raise
            log.debug("Sending %s again on a new connection: %s", method, err)
            self._reconnect()
            lines = self._head_lines()
        self._request = None
        while True:
            line = lines[0]
            match = _STATUS_LINE.fullmatch(line)
            if match is None:
                raise ResponseFailed(f"malformed status line {line[:100]!r}")
            version, status = match[1], int(match[2])
            if version not in (b"1.1", b"1.0"):
                raise ResponseFailed(f"unsupported HTTP version in the status line {line[:100]!r}")
            if status < 100:
                raise ResponseFailed(f"status code {match[2].decode()} out of range (100-999) in {line[:100]!r}")
            headers = _header_fields(lines[1:], "header")
            if status == 101:  # no request of ours asks for an Upgrade
                raise ResponseFailed("101 Switching Protocols, but the request asked for no protocol switch")
            if status >= 200:
                return Response(self, method, status, version == b"1.1", headers)
            lines = self._head_lines()  # 100 Continue and friends: the real answer follows

    def _replayable(self, method: str) -> bool:
        """Go's persistConn.shouldRetryRequest for an error reading the first byte of the answer:
        the connection was reused (a new one the server hangs up on is not retried: it may not like
        the request) and the request may be sent twice (Request.isReplayable; our body is bytes,
        always there to send again)."""
        request = self._request
        if not self.used or self.endpoint is None or request is None:
            return False
        if method in _IDEMPOTENT:
            return True
        head_end = request.find(b"\r\n\r\n")
        return _IDEMPOTENCY_KEY.search(request, 0, head_end if head_end >= 0 else len(request)) is not None

    def _reconnect(self) -> None:
        """Replace the broken socket with a new connection to the same endpoint and send the request
        on it (ConnectFailed or Unsent if that fails)."""
        assert self.endpoint is not None and self._request is not None
        fresh = self.endpoint.connect()
        self.close()
        self.sock, self.rfile, self.used = fresh.sock, fresh.rfile, False
        self.send(self._request, self._timeout)


def _split_lines(head: bytes) -> list[bytes]:
    """A head's lines where some end in a bare LF: each line's CR before the LF removed, as h11 does."""
    return [line[:-1] if line[-1:] == b"\r" else line for line in head.split(b"\n")]


def _header_fields(lines: list[bytes], kind: str) -> dict[str, str]:
    """The framing fields of a header (or trailer) section, every line checked against RFC 9112's
    field-line grammar (an obs-fold continuation joined to its line with a space, §5.2); repeated
    fields joined with ", "; Content-Length and Transfer-Encoding checked (`kind`: the section's name)."""
    if not lines:
        return {}
    block = b"\n".join(lines)
    if b"\n " in block or b"\n\t" in block or block[:1] in (b" ", b"\t"):
        lines = _unfold(lines, kind)
        block = b"\n".join(lines)
    if _HEADER_LINES.fullmatch(block) is None:
        bad = next(line for line in lines if _HEADER_LINE.fullmatch(line) is None)
        raise ResponseFailed(f"malformed {kind} line {bad[:100]!r}")
    fields: dict[str, str] = {}
    for name, value in _FRAMING_FIELDS.findall(block):
        key = _FRAMING[name.lower()]
        text = value.decode("latin-1")
        if key not in fields:
            fields[key] = text
        elif key == "transfer-encoding":
            raise ResponseFailed(f"more than one Transfer-Encoding {kind}")
        else:
            fields[key] = f"{fields[key]}, {text}"
    if "content-length" in fields:
        fields["content-length"] = _content_length(fields["content-length"])
    if "transfer-encoding" in fields:
        if fields["transfer-encoding"].lower() != "chunked":  # the one coding we (and h11) decode
            raise ResponseFailed(f"unsupported Transfer-Encoding {fields['transfer-encoding']!r}: only chunked")
        fields["transfer-encoding"] = "chunked"
    return fields


def _unfold(lines: list[bytes], kind: str) -> list[bytes]:
    unfolded: list[bytes] = []
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            if not unfolded:
                raise ResponseFailed(f"a continuation line at the start of the {kind}s: {line[:100]!r}")
            unfolded[-1] += b" " + line.lstrip(b" \t")
        else:
            unfolded.append(line)
    return unfolded


def _content_length(value: str) -> str:
    """The one length a Content-Length field (or several, or a list) gives, as RFC 9112 §6.3 allows:
    repeats of one number; different numbers are conflicting, anything else is bad."""
    if value.isascii() and value.isdigit() and len(value) <= 20:  # the usual one: no list, no spaces
        return value
    lengths = {length.strip(" \t") for length in value.split(",")}
    if len(lengths) != 1:
        raise ResponseFailed(f"conflicting Content-Length {value!r}")
    length = lengths.pop()
    if _CONTENT_LENGTH.fullmatch(length) is None:
        raise ResponseFailed(f"bad Content-Length {value!r}")
    return length


class Response:
    """A response whose head has been read (`headers`: the framing ones, lower-case names); its body
    is read once, whole (`read`) or in pieces (`chunks`). The connection goes back to its pool (or is
    closed) once the body has been read."""

    __slots__ = ("_conn", "status", "headers", "_length", "_chunked", "_keep_alive", "_decoder", "_done")

    def __init__(self, conn: Connection, method: str, status: int, http11: bool, headers: dict[str, str]) -> None:
        self._conn: Connection | None = conn
        self.status = status
        self.headers = headers
        if "connection" in headers:
            connection = {token.strip(" \t").lower() for token in headers["connection"].split(",")}
            self._keep_alive = "close" not in connection and (http11 or "keep-alive" in connection)
        else:
            self._keep_alive = http11
        chunked = "transfer-encoding" in headers
        self._chunked = False
        self._length: int | None = None
        if chunked and not http11:  # RFC 9112 §6.1: an HTTP/1.0 message's framing is then faulty
            raise ResponseFailed("an HTTP/1.0 response with Transfer-Encoding: its framing is faulty")
        if method == "HEAD" or status in (204, 304):  # no body, whatever the headers say (§6.3)
            self._length = 0
        elif chunked:
            self._chunked = True
            if "content-length" in headers:  # Transfer-Encoding wins; both may be a smuggling attempt
                self._keep_alive = False
        elif "content-length" in headers:
            self._length = int(headers["content-length"])
        else:
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
        """The connection the body is still to be read from; None once reading it began."""
        return self._conn

    def _take(self) -> Connection:
        """The connection, once: a second read would take the next response's bytes for this body."""
        conn = self._conn
        if conn is None:
            raise ValueError("the body was read already")
        self._conn = None
        return conn

    def read(self) -> tuple[bytes, bool]:
        """The whole body, and whether the connection may carry another request."""
        conn = self._take()
        if self._length is not None:
            body = conn._read(self._length) if self._length else b""
        else:
            body = b"".join(self._raw_chunks(conn))
        if self._decoder is not None:
            try:
                body = self._decoder.decompress(body) + self._decoder.flush()
            except zlib.error as err:
                raise ResponseFailed(f"the body is not valid {self.headers['content-encoding']}: {err}") from None
            self._check_complete()
        self._done = True
        return body, self._keep_alive

    def chunks(self) -> Iterator[bytes]:
        """The body as it arrives: a chunk of the chunked coding, or what one read returns. Raises
        ReadTimedOut or ResponseFailed; ends at the body's end."""
        return self._pieces(self._take())

    def _pieces(self, conn: Connection) -> Iterator[bytes]:
        decoder = self._decoder
        if self._chunked:
            pieces = self._raw_chunks(conn)
        elif self._length is not None:
            pieces = self._sized(conn, self._length)
        else:
            pieces = self._to_eof(conn)
        for piece in pieces:
            if decoder is not None:
                try:
                    piece = decoder.decompress(piece)
                except zlib.error as err:
                    raise ResponseFailed(f"the body is not valid {self.headers['content-encoding']}: {err}") from None
                if not piece:
                    continue
            yield piece
        if decoder is not None:
            self._check_complete()
        self._done = True

    def _check_complete(self) -> None:
        if not self._decoder.eof:  # zlib returns what it has of a cut stream without a word
            raise ResponseFailed(f"the {self.headers['content-encoding']} body ends before its compressed stream does")

    def _raw_chunks(self, conn: Connection) -> Iterator[bytes]:
        if not self._chunked:
            yield from self._to_eof(conn)
            return
        while True:
            line = conn._line("a chunked body")
            match = _CHUNK_SIZE_LINE.fullmatch(line)
            if match is None:
                raise ResponseFailed(f"malformed chunk size line {line[:100]!r}")
            size = int(match[1], 16)
            if size == 0:
                trailers: list[bytes] = []  # checked as headers are, then dropped: nothing here reads them
                while (trailer := conn._line("a chunked body's trailers")) not in (b"\r\n", b"\n"):
                    if len(trailers) >= MAX_HEADERS:
                        raise ResponseFailed(f"more than {MAX_HEADERS} trailers")
                    trailers.append(trailer[:-2] if trailer[-2:] == b"\r\n" else trailer[:-1])
                if trailers:
                    _header_fields(trailers, "trailer")
                return
            data = conn._read(size, f"a chunk of {size} bytes")
            if conn._read(2, f"the CRLF after a chunk of {size} bytes") != b"\r\n":
                raise ResponseFailed(f"a chunk of {size} bytes not followed by CRLF")
            yield data

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
                conn.used = True
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
