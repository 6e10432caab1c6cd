"""The basic work queue (client-go util/workqueue Type): a FIFO of keys with two guarantees.

1. Dedup: a key added many times before a worker takes it is processed once (the `dirty` set).
2. One worker per key: a key being processed (the `processing` set) is not handed to a second
   worker. If it is added again meanwhile, it is only marked dirty, and `done()` puts it back.

Controllers queue keys ("namespace/name"), not objects: the worker reads the current object from
the informer's store, so whatever happened in between is seen at once (level-based).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from minisched.clock import Clock, RealClock
from minisched.workqueue.metrics import MetricsProvider, QueueMetrics

T = TypeVar("T", bound=Hashable)

# How often unfinished_work_seconds and longest_running_processor_seconds are refreshed.
UNFINISHED_WORK_UPDATE_PERIOD = 0.5


class Queue(Generic[T]):
    """A deduplicating FIFO work queue.

    Workers loop::

        while True:
            item, shutdown = q.get()
            if shutdown:
                return
            try:
                process(item)
            finally:
                q.done(item)
    """

    def __init__(
        self, name: str = "", *, clock: Clock | None = None, metrics_provider: MetricsProvider | None = None
    ) -> None:
        self.name = name
        self._clock: Clock = clock or RealClock()
        self._cond = threading.Condition()
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()  # waiting to be processed (queued, or re-added while processing)
        self._processing: set[T] = set()  # handed to a worker, done() not called yet
        self._shutting_down = False
        self._drain = False
        self._metrics = QueueMetrics(name, metrics_provider, self._clock)
        if self._metrics.enabled:
            threading.Thread(
                target=self._update_unfinished_work_loop, name=f"workqueue-metrics-{name}", daemon=True
            ).start()

    def add(self, item: T) -> None:
        """Queue `item` unless it is already waiting. Ignored after shut_down()."""
        with self._cond:
            if self._shutting_down or item in self._dirty:
                return
            self._metrics.add(item)
            self._dirty.add(item)
            if item in self._processing:
                return  # done() re-queues it, so one key never runs on two workers
            self._queue.append(item)
            self._cond.notify()

    def get(self) -> tuple[T | None, bool]:
        """Block until an item is available; return (item, False). After shut_down(), queued items
        are still returned; once the queue is empty, returns (None, True)."""
        with self._cond:
            while not self._queue and not self._shutting_down:
                self._cond.wait()
            if not self._queue:
                return None, True
            item = self._queue.popleft()
            self._metrics.get(item)
            self._processing.add(item)
            self._dirty.discard(item)
            return item, False

    def done(self, item: T) -> None:
        """The worker finished `item`. If it was added again meanwhile, it is queued now."""
        with self._cond:
            self._metrics.done(item)
            self._processing.discard(item)
            if item in self._dirty:
                self._queue.append(item)
                self._cond.notify()
            elif not self._processing:
                self._cond.notify_all()  # wakes shut_down_with_drain()

    def shut_down(self) -> None:
        """Stop accepting items; get() drains what is queued, then reports shutdown."""
        with self._cond:
            self._drain = False
            self._shutting_down = True
            self._cond.notify_all()
        self._on_shut_down()

    def shut_down_with_drain(self) -> None:
        """shut_down(), then wait until every item handed to a worker is done(). Items still
        queued are not waited for (as in client-go). A concurrent shut_down() ends the wait."""
        with self._cond:
            self._drain = True
            self._shutting_down = True
            self._cond.notify_all()
        self._on_shut_down()
        with self._cond:
            while self._processing and self._drain:
                self._cond.wait()

    def _on_shut_down(self) -> None:
        """Called once shutting down, without the queue's lock held (subclasses stop threads)."""

    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    def __len__(self) -> int:
        """Items waiting to be handed out (not counting those being processed)."""
        with self._cond:
            return len(self._queue)

    def processing(self) -> int:
        with self._cond:
            return len(self._processing)

    def _update_unfinished_work_loop(self) -> None:
        with self._cond:
            while not self._shutting_down:
                self._clock.wait(self._cond, UNFINISHED_WORK_UPDATE_PERIOD)
                self._metrics.update_unfinished_work()
