from __future__ import annotations

import pytest

from minisched.clock import VirtualClock
from minisched.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)
from tests.workqueue.helpers import eventually


def test_exponential_doubles_from_5ms_and_caps_at_1000s() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("a") for _ in range(20)]
    expected = [min(0.005 * 2**n, 1000.0) for n in range(20)]
    assert delays == expected
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[17] == 655.36 and delays[18] == 1000.0  # 0.005 * 2**18 = 1310.72 > cap
    assert limiter.num_requeues("a") == 20


@pytest.mark.parametrize(
    ("base", "cap", "failures", "expected"),
    [
        (0.001, 1.0, 1, 0.001),
        (0.001, 1.0, 2, 0.002),
        (0.001, 1.0, 10, 0.512),
        (0.001, 1.0, 11, 1.0),
        (1.0, 60.0, 7, 60.0),
        (0.005, 1000.0, 5000, 1000.0),  # no float overflow after many failures
    ],
)
def test_exponential_table(base: float, cap: float, failures: int, expected: float) -> None:
    limiter = ItemExponentialFailureRateLimiter(base, cap)
    for _ in range(failures - 1):
        limiter.when("x")
    assert limiter.when("x") == expected


def test_exponential_counts_items_separately_and_forget_resets() -> None:
    limiter = ItemExponentialFailureRateLimiter(1, 100)
    assert [limiter.when("a") for _ in range(3)] == [1, 2, 4]
    assert limiter.when("b") == 1
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 1
    assert limiter.num_requeues("b") == 1


def test_fast_slow() -> None:
    limiter = ItemFastSlowRateLimiter(0.005, 10, 3)
    assert [limiter.when("a") for _ in range(5)] == [0.005, 0.005, 0.005, 10, 10]
    assert limiter.num_requeues("a") == 5
    limiter.forget("a")
    assert limiter.when("a") == 0.005


def test_token_bucket_allows_a_burst_then_spaces_by_qps(virtual_clock: VirtualClock) -> None:
    limiter = BucketRateLimiter(10, 100, clock=virtual_clock)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert limiter.when("x") == pytest.approx(0.1)
    assert limiter.when("x") == pytest.approx(0.2)
    virtual_clock.advance(0.1)  # one token refilled, two reserved: still one owed
    assert limiter.when("x") == pytest.approx(0.2)
    virtual_clock.advance(1000)
    assert limiter.tokens() == 100  # refills up to the burst, no further
    assert limiter.num_requeues("x") == 0
    limiter.forget("x")  # nothing tracked per item


def test_token_bucket_refills_at_qps(virtual_clock: VirtualClock) -> None:
    limiter = BucketRateLimiter(2, 1, clock=virtual_clock)
    assert limiter.when("a") == 0.0
    assert limiter.when("a") == pytest.approx(0.5)
    virtual_clock.advance(1.0)  # owed one, refilled two: one in hand
    assert limiter.tokens() == pytest.approx(1.0)
    assert limiter.when("a") == 0.0


def test_max_of_takes_the_longest_and_forgets_in_all() -> None:
    limiter = MaxOfRateLimiter(ItemExponentialFailureRateLimiter(1, 1000), ItemFastSlowRateLimiter(5, 50, 2))
    assert [limiter.when("a") for _ in range(6)] == [5, 5, 50, 50, 50, 50]
    assert limiter.when("a") == 64
    assert limiter.num_requeues("a") == 7
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0 and limiter.when("a") == 5


def test_default_controller_rate_limiter_is_exponential_then_bucket(virtual_clock: VirtualClock) -> None:
    limiter = default_controller_rate_limiter(virtual_clock)
    # One item failing: its own exponential backoff (the bucket has plenty of tokens).
    assert [limiter.when("a") for _ in range(3)] == [0.005, 0.01, 0.02]
    # A storm of 200 distinct failing items: after the 100-token burst the bucket spaces them.
    storm = [limiter.when(f"item-{i}") for i in range(200)]
    assert storm[:97] == [0.005] * 97
    assert storm[97] == pytest.approx(0.1)
    assert storm[-1] == pytest.approx(10.3)


def test_with_max_wait_caps_another_limiter() -> None:
    limiter = WithMaxWaitRateLimiter(ItemExponentialFailureRateLimiter(1, 1000), 3)
    assert [limiter.when("a") for _ in range(4)] == [1, 2, 3, 3]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ItemExponentialFailureRateLimiter(-1, 10), "must not be negative"),
        (lambda: ItemFastSlowRateLimiter(1, 2, -1), "must not be negative"),
        (lambda: BucketRateLimiter(0, 10), "qps must be positive"),
        (lambda: BucketRateLimiter(1, 0), "burst must be at least 1"),
        (lambda: MaxOfRateLimiter(), "at least one rate limiter"),
    ],
)
def test_bad_settings_are_rejected_with_a_clear_message(build, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_rate_limiting_queue_spaces_retries_and_forget_resets(virtual_clock: VirtualClock) -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(1, 100), clock=virtual_clock)
    try:
        q.add_rate_limited("a")
        assert len(q) == 0 and q.num_requeues("a") == 1
        virtual_clock.advance(1)
        eventually(lambda: len(q) == 1)
        item, _ = q.get()
        q.done("a")
        q.add_rate_limited("a")  # second failure: 2 s
        virtual_clock.advance(1.5)
        eventually(lambda: q.next_ready_in() == pytest.approx(0.5))
        virtual_clock.advance(0.5)
        eventually(lambda: len(q) == 1)
        q.forget("a")
        assert q.num_requeues("a") == 0
    finally:
        q.shut_down()


def test_workers_retrying_failures_through_the_rate_limited_queue_finish_every_item() -> None:
    """Items fail a few times each and are retried with add_rate_limited: every item ends up done,
    never on two workers at once, and forget() resets its count."""
    import random
    import threading
    import time

    q: RateLimitingQueue[int] = RateLimitingQueue(ItemExponentialFailureRateLimiter(0.0005, 0.005))
    failures_left = {i: random.Random(i).randrange(4) for i in range(50)}
    attempts = dict.fromkeys(failures_left, 0)
    done: set[int] = set()
    active: set[int] = set()
    overlaps: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            item, shutdown = q.get()
            if shutdown:
                return
            assert item is not None
            with lock:
                if item in active:
                    overlaps.append(item)
                active.add(item)
                attempts[item] += 1
                fail = failures_left[item] > 0
                failures_left[item] -= 1
            time.sleep(0.0002)  # hold the item a moment, so a second worker on it would be seen
            with lock:
                active.discard(item)
            if fail:
                q.add_rate_limited(item)
            else:
                q.forget(item)
                with lock:
                    done.add(item)
            q.done(item)

    workers = [threading.Thread(target=worker) for _ in range(4)]
    for w in workers:
        w.start()
    for i in failures_left:
        q.add(i)
    eventually(lambda: len(done) == 50, 10, "every item to succeed")
    q.shut_down_with_drain()
    for w in workers:
        w.join(5)
    assert overlaps == []
    assert all(attempts[i] == random.Random(i).randrange(4) + 1 for i in attempts)
    assert all(q.num_requeues(i) == 0 for i in attempts)
