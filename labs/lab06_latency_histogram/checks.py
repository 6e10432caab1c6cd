"""Lab 6 checks (public).

    python -m labs.lab06_latency_histogram.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import gc
import random
import sys
from typing import Any

from labs.harness import Check, main, running_scheduler, wait_until
from minisched.objects import make_node, make_pod
from minisched.observability.runtime import GCPauseRecorder

LAB = "lab06_latency_histogram"
BOUNDS = (0.001, 0.01, 0.1)


def expected_quantile(bounds: tuple[float, ...], values: list[float], q: float) -> float:
    """Prometheus' histogram_quantile over the README's buckets, written out loop by loop."""
    counts = [0] * (len(bounds) + 1)
    for v in values:
        counts[next((i for i, b in enumerate(bounds) if v <= b), len(bounds))] += 1
    rank, below = q * len(values), 0
    for i, c in enumerate(counts):
        if below + c >= rank:
            if i == len(bounds):
                return bounds[-1]
            lower = bounds[i - 1] if i else 0.0
            return lower + (bounds[i] - lower) * (rank - below) / c
        below += c
    raise AssertionError("unreachable: the last cumulative count is the total")


def check_buckets(module: Any) -> None:
    h = module.new(BOUNDS)
    values = [0.0005, 0.001, 0.002, 0.01, 0.5, 7.0]
    for v in values:
        h.observe(v)
    got = [int(c) for c in h.counts()]
    assert got == [2, 2, 0, 2], (
        f"bounds {list(BOUNDS)} and measurements {values}: expected counts [2, 2, 0, 2] (le=0.001, le=0.01, "
        f"le=0.1, +Inf; a bound is inclusive), got {got}")
    assert h.count == 6, f"six measurements: expected count 6, got {h.count}"
    assert abs(h.sum - sum(values)) < 1e-9, f"expected sum {sum(values):g}, got {h.sum}"


def check_quantiles(module: Any) -> None:
    h = module.new(BOUNDS)
    for v in (0.0005, 0.002, 0.004, 0.02):  # one in the first bucket, two in the second, one in the third
        h.observe(v)
    got = h.quantile(0.5)  # rank 2: the second bucket, halfway through its two: 0.001 + 0.009 * 1/2
    assert abs(got - 0.0055) < 1e-12, f"quantile(0.5) of [0.0005, 0.002, 0.004, 0.02]: expected 0.0055, got {got}"
    rng = random.Random(6)
    for trial in range(20):
        values = [rng.lognormvariate(-5, 1.5) for _ in range(rng.randint(1, 300))]
        h = module.new(BOUNDS)
        for v in values:
            h.observe(v)
        for q in (0.25, 0.5, 0.9, 0.99, 1.0):
            want, got = expected_quantile(BOUNDS, values, q), h.quantile(q)
            assert abs(got - want) < 1e-12, (
                f"trial {trial} ({len(values)} measurements, counts {[int(c) for c in h.counts()]}): "
                f"quantile({q}) expected {want:.6g}, got {got:.6g}")


class AttemptLatency:
    """A scheduler observer: each scheduling attempt's latency, labelled with its result."""

    def __init__(self, histogram: Any) -> None:
        self.histogram = histogram

    def observe_attempt(self, result: str, seconds: float) -> None:
        self.histogram.labels(result=result).observe(seconds)


def check_recorders(module: Any) -> None:
    module.new().labels(generation="2").observe(0.0)  # fails here first, not in a recorder's thread
    gc_pauses = module.new()
    recorder = GCPauseRecorder(gc_pauses)
    with recorder:
        for _ in range(3):
            gc.collect()
    counts = recorder.counts()
    got = {g: gc_pauses.labels(generation=str(g)).count for g in range(3)}
    assert counts[2] >= 3 and got == counts, (
        f"three full collections recorded by GCPauseRecorder(histogram=yours): the recorder counted {counts} "
        f"collections by generation, your labels(generation=...) children counted {got}")
    attempts = module.new()
    pods = [make_pod(f"small-{i}", cpu="100m") for i in range(10)] + [make_pod(f"huge-{i}", cpu="64") for i in range(2)]
    with running_scheduler(nodes=[make_node("n1", cpu="4")], observer=AttemptLatency(attempts)) as (cluster, sched):
        for p in pods:
            cluster.create("pods", p)
        wait_until(lambda: len(sched.queue) == len(pods), "the scheduler never queued the twelve pods")
        for _ in pods:
            sched.schedule_one(timeout=5)
        sched.wait_for_bindings(timeout=10)
    got = {r: attempts.labels(result=r).count for r in ("scheduled", "unschedulable")}
    assert got == {"scheduled": 10, "unschedulable": 2}, (
        "a scheduler whose observer records each attempt into labels(result=...): expected 10 scheduled and 2 "
        f"unschedulable attempts, got {got}")


CHECKS = [
    Check("measurements land in their buckets", check_buckets,
          "bisect.bisect_left(self.buckets, seconds) is the first bound >= seconds; len(buckets) is +Inf."),
    Check("quantiles interpolate as Prometheus does", check_quantiles,
          "np.cumsum of the counts, then np.searchsorted(cumulative, rank) finds the bucket.", points=2),
    Check("records GC pauses and a scheduler's attempts", check_recorders,
          "labels() must return the same child for the same labels: keep the children in a dict.", points=2),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
