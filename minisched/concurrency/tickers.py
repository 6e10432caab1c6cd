"""Two tickers: one on absolute deadlines, one that sleeps a relative interval (Part II §2.3).

`RelativeTicker` is `while True: work(); sleep(period)`: every tick starts `period` after the
previous work ended, so the work's duration and every oversleep add up: after n ticks it is
n·(work + oversleep) behind. `AbsoluteTicker` computes tick k's deadline as start + k·period, as
Go's time.Ticker does, so lateness does not accumulate; a tick that could not be delivered in time
is skipped, not bunched (Go's ticker channel has a buffer of one and drops the rest).

Both take a `Clock`; `sleep` defaults to the clock's, and a simulation on a `VirtualClock` passes
`sleep=clock.advance` to move time itself from a single thread.
"""

from __future__ import annotations

import math
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from minisched.clock import Clock, RealClock
from minisched.concurrency.dropping import DroppingQueue

__all__ = ["AbsoluteTicker", "MeasuredDrops", "RelativeTicker", "TickRun", "measure_ticker_drops", "run_ticks"]

FloatArray = npt.NDArray[np.float64]


class RelativeTicker:
    def __init__(self, period: float, clock: Clock | None = None, *, sleep: Callable[[float], None] | None = None):
        if period <= 0:
            raise ValueError(f"a ticker period must be positive, got {period}")
        self.period = period
        self.clock = clock or RealClock()
        self._sleep = sleep or self.clock.sleep
        self.start = self.clock.monotonic()
        self.skipped = 0  # never skips: it only ever falls behind

    def wait(self) -> float:
        """Sleep one period from now; returns when this tick was due (now, by definition)."""
        self._sleep(self.period)
        return self.clock.monotonic()


class AbsoluteTicker:
    def __init__(self, period: float, clock: Clock | None = None, *, sleep: Callable[[float], None] | None = None):
        if period <= 0:
            raise ValueError(f"a ticker period must be positive, got {period}")
        self.period = period
        self.clock = clock or RealClock()
        self._sleep = sleep or self.clock.sleep
        self.start = self.clock.monotonic()
        self._k = 0
        self.skipped = 0

    def wait(self) -> float:
        """Sleep until the next deadline start + k·period; returns that deadline. If more than a
        whole period has passed since the last due tick, the ticks in between are skipped."""
        self._k += 1
        now = self.clock.monotonic()
        deadline = self.start + self._k * self.period
        if now - deadline >= self.period:
            behind = math.floor((now - deadline) / self.period)
            self._k += behind
            self.skipped += behind
            deadline = self.start + self._k * self.period
        delay = deadline - self.clock.monotonic()
        if delay > 0:
            self._sleep(delay)
        return deadline


@dataclass(frozen=True)
class TickRun:
    period: float
    start: float
    fired: FloatArray  # when each tick's work began (clock.monotonic())
    skipped: int

    @property
    def drift(self) -> float:
        """How far the last tick is behind the ideal schedule start + n·period, counting skipped
        ticks as ticks (so a ticker that skips is on schedule)."""
        n = len(self.fired) + self.skipped
        return float(self.fired[-1] - (self.start + n * self.period))

    @property
    def intervals(self) -> FloatArray:
        return np.diff(np.concatenate([[self.start], self.fired]))


def run_ticks(ticker: AbsoluteTicker | RelativeTicker, ticks: int, work: Callable[[], None]) -> TickRun:
    """Fire `ticks` ticks, calling `work()` on each; records when each tick's work began."""
    if ticks < 1:
        raise ValueError(f"run at least one tick, got {ticks}")
    fired = np.empty(ticks, np.float64)
    for i in range(ticks):
        ticker.wait()
        fired[i] = ticker.clock.monotonic()
        work()
    return TickRun(ticker.period, ticker.start, fired, ticker.skipped)


@dataclass(frozen=True)
class MeasuredDrops:
    offered: int
    dropped: int
    served: int
    busy_seconds: float  # the consumer's measured time in service, summed
    seconds: float  # wall-clock length of the run

    @property
    def drop_fraction(self) -> float:
        return self.dropped / self.offered if self.offered else 0.0

    @property
    def load(self) -> float:
        """Offered load as it really was: measured mean service time / mean time between offers
        (sleeps overshoot, so this is a little above the load asked for)."""
        if not self.served or not self.offered:
            return 0.0
        return (self.busy_seconds / self.served) / (self.seconds / self.offered)


def measure_ticker_drops(period: float, service_mean: float, buffer: int, ticks: int, *, seed: int = 0) -> MeasuredDrops:
    """The book's §2.3 loop for real: an `AbsoluteTicker` thread offers one item per tick to a
    `DroppingQueue(buffer)` (never blocking), and a consumer thread serves each item by waiting an
    exponential time of mean `service_mean` (`time.sleep`: a consumer waiting on an API call,
    which releases the GIL). Counts what was offered, dropped and served. Takes about
    `ticks * period` seconds."""
    if period <= 0 or service_mean <= 0 or ticks < 1:
        raise ValueError(f"need period > 0, service_mean > 0 and ticks >= 1, got {period}, {service_mean}, {ticks}")
    q: DroppingQueue[int] = DroppingQueue(buffer)
    rng = random.Random(seed)
    services = [rng.expovariate(1 / service_mean) for _ in range(ticks)]  # drawn up front: no RNG in the timing
    done = threading.Event()
    busy = [0.0, 0]

    def consume() -> None:
        while True:
            try:
                item = q.get(timeout=0.05)
            except queue.Empty:
                if done.is_set():
                    return
                continue
            started = time.perf_counter()
            time.sleep(services[item])
            busy[0] += time.perf_counter() - started
            busy[1] += 1

    consumer = threading.Thread(target=consume, name="ticker-consumer", daemon=True)
    consumer.start()
    ticker = AbsoluteTicker(period)
    for i in range(ticks):
        ticker.wait()
        q.offer(i)
    seconds = time.monotonic() - ticker.start
    done.set()
    consumer.join()
    return MeasuredDrops(q.offered, q.dropped, int(busy[1]), busy[0], seconds)
