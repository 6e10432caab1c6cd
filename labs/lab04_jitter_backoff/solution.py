"""Lab 4, the instructor's solution."""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Hashable


class FullJitterRateLimiter:
    def __init__(self, base_delay: float, max_delay: float, rng: random.Random) -> None:
        if base_delay < 0:
            raise ValueError(f"base_delay must not be negative, got {base_delay}")
        if max_delay < 0:
            raise ValueError(f"max_delay must not be negative, got {max_delay}")
        self.base_delay, self.max_delay, self.rng = base_delay, max_delay, rng
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            n = self._failures.get(item, 0)
            self._failures[item] = n + 1
            try:  # base·2ⁿ exactly (ldexp); past the float range it overflows, and only the cap is left
                grown = math.ldexp(self.base_delay, n)
            except OverflowError:
                grown = math.inf
            bound = min(self.max_delay, grown)
            return bound * self.rng.random()

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


def new(base_delay: float = 0.005, max_delay: float = 1000.0, rng: random.Random | None = None) -> FullJitterRateLimiter:
    return FullJitterRateLimiter(base_delay, max_delay, rng or random.Random())
