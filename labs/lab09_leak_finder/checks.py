"""Lab 9 checks (public).

    python -m labs.lab09_leak_finder.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import collections
import inspect
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

from labs.harness import Check, main
from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable


def as_found(check: Callable[[Any], None]) -> Callable[[Any], None]:
    """The check, leaving tracemalloc as it found it whatever the student's code did (tracing left
    on would slow down everything that runs after)."""
    def run(module: Any) -> None:
        was = tracemalloc.is_tracing()
        try:
            check(module)
        finally:
            if not was and tracemalloc.is_tracing():
                tracemalloc.stop()

    return run


def where(fn: Callable[..., Any], text: str) -> str:
    """"file:line" of the line of `fn` holding `text`, as tracemalloc names it."""
    lines, first = inspect.getsourcelines(fn)
    return f"{inspect.getsourcefile(fn)}:{first + next(i for i, line in enumerate(lines) if text in line)}"


LAB = "lab09_leak_finder"


class Planted:
    """A leak (every round adds 20 objects of 2,000 bytes for ever), a bounded buffer that is full
    after two rounds, and a cache trimmed to its newest half whenever it reaches 60 entries."""

    def __init__(self) -> None:
        self.leak: list[bytes] = []
        self.buffer: collections.deque[bytes] = collections.deque(maxlen=40)
        self.cache: list[bytes] = []
        self.rounds = 0

    def run_round(self) -> None:
        self.rounds += 1
        for i in range(20):
            self.leak.append(bytes(2000) + bytes([i]))  # the leak
            self.buffer.append(bytes(500) + bytes([i]))  # bounded
            self.cache.append(bytes(800) + bytes([i]))  # trimmed now and then
        if len(self.cache) >= 60:
            del self.cache[:30]


LEAK = where(Planted.run_round, "# the leak")
BOUNDED = where(Planted.run_round, "# bounded")
TRIMMED = where(Planted.run_round, "# trimmed")


def short(location: str) -> str:
    return location.rsplit("/", 1)[-1]


def check_names_the_leak(module: Any) -> None:
    planted = Planted()
    found = module.growing_lines(planted.run_round, rounds=4, warmup=2)
    assert planted.rounds == 6, f"warmup=2, rounds=4: expected run_round called 6 times, it was called {planted.rounds}"
    locations = [g.location for g in found]
    assert locations and locations[0] == LEAK, (
        f"expected the leaking line {short(LEAK)} first, got {[short(loc) for loc in locations[:5]]}")
    per_round = found[0].bytes_per_round
    assert 20 * 2000 <= per_round <= 20 * 2200, (
        f"the leak adds 20 objects of 2,001 bytes per round (about 41 KB with their headers): "
        f"bytes_per_round {per_round:.0f}")
    assert BOUNDED not in locations, f"the deque(maxlen=40) full after the warm-up is not a leak, yet reported: {found}"


def check_trimmed_buffer(module: Any) -> None:
    found = [g.location for g in module.growing_lines(Planted().run_round, rounds=4, warmup=2)]
    assert TRIMMED not in found, (
        f"the cache trimmed to its newest half at 60 entries grows in three rounds of four, not all: "
        f"{short(TRIMMED)} should not be reported; got {[short(loc) for loc in found[:5]]}")
    assert LEAK in found, f"the leak {short(LEAK)} should still be reported; got {[short(loc) for loc in found[:5]]}"


class KeepsEveryTiming:
    """A framework observer with a leak: it keeps every extension point's timing it hears about."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, float]] = []

    def observe_point(self, point: str, status: str, seconds: float) -> None:
        self.seen.append((point, status, seconds))  # the observer's leak


OBSERVER_LEAK = where(KeepsEveryTiming.observe_point, "# the observer's leak")


def check_framework(module: Any) -> None:
    module.growing_lines(lambda: None, rounds=2, warmup=0)  # fails here first
    observer = KeepsEveryTiming()
    framework = Framework(seed=0, observer=observer.observe_point)
    table = NodeTable()
    for i in range(10):
        table.add_node(make_node(f"node-{i:02d}", cpu="8", memory="16Gi"))
    count = [0]

    def one_round() -> None:  # 10 pods through Filter and Score, as the scheduler's cycle runs them
        count[0] += 1
        for i in range(10):
            framework.schedule(PodInfo.from_pod(make_pod(f"p-{count[0]}-{i}", cpu="250m")), table.snapshot(),
                               state=CycleState())

    found = [g.location for g in module.growing_lines(one_round, rounds=3, warmup=1)]
    assert OBSERVER_LEAK in found, (
        "rounds of 10 pods through a scheduler framework whose observer keeps every timing: expected its line "
        f"{short(OBSERVER_LEAK)} among the growing lines, got {[short(loc) for loc in found[:8]]}")


CHECKS = [
    Check("names the line that leaks, not the bounded buffer", as_found(check_names_the_leak),
          "warm up first; then snapshot after gc.collect() each round; compare_to(previous, 'lineno').", points=2),
    Check("a buffer trimmed now and then is not a leak", as_found(check_trimmed_buffer),
          "compare each round with the round before, and keep only lines that grew in every round."),
    Check("finds an observer that leaks in the scheduler framework", as_found(check_framework),
          "filter out tracemalloc's file and your own (__file__) from every snapshot.", points=2),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
