"""Lab 7 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import threading
import time
from typing import Any

from labs.harness import Check, Rendezvous, call_within, in_threads
from labs.lab07_latest_queue.checks import offers_without_blocking


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


def check_get_returns_in_time(module: Any) -> None:
    """An item that comes before the deadline is returned, and a get() without a timeout waits
    without spinning and without tripping over a wake-up that found nothing."""
    offers_without_blocking(module)
    q = module.new(2)
    threading.Timer(0.1, q.offer, args=("late",)).start()
    started = time.monotonic()
    got = call_within(5.0, "get(timeout=0.9) with an item offered after 0.1 s", lambda: q.get(timeout=0.9))
    waited = time.monotonic() - started
    assert got == "late" or (got is None and waited >= 0.85), (  # None at 0.9 s: the machine delayed the offer
        f"get(timeout=0.9) with an item offered after 0.1 s: expected 'late', got {got!r} after {waited:.2f} s, "
        "before its timeout was up")

    q = module.new(2)
    stop = threading.Event()
    spent: list[float] = []

    def wait_for_ever() -> Any:
        cpu = time.thread_time()
        try:
            return q.get()
        finally:
            spent.append(time.thread_time() - cpu)

    def thief() -> None:  # wakes the waiting get() with nothing to take, five times, then offers for real
        for _ in range(5):
            q.offer("stolen")
            q.get(timeout=0)
            time.sleep(0.05)
        time.sleep(0.3)
        q.offer("kept")

    stealing = threading.Thread(target=thief, daemon=True)
    stealing.start()
    try:
        got = call_within(10.0, "get() (no timeout) woken five times with nothing to take, then given an item",
                          wait_for_ever)
    finally:
        stop.set()
        stealing.join(5)
    assert got == "kept", f"get() with no timeout: expected the item 'kept', got {got!r}"
    assert spent and spent[0] < 0.25, (
        f"get() with no timeout used {spent[0]:.2f} s of CPU waiting about 0.55 s: it spun instead of waiting on the "
        "condition")


def check_threads(module: Any) -> None:
    offers_without_blocking(module)
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
    offers_without_blocking(module)
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


def check_deadline_kept(module: Any) -> None:
    """get(timeout=0.5) while another consumer takes every item first: each offer wakes the waiting
    get, which finds nothing. It must still give up 0.5 s after it was called, not 0.5 s after its
    last wake-up (that would be never while items keep coming)."""
    offers_without_blocking(module)
    for _attempt in range(3):
        q = module.new(4)
        stop = threading.Event()

        def thief(q: Any = q, stop: threading.Event = stop) -> None:  # offers and takes back at once
            while not stop.is_set():
                q.offer("stolen")
                q.get(timeout=0)
                time.sleep(0.05)

        stealing = threading.Thread(target=thief, daemon=True)
        stealing.start()
        try:
            started = time.monotonic()
            got = call_within(5.0, "get(timeout=0.5) while another consumer took every item first",
                              lambda q=q: q.get(timeout=0.5))
            waited = time.monotonic() - started
        finally:
            stop.set()
            stealing.join(5)
        if got is not None:
            continue  # it won an item from the thief: a fair outcome; try again
        assert waited < 1.5, (
            f"get(timeout=0.5), woken every 0.05 s by offers another consumer took first, returned None after "
            f"{waited:.2f} s: each wake-up restarted the wait; wait only for what is left of the deadline")
        return
    raise AssertionError("get(timeout=0.5) took an item before the other consumer three times in three: the check "
                         "could not make it wait (it should not win those races every time)")


class MeetingSize(int):
    """A maxsize whose comparisons make two offering threads meet: both have read how many items
    wait, so without a lock both find room for the last place and both take it."""

    rendezvous: Rendezvous

    def _meet(self, other: Any, op: Any) -> Any:
        self.rendezvous.meet()
        return op(int(self), other)

    def __ge__(self, other: Any) -> Any:
        return self._meet(other, int.__ge__)

    def __le__(self, other: Any) -> Any:
        return self._meet(other, int.__le__)

    def __gt__(self, other: Any) -> Any:
        return self._meet(other, int.__gt__)

    def __lt__(self, other: Any) -> Any:
        return self._meet(other, int.__lt__)

    def __eq__(self, other: object) -> bool:
        return bool(self._meet(other, int.__eq__))

    def __ne__(self, other: object) -> bool:
        return bool(self._meet(other, int.__ne__))

    __hash__ = int.__hash__


def check_forced_interleaving(module: Any) -> None:
    offers_without_blocking(module)
    rendezvous = Rendezvous(2, at=1)
    MeetingSize.rendezvous = rendezvous
    for round_ in range(3):
        q = module.new(MeetingSize(4))
        for i in range(3):
            q.offer(("before", i))
        rendezvous.arm()
        in_threads(lambda k, q=q: q.offer(("at once", k)), 2)
        rendezvous.disarm()
        got = (len(q), q.accepted, q.dropped)
        assert got == (4, 5, 1), (
            f"LatestQueue(4) holding 3, two threads offering at the same moment: expected 4 waiting, accepted 5, "
            f"dropped 1; got {got[0]} waiting, accepted {got[1]}, dropped {got[2]} (round {round_}): both found "
            "room for the last place")


CHECKS = [
    Check("a waiting get wakes when an item comes", check_get_waits,
          "offer() calls self._cond.notify(); get() waits with self._cond.wait(remaining) in a loop."),
    Check("safe when producers offer at once", check_threads, "do all of offer() under self._cond."),
    Check("maxsize below 1 is refused by name", check_maxsize,
          "raise ValueError(f'... maxsize={maxsize}') in __init__."),
    Check("get's deadline is fixed when it is called", check_deadline_kept,
          "deadline = time.monotonic() + timeout once, before the loop; after each wake-up wait only "
          "deadline - time.monotonic(), and return None when that is not positive."),
    Check("two offers into the last free place at the same moment", check_forced_interleaving,
          "test for room, drop, append and count under one `with self._cond:`: the check makes two threads test "
          "for room at the same moment, so without the lock both append."),
    Check("get returns an item that comes in time, and waits for ever without spinning", check_get_returns_in_time,
          "loop while no item waits: with no timeout, self._cond.wait() and look again; with one, wait for what is "
          "left of the deadline and give up only when nothing is left."),
]
