"""§2.4: the SPSC ring buffer's semantics, and the throughput harness delivering every item in order."""

from __future__ import annotations

import threading
import time

import pytest

from minisched.concurrency.ringbuffer import RingBuffer
from minisched.concurrency.throughput import KINDS, gil_enabled, measure, run_once


@pytest.mark.parametrize("capacity", [0, 3, 6, 1000])
def test_capacity_must_be_a_power_of_two(capacity: int) -> None:
    with pytest.raises(ValueError, match="power of two"):
        RingBuffer(capacity)


def test_fifo_full_empty_and_wraparound() -> None:
    ring: RingBuffer[str] = RingBuffer(4)
    assert ring.try_get() == (False, None)
    for round_ in range(3):  # wrap the indices around several times
        for i in range(4):
            assert ring.try_put(f"{round_}-{i}")
        assert not ring.try_put("overflow")
        assert len(ring) == 4
        assert [ring.try_get()[1] for _ in range(4)] == [f"{round_}-{i}" for i in range(4)]
        assert len(ring) == 0


def test_batches_respect_room_and_order() -> None:
    ring: RingBuffer[int] = RingBuffer(8)
    assert ring.put_many(range(5)) == 5
    assert ring.put_many(range(5, 20)) == 3  # only 3 slots left
    assert ring.get_many(3) == [0, 1, 2]
    assert ring.put_many([100, 101]) == 2
    assert ring.get_many(100) == [3, 4, 5, 6, 7, 100, 101]
    assert ring.get_many(1) == []


def test_consumed_slots_release_their_items() -> None:
    ring: RingBuffer[object] = RingBuffer(2)
    ring.try_put(object())
    ring.try_get()
    assert ring._buf == [None, None]


def test_two_threads_lose_nothing_and_keep_order() -> None:
    ring: RingBuffer[int] = RingBuffer(16)  # small, so both sides hit full and empty often
    n = 20_000
    got: list[int] = []

    def produce() -> None:
        for i in range(n):
            while not ring.try_put(i):
                time.sleep(0)  # a bare spin would hold the GIL for a whole switch interval (5 ms)

    def consume() -> None:
        while len(got) < n:
            ok, item = ring.try_get()
            if ok:
                got.append(item)  # type: ignore[arg-type]
            else:
                time.sleep(0)

    threads = [threading.Thread(target=consume), threading.Thread(target=produce)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert got == list(range(n))


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_delivers_all_items_in_order(kind: str) -> None:
    m = measure(kind, 2_000, repeats=2, capacity=64)
    assert len(m.seconds) == 2 and m.median_rate > 0
    slowest, fastest = m.spread
    assert slowest <= m.median_rate <= fastest


def test_unknown_kind_is_named() -> None:
    with pytest.raises(ValueError, match="unknown queue kind 'asyncio'"):
        run_once("asyncio", 10)


def test_gil_flag_is_a_bool() -> None:
    assert isinstance(gil_enabled(), bool)
