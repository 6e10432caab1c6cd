"""Lab 9 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import tracemalloc
from typing import Any

from labs.harness import Check
from labs.lab09_leak_finder.checks import as_found, short, where


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


class TwoLeaks:
    """Two leaks of different sizes in every round, and a line that grows by a few bytes only."""

    def __init__(self) -> None:
        self.big: list[bytes] = []
        self.small: list[bytes] = []
        self.crumbs: list[int] = []
        self.rounds = 0

    def run_round(self) -> None:
        self.rounds += 1
        for i in range(20):
            self.small.append(bytes(400) + bytes([i]))  # the small leak
            self.big.append(bytes(3000) + bytes([i]))  # the big leak
        self.crumbs.append(10**30 + self.rounds)  # a few dozen bytes a round


BIG = where(TwoLeaks.run_round, "# the big leak")
SMALL = where(TwoLeaks.run_round, "# the small leak")
CRUMBS = where(TwoLeaks.run_round, "# a few dozen bytes")


def check_order_and_parameters(module: Any) -> None:
    planted = TwoLeaks()
    found = module.growing_lines(planted.run_round, rounds=3, warmup=1)
    assert planted.rounds == 4, f"warmup=1, rounds=3: expected run_round called 4 times, it was called {planted.rounds}"
    locations = [g.location for g in found]
    assert BIG in locations and SMALL in locations, (
        f"two lines leak in every round ({short(BIG)}, {short(SMALL)}): got {[short(loc) for loc in locations[:6]]}")
    assert locations.index(BIG) < locations.index(SMALL), (
        f"the most bytes per round first: {short(BIG)} (about 60 KB a round) before {short(SMALL)} (about 9 KB), "
        f"got {[(short(g.location), round(g.bytes_per_round)) for g in found[:6]]}")
    per_round = {g.location: g.bytes_per_round for g in found}
    assert all(a.bytes_per_round >= b.bytes_per_round for a, b in zip(found, found[1:], strict=False)), (
        f"sorted by bytes_per_round, largest first: got {[round(g.bytes_per_round) for g in found[:6]]}")
    assert 20 * 3000 <= per_round[BIG] <= 20 * 3200, (
        f"the big leak adds 20 objects of 3,001 bytes per round over 3 rounds: bytes_per_round "
        f"{per_round[BIG]:.0f} (total growth divided by rounds, not by rounds + warmup)")
    assert CRUMBS in locations, f"the line growing a few dozen bytes a round grows in every round too: {locations[:6]}"
    found = [g.location for g in module.growing_lines(TwoLeaks().run_round, rounds=2, warmup=1, min_bytes=20_000)]
    assert BIG in found and SMALL not in found and CRUMBS not in found, (
        f"min_bytes=20000: only lines growing at least 20,000 bytes in every round count, so only {short(BIG)}; "
        f"got {[short(loc) for loc in found[:6]]}")
    planted = TwoLeaks()
    module.growing_lines(planted.run_round, rounds=5, warmup=0)
    assert planted.rounds == 5, f"warmup=0, rounds=5: expected run_round called 5 times, it was called {planted.rounds}"


class CyclesAndCreep:
    """Garbage held only by reference cycles (freed by a collection, not before), and a line that
    grows by exactly one byte a round."""

    def __init__(self) -> None:
        self.creep = b""
        self.rounds = 0

    def run_round(self) -> None:
        self.rounds += 1
        for _ in range(10):
            cycle: list[Any] = [bytes(5000)]  # garbage in a cycle
            cycle.append(cycle)
        self.creep = self.creep + b"x"  # one byte more every round


CYCLES = where(CyclesAndCreep.run_round, "# garbage in a cycle")
CREEP = where(CyclesAndCreep.run_round, "# one byte more")


def check_defaults_and_cycles(module: Any) -> None:
    import gc

    planted = CyclesAndCreep()
    enabled = gc.isenabled()
    gc.disable()  # as a busy process may go a while without an automatic collection
    try:
        found = [g.location for g in module.growing_lines(planted.run_round)]
    finally:
        if enabled:
            gc.enable()
    assert planted.rounds == 6, (
        f"the defaults are rounds=4, warmup=2: expected run_round called 6 times, it was called {planted.rounds}")
    assert CYCLES not in found, (
        f"{short(CYCLES)} makes garbage that only reference cycles hold: a full collection (gc.collect()) before "
        f"each snapshot frees it, so it is not held; it was reported")
    assert CREEP in found, (
        f"{short(CREEP)} grows by one byte every round: with the default min_bytes=1 it leaks; "
        f"got {[short(loc) for loc in found[:6]]}")


CHECKS = [
    Check("nothing held, nothing reported; tracemalloc left as found", as_found(check_no_leak),
          "start tracemalloc only if tracemalloc.is_tracing() is False, and stop only what you started."),
    Check("a round that raises", as_found(check_round_raises), "stop tracemalloc in a finally."),
    Check("rounds and warmup are checked by name", as_found(check_arguments),
          "check the arguments before turning tracemalloc on."),
    Check("the defaults, and garbage held only by cycles", as_found(check_defaults_and_cycles),
          "defaults rounds=4, warmup=2, min_bytes=1 (a growth of exactly min_bytes counts); gc.collect() before "
          "every snapshot."),
    Check("several leaks, largest first; rounds, warmup and min_bytes obeyed", as_found(check_order_and_parameters),
          "sort by bytes_per_round, largest first; divide each line's total growth by rounds; report a line only "
          "when its size_diff is at least min_bytes in every round.", points=2),
]
