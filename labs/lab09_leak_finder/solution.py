"""Lab 9, the instructor's solution."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Growth:
    location: str  # "path/to/file.py:123"
    bytes_per_round: float


def _snapshot() -> tracemalloc.Snapshot:
    gc.collect()  # what is left is held, not garbage waiting for the collector
    return tracemalloc.take_snapshot().filter_traces((
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, __file__),  # this function's bookkeeping grows every round too
    ))


def growing_lines(run_round: Callable[[], object], rounds: int = 4, warmup: int = 2, min_bytes: int = 1) -> list[Growth]:
    if rounds < 2:
        raise ValueError(f"rounds must be at least 2 to see growth in every round, got {rounds}")
    if warmup < 0:
        raise ValueError(f"warmup must not be negative, got {warmup}")
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        for _ in range(warmup):
            run_round()
        previous = _snapshot()
        grown: dict[str, list[int]] = {}
        for r in range(rounds):
            run_round()
            now = _snapshot()
            for stat in now.compare_to(previous, "lineno"):
                if stat.size_diff >= min_bytes:
                    frame = stat.traceback[0]
                    grown.setdefault(f"{frame.filename}:{frame.lineno}", []).append(stat.size_diff)
            previous = now
            # a line must have grown in this round and every one before it
            grown = {loc: diffs for loc, diffs in grown.items() if len(diffs) == r + 1}
        found = [Growth(loc, sum(diffs) / rounds) for loc, diffs in grown.items()]
        return sorted(found, key=lambda g: (-g.bytes_per_round, g.location))
    finally:
        if started:
            tracemalloc.stop()
