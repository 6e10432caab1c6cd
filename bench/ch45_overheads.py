"""What the chapter 4 machinery costs per use: contexts, call(), retries, metrics, the event log.

Prints figures measured on this machine (medians of a few repeats); nothing here is asserted.
Run: .venv/bin/python bench/ch45_overheads.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from minisched.clock import RealClock
from minisched.deadline import RetryPolicy, background, call
from minisched.observability.eventlog import EventLog, EventTypes, PodPlacements, replay
from minisched.observability.metrics import SchedulerMetrics

REPEATS = 5


def per_op(fn: Callable[[], None], n: int) -> float:
    """Median seconds per call of fn over REPEATS runs of n calls."""
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n)
    return statistics.median(samples)


def show(label: str, seconds: float) -> None:
    if seconds < 1e-6:
        print(f"{label:<52} {seconds * 1e9:10.0f} ns/op")
    else:
        print(f"{label:<52} {seconds * 1e6:10.1f} µs/op")


def main() -> None:
    root = background(RealClock())
    deadline_ctx = root.with_timeout(3600)
    show("Context.err() with a deadline", per_op(deadline_ctx.err, 100_000))
    show("with_timeout() child + cancel()", per_op(lambda: root.with_timeout(1).cancel(), 20_000))
    def noop() -> None:
        pass

    show("call(ctx, fn) on a reused helper thread", per_op(lambda: call(deadline_ctx, noop), 5_000))
    show("plain fn() for comparison", per_op(noop, 100_000))
    policy = RetryPolicy()
    show("RetryPolicy.run, first attempt succeeds (tenacity)", per_op(lambda: policy.run(root, lambda c: None), 5_000))

    metrics = SchedulerMetrics()
    show("SchedulerMetrics.observe_attempt", per_op(lambda: metrics.observe_attempt("scheduled", 0.003), 50_000))
    show("SchedulerMetrics.exposition() (one scrape)", per_op(lambda: None if metrics.exposition() else None, 500))

    for where in ("memory", "file"):
        with tempfile.TemporaryDirectory() as tmp:
            path = ":memory:" if where == "memory" else str(Path(tmp) / "log.sqlite")
            log = EventLog(path)
            n = 2_000
            start = time.perf_counter()
            for i in range(n):
                log.append(f"default/p{i % 500}", EventTypes.ATTEMPT_FAILED, {"reason": "x"},
                           expected_version=log.version(f"default/p{i % 500}"))
            append = (time.perf_counter() - start) / n
            show(f"EventLog.append (SQLite {where}, version check)", append)
            start = time.perf_counter()
            replay(log, PodPlacements())
            show(f"replay per event (SQLite {where})", (time.perf_counter() - start) / n)
            log.close()


if __name__ == "__main__":
    main()
