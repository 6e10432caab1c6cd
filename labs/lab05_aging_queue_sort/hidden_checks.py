"""Lab 5 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import functools
import heapq
import random
from typing import Any

from labs.harness import Check
from labs.lab05_aging_queue_sort.checks import Queued


def check_bad_args(module: Any) -> None:
    for value in (0, -5):
        try:
            module.new({"agingSeconds": value}, None)
        except ValueError as e:
            assert "agingSeconds" in str(e), f"the ValueError should name agingSeconds: got {e!r}"
        else:
            raise AssertionError(f"agingSeconds {value} should be refused with a ValueError")
    try:
        half = module.new({"agingSeconds": 0.5}, None)
    except ValueError as e:
        raise AssertionError(f"agingSeconds 0.5 is positive, yet refused: {e!r}") from None
    assert half.less(Queued("old", 0, 0.0), Queued("new", 1, 0.6)), (
        "agingSeconds 0.5: priority 0 queued 0.6 s before priority 1 has aged 1.2 points and goes first")


def check_default_exactly_60(module: Any) -> None:
    default = module.new(None, None)
    x = Queued("x", 0, 0.0)
    tie, ahead = Queued("tie", 1, 60.0), Queued("ahead", 1, 59.5)
    assert default.less(x, tie) and not default.less(tie, x), (
        "no args: agingSeconds is 60, so priority 1 queued 60 s after priority 0 is exactly level with it, and the "
        "earlier goes first")
    assert default.less(ahead, x), "no args: priority 1 queued 59.5 s after priority 0 is still ahead by 1/120 point"


def check_heap_order(module: Any) -> None:
    sort = module.new({"agingSeconds": 7}, None)
    rng = random.Random(11)
    pods = [Queued(f"p{i}", rng.randint(0, 20), rng.uniform(0, 300)) for i in range(300)]

    class Entry:
        def __init__(self, q: Queued) -> None:
            self.q = q

        def __lt__(self, other: Entry) -> bool:
            return bool(sort.less(self.q, other.q))

    heap: list[Entry] = []
    for p in pods:
        heapq.heappush(heap, Entry(p))
    popped = [heapq.heappop(heap).q.name for _ in range(len(pods))]
    key = functools.cmp_to_key(lambda a, b: -1 if sort.less(a, b) else (1 if sort.less(b, a) else 0))
    want = [p.name for p in sorted(pods, key=key)]
    expected = [p.name for p in sorted(pods, key=lambda p: (-(p.priority - p.timestamp / 7), p.timestamp))]
    assert popped == want == expected, "300 random pods through a heap: the order differs from the aging rule " \
        f"(first ten expected {expected[:10]}, got {popped[:10]})"


CHECKS = [
    Check("the default agingSeconds is 60", check_default_exactly_60, "args.get('agingSeconds', 60) when args has none."),
    Check("agingSeconds must be positive", check_bad_args,
          "raise ValueError naming agingSeconds when it is not > 0 (0.5 is fine)."),
    Check("a heap of 300 pods comes out in aging order", check_heap_order,
          "less() must be a strict weak order that does not depend on the time it is called."),
]
