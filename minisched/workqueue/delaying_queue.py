"""A work queue that can add an item later (client-go DelayingInterface.AddAfter).

Waiting items sit in a heap ordered by ready time; one thread sleeps on the queue's Clock until the
earliest is due and then adds it. Adding an item that is already waiting keeps the earlier time.
"""

from __future__ import annotations

import heapq
import itertools
import threading

from minisched.clock import Clock
from minisched.workqueue.metrics import MetricsProvider
from minisched.workqueue.queue import Queue, T

# The waiting loop wakes at least this often even when nothing is waiting (client-go: 10 s).
MAX_WAIT = 10.0


class DelayingQueue(Queue[T]):
    def __init__(
        self, name: str = "", *, clock: Clock | None = None, metrics_provider: MetricsProvider | None = None
    ) -> None:
        super().__init__(name, clock=clock, metrics_provider=metrics_provider)
        self._wait_cond = threading.Condition()
        self._heap: list[tuple[float, int, T]] = []
        self._waiting: dict[T, tuple[float, int]] = {}  # item -> (ready time, seq) of its live heap entry
        self._seq = itertools.count()
        self._loop_stopped = False  # guarded by _wait_cond, so the loop never takes the queue's lock inside it
        self._loop = threading.Thread(target=self._waiting_loop, name=f"workqueue-delay-{name}", daemon=True)
        self._loop.start()

    def add_after(self, item: T, delay: float) -> None:
        """Add `item` after `delay` seconds on the queue's clock (at once if delay <= 0)."""
        if self.shutting_down():
            return
        self._metrics.retry()
        if delay <= 0:
            self.add(item)
            return
        with self._wait_cond:
            ready = self._clock.monotonic() + delay
            current = self._waiting.get(item)
            if current is not None and current[0] <= ready:
                return
            seq = next(self._seq)
            self._waiting[item] = (ready, seq)
            heapq.heappush(self._heap, (ready, seq, item))  # a superseded entry is skipped when popped
            self._wait_cond.notify()

    def waiting(self) -> int:
        """How many items are waiting for their time to come."""
        with self._wait_cond:
            return len(self._waiting)

    def next_ready_in(self) -> float | None:
        """Seconds until the earliest waiting item is due, or None."""
        with self._wait_cond:
            if not self._waiting:
                return None
            return min(ready for ready, _ in self._waiting.values()) - self._clock.monotonic()

    def _on_shut_down(self) -> None:
        with self._wait_cond:
            self._loop_stopped = True
            self._wait_cond.notify_all()

    def _waiting_loop(self) -> None:
        while True:
            with self._wait_cond:
                if self._loop_stopped:
                    return
                now = self._clock.monotonic()
                due: list[T] = []
                while self._heap and self._heap[0][0] <= now:
                    ready, seq, item = heapq.heappop(self._heap)
                    if self._waiting.get(item) == (ready, seq):
                        del self._waiting[item]
                        due.append(item)
            # Added outside _wait_cond: add() takes the queue's lock, and no path holds both.
            for item in due:
                self.add(item)
            with self._wait_cond:
                if self._loop_stopped:
                    return
                timeout = self._heap[0][0] - self._clock.monotonic() if self._heap else MAX_WAIT
                if timeout > 0:
                    self._clock.wait(self._wait_cond, timeout)
