"""Lab 4 starter: fill in FullJitterRateLimiter (see README.md)."""

from __future__ import annotations

import random
from collections.abc import Hashable


class FullJitterRateLimiter:
    def __init__(self, base_delay: float, max_delay: float, rng: random.Random) -> None:
        self.base_delay, self.max_delay, self.rng = base_delay, max_delay, rng

    def when(self, item: Hashable) -> float:
        raise NotImplementedError("when")  # your code here

    def forget(self, item: Hashable) -> None:
        raise NotImplementedError("forget")  # your code here

    def num_requeues(self, item: Hashable) -> int:
        raise NotImplementedError("num_requeues")  # your code here


def new(base_delay: float = 0.005, max_delay: float = 1000.0, rng: random.Random | None = None) -> FullJitterRateLimiter:
    return FullJitterRateLimiter(base_delay, max_delay, rng or random.Random())
