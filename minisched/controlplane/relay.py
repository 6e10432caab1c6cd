"""A TCP relay on loopback for fault tests: put it between a client and the API server, then break
the connections the ways networks break them.

    relay = TcpRelay("127.0.0.1", api_port).start()
    ... point the client at 127.0.0.1:relay.port (TLS passes through untouched) ...
    relay.black_hole()   # open connections stop carrying bytes, with no FIN and no RST
    relay.cut()          # open connections are reset (RST), as a restarted middlebox does
    relay.refuse(True)   # new connections are accepted and reset at once

`black_hole()` is the failure that only a deadline can notice: both ends still see an open, healthy
socket (the relay's kernel even acknowledges TCP keepalive probes), and nothing ever arrives. New
connections are forwarded normally, as after a NAT or conntrack entry is forgotten, so a client that
gives up on the dead connection and reconnects recovers at once.

One selector thread moves the bytes of every connection; it is a test tool, not a proxy to deploy.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
from dataclasses import dataclass, field

__all__ = ["TcpRelay"]


@dataclass(eq=False)
class _Pair:
    client: socket.socket
    upstream: socket.socket
    dead: bool = False  # black-holed: kept open, never read again
    reset: bool = False  # cut: the loop thread unregisters and resets it
    pending: dict[socket.socket, bytes] = field(default_factory=dict)


class TcpRelay:
    def __init__(self, target_host: str, target_port: int, *, listen_host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server((listen_host, port))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._refuse = False
        self._thread: threading.Thread | None = None
        self._after_sync: list[threading.Event] = []
        self.accepted = 0
        self.black_holed = 0
        self.cuts = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TcpRelay:
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._run, name=f"tcp-relay-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            _close(pair.client, reset=True)
            _close(pair.upstream, reset=True)
        with contextlib.suppress(OSError):
            self._listener.close()
        self._selector.close()

    def __enter__(self) -> TcpRelay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults ----------------------------------------------------------------------------------

    def open_connections(self) -> int:
        with self._lock:
            return sum(1 for p in self._pairs if not p.dead)

    def black_hole(self) -> int:
        """Stop moving bytes on every open connection, without closing any; returns how many."""
        with self._lock:
            live = [p for p in self._pairs if not p.dead]
            for pair in live:
                pair.dead = True
            self.black_holed += len(live)
        return len(live)

    def cut(self) -> int:
        """Reset every open connection (black-holed ones too); returns how many once they are reset."""
        with self._lock:
            for pair in self._pairs:
                pair.reset = True
            n = len(self._pairs)
            self.cuts += n
            done = threading.Event()
            self._after_sync.append(done)
        if self._thread is not None and self._thread.is_alive():
            done.wait(5)
        return n

    def refuse(self, refuse: bool = True) -> None:
        """While set, new connections are reset as soon as they are accepted."""
        self._refuse = refuse

    # -- the loop --------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sync_registrations()
            try:
                ready = self._selector.select(timeout=0.05)
            except (OSError, ValueError):
                continue
            for key, _ in ready:
                if key.data is None:
                    self._accept()
                else:
                    self._move(key.data, key.fileobj)  # type: ignore[arg-type]

    def _sync_registrations(self) -> None:
        """Unregister sockets of black-holed pairs (their bytes stay in the kernel) and reset cut
        ones. Only this thread closes sockets, so a closed socket never lingers in the selector."""
        with self._lock:
            reset = [p for p in self._pairs if p.reset]
            self._pairs = [p for p in self._pairs if not p.reset]
            live = {s for p in self._pairs if not p.dead for s in (p.client, p.upstream)}
            waiting, self._after_sync = self._after_sync, []
        for key in list(self._selector.get_map().values()):
            if key.data is not None and key.fileobj not in live:
                with contextlib.suppress(KeyError, ValueError, OSError):
                    self._selector.unregister(key.fileobj)
        for pair in reset:
            _close(pair.client, reset=True)
            _close(pair.upstream, reset=True)
        for done in waiting:
            done.set()

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        if self._refuse:
            _close(client, reset=True)
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            _close(client, reset=True)
            return
        for s in (client, upstream):
            s.setblocking(True)
            s.settimeout(5)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = _Pair(client, upstream)
        with self._lock:
            self._pairs.append(pair)
            self.accepted += 1
        self._selector.register(client, selectors.EVENT_READ, pair)
        self._selector.register(upstream, selectors.EVENT_READ, pair)

    def _move(self, pair: _Pair, source: socket.socket) -> None:
        if pair.dead:
            return
        target = pair.upstream if source is pair.client else pair.client
        try:
            data = source.recv(65536)
            if data:
                target.sendall(data)
                return
            # An orderly close on one side: pass it on and forget the pair.
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        with self._lock:
            if pair in self._pairs:
                self._pairs.remove(pair)
        for s in (pair.client, pair.upstream):
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(s)
        _close(pair.client, reset=False)
        _close(pair.upstream, reset=False)


def _close(sock: socket.socket, *, reset: bool) -> None:
    with contextlib.suppress(OSError):
        if reset:  # SO_LINGER 0: close sends RST instead of FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
