"""Waiting on real threads in tests, with a deadline so a bug fails the test instead of hanging it."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(cond: Callable[[], bool], timeout: float = 3.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.005)


def stays(cond: Callable[[], bool], duration: float = 0.15) -> bool:
    """True if cond() holds for the whole of `duration` real seconds (to check nothing happens)."""
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        if not cond():
            return False
        time.sleep(0.005)
    return True
