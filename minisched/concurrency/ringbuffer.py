"""§2.4: a single-producer, single-consumer ring buffer without locks, and what that means in Python.

The book's queue is a Java-style MPMC ring with CAS on head and tail. Python has no compare-and-swap,
so a lock-free *multi*-producer ring cannot be written in pure Python. What can be written is the
classic SPSC ring: the producer alone writes `_tail`, the consumer alone writes `_head`, and each
publishes its index only after touching the slot. Correctness then needs only that
 (1) a single attribute store or list-item store is atomic, and
 (2) the other thread sees this thread's stores in program order.
Under the GIL both hold, because one thread runs bytecode at a time. In free-threaded CPython
(3.13t+, PEP 703) list and attribute operations are made thread-safe with per-object critical
sections, which also order them; CPython documents no memory model, so that is an implementation
property we rely on, not a language guarantee. "Lock-free" here means no lock of ours: under the
GIL the threads still take turns, so it buys no parallelism, and a spinning consumer wastes its
turn (see bench/queues_bench.py for the figures).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class RingBuffer(Generic[T]):
    """Bounded FIFO for exactly one producer thread and one consumer thread.

    `try_put` / `try_get` never block: a full or empty buffer is reported, and the caller decides
    whether to spin, sleep or drop (the book's "retry or drop").
    """

    __slots__ = ("_buf", "_capacity", "_head", "_mask", "_tail")

    def __init__(self, capacity: int) -> None:
        if capacity < 1 or capacity & (capacity - 1):
            raise ValueError(
                f"capacity must be a power of two (so index & mask replaces modulo); got {capacity}"
            )
        self._capacity = capacity
        self._mask = capacity - 1
        self._buf: list[T | None] = [None] * capacity
        self._head = 0  # next slot to read; written only by the consumer
        self._tail = 0  # next slot to write; written only by the producer

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return self._tail - self._head  # a snapshot: the other side may move at any time

    def try_put(self, item: T) -> bool:
        """Producer only. False if full."""
        tail = self._tail
        if tail - self._head == self._capacity:
            return False
        self._buf[tail & self._mask] = item
        self._tail = tail + 1  # publish after the slot is written
        return True

    def try_get(self) -> tuple[bool, T | None]:
        """Consumer only. (False, None) if empty."""
        head = self._head
        if head == self._tail:
            return False, None
        index = head & self._mask
        item = self._buf[index]
        self._buf[index] = None  # drop the reference so the item can be freed
        self._head = head + 1  # publish after the slot is read
        return True, item

    def put_many(self, items: Iterable[T]) -> int:
        """Producer only. Put items until full; returns how many were put. One publish per batch."""
        tail, head, mask, buf = self._tail, self._head, self._mask, self._buf
        room = self._capacity - (tail - head)
        count = 0
        for item in items:
            if count == room:
                break
            buf[(tail + count) & mask] = item
            count += 1
        self._tail = tail + count
        return count

    def get_many(self, limit: int) -> list[T]:
        """Consumer only. Up to `limit` items, oldest first. One publish per batch."""
        head = self._head
        available = min(self._tail - head, limit)
        out: list[T] = []
        mask, buf = self._mask, self._buf
        for offset in range(available):
            index = (head + offset) & mask
            out.append(buf[index])  # type: ignore[arg-type]  # a published slot holds a T
            buf[index] = None
        self._head = head + available
        return out
