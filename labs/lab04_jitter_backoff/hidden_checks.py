"""Lab 4 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import random
from typing import Any

from labs.harness import Check, in_threads


def check_long_failure_runs(module: Any) -> None:
    limiter = module.new(0.005, 30.0, random.Random(9))
    for n in range(2000):
        delay = limiter.when("stuck")
        assert 0 <= delay <= 30.0, f"failure {n}: expected a delay within [0, 30] s, got {delay}"


def check_threads(module: Any) -> None:
    limiter = module.new(0.001, 1.0, random.Random(2))

    def fail_often(k: int) -> None:
        for _ in range(500):
            limiter.when("shared")

    in_threads(fail_often, 8)
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


CHECKS = [
    Check("thousands of failures stay within the cap", check_long_failure_runs,
          "2.0 ** 2000 overflows a float: stop doubling once the bound reaches max_delay."),
    Check("safe when workers fail at once", check_threads, "guard the counts with a threading.Lock."),
    Check("negative delays are refused by name", check_bad_arguments,
          "raise ValueError(f'base_delay must not be negative, got {base_delay}') in the constructor."),
]
