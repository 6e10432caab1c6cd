"""Child processes that never outlive us: own process group, terminate then kill, atexit backstop."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

_live: set[ManagedProcess] = set()
_live_lock = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the child binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


class ProcessFailed(RuntimeError):
    """A component exited or did not become ready; the message includes the tail of its log."""


class ManagedProcess:
    """One component, its output in a log file, in its own process group so stop() gets everything."""

    def __init__(
        self, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        # The port it serves on (health, metrics), when the harness gave it one.
        self.port: int | None = None
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._log.write(("$ " + " ".join(self.argv) + "\n").encode())
        self._log.flush()
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: killpg reaches any children too
            preexec_fn=_die_with_parent,
        )
        with _live_lock:
            _live.add(self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def fail(self, what: str) -> ProcessFailed:
        state = f"exited with code {self.popen.returncode}" if not self.running() else "still running"
        return ProcessFailed(
            f"{self.name} {what} ({state}); log {self.log_path}, last lines:\n{self.log_tail()}"
        )

    def wait_until(self, check: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> None:
        """Poll `check` until true; fail early if the process dies, with its log tail."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                raise self.fail(f"exited before {what}")
            try:
                if check():
                    return
            except Exception:  # noqa: BLE001 - not ready yet (connection refused, TLS not up...)
                pass
            if time.monotonic() > deadline:
                raise self.fail(f"not {what} within {timeout:.0f}s")
            time.sleep(interval)
            interval = min(interval * 1.5, 1.0)

    def kill(self) -> None:
        """SIGKILL the process group at once (a crash, for fault tests), and wait for it."""
        try:
            _signal_group(self.popen.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=10)
        finally:
            self._log.close()
            with _live_lock:
                _live.discard(self)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after `grace` seconds. Idempotent."""
        try:
            if self.running():
                _signal_group(self.popen.pid, signal.SIGTERM)
                try:
                    self.popen.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    _signal_group(self.popen.pid, signal.SIGKILL)
                    self.popen.wait(timeout=10)
            # Children that ignored the leader's exit still share its group id.
            _signal_group(self.popen.pid, signal.SIGKILL)
        finally:
            self._log.close()
            with _live_lock:
                _live.discard(self)


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGKILL it when its parent dies.

    atexit covers normal exits and exceptions; this covers the parent being killed outright (a
    SIGKILLed pytest, a closed terminal), which would otherwise leave etcd and the API server
    running. Linux counts the parent *thread*: start control planes from a long-lived thread."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@atexit.register
def _stop_all() -> None:
    """Backstop for an interpreter exiting without stopping its control plane (a crashed test run)."""
    with _live_lock:
        remaining = list(_live)
    for proc in remaining:
        proc.stop(grace=3.0)
