"""Lab 6 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any

from labs.harness import Check, in_threads, wait_until
from labs.lab06_latency_histogram.checks import BOUNDS
from minisched.observability.runtime import TickerLateness


def check_memory_flat(module: Any) -> None:
    h = module.new()
    rng = random.Random(1)
    values = [rng.expovariate(1000) for _ in range(50_000)]
    for v in values[:1000]:  # warm-up: whatever is allocated once is allocated now
        h.observe(v)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for v in values:
            h.observe(v)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, (f"50,000 more measurements made the histogram hold {grown / 1024:.0f} KiB more: "
                               "it must keep counts per bucket, not the measurements")


def check_ticker(module: Any) -> None:
    module.new().observe(0.0)  # fails here first, not in the ticker's thread
    h = module.new()
    ticker = TickerLateness(0.002, histogram=h)
    with ticker:
        wait_until(lambda: ticker.lateness.size >= 5, "the ticker never ticked five times")
    kept = ticker.lateness
    assert h.count == kept.size and abs(h.sum - float(kept.sum())) < 1e-9, (
        f"TickerLateness(histogram=yours) woke {kept.size} times (total lateness {kept.sum():.6f} s); "
        f"your histogram counted {h.count} (sum {h.sum:.6f} s)")


def check_threads(module: Any) -> None:
    h = module.new(BOUNDS)

    def observe_many(k: int) -> None:
        for i in range(5000):
            h.observe((i % 4) * 0.004)

    in_threads(observe_many, 4, switch_interval=1e-5)  # switch often: a lost update shows
    got = [int(c) for c in h.counts()]
    assert got == [5000, 10000, 5000, 0] and h.count == 20000, (
        f"4 threads x 5,000 measurements: expected counts [5000, 10000, 5000, 0], got {got} (a lost update)")


def check_refusals(module: Any) -> None:
    for buckets in ((), (0.1, 0.1), (0.2, 0.1), (0.0, 1.0), (-1.0, 1.0)):
        try:
            module.new(buckets)
        except ValueError as e:
            assert "buckets" in str(e), f"the ValueError for buckets {list(buckets)} should name buckets: got {e!r}"
        else:
            raise AssertionError(f"buckets {list(buckets)} should be refused with a ValueError")
    h = module.new(BOUNDS)
    for what, q in (("no measurement yet", 0.5), ("q = 0", 0.0), ("q = 1.5", 1.5)):
        if what != "no measurement yet":
            h.observe(0.005)
        try:
            h.quantile(q)
        except ValueError:
            continue
        raise AssertionError(f"quantile({q}) with {what}: expected a ValueError")


def check_labels(module: Any) -> None:
    h = module.new(BOUNDS)
    a, b = h.labels(result="scheduled"), h.labels(result="error")
    assert a is h.labels(result="scheduled"), "labels(result='scheduled') twice must return the same child"
    assert a is not b and a is not h, "different labels need different children (and not the parent itself)"
    a.observe(0.5)
    assert (a.count, b.count) == (1, 0), f"one measurement in the 'scheduled' child: got counts {(a.count, b.count)}"
    assert list(a.buckets) == list(BOUNDS), f"a child keeps its parent's buckets: got {list(a.buckets)}"


CHECKS = [
    Check("memory stays flat over 50,000 measurements", check_memory_flat,
          "a numpy array of counts made in __init__, incremented in observe()."),
    Check("records a TickerLateness", check_ticker, "observe() must accept any float the ticker measures."),
    Check("safe when threads observe at once", check_threads, "increment under self._lock."),
    Check("bad buckets and bad quantiles are refused", check_refusals,
          "check the bounds in __init__: at least one, all > 0, each greater than the one before."),
    Check("labels(): one child per set of labels", check_labels,
          "key a dict by tuple(sorted(labels.items())); a child is a LatencyHistogram(self.buckets)."),
]
