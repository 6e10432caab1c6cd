"""Lab 4 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import random
from typing import Any

from labs.harness import Check, Rendezvous, in_threads


def check_long_failure_runs(module: Any) -> None:
    limiter = module.new(0.005, 30.0, random.Random(9))
    for n in range(2000):
        delay = limiter.when("stuck")
        assert 0 <= delay <= 30.0, f"failure {n}: expected a delay within [0, 30] s, got {delay}"


def check_zero_base_stays_zero(module: Any) -> None:
    """base_delay 0 makes every bound min(max_delay, 0 * 2**n) = 0, for every n, past the n where 2.0**n
    overflows a float too (0 * 2**n is 0 however large n is)."""
    limiter = module.new(0.0, 30.0, random.Random(4))
    for n in range(1100):
        delay = limiter.when("instant")
        assert delay == 0.0, (f"base_delay 0: failure {n} should retry at once (bound min(30, 0 * 2**{n}) = 0), "
                              f"got {delay}")


def check_threads(module: Any) -> None:
    limiter = module.new(0.001, 1.0, random.Random(2))

    def fail_often(k: int) -> None:
        for _ in range(500):
            limiter.when("shared")

    in_threads(fail_often, 8, switch_interval=1e-6)  # switch often: a lost update shows
    got = limiter.num_requeues("shared")
    assert got == 4000, f"8 threads x 500 failures: expected 4000 requeues, got {got} (a lost update)"


def check_bad_arguments(module: Any) -> None:
    for kwargs, name in (({"base_delay": -1.0, "max_delay": 1.0}, "base_delay"),
                         ({"base_delay": 1.0, "max_delay": -1.0}, "max_delay")):
        try:
            module.new(rng=random.Random(0), **kwargs)
        except ValueError as e:
            assert name in str(e), f"the ValueError should name {name}: got {e!r}"
        else:
            raise AssertionError(f"new({kwargs}) should raise ValueError naming {name}")
    for base, cap in ((0.0, 0.0), (0.0, 2.0), (0.5, 0.5)):  # zero and below-one delays are not negative
        try:
            limiter = module.new(base, cap, random.Random(0))
        except ValueError as e:
            raise AssertionError(f"new(base_delay={base}, max_delay={cap}) has no negative delay, yet raised {e!r}: "
                                 "refuse only delays below 0") from None
        delays = [limiter.when("x") for _ in range(3)]
        assert all(0 <= d <= min(base * 4, cap) for d in delays), (
            f"new(base_delay={base}, max_delay={cap}): three failures gave {delays}, expected each within "
            f"[0, min(base_delay * 2**n, max_delay)]")


class MeetingItem:
    """An item whose second hash in a when() (the write-back of `d[item] = n + 1`, after the read
    `d.get(item)`) makes the two failing workers meet: both have read the item's failure count and
    neither has written it back, so without a lock one update is lost every time."""

    def __init__(self, name: str, rendezvous: Rendezvous) -> None:
        self.name, self.rendezvous = name, rendezvous

    def __hash__(self) -> int:
        self.rendezvous.meet()
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MeetingItem) and other.name == self.name

    def __repr__(self) -> str:
        return self.name


def check_forced_interleaving(module: Any) -> None:
    limiter = module.new(0.001, 1.0, random.Random(4))
    rendezvous = Rendezvous(2, at=2)
    item = MeetingItem("pod-x", rendezvous)
    rounds = 4
    for _ in range(rounds):
        rendezvous.arm()
        in_threads(lambda k: limiter.when(item), 2)
    rendezvous.disarm()
    got = limiter.num_requeues(item)
    assert got == 2 * rounds, (
        f"two workers failing the same item at once, {rounds} times: expected {2 * rounds} requeues, got {got}: "
        "both read the count before either wrote it back (a lost update)")


CHECKS = [
    Check("thousands of failures stay within the cap", check_long_failure_runs,
          "2.0 ** 2000 overflows a float: stop doubling once the bound reaches max_delay."),
    Check("base_delay 0 retries at once, however many failures", check_zero_base_stays_zero,
          "the bound is min(max_delay, base_delay * 2**n) for every n: do not jump to max_delay because 2.0**n "
          "would overflow (n >= 1024); with base_delay 0 the bound stays 0 (math.ldexp computes base * 2**n "
          "and raises OverflowError only when the product itself overflows)."),
    Check("safe when workers fail at once", check_threads,
          "guard the read-modify-write of the counts with a threading.Lock."),
    Check("negative delays are refused by name", check_bad_arguments,
          "raise ValueError(f'base_delay must not be negative, got {base_delay}') in the constructor when "
          "base_delay < 0 (zero is a valid delay), and the same for max_delay."),
    Check("two workers failing one item at the same moment both count", check_forced_interleaving,
          "read the count, add one and write it back under one threading.Lock (with self._lock: ...): the check "
          "makes two threads read it at the same moment, so without the lock one failure is lost every time."),
]
