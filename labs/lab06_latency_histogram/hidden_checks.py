"""Lab 6 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any

from labs.harness import Check, Rendezvous, in_threads, wait_until
from labs.lab06_latency_histogram.checks import BOUNDS
from minisched.observability.runtime import TickerLateness


def check_default_buckets(module: Any) -> None:
    """new() with no buckets: DEFAULT_BUCKETS, the README's 10 µs to 0.33 s, doubling (16 bounds, then +Inf)."""
    histogram = module.new()
    bounds = [1e-5 * 2**i for i in range(16)]  # 10 µs .. 0.32768 s
    for seconds in [*bounds, 0.33]:
        histogram.observe(seconds)
    got = [int(c) for c in histogram.counts()]
    assert got == [1] * 16 + [1], (
        f"new() with the default buckets (10 µs doubling to 0.33 s, then +Inf): one measurement at each bound and "
        f"one at 0.33 s should fill each of the 17 buckets once, got {got}")


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
    for buckets in ((), (0.1, 0.1), (0.2, 0.1), (0.1, 0.3, 0.2), (0.0, 1.0), (-1.0, 1.0)):
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


def check_first_bucket(module: Any) -> None:
    h = module.new(BOUNDS)
    for v in (0.0002, 0.0004, 0.0006, 0.05):
        h.observe(v)
    for q, want in ((0.25, 0.001 / 3), (0.5, 0.002 / 3), (0.75, 0.001)):  # rank q * 4 of the first bucket's 3
        got = h.quantile(q)
        assert abs(got - want) < 1e-12, (
            f"three of four measurements in the first bucket (le={BOUNDS[0]}): quantile({q}) expected {want:g} "
            f"(interpolated from 0, the first bucket's lower edge, with nothing below it), got {got:g}")


def check_label_order(module: Any) -> None:
    h = module.new(BOUNDS)
    first = h.labels(result="scheduled", profile="default")
    second = h.labels(profile="default", result="scheduled")
    assert first is second, ("labels(result='scheduled', profile='default') and labels(profile='default', "
                             "result='scheduled') are the same labels in another order: expected the same child")
    other = h.labels(result="default", profile="scheduled")
    assert other is not first, "the values swapped between the labels are other labels: expected another child"


class MeetingSeconds(float):
    """A measurement whose addition makes two observing threads meet: `self._sum += seconds` has
    read the old sum in both, so without a lock one addition is lost every time."""

    rendezvous: Rendezvous

    def __add__(self, other: Any) -> float:
        self.rendezvous.meet()
        return float(self) + other

    __radd__ = __add__

    def __float__(self) -> float:
        self.rendezvous.meet()
        return float.__float__(self)


def check_forced_interleaving(module: Any) -> None:
    h = module.new(BOUNDS)
    rendezvous = Rendezvous(2, at=1)
    MeetingSeconds.rendezvous = rendezvous
    rounds = 4
    for _ in range(rounds):
        rendezvous.arm()
        in_threads(lambda k: h.observe(MeetingSeconds(0.004)), 2)
    rendezvous.disarm()
    assert h.count == 2 * rounds and abs(h.sum - 0.008 * rounds) < 1e-12, (
        f"two threads observing 0.004 s at the same moment, {rounds} times: expected count {2 * rounds} and sum "
        f"{0.008 * rounds:g}, got count {h.count} and sum {h.sum:g}: both read the sum before either wrote it back")


class MeetingLabel(str):
    """A label value whose second hash in a labels() call (storing the new child, after looking for
    it) makes two threads meet: both have looked and found nothing, so without a lock both create
    a child and one thread's measurements go to a child nobody reads."""

    rendezvous: Rendezvous

    def __str__(self) -> str:
        return self  # str(value) keeps the hook in the key

    def __hash__(self) -> int:
        self.rendezvous.meet()
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)


def check_labels_at_once(module: Any) -> None:
    h = module.new(BOUNDS)
    rendezvous = Rendezvous(2, at=2)
    MeetingLabel.rendezvous = rendezvous
    for i in range(3):
        value = MeetingLabel(f"round-{i}")
        children: list[Any] = [None, None]
        rendezvous.arm()
        in_threads(lambda k, value=value, children=children: children.__setitem__(k, h.labels(round=value)), 2)
        rendezvous.disarm()
        assert children[0] is children[1], (
            f"two threads asking labels(round='round-{i}') at the same moment got two different children: both "
            "looked for it, found nothing and created one, so one thread's measurements go to a child nobody reads")


CHECKS = [
    Check("the default buckets are 10 µs doubling to 0.33 s", check_default_buckets,
          "new() with no argument uses DEFAULT_BUCKETS = exponential_buckets(1e-5, 2, 16) as the starter gives it."),
    Check("memory stays flat over 50,000 measurements", check_memory_flat,
          "a numpy array of counts made in __init__, incremented in observe()."),
    Check("records a TickerLateness", check_ticker, "observe() must accept any float the ticker measures."),
    Check("safe when threads observe at once", check_threads, "increment under self._lock."),
    Check("bad buckets and bad quantiles are refused", check_refusals,
          "check the bounds in __init__: at least one, all > 0, each greater than the one before."),
    Check("labels(): one child per set of labels", check_labels,
          "key a dict by tuple(sorted(labels.items())); a child is a LatencyHistogram(self.buckets)."),
    Check("a quantile in the first bucket starts from 0", check_first_bucket,
          "for the first bucket, lower is 0 and the count below it is 0: buckets[b - 1] with b = 0 is the *last* "
          "bound."),
    Check("labels in any order are the same labels", check_label_order,
          "key the children by tuple(sorted(labels.items())): keyword arguments keep the order they were written in."),
    Check("two threads observing at the same moment both count", check_forced_interleaving,
          "add to the counts and the sum under self._lock: the check makes two threads read the sum at the same "
          "moment, so without the lock one measurement is lost every time."),
    Check("two threads asking for the same new child get one child", check_labels_at_once,
          "look the child up and create it under one lock: checked first and created after, two threads both "
          "find nothing and both create one."),
]
