"""Lab 9 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import tracemalloc
from typing import Any

from labs.harness import Check
from labs.lab09_leak_finder.checks import as_found


def churn() -> None:
    """Allocates and frees: holds nothing afterwards."""
    data = [bytes(300) + bytes([i % 256]) for i in range(500)]
    del data


def check_no_leak(module: Any) -> None:
    was = tracemalloc.is_tracing()
    found = module.growing_lines(churn, rounds=3, warmup=1)
    assert found == [], f"a round that frees all it allocates holds nothing: expected [], got {found[:5]}"
    assert tracemalloc.is_tracing() == was, "tracemalloc was off before growing_lines: leave it off"
    tracemalloc.start()
    try:
        module.growing_lines(churn, rounds=2, warmup=0)
        assert tracemalloc.is_tracing(), "tracemalloc was on before growing_lines (someone else's): leave it on"
    finally:
        tracemalloc.stop()


def check_round_raises(module: Any) -> None:
    calls = [0]

    def flaky() -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise RuntimeError("the round broke")

    try:
        module.growing_lines(flaky, rounds=3, warmup=1)
    except RuntimeError as e:
        assert "the round broke" in str(e), f"expected the round's own RuntimeError, got {e!r}"
    else:
        raise AssertionError("a round that raises: growing_lines should let its error through")
    assert not tracemalloc.is_tracing(), "after a round raised, tracemalloc is still on: stop it in a finally"


def check_arguments(module: Any) -> None:
    for kwargs, name in (({"rounds": 1}, "rounds"), ({"warmup": -1}, "warmup")):
        try:
            module.growing_lines(churn, **kwargs)
        except ValueError as e:
            assert name in str(e), f"the ValueError should name {name}: got {e!r}"
        else:
            raise AssertionError(f"growing_lines(..., {kwargs}) should raise ValueError naming {name}")
    assert not tracemalloc.is_tracing(), "a refused call must not leave tracemalloc on"


CHECKS = [
    Check("nothing held, nothing reported; tracemalloc left as found", as_found(check_no_leak),
          "start tracemalloc only if tracemalloc.is_tracing() is False, and stop only what you started."),
    Check("a round that raises", as_found(check_round_raises), "stop tracemalloc in a finally."),
    Check("rounds and warmup are checked by name", as_found(check_arguments),
          "check the arguments before turning tracemalloc on."),
]
