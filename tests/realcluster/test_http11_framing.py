"""How minisched.cluster.http11 reads responses, byte for byte, with no server: a replayed byte
stream delivered in the pieces a test chooses (so a head or a chunk can be split across reads).

Pinned: RFC 9112's framing rules where responses go wrong (a leading blank line, conflicting or bad
Content-Length, transfer codings other than chunked, Transfer-Encoding with Content-Length or in
HTTP/1.0, bad chunk size lines and chunk ends, bodies cut short, obs-fold, 1xx and 101, bodies of
HEAD/204/304, bare-LF heads) each raise the module's own error naming the problem; then a
differential test: over generated responses, valid and malformed, several on one connection and
split at arbitrary read boundaries, http11 agrees with h11 wherever h11 accepts and raises its own
error wherever h11 rejects."""

from __future__ import annotations

import gzip
import io
from collections.abc import Sequence

import h11
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minisched.cluster import http11


class _Replay(io.RawIOBase):
    """A raw stream that returns the given pieces, at most one per read, then EOF."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self._pieces = [piece for piece in pieces if piece]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if not self._pieces:
            return 0
        piece = self._pieces[0]
        size = min(len(buffer), len(piece))
        buffer[:size] = piece[:size]
        if size < len(piece):
            self._pieces[0] = piece[size:]
        else:
            self._pieces.pop(0)
        return size


class _ReplaySocket:
    """What Connection uses of a socket, the answer replayed from pieces."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self._raw = _Replay(pieces)

    def makefile(self, mode: str, buffering: int) -> io.BufferedReader:
        return io.BufferedReader(self._raw, buffering)

    def settimeout(self, timeout: float | None) -> None:
        pass

    def gettimeout(self) -> float | None:
        return None

    def sendall(self, data: bytes) -> None:
        pass

    def fileno(self) -> int:
        return -1

    def close(self) -> None:
        pass


def _connection(*pieces: bytes) -> http11.Connection:
    return http11.Connection(_ReplaySocket(pieces))  # type: ignore[arg-type]


def _read(*pieces: bytes, method: str = "GET") -> tuple[int, bytes, bool]:
    response = _connection(*pieces).read_head(method)
    body, reusable = response.read()
    return response.status, body, reusable


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@pytest.mark.parametrize(("pieces", "error"), [
    # The head
    ((b"\r\n" + OK,), "starts with a blank line"),
    ((b"\r\n", OK), "starts with a blank line"),  # was an IndexError
    ((b"\n", OK), "starts with a blank line"),
    ((b"\r\n\r\n" + OK,), "starts with a blank line"),
    ((b"HTTP/1.1 200 OK\x00\r\nContent-Length: 0\r\n\r\n",), "malformed status line"),
    ((b"HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n",), "status code 099 out of range"),
    ((b"HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n",), "unsupported HTTP version"),
    ((b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",), "101 Switching Protocols"),
    ((b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",), "malformed header line"),  # no space before ':'
    ((b"HTTP/1.1 200 OK\r\n: 2\r\n\r\nok",), "malformed header line"),
    ((b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok",), "malformed header line"),
    ((b"HTTP/1.1 200 OK\r\n Content-Length: 2\r\n\r\nok",), "continuation line at the start"),
    ((b"HTTP/1.1 200 OK\r\nContent-Length: 2", b"\r\nX-A: b\r\n"), "closed in the middle of the headers"),
    ((b"HTTP/1.1 200 OK\r\nX: " + b"x" * 70000 + b"\r\n\r\n",), "a line longer than 65536 bytes"),
    # Content-Length
    ((b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!",), "conflicting Content-Length '2, 3'"),
    ((b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok!",), "conflicting Content-Length"),
    ((b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",), "bad Content-Length '\\+2'"),
    ((b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\n0123456789",), "bad Content-Length"),
    ((b"HTTP/1.1 200 OK\r\nContent-Length: 2\xa0\r\n\r\nok",), "bad Content-Length"),
    ((b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",), "bad Content-Length"),
    ((b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nok",), "closed 99999999999999999997 bytes short"),
    ((b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok",), "closed 3 bytes short of the body"),
    ((b"HTTP/1.1 204 No Content\r\nContent-Length: x\r\n\r\n",), "bad Content-Length"),  # checked, then ignored
    # Transfer-Encoding
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",), "unsupported Transfer-Encoding"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunkedx\r\n\r\n0\r\n\r\n",), "unsupported Transfer-Encoding"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",),
     "more than one Transfer-Encoding"),
    ((b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",), "HTTP/1.0 response with Transfer"),
    # Chunked bodies
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n",), "malformed chunk size line"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\n0123456789abcdef\r\n0\r\n\r\n",),
     "malformed chunk size line"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n 2\r\nok\r\n0\r\n\r\n",), "malformed chunk size line"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 ;x=1\r\nok\r\n0\r\n\r\n",), "malformed chunk size line"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n",), "malformed chunk size line"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\nok\r\n0\r\n\r\n",), "malformed chunk size line"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 21 + b"\r\n",), "malformed chunk size line"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX0\r\n\r\n",), "not followed by CRLF"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\n0\r\n\r\n",), "not followed by CRLF"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n",), "closed in the middle of a chunked body"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2",), "closed in the middle of a chunked body"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nok",), "closed 3 bytes short of a chunk of 5"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 20 + b"\r\nok",), "bytes short of a chunk"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n",), "in the middle of a chunked body's trailers"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nbad trailer\r\n\r\n",), "malformed trailer line"),
    ((b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 1, 2\r\n\r\n",),
     "conflicting Content-Length"),
    # Content-Encoding
    ((b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 10\r\n\r\n" + gzip.compress(b"{}" * 50)[:10],),
     "gzip body ends before its compressed stream"),
    ((b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nnope",), "not valid gzip"),
])
def test_a_malformed_response_is_a_clear_error(pieces: tuple[bytes, ...], error: str) -> None:
    with pytest.raises(http11.ResponseFailed, match=error):
        _read(*pieces)


@pytest.mark.parametrize(("pieces", "method", "expected"), [
    # bare LF line ends (RFC 9112 §2.2); a CRLF CRLF later in the body is not the head's end
    ((b"HTTP/1.1 200 OK\nContent-Length: 4\n\n\r\n\r\n",), "GET", (200, b"\r\n\r\n", True)),
    ((b"HTTP/1.1 200 OK\r\nContent-Length: 2\n\r\nok",), "GET", (200, b"ok", True)),
    # obs-fold joined with a space (RFC 9112 §5.2), and a Content-Length repeated with one value
    ((b"HTTP/1.1 200 OK\r\nX-A: 1\r\n\t2\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",), "GET", (200, b"ok", True)),
    # 1xx answers skipped; a chunk extension, trailers; a head and a chunk split across reads
    ((b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK,), "POST", (200, b"ok", True)),
    ((b"HTTP/1.1 200 OK\r\nTransfer-", b"Encoding: Chunked\r", b"\n\r\n2;a=\"b c\"\r\no", b"k\r\n0\r\nX-T: 1\r\n\r\n"),
     "GET", (200, b"ok", True)),
    # Transfer-Encoding wins over Content-Length, and the connection is not reused (a smuggling sign)
    ((b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",), "GET",
     (200, b"ok", False)),
    # no body for HEAD, 204 and 304, whatever the framing headers say
    ((b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",), "HEAD", (200, b"", True)),
    ((b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",), "DELETE", (204, b"", True)),
    ((b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",), "GET", (304, b"", True)),
    # Connection tokens, HTTP/1.0 keep-alive, and a body that ends with the connection
    ((b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok",), "GET", (200, b"ok", False)),
    ((b"HTTP/1.1 200 OK\r\nConnection: x-close-x\r\nContent-Length: 2\r\n\r\nok",), "GET", (200, b"ok", True)),
    ((b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok",), "GET", (200, b"ok", True)),
    ((b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",), "GET", (200, b"ok", False)),
    ((b"HTTP/1.1 200 OK\r\n\r\nto the", b" end"), "GET", (200, b"to the end", False)),
    ((b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok",), "GET", (200, b"ok", True)),  # no reason phrase
])
def test_well_formed_responses_read_as_rfc_9112_frames_them(
        pieces: tuple[bytes, ...], method: str, expected: tuple[int, bytes, bool]) -> None:
    assert _read(*pieces, method=method) == expected


def test_each_response_is_read_once_and_the_next_one_is_left_for_the_next_request() -> None:
    conn = _connection(OK + b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope")
    first = conn.read_head("GET")
    assert first.read() == (b"ok", True)
    with pytest.raises(ValueError, match="the body was read already"):
        first.read()  # used to return the next response's head and body as this one's
    with pytest.raises(ValueError, match="the body was read already"):
        first.chunks()
    second = conn.read_head("GET")
    assert (second.status, second.read()) == (404, (b"nope", True))


def test_a_head_or_no_content_answer_streams_no_body_and_leaves_the_next_response() -> None:
    conn = _connection(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", OK,
                       b"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n", OK)
    assert list(conn.read_head("HEAD").chunks()) == []
    assert conn.read_head("GET").read() == (b"ok", True)
    assert list(conn.read_head("GET").chunks()) == []
    assert conn.read_head("GET").read() == (b"ok", True)


# ---------------------------------------------------------------------------------- against h11

_FRAMING = ("content-length", "transfer-encoding", "connection")


def _h11_answers(data: bytes, splits: list[int], methods: list[str]) -> list[tuple[int, dict[str, str], bytes, bool] | None]:
    """What h11 makes of `data` fed in the pieces `splits` cut, as the answers to `methods` one
    after another: (status, framing headers, body, reusable) each, None for the one it rejects;
    the list stops there, or at a response after which the connection cannot be reused."""
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=1 << 20)
    pieces = [data[a:b] for a, b in zip([0, *splits], [*splits, len(data)], strict=True)] + [b""]
    answers: list[tuple[int, dict[str, str], bytes, bool] | None] = []
    for method in methods:
        conn.send(h11.Request(method=method, target="/", headers=[("Host", "h")]))
        conn.send(h11.EndOfMessage())
        status, headers, body, closed = 0, {}, b"", False
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    if not pieces:
                        raise h11.RemoteProtocolError("no more data")
                    closed = not pieces[0]  # b"": the end of the stream, which may end this body
                    conn.receive_data(pieces.pop(0))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                    for name in _FRAMING:
                        values = [value.decode("latin-1") for key, value in event.headers if key == name.encode()]
                        if values:
                            headers[name] = ", ".join(values)
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise h11.RemoteProtocolError("closed before a response")
        except h11.ProtocolError:
            answers.append(None)
            return answers
        reusable = conn.their_state is h11.DONE and not closed
        answers.append((status, headers, body, reusable))
        if not reusable:
            return answers
        conn.start_next_cycle()
    return answers


_BREAKS = ("version", "status", "reason", "blank line first", "header name", "header value", "space before colon",
           "fold first", "length off", "length conflicting", "length format", "coding", "coding and length",
           "chunk size", "chunk end", "last chunk", "trailer", "byte", "cut")
_NAMES = ["Audit-Id", "X-Kubernetes-Pf-Flowschema-Uid", "Content-Type", "Connection", "Cache-Control", "x-a"]
_VALUES = ["", "v", "a b", " padded\t", "x\x01y", "\xe4", "\xa0", "application/json", "keep-alive", "close",
           "Keep-Alive, Close", "x-close-y"]


@st.composite
def _response(draw: st.DrawFn, last: bool) -> tuple[bytes, str]:
    """One response's bytes and the method it answers: well formed, or broken in one drawn way
    (`last`: the final response on the connection, whose body may run to its end)."""
    broken = draw(st.sampled_from((None,) * len(_BREAKS) + _BREAKS))
    method = draw(st.sampled_from(["GET", "GET", "POST", "HEAD"]))
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.0"]))
    status = draw(st.sampled_from(["200", "200", "201", "404", "500", "204", "304"]))
    reason = draw(st.sampled_from([" OK", " OK", "", " ", " Not \tFound", " x\x01\xff"]))
    if broken == "version":
        version = draw(st.sampled_from(["HTTP/2.0", "HTTP/1.2", "http/1.1", "HTTP/1", "HTTP/1.1 ", "ICY"]))
    elif broken == "status":
        status = draw(st.sampled_from(["099", "20", "2000", "2O0", "101", ""]))
    elif broken == "reason":
        reason = draw(st.sampled_from([" x\x00", " a\rb", " a\x0bb", "OK"]))
    eol = draw(st.sampled_from(["\r\n", "\r\n", "\n"]))
    headers = [f"{name}:{draw(st.sampled_from(['', ' ']))}{value}"
               for name, value in draw(st.lists(st.tuples(st.sampled_from(_NAMES), st.sampled_from(_VALUES)), max_size=3))]
    framing = draw(st.sampled_from(["length", "length", "chunked", "chunked"] + (["to the end"] if last else [])))
    body = draw(st.binary(max_size=12))
    payload = body
    if framing == "length":
        declared = draw(st.sampled_from([str(len(body)), f"{len(body)}, {len(body)}", f"0{len(body)}"]))
        if broken == "length off":
            declared = str(len(body) + draw(st.sampled_from([-1, 1, 2])))
        elif broken == "length conflicting":
            declared = f"{len(body)}, {len(body) + 1}"
        elif broken == "length format":
            declared = draw(st.sampled_from([f"+{len(body)}", f"0x{len(body)}", f"{len(body)}_0", f"{len(body)}\xa0",
                                             "", "-1", "1" * 21]))
        headers.append(f"Content-Length: {declared}")
        if broken == "length conflicting" and draw(st.booleans()):
            headers[-1] = f"Content-Length: {len(body)}"
            headers.append(f"Content-Length: {len(body) + 1}")
    elif framing == "chunked":
        coding = draw(st.sampled_from(["chunked", "Chunked", "CHUNKED"]))
        if broken == "coding":
            coding = draw(st.sampled_from(["gzip, chunked", "chunked, gzip", "identity", "xchunked", "chunked, chunked"]))
        headers.append(f"Transfer-Encoding: {coding}")
        if broken == "coding and length":
            headers.append(f"Content-Length: {draw(st.sampled_from([0, 3, 100]))}")
        payload = b""
        pieces = draw(st.lists(st.binary(min_size=1, max_size=5), max_size=3))
        bad_piece = draw(st.integers(0, max(0, len(pieces) - 1)))
        for index, piece in enumerate(pieces):
            size = draw(st.sampled_from([f"{len(piece):x}", f"{len(piece):X}", f"0{len(piece):x}", f"{len(piece):x};e=1",
                                         f"{len(piece):x};e=\"a b\"", f"{len(piece):x} "]))
            end = "\r\n"
            if index == bad_piece and broken == "chunk size":
                size = draw(st.sampled_from([f" {len(piece):x}", f"{len(piece):x} ;e", f"0x{len(piece):x}",
                                             f"{len(piece) + 1:x}", f"-{len(piece):x}", "", "g"]))
            elif index == bad_piece and broken == "chunk end":
                end = draw(st.sampled_from(["\n", "", "XX", "\r"]))
            payload += size.encode() + b"\r\n" + piece + end.encode()
        last_chunk = draw(st.sampled_from([b"0\r\n\r\n", b"0\r\nX-T: 1\r\n\r\n", b"0\r\nX-T: 1\n\n", b"0;e\r\n\r\n",
                                          b"000\r\n\r\n"]))
        if broken == "last chunk":
            last_chunk = draw(st.sampled_from([b"", b"0\r\n", b"0\r\nX-T: 1\r\n", b"0\n\n"]))
        elif broken == "trailer":
            last_chunk = draw(st.sampled_from([b"0\r\nbad\r\n\r\n", b"0\r\nContent-Length: 1, 2\r\n\r\n",
                                               b"0\r\n folded\r\n\r\n", b"0\r\nX-T : 1\r\n\r\n"]))
        payload += last_chunk
    if broken == "header name":
        headers.append(draw(st.sampled_from(["Bad Name: v", ": v", "X\x00: v", "[x]: v", "no colon"])))
    elif broken == "header value":
        headers.append(draw(st.sampled_from(["X-A: a\x00b", "X-A: a\rb", "X-A: a\x0cb"])))
    elif broken == "space before colon":
        headers.append(draw(st.sampled_from(["X-A : v", "Content-Length :0", "X-A\t: v"])))
    draw(st.randoms()).shuffle(headers)
    if draw(st.integers(0, 9)) == 0 and headers:  # an obs-fold continuation line (RFC 9112 §5.2)
        headers.insert(draw(st.integers(1, len(headers))), "\t folded")
    elif broken == "fold first":
        headers.insert(0, " folded")
    head = eol.join([f"{version} {status}{reason}", *headers]) + eol + eol
    if broken == "blank line first":
        head = eol + head
    if draw(st.integers(0, 9)) == 0:  # a 1xx answer first
        head = f"HTTP/1.1 {draw(st.sampled_from(['100 Continue', '103 Early Hints']))}{eol}{eol}" + head
    data = head.encode("latin-1") + payload
    if broken == "byte" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    elif broken == "cut" and data:
        data = data[:draw(st.integers(0, len(data) - 1))]
    return data, method


@st.composite
def _exchange(draw: st.DrawFn) -> tuple[bytes, list[int], list[str]]:
    count = draw(st.integers(1, 3))
    responses = [draw(_response(last=index == count - 1)) for index in range(count)]
    data = b"".join(data for data, _ in responses)
    splits = sorted(set(draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=6)))) if len(data) > 1 else []
    return data, splits, [method for _, method in responses]


def _ours(data: bytes, splits: list[int], methods: list[str]) -> list[tuple[int, dict[str, str], bytes, bool] | str]:
    """What http11 makes of the same: the answers, or the message of the error it raised for one."""
    conn = _connection(*[data[a:b] for a, b in zip([0, *splits], [*splits, len(data)], strict=True)])
    answers: list[tuple[int, dict[str, str], bytes, bool] | str] = []
    for method in methods:
        try:
            response = conn.read_head(method)
            body, reusable = response.read()
        except http11.HttpFailure as err:
            answers.append(str(err))
            return answers
        answers.append((response.status, {k: v for k, v in response.headers.items() if k in _FRAMING}, body, reusable))
        if not reusable:
            return answers
    return answers


# Where http11 rejects what h11 takes, on purpose: an HTTP version other than 1.0 and 1.1 (the API
# server speaks 1.1), and Transfer-Encoding in an HTTP/1.0 answer (RFC 9112 §6.1: its framing is faulty).
_STRICTER_BY_DESIGN = ("unsupported HTTP version", "an HTTP/1.0 response with Transfer-Encoding")


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_exchange())
def test_http11_reads_what_h11_reads_and_rejects_what_h11_rejects(exchange: tuple[bytes, list[int], list[str]]) -> None:
    data, splits, methods = exchange
    ours, theirs = _ours(data, splits, methods), _h11_answers(data, splits, methods)
    for index, (mine, reference) in enumerate(zip(ours, theirs, strict=False)):
        if reference is None:
            assert isinstance(mine, str), f"response {index}: h11 rejects it, http11 read {mine}"
            return
        if isinstance(mine, str):
            assert mine.startswith(_STRICTER_BY_DESIGN), f"response {index}: h11 reads {reference}, http11: {mine}"
            return
        status, headers, body, reusable = mine
        assert (status, headers, body) == reference[:3], f"response {index}"
        if reusable != reference[3]:
            # h11 keeps no HTTP/1.0 connection, Go's client and http11 honour `keep-alive`; and
            # http11 drops one whose answer had both Transfer-Encoding and Content-Length.
            assert (reusable and "keep-alive" in headers.get("connection", "").lower()) or (
                not reusable and "transfer-encoding" in headers and "content-length" in reference[1]), f"response {index}"
            return
    assert len(ours) == len(theirs) or isinstance(ours[-1], str) or theirs[-1] is None

