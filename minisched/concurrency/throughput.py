"""Producer/consumer throughput of Python's queues and of `RingBuffer`, measured the same way.

One producer thread sends `items` integers, one consumer thread receives them all and checks the
order; the figure is items per second of wall time from start to the consumer's last item. The
waits are what each structure offers: queue.Queue and SimpleQueue block; deque and the ring buffer
have no blocking call, so their consumer (and the ring's producer when full) yields with
time.sleep(0), which under the GIL hands the interpreter to the other thread.
"""

from __future__ import annotations

import collections
import queue
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from minisched.concurrency.ringbuffer import RingBuffer

KINDS = ("queue.Queue", "queue.SimpleQueue", "collections.deque", "RingBuffer", "RingBuffer(batch 256)")


@dataclass(frozen=True)
class Measurement:
    kind: str
    items: int
    seconds: list[float]

    @property
    def median_rate(self) -> float:
        return self.items / statistics.median(self.seconds)

    @property
    def spread(self) -> tuple[float, float]:
        """(slowest, fastest) rate over the repeats."""
        return self.items / max(self.seconds), self.items / min(self.seconds)


def gil_enabled() -> bool:
    check = getattr(sys, "_is_gil_enabled", None)
    return True if check is None else bool(check())


def _pair(kind: str, items: int, capacity: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """(producer, consumer) functions for one run; the consumer asserts it got 0..items-1 in order."""

    def check(got: int, expected: int) -> None:
        if got != expected:
            raise AssertionError(f"{kind}: got item {got}, expected {expected}")

    if kind in ("queue.Queue", "queue.SimpleQueue"):
        q: queue.Queue[int] | queue.SimpleQueue[int] = (
            queue.Queue(capacity) if kind == "queue.Queue" else queue.SimpleQueue()
        )

        def produce() -> None:
            put = q.put
            for i in range(items):
                put(i)

        def consume() -> None:
            get = q.get
            for i in range(items):
                check(get(), i)

        return produce, consume
    if kind == "collections.deque":
        d: collections.deque[int] = collections.deque()

        def produce() -> None:
            append = d.append
            for i in range(items):
                append(i)

        def consume() -> None:
            popleft = d.popleft
            i = 0
            while i < items:
                try:
                    check(popleft(), i)
                    i += 1
                except IndexError:
                    time.sleep(0)

        return produce, consume
    if kind.startswith("RingBuffer"):
        ring: RingBuffer[int] = RingBuffer(capacity)
        batch = 256 if "batch" in kind else 0

        def produce() -> None:
            if batch:
                i = 0
                while i < items:
                    n = ring.put_many(range(i, min(i + batch, items)))
                    if n == 0:
                        time.sleep(0)
                    i += n
                return
            put = ring.try_put
            for i in range(items):
                while not put(i):
                    time.sleep(0)

        def consume() -> None:
            i = 0
            if batch:
                while i < items:
                    got = ring.get_many(batch)
                    if not got:
                        time.sleep(0)
                    for value in got:
                        check(value, i)
                        i += 1
                return
            get = ring.try_get
            while i < items:
                ok, got_one = get()
                if ok:
                    check(got_one, i)  # type: ignore[arg-type]  # ok means an int was returned
                    i += 1
                else:
                    time.sleep(0)

        return produce, consume
    raise ValueError(f"unknown queue kind {kind!r}; choose from {', '.join(KINDS)}")


def run_once(kind: str, items: int, capacity: int = 1024) -> float:
    """Seconds for one producer/consumer run of `items` items."""
    produce, consume = _pair(kind, items, capacity)
    errors: list[BaseException] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as error:  # reported to the caller below
                errors.append(error)

        return run

    consumer = threading.Thread(target=guarded(consume))
    producer = threading.Thread(target=guarded(produce))
    started = time.perf_counter()
    consumer.start()
    producer.start()
    producer.join()
    consumer.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed


def measure(kind: str, items: int, repeats: int = 3, capacity: int = 1024) -> Measurement:
    return Measurement(kind, items, [run_once(kind, items, capacity) for _ in range(repeats)])
