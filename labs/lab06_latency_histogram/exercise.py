"""Lab 6 starter: fill in LatencyHistogram (see README.md)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from minisched.observability.metrics import exponential_buckets

DEFAULT_BUCKETS = exponential_buckets(1e-5, 2, 16)  # 10 µs .. 0.33 s


class LatencyHistogram:
    def __init__(self, buckets: Sequence[float] = DEFAULT_BUCKETS) -> None:
        self.buckets = tuple(float(b) for b in buckets)  # check them here
        self._lock = threading.Lock()
        # your fields here: the counts (one per bucket, and +Inf), the sum, labels()' children

    def observe(self, seconds: float) -> None:
        raise NotImplementedError("observe")  # your code here

    def counts(self) -> npt.NDArray[np.int64]:
        raise NotImplementedError("counts")  # your code here

    @property
    def count(self) -> int:
        raise NotImplementedError("count")  # your code here

    @property
    def sum(self) -> float:
        raise NotImplementedError("sum")  # your code here

    def quantile(self, q: float) -> float:
        raise NotImplementedError("quantile")  # your code here

    def labels(self, **labels: str) -> LatencyHistogram:
        raise NotImplementedError("labels")  # your code here


def new(buckets: Sequence[float] = DEFAULT_BUCKETS) -> LatencyHistogram:
    return LatencyHistogram(buckets)
