"""Lab 6, the instructor's solution."""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from minisched.observability.metrics import exponential_buckets

DEFAULT_BUCKETS = exponential_buckets(1e-5, 2, 16)  # 10 µs .. 0.33 s


class LatencyHistogram:
    def __init__(self, buckets: Sequence[float] = DEFAULT_BUCKETS) -> None:
        bounds = tuple(float(b) for b in buckets)
        if not bounds or not all(math.isfinite(b) and b > 0 for b in bounds) or \
                any(b <= a for a, b in zip(bounds, bounds[1:], strict=False)):
            raise ValueError(f"buckets must be positive upper bounds in increasing order, got {list(buckets)}")
        self.buckets = bounds
        self._lock = threading.Lock()
        self._counts = np.zeros(len(bounds) + 1, np.int64)  # the last is +Inf
        self._sum = 0.0
        self._children: dict[tuple[tuple[str, str], ...], LatencyHistogram] = {}

    def observe(self, seconds: float) -> None:
        i = bisect.bisect_left(self.buckets, seconds)  # the first bound >= seconds (len: +Inf)
        with self._lock:
            self._counts[i] += 1
            self._sum += seconds

    def counts(self) -> npt.NDArray[np.int64]:
        with self._lock:
            return self._counts.copy()

    @property
    def count(self) -> int:
        with self._lock:
            return int(self._counts.sum())

    @property
    def sum(self) -> float:
        with self._lock:
            return self._sum

    def quantile(self, q: float) -> float:
        if not 0 < q <= 1:
            raise ValueError(f"a quantile q must be in (0, 1], got {q}")
        counts = self.counts()
        total = int(counts.sum())
        if total == 0:
            raise ValueError("no measurements yet: a quantile of nothing")
        rank = q * total
        cumulative = np.cumsum(counts)
        b = int(np.searchsorted(cumulative, rank, side="left"))  # the first bucket reaching rank
        if b >= len(self.buckets):
            return self.buckets[-1]  # in +Inf: the highest finite bound is all we know
        lower = self.buckets[b - 1] if b > 0 else 0.0
        below = int(cumulative[b - 1]) if b > 0 else 0
        return lower + (self.buckets[b] - lower) * (rank - below) / int(counts[b])

    def labels(self, **labels: str) -> LatencyHistogram:
        key = tuple(sorted((k, str(v)) for k, v in labels.items()))
        with self._lock:
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = LatencyHistogram(self.buckets)
            return child


def new(buckets: Sequence[float] = DEFAULT_BUCKETS) -> LatencyHistogram:
    return LatencyHistogram(buckets)
