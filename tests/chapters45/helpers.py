"""Small test helpers for chapters 4 and 5."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from minisched.clock import VirtualClock


def eventually(cond: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Wait in real time for `cond` (other threads are working); fail with `what` if it never holds."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def run_in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, dict[str, object]]:
    """Start fn on a daemon thread; the dict gets "result" or "error" when it ends."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def wait_for_sleepers(clock: VirtualClock, timeout: float = 5.0) -> None:
    eventually(clock.has_waiters, timeout, "a thread to sleep on the virtual clock")
