"""A bounded queue that drops what does not fit, and counts it (Part II §2.3).

Go writes this as a buffered channel and a select with a default branch:

    select {
    case ch <- task:
    default:
        dropped++        // the channel is full: drop, never block the ticker
    }

`DroppingQueue` is that for threads (queue.Queue underneath), `AsyncDroppingQueue` for asyncio
(asyncio.Queue underneath). Both count what they accepted and what they dropped, so the drop policy
can be measured, and both keep their counters under a lock (correct on a free-threaded build too).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["AsyncDroppingQueue", "DroppingQueue"]


class DroppingQueue(Generic[T]):
    """At most `maxsize` items wait; `offer` never blocks: a full queue drops the new item."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"a dropping queue needs room for at least one item, got maxsize={maxsize}")
        self.maxsize = maxsize
        self._q: queue.Queue[T] = queue.Queue(maxsize)
        self._lock = threading.Lock()
        self.accepted = 0
        self.dropped = 0

    def offer(self, item: T) -> bool:
        """Enqueue if there is room; False (and one more drop counted) if the queue is full."""
        try:
            self._q.put_nowait(item)
        except queue.Full:
            with self._lock:
                self.dropped += 1
            return False
        with self._lock:
            self.accepted += 1
        return True

    def get(self, timeout: float | None = None) -> T:
        """The oldest item, waiting up to `timeout` seconds (None: forever); queue.Empty on timeout."""
        return self._q.get(timeout=timeout)

    def get_nowait(self) -> T:
        return self._q.get_nowait()

    def __len__(self) -> int:
        return self._q.qsize()

    @property
    def offered(self) -> int:
        return self.accepted + self.dropped

    @property
    def drop_fraction(self) -> float:
        return self.dropped / self.offered if self.offered else 0.0


class AsyncDroppingQueue(Generic[T]):
    """The same policy for one event loop (not thread-safe, as asyncio.Queue is not)."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"a dropping queue needs room for at least one item, got maxsize={maxsize}")
        self.maxsize = maxsize
        self._q: asyncio.Queue[T] = asyncio.Queue(maxsize)
        self.accepted = 0
        self.dropped = 0

    def offer(self, item: T) -> bool:
        try:
            self._q.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1
            return False
        self.accepted += 1
        return True

    async def get(self) -> T:
        return await self._q.get()

    def __len__(self) -> int:
        return self._q.qsize()

    @property
    def offered(self) -> int:
        return self.accepted + self.dropped

    @property
    def drop_fraction(self) -> float:
        return self.dropped / self.offered if self.offered else 0.0
