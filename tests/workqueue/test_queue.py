from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest

from minisched.clock import VirtualClock
from minisched.workqueue import InMemoryMetricsProvider, Queue
from tests.workqueue.helpers import eventually, stays


def drain(q: Queue[str]) -> list[str]:
    out = []
    while len(q):
        item, shutdown = q.get()
        assert not shutdown and item is not None
        out.append(item)
        q.done(item)
    return out


def test_items_come_out_in_order_and_duplicates_collapse() -> None:
    q: Queue[str] = Queue()
    for key in ["a", "b", "a", "c", "b", "a"]:
        q.add(key)
    assert len(q) == 3
    assert drain(q) == ["a", "b", "c"]


def test_item_added_while_processing_is_held_back_until_done() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    item, _ = q.get()
    assert item == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0, "a key being processed must not be handed to a second worker"
    q.done("a")
    assert len(q) == 1
    assert q.get() == ("a", False)
    q.done("a")
    assert len(q) == 0 and q.processing() == 0


def test_done_without_readd_does_not_requeue() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    q.get()
    q.done("a")
    assert len(q) == 0


def test_get_blocks_until_an_item_is_added() -> None:
    q: Queue[str] = Queue()
    got: list[tuple[str | None, bool]] = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    assert stays(lambda: not got)
    q.add("x")
    t.join(2)
    assert got == [("x", False)]


def test_after_shut_down_get_returns_queued_items_then_reports_shutdown() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    q.add("b")
    q.shut_down()
    q.add("c")  # ignored once shutting down
    assert q.shutting_down()
    assert q.get() == ("a", False)
    assert q.get() == ("b", False)
    assert q.get() == (None, True)
    assert q.get() == (None, True)


def test_shut_down_wakes_every_blocked_worker() -> None:
    q: Queue[str] = Queue()
    results: list[tuple[str | None, bool]] = []
    workers = [threading.Thread(target=lambda: results.append(q.get())) for _ in range(4)]
    for w in workers:
        w.start()
    time.sleep(0.05)
    q.shut_down()
    for w in workers:
        w.join(2)
    assert results == [(None, True)] * 4


def test_shut_down_with_drain_waits_for_items_being_processed() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    q.add("b")
    q.get()  # "a" is now processing
    returned = threading.Event()
    t = threading.Thread(target=lambda: (q.shut_down_with_drain(), returned.set()))
    t.start()
    assert stays(lambda: not returned.is_set()), "drain must wait for the item in processing"
    assert q.get() == ("b", False)  # queued items are still handed out while draining
    q.done("a")
    assert stays(lambda: not returned.is_set())
    q.done("b")
    assert returned.wait(2)
    assert q.get() == (None, True)


def test_shut_down_with_drain_returns_at_once_when_nothing_is_processing() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    q.shut_down_with_drain()
    assert q.get() == ("a", False)


def test_shut_down_ends_a_drain_that_is_waiting() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    q.get()
    returned = threading.Event()
    t = threading.Thread(target=lambda: (q.shut_down_with_drain(), returned.set()))
    t.start()
    assert stays(lambda: not returned.is_set())
    q.shut_down()
    assert returned.wait(2)


@pytest.mark.parametrize("workers", [2, 8])
def test_many_workers_never_share_a_key_and_lose_no_add(workers: int) -> None:
    q: Queue[int] = Queue()
    keys = 20
    generation = Counter[int]()  # bumped before each add
    processed_generation: dict[int, int] = {}
    active: set[int] = set()
    violations: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            key, shutdown = q.get()
            if shutdown:
                return
            assert key is not None
            with lock:
                if key in active:
                    violations.append(key)
                active.add(key)
                seen = generation[key]
            time.sleep(random.random() * 0.001)
            with lock:
                active.discard(key)
                processed_generation[key] = max(processed_generation.get(key, 0), seen)
            q.done(key)

    def producer(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(300):
            key = rng.randrange(keys)
            with lock:
                generation[key] += 1
            q.add(key)
            if rng.random() < 0.1:
                time.sleep(0.0005)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    producers = [threading.Thread(target=producer, args=(i,)) for i in range(3)]
    for t in threads + producers:
        t.start()
    for t in producers:
        t.join(10)
    eventually(lambda: len(q) == 0 and q.processing() == 0, 10, "the queue to empty")
    q.shut_down_with_drain()
    for t in threads:
        t.join(5)
    assert violations == []
    # Every key was processed at least once after its last add: nothing lost.
    assert processed_generation == dict(generation)


def test_metrics_follow_an_item_through_the_queue() -> None:
    clock = VirtualClock()
    provider = InMemoryMetricsProvider()
    q: Queue[str] = Queue("pods", clock=clock, metrics_provider=provider)
    rec = provider.queues["pods"]
    q.add("a")
    q.add("a")  # deduplicated: not counted
    q.add("b")
    assert rec.adds.value == 2 and rec.depth.value == 2
    clock.advance(2)
    q.get()
    assert rec.depth.value == 1
    assert rec.latency.observations == [2.0]
    clock.advance(3)
    eventually(lambda: rec.unfinished_work_seconds.value == 3.0, what="unfinished work refreshed")
    assert rec.longest_running_processor_seconds.value == 3.0
    q.done("a")
    assert rec.work_duration.observations == [3.0]
    q.shut_down()


def test_an_unnamed_queue_records_no_metrics() -> None:
    provider = InMemoryMetricsProvider()
    q: Queue[str] = Queue(metrics_provider=provider)
    q.add("a")
    assert provider.queues == {}
