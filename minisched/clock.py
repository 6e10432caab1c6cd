"""Clocks: real time, or a virtual clock that only moves when told to.

Everything in minisched that waits or stamps times (work queue delays, scheduler backoff, lease
renewals, the embedded server's timestamps) takes a `Clock`, as Kubernetes code takes
k8s.io/utils/clock. Tests and notebooks use `VirtualClock` so that a 10-second backoff takes no
real time and every run prints the same timestamps.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Wall time in seconds since the epoch (used for timestamps)."""
        ...

    def monotonic(self) -> float:
        """A clock that never goes back (used for durations and deadlines)."""
        ...

    def sleep(self, seconds: float) -> None: ...

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        """Like cond.wait(timeout) (the caller holds cond), with the timeout on this clock.
        Returns False if the timeout passed. Spurious wake-ups are allowed: callers loop."""
        ...


class RealClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        return cond.wait(timeout)


class VirtualClock:
    """Time stands still until `advance()` (or `set()`) moves it.

    Threads sleeping or waiting on this clock wake when it passes their deadline. `monotonic()` and
    `now()` move together. Starts at 2026-01-01T00:00:00Z unless told otherwise, so timestamps in
    notebook output are stable.
    """

    DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC).timestamp()

    def __init__(self, start: float | None = None) -> None:
        self._now = self.DEFAULT_START if start is None else start
        self._lock = threading.Lock()
        self._seq = itertools.count()
        # (deadline, seq, condition to notify)
        self._waiters: list[tuple[float, int, threading.Condition]] = []
        # Callers poll wait() in a loop; one registration per (deadline, condition) keeps the heap small.
        self._registered: set[tuple[float, int]] = set()
        # Threads inside sleep()/wait() now: a test driver advances time only once every thread it
        # expects has come to rest on the clock (a thread busy in a slow real call has not).
        self._resting = 0

    def now(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        return self.now()

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go back: advance({seconds})")
        with self._lock:
            target = self._now + seconds
        self.set(target)

    def set(self, when: float) -> None:
        with self._lock:
            if when < self._now:
                raise ValueError("a clock cannot go back")
            self._now = when
            due: list[threading.Condition] = []
            while self._waiters and self._waiters[0][0] <= when:
                deadline, _, cond = heapq.heappop(self._waiters)
                self._registered.discard((deadline, id(cond)))
                due.append(cond)
        for cond in due:
            with cond:
                cond.notify_all()

    def has_waiters(self) -> bool:
        with self._lock:
            return bool(self._waiters)

    def next_deadline(self) -> float | None:
        """When the earliest sleeper wakes (lets a driver jump straight to it)."""
        with self._lock:
            return self._waiters[0][0] if self._waiters else None

    def resting(self) -> int:
        """How many threads are sleeping or waiting on this clock right now."""
        with self._lock:
            return self._resting

    def _rest(self, delta: int) -> None:
        with self._lock:
            self._resting += delta

    def sleep(self, seconds: float) -> None:
        cond = threading.Condition()
        deadline = self.now() + max(seconds, 0.0)
        self._rest(1)
        try:
            with cond:
                while self.now() < deadline:
                    self._register(deadline, cond)
                    cond.wait(0.05)
        finally:
            self._rest(-1)

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        self._rest(1)
        try:
            if timeout is None:
                cond.wait()
                return True
            deadline = self.now() + max(timeout, 0.0)
            if self.now() >= deadline:
                return False
            self._register(deadline, cond)
            # A short real-time cap guards against a notify lost between _register and wait.
            cond.wait(0.05)
            return self.now() < deadline
        finally:
            self._rest(-1)

    def _register(self, deadline: float, cond: threading.Condition) -> None:
        with self._lock:
            if (deadline, id(cond)) in self._registered:
                return
            self._registered.add((deadline, id(cond)))
            heapq.heappush(self._waiters, (deadline, next(self._seq), cond))


def pause_unless_stopped(clock: Clock, wake: threading.Condition, stop: threading.Event, seconds: float) -> None:
    """Sleep `seconds` on `clock` (virtual or real), returning at once when `stop` is set and
    `wake` notified: a loop thread's pause between rounds that shutdown can cut short."""
    deadline = clock.monotonic() + seconds
    with wake:
        while not stop.is_set():
            left = deadline - clock.monotonic()
            if left <= 0:
                return
            clock.wait(wake, left)


def run_for(clock: VirtualClock, seconds: float, *, step: float = 0.25, pause: float = 0.01) -> None:
    """Move `clock` on by `seconds` in steps of `step`, with `pause` of real time before each step:
    threads sleeping on the clock (electors, back-offs, resyncs) wake and act between steps, as they
    would while real time passed. A step that does not divide `seconds` is an error (the clock
    would end elsewhere than asked)."""
    if step <= 0 or seconds < 0:
        raise ValueError(f"run_for needs seconds >= 0 and step > 0, got seconds={seconds}, step={step}")
    steps = round(seconds / step)
    if abs(steps * step - seconds) > 1e-9:
        raise ValueError(f"run_for: step {step} s does not divide {seconds} s")
    for _ in range(steps):
        time.sleep(pause)
        clock.advance(step)
    time.sleep(2 * pause)  # let the last step's wake-ups finish before the caller looks


def wait_until(condition: Callable[[], object], what: str, *, timeout: float = 60.0,
               clock: VirtualClock | None = None, step: float = 0.0, pause: float = 0.01) -> None:
    """Return once `condition()` is true; raise TimeoutError naming `what` after `timeout` seconds of
    real time. With `clock` and `step`, virtual time moves on by `step` each poll, for conditions
    that need it (a pod backing off on the virtual clock is tried again only when it moves)."""
    if step and clock is None:
        raise ValueError("wait_until: step needs the clock to advance")
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:g} s for {what}")
        if clock is not None and step:
            clock.advance(step)
        time.sleep(pause)


def rfc3339(ts: float) -> str:
    """A timestamp as the API server writes it: second resolution, UTC, trailing Z."""
    return _rfc3339_seconds(int(ts))


@lru_cache(maxsize=64)
def _rfc3339_seconds(seconds: int) -> str:
    # every write stamps one or more of these, mostly the same second as the last one (strftime
    # costs ~5 µs a call)
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(ts: float) -> str:
    """MicroTime, as in Lease.spec.renewTime and events.k8s.io eventTime."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
