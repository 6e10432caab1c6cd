"""Small test helpers for chapters 4 and 5."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from minisched.clock import VirtualClock


def eventually(cond: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
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


Resting = int | Callable[[], int]


def _await_rest(clock: VirtualClock, resting: Resting, timeout: float = 30.0) -> None:
    # On a loaded machine a thread may still be inside a slow real call (a real API server's
    # answer); moving virtual time past its deadlines then would test the machine's load, not
    # the code. Wait (in real time, bounded) until the threads the test expects are resting.
    expected = resting if isinstance(resting, int) else None
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if clock.resting() >= (expected if expected is not None else resting()):  # type: ignore[operator]
            return
        time.sleep(0.001)


def drive(clock: VirtualClock, seconds: float, *, step: float = 0.25, settle: float = 0.003,
          resting: Resting = 0) -> None:
    """Move virtual time forward in small steps, letting real threads react between steps (and,
    with `resting`, until that many threads sleep on the clock)."""
    end = clock.now() + seconds
    while clock.now() < end - 1e-9:
        time.sleep(settle)
        _await_rest(clock, resting)
        clock.advance(min(step, end - clock.now()))
    time.sleep(settle)


def drive_until(clock: VirtualClock, cond: Callable[[], bool], *, limit: float, step: float = 0.25,
                what: str = "condition", resting: Resting = 0) -> float:
    """Advance virtual time until cond() holds; return the virtual seconds it took."""
    start = clock.now()
    while not cond():
        if clock.now() - start > limit:
            raise AssertionError(f"{what} did not happen within {limit} virtual seconds")
        time.sleep(0.003)
        _await_rest(clock, resting)
        clock.advance(step)
    return clock.now() - start


def alive_threads(*holders: object) -> Callable[[], int]:
    """How many of these candidates' threads are still running (for drive's `resting`)."""
    def count() -> int:
        return sum(1 for h in holders if (t := getattr(h, "thread", None)) is not None and t.is_alive())
    return count
