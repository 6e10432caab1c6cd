"""Lab 7 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import threading
from typing import Any

from labs.harness import Check, in_threads


def check_get_waits(module: Any) -> None:
    q = module.new(2)
    got: list[Any] = []
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            got.append(q.get(timeout=30))
        except BaseException as e:  # reported from the checking thread, with the student's line
            errors.append(e)

    waiter = threading.Thread(target=consume, daemon=True)
    waiter.start()
    q.offer("tick")
    waiter.join(20)
    if errors:
        raise errors[0]
    assert not waiter.is_alive(), "get(timeout=30) did not wake when an item was offered (notify the condition)"
    assert got == ["tick"], f"get(timeout=30) with an item offered meanwhile: expected 'tick', got {got}"
    assert q.get(timeout=0.05) is None, "get(timeout=0.05) on an empty queue should return None when the time is up"


def check_threads(module: Any) -> None:
    q = module.new(10)

    def produce(k: int) -> None:
        for i in range(2000):
            q.offer((k, i))

    in_threads(produce, 4, switch_interval=1e-5)  # switch often: a lost update shows
    got = (q.accepted, q.dropped, len(q))
    assert got == (8000, 7990, 10), (
        f"4 threads x 2,000 offers into LatestQueue(10), nobody reading: expected accepted 8000, dropped 7990, "
        f"10 waiting; got {got}")
    kept = [q.get(timeout=0) for _ in range(10)]
    for k in range(4):
        mine = [i for who, i in kept if who == k]
        assert mine == sorted(mine), f"producer {k}'s items came out of order: {mine}"


def check_maxsize(module: Any) -> None:
    for size in (0, -3):
        try:
            module.new(size)
        except ValueError as e:
            assert "maxsize" in str(e), f"the ValueError should name maxsize: got {e!r}"
        else:
            raise AssertionError(f"LatestQueue({size}) should be refused with a ValueError")
    q = module.new(1)
    assert q.offer("a") is True and q.offer("b") is False and q.get(timeout=0) == "b", (
        "LatestQueue(1): offering a then b should keep b")


CHECKS = [
    Check("a waiting get wakes when an item comes", check_get_waits,
          "offer() calls self._cond.notify(); get() waits with self._cond.wait(remaining) in a loop."),
    Check("safe when producers offer at once", check_threads, "do all of offer() under self._cond."),
    Check("maxsize below 1 is refused by name", check_maxsize,
          "raise ValueError(f'... maxsize={maxsize}') in __init__."),
]
