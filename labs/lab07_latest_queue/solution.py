"""Lab 7, the instructor's solution."""

from __future__ import annotations

import collections
import threading
import time
from typing import Generic, TypeVar

T = TypeVar("T")


class LatestQueue(Generic[T]):
    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"a queue needs room for at least one item, got maxsize={maxsize}")
        self.maxsize = maxsize
        self._items: collections.deque[T] = collections.deque()
        self._cond = threading.Condition()
        self.accepted = 0
        self.dropped = 0

    def offer(self, item: T) -> bool:
        with self._cond:
            full = len(self._items) >= self.maxsize
            if full:
                self._items.popleft()  # the oldest goes: the newest is worth more
                self.dropped += 1
            self._items.append(item)
            self.accepted += 1
            self._cond.notify()
            return not full

    def get(self, timeout: float | None = None) -> T | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._items:
                if deadline is None:
                    self._cond.wait()
                    continue
                remaining = deadline - time.monotonic()  # from the deadline: wake-ups do not reset it
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)
            return self._items.popleft()

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)


def new(maxsize: int) -> LatestQueue[object]:
    return LatestQueue(maxsize)
