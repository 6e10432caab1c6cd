"""The TCP relay the fault tests put between minisched and the API server (no control plane needed)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from minisched.controlplane.relay import TcpRelay


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return

            def echo(c: socket.socket = conn) -> None:
                with c, contextlib.suppress(OSError):
                    while data := c.recv(65536):
                        c.sendall(data)

            threading.Thread(target=echo, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def _connect(relay: TcpRelay) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", relay.port), timeout=2)
    s.settimeout(1.0)
    return s


def test_forwards_then_black_holes_open_connections_but_not_new_ones(echo_port: int) -> None:
    with TcpRelay("127.0.0.1", echo_port) as relay:
        old = _connect(relay)
        old.sendall(b"hello")
        assert old.recv(100) == b"hello"
        assert relay.black_hole() == 1
        old.sendall(b"anyone?")
        with pytest.raises(TimeoutError):  # silence: no data, no FIN, no RST
            old.recv(100)
        new = _connect(relay)
        new.sendall(b"fresh")
        assert new.recv(100) == b"fresh"
        old.close()
        new.close()


def test_cut_resets_every_connection_and_refuse_resets_new_ones(echo_port: int) -> None:
    with TcpRelay("127.0.0.1", echo_port) as relay:
        conn = _connect(relay)
        conn.sendall(b"x")
        assert conn.recv(10) == b"x"
        assert relay.cut() == 1
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            conn.sendall(b"y")
            conn.recv(10)
            conn.sendall(b"z")
        relay.refuse(True)
        with pytest.raises((ConnectionResetError, BrokenPipeError, TimeoutError)):
            refused = _connect(relay)
            refused.sendall(b"y")
            if not refused.recv(10):
                raise ConnectionResetError
        relay.refuse(False)
        ok = _connect(relay)
        ok.sendall(b"back")
        assert ok.recv(10) == b"back"
