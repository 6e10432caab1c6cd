"""Lab 4 checks (public).

    python -m labs.lab04_jitter_backoff.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import random
import sys
from typing import Any

from labs.harness import Check, main
from minisched.clock import VirtualClock
from minisched.workqueue.rate_limiters import BucketRateLimiter, MaxOfRateLimiter
from minisched.workqueue.rate_limiting_queue import RateLimitingQueue

LAB = "lab04_jitter_backoff"


def expected_delays(seed: int, base: float, cap: float, count: int) -> list[float]:
    rng = random.Random(seed)
    return [min(cap, base * 2.0**n) * rng.random() for n in range(count)]


def check_full_jitter(module: Any) -> None:
    limiter = module.new(0.01, 5.0, random.Random(42))
    got = [limiter.when("pod-a") for _ in range(12)]
    want = expected_delays(42, 0.01, 5.0, 12)
    for n, (g, w) in enumerate(zip(got, want, strict=True)):
        bound = min(5.0, 0.01 * 2.0**n)
        assert 0 <= g <= bound, f"failure {n}: expected a delay between 0 and {bound:g} s, got {g:g}"
        assert abs(g - w) < 1e-12, (f"failure {n}: expected bound * rng.random() = {w:.6f} s "
                                    f"(one rng.random() per call), got {g:.6f}")


def check_per_item(module: Any) -> None:
    limiter = module.new(0.01, 5.0, random.Random(1))
    for _ in range(3):
        limiter.when("a")
    limiter.when("b")
    counts = (limiter.num_requeues("a"), limiter.num_requeues("b"), limiter.num_requeues("c"))
    assert counts == (3, 1, 0), f"num_requeues for a, b, never-failed c: expected (3, 1, 0), got {counts}"
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0, f"after forget: expected 0 requeues, got {limiter.num_requeues('a')}"
    assert limiter.num_requeues("b") == 1, "forget('a') must not touch b's count"
    rng = random.Random(3)
    fresh = module.new(0.01, 5.0, rng)
    first = fresh.when("x")
    assert first <= 0.01, f"a forgotten or new item starts again at n = 0 (bound 0.01 s), got {first:g}"


def check_in_a_queue(module: Any) -> None:
    clock = VirtualClock()
    limiter = MaxOfRateLimiter(module.new(1.0, 60.0, random.Random(5)), BucketRateLimiter(100, 1000, clock=clock))
    queue: RateLimitingQueue[str] = RateLimitingQueue(limiter, "lab4", clock=clock)
    try:
        draws = random.Random(5)
        r1, r2 = draws.random(), draws.random()  # pod-0's and pod-1's first failures (bound 1 s each)
        queue.add_rate_limited("pod-0")
        queue.add_rate_limited("pod-1")
        queue.add_rate_limited("pod-0")  # pod-0's second failure: later than its first, so the first stays
        assert len(queue) == 0, "a rate-limited add must wait for its delay; the item was queued at once"
        waiting = queue.next_ready_in()
        assert waiting is not None and abs(waiting - min(r1, r2)) < 1e-6, (
            f"expected the earliest item due in {min(r1, r2):.4f} s (full jitter of the first failures), "
            f"the queue says {waiting}")
        assert queue.num_requeues("pod-0") == 2, f"pod-0 failed twice: expected 2 requeues, got {queue.num_requeues('pod-0')}"
        assert queue.num_requeues("pod-1") == 1, f"pod-1 failed once: expected 1 requeue, got {queue.num_requeues('pod-1')}"
        queue.forget("pod-0")
        assert queue.num_requeues("pod-0") == 0, "queue.forget must reach your limiter's forget"
    finally:
        queue.shut_down()


CHECKS = [
    Check("full jitter: bound * rng.random(), bound doubling to the cap", check_full_jitter,
          "n is the number of earlier failures of this item; bound = min(max_delay, base_delay * 2**n); "
          "call self.rng.random() exactly once per when().", points=2),
    Check("failures counted per item; forget starts over", check_per_item,
          "keep a dict item -> failures; forget() removes the item.", points=2),
    Check("drives a RateLimitingQueue inside MaxOfRateLimiter", check_in_a_queue,
          "the queue calls when(item) and waits that long before the item is ready."),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
