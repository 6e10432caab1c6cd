from __future__ import annotations

import pytest

from minisched.clock import VirtualClock
from minisched.workqueue import DelayingQueue, InMemoryMetricsProvider
from tests.workqueue.helpers import eventually, stays


@pytest.fixture
def q(virtual_clock: VirtualClock):
    queue: DelayingQueue[str] = DelayingQueue(clock=virtual_clock)
    yield queue
    queue.shut_down()


def test_item_appears_only_when_its_time_comes(q: DelayingQueue[str], virtual_clock: VirtualClock) -> None:
    q.add_after("a", 5)
    assert q.waiting() == 1
    virtual_clock.advance(4.9)
    assert stays(lambda: len(q) == 0)
    virtual_clock.advance(0.1)
    eventually(lambda: len(q) == 1, what="the delayed item")
    assert q.waiting() == 0
    assert q.get() == ("a", False)


def test_zero_or_negative_delay_adds_at_once(q: DelayingQueue[str]) -> None:
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert len(q) == 2 and q.waiting() == 0


@pytest.mark.parametrize(
    ("first", "second", "ready_at"),
    [(10, 2, 2), (2, 10, 2), (5, 5, 5)],
)
def test_adding_a_waiting_item_again_keeps_the_earlier_time(
    q: DelayingQueue[str], virtual_clock: VirtualClock, first: float, second: float, ready_at: float
) -> None:
    q.add_after("a", first)
    q.add_after("a", second)
    assert q.waiting() == 1
    virtual_clock.advance(ready_at - 0.01)
    assert stays(lambda: len(q) == 0, 0.08)
    virtual_clock.advance(0.01)
    eventually(lambda: len(q) == 1)
    virtual_clock.advance(20)
    assert stays(lambda: len(q) == 1, 0.08), "a superseded entry must not add the item twice"


def test_items_due_together_come_out_in_ready_order(q: DelayingQueue[str], virtual_clock: VirtualClock) -> None:
    q.add_after("late", 3)
    q.add_after("early", 1)
    q.add_after("middle", 2)
    virtual_clock.advance(3)
    eventually(lambda: len(q) == 3)
    assert [q.get()[0] for _ in range(3)] == ["early", "middle", "late"]


def test_shut_down_stops_the_waiting_loop(virtual_clock: VirtualClock) -> None:
    q: DelayingQueue[str] = DelayingQueue(clock=virtual_clock)
    q.add_after("a", 1)
    q.shut_down()
    q._loop.join(2)
    assert not q._loop.is_alive()
    q.add_after("b", 0)
    assert len(q) == 0


def test_every_add_after_counts_as_a_retry(virtual_clock: VirtualClock) -> None:
    provider = InMemoryMetricsProvider()
    q: DelayingQueue[str] = DelayingQueue("retries", clock=virtual_clock, metrics_provider=provider)
    q.add_after("a", 1)
    q.add_after("b", 0)
    assert provider.queues["retries"].retries.value == 2
    q.shut_down()
