"""Part II §2.1 and §2.3: decision flows, a dropping queue, M/M/1/K, two tickers."""

from __future__ import annotations

import asyncio
import queue
import time

import pytest

from minisched.clock import VirtualClock
from minisched.concurrency.decision_flow import (
    TIMEOUT,
    Task,
    decide_async,
    decide_threaded,
    select_async,
    select_inbox,
    spawn_costs,
)
from minisched.concurrency.dropping import AsyncDroppingQueue, DroppingQueue
from minisched.concurrency.mm1k import mm1k_drop_fraction, simulate_drops
from minisched.concurrency.tickers import AbsoluteTicker, RelativeTicker, run_ticks


def test_dropping_queue_drops_when_full_and_counts() -> None:
    q: DroppingQueue[int] = DroppingQueue(2)
    assert [q.offer(i) for i in range(5)] == [True, True, False, False, False]
    assert (q.accepted, q.dropped, q.offered, len(q)) == (2, 3, 5, 2)
    assert q.drop_fraction == pytest.approx(0.6)
    assert q.get() == 0 and q.offer(9) and q.get_nowait() == 1 and q.get() == 9
    with pytest.raises(queue.Empty):
        q.get(timeout=0.01)
    with pytest.raises(ValueError, match="at least one"):
        DroppingQueue(0)


def test_async_dropping_queue_has_the_same_policy() -> None:
    async def run() -> tuple[int, int, list[int]]:
        q: AsyncDroppingQueue[int] = AsyncDroppingQueue(3)
        for i in range(10):
            q.offer(i)
        return q.accepted, q.dropped, [await q.get() for _ in range(len(q))]

    assert asyncio.run(run()) == (3, 7, [0, 1, 2])


@pytest.mark.parametrize(("lam", "mu", "k", "expected"), [(1, 1, 3, 0.25), (1, 2, 1, 1 / 3), (2, 1, 1, 2 / 3)])
def test_mm1k_formula_special_cases(lam: float, mu: float, k: int, expected: float) -> None:
    # rho = 1: uniform over 0..K; K = 1: Erlang's loss formula rho / (1 + rho)
    assert mm1k_drop_fraction(lam, mu, k) == pytest.approx(expected)


def test_mm1k_formula_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="K >= 1"):
        mm1k_drop_fraction(1, 1, 0)
    with pytest.raises(ValueError, match="positive"):
        mm1k_drop_fraction(0, 1, 2)


@pytest.mark.parametrize("buffer", [1, 4])
@pytest.mark.parametrize("load", [0.8, 1.25])
def test_simulated_drop_fraction_matches_mm1k_within_002(buffer: int, load: float) -> None:
    sim = simulate_drops(load, 1.0, buffer, arrivals=40_000, seed=buffer)
    assert sim.offered == 40_000 and sim.dropped + sim.served <= sim.offered
    assert abs(sim.drop_fraction - mm1k_drop_fraction(load, 1.0, buffer + 1)) < 0.02
    # and the buffer matters: K = buffer (forgetting the item in service) is measurably wrong for small buffers
    if buffer == 1:
        assert abs(sim.drop_fraction - mm1k_drop_fraction(load, 1.0, buffer)) > 0.05


def test_simulation_is_deterministic_on_the_virtual_clock() -> None:
    clock = VirtualClock()
    a = simulate_drops(0.9, 1.0, 2, arrivals=2000, seed=7, clock=clock)
    assert a == simulate_drops(0.9, 1.0, 2, arrivals=2000, seed=7)
    assert clock.monotonic() - VirtualClock.DEFAULT_START == pytest.approx(a.virtual_seconds)


def test_relative_ticker_drifts_by_the_work_absolute_does_not() -> None:
    # the last tick fires before its work: 299 works behind
    for cls, expected in ((RelativeTicker, 299 * 0.002), (AbsoluteTicker, 0.0)):
        clock = VirtualClock(start=0.0)  # small numbers: float rounding stays far below 1e-9
        ticker = cls(0.01, clock, sleep=clock.advance)
        run = run_ticks(ticker, 300, work=lambda c=clock: c.advance(0.002))  # type: ignore[misc]
        assert run.drift == pytest.approx(expected, abs=1e-9), cls.__name__
        assert run.skipped == 0


def test_absolute_ticker_skips_ticks_it_could_not_deliver() -> None:
    clock = VirtualClock(start=0.0)
    ticker = AbsoluteTicker(0.01, clock, sleep=clock.advance)
    run = run_ticks(ticker, 10, work=lambda: clock.advance(0.025))  # work longer than two periods
    assert run.skipped > 0
    assert abs(run.drift) < 0.01  # behind by less than one period, however many ticks
    assert run.intervals[0] == pytest.approx(0.01)
    # a missed tick fires as soon as the work ends (Go's channel holds one), the rest are skipped
    assert run.intervals[1:] == pytest.approx([0.025] * 9)


def _fast(task: Task) -> float:
    return float(task.id)


def _slow_on_odd(task: Task) -> float:
    if task.id % 2:
        time.sleep(0.8)
    return 100.0


async def _afast(task: Task) -> float:
    return float(task.id)


async def _aslow_on_odd(task: Task) -> float:
    if task.id % 2:
        await asyncio.sleep(0.8)
    return 100.0


def test_threads_and_asyncio_flows_decide_the_same() -> None:
    tasks = [Task(i) for i in range(6)]
    threaded = decide_threaded(tasks, {"A": _fast, "B": _slow_on_odd}, timeout=0.3, workers=6)
    asynced = asyncio.run(decide_async(tasks, {"A": _afast, "B": _aslow_on_odd}, timeout=0.3))
    assert threaded == asynced
    assert [o.status for o in threaded] == ["decided", TIMEOUT] * 3
    assert threaded[1].missing == ("B",) and threaded[1].score == 1.0
    assert threaded[2].answered == ("A", "B") and threaded[2].score == 102.0


def test_select_helpers_time_out() -> None:
    inbox: queue.Queue[tuple[str, int]] = queue.Queue()
    assert select_inbox(inbox, time.monotonic() + 0.01) is None
    inbox.put(("a", 1))
    assert select_inbox(inbox, time.monotonic() - 1) == ("a", 1)

    async def run() -> tuple[int | None, int | None]:
        async def later(v: int, d: float) -> int:
            await asyncio.sleep(d)
            return v

        return await select_async(later(1, 0), 0.5), await select_async(later(2, 1.0), 0.01)

    assert asyncio.run(run()) == (1, None)


def test_spawn_costs_are_measured() -> None:
    costs = spawn_costs(50)
    assert set(costs) == {"thread start+join", "asyncio task", "executor item"}
    assert all(v > 0 for v in costs.values())
    with pytest.raises(ValueError):
        spawn_costs(0)


def test_the_books_shared_decisions_channel_hands_decisions_to_the_wrong_tasks() -> None:
    from minisched.concurrency.decision_flow import route_decisions

    own = [(i, i) for i in range(8)]
    assert route_decisions(8, shared=False, step=0.002) == own
    shared = route_decisions(8, shared=True, step=0.002)
    assert shared != own  # 1 in 8! that a shared channel routes all eight right by chance
    assert sorted(got for _, got in shared) == list(range(8))  # every decision went to someone
    with pytest.raises(ValueError, match="at least one task"):
        route_decisions(0, shared=True)


def test_a_ticker_drops_fewer_than_poisson_arrivals_and_none_with_fixed_service_below_capacity() -> None:
    from minisched.concurrency.mm1k import mm1k_drop_fraction, simulate_ticker_drops

    fixed = simulate_ticker_drops(1.0, 0.9, 1, ticks=5_000, exponential_service=False)
    assert fixed.dropped == 0 and fixed.served >= 4_999  # (the last one may still be in service)
    over = simulate_ticker_drops(1.0, 1.2, 8, ticks=30_000, exponential_service=False)
    assert abs(over.drop_fraction - (1 - 1 / 1.2)) < 0.001  # above capacity: 1 - 1/ρ, buffer or not
    ticker = simulate_ticker_drops(1.0, 0.9, 1, ticks=30_000, seed=1)
    assert 0 < ticker.drop_fraction < mm1k_drop_fraction(0.9, 1.0, 2) - 0.05
    assert simulate_ticker_drops(1.0, 0.9, 1, ticks=1_000, seed=3) == simulate_ticker_drops(1.0, 0.9, 1, ticks=1_000, seed=3)
    with pytest.raises(ValueError, match="positive"):
        simulate_ticker_drops(0.0, 1.0, 1)


def test_a_real_ticker_and_consumer_count_every_offer() -> None:
    from minisched.concurrency.tickers import measure_ticker_drops

    run = measure_ticker_drops(0.002, 0.004, 1, 60)  # twice the capacity: about half must go
    assert run.offered == 60 and run.dropped + run.served == 60
    assert run.dropped > 0 and run.load > 1
    with pytest.raises(ValueError, match="ticks >= 1"):
        measure_ticker_drops(0.002, 0.004, 1, 0)
