"""One producer and one consumer through a `RingBuffer`, as chapter 2.4 runs them: each side spins
on a full (or empty) ring, yielding the GIL with `time.sleep(0)`, and counts how often it had to.
A tiny ring makes both sides meet "full" and "empty" thousands of times; the run shows that every
item still arrives, once, in order."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from minisched.concurrency.ringbuffer import RingBuffer


@dataclass
class SpscRun:
    received: list[int] = field(default_factory=list)
    found_full: int = 0    # times the producer's try_put met a full ring
    found_empty: int = 0   # times the consumer's try_get met an empty ring

    def in_order(self, items: int) -> bool:
        return self.received == list(range(items))


def run_spsc(items: int = 50_000, capacity: int = 16) -> SpscRun:
    """Put 0..items-1 through a ring of `capacity` slots from one thread, take them in another."""
    if items < 0:
        raise ValueError(f"run_spsc: items must be >= 0, got {items}")
    ring: RingBuffer[int] = RingBuffer(capacity)
    run = SpscRun()

    def produce() -> None:
        for i in range(items):
            while not ring.try_put(i):
                run.found_full += 1
                time.sleep(0)  # yield the GIL to the consumer

    def consume() -> None:
        while len(run.received) < items:
            ok, item = ring.try_get()
            if ok:
                run.received.append(item)  # type: ignore[arg-type]
            else:
                run.found_empty += 1
                time.sleep(0)

    threads = [threading.Thread(target=consume), threading.Thread(target=produce)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return run
