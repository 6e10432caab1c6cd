"""The scheduler's own threads: daemon workers for the binding cycles and for asynchronous
preemption's API calls, and the slots that bound the bindings in flight (kube runs both on
goroutines; the binding cycle's `go func()` in schedule_one.go).
"""

from __future__ import annotations

import queue as queue_module
import threading
from collections.abc import Callable
from typing import Any


class _DaemonWorkers:
    """Up to `size` daemon threads running submitted jobs in order (started as needed).

    Unlike ThreadPoolExecutor, whose workers the interpreter joins at exit, a worker stuck in a
    request that never returns cannot hold the process, and shutdown() hands back the jobs that
    never started, so the caller can undo what they stood for."""

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._jobs: queue_module.SimpleQueue[tuple[Callable[[Any], None], Any] | None] = queue_module.SimpleQueue()
        self._lock = threading.Lock()  # taken by submit() and shutdown() only, never by a worker
        self._threads = 0
        self._submitted = 0
        # jobs finished, one counter per worker, each written by its worker alone: a worker never
        # takes a lock the scheduling loop waits on (under the GIL a contended lock costs the loop
        # the interpreter until the worker lets go of it, often a whole switch interval)
        self._finished: list[int] = []
        self._closed = False

    def submit(self, fn: Callable[[Any], None], arg: Any) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name} workers are shut down")
            self._submitted += 1
            # A new thread only when every thread has a job (a count read while workers run can
            # only be behind, which errs towards starting one more, never one fewer).
            start = self._threads < self._size and self._submitted - sum(self._finished) > self._threads
            if start:
                self._threads += 1
                self._finished.append(0)
                slot = self._threads - 1
        self._jobs.put((fn, arg))
        if start:
            threading.Thread(target=self._work, args=(slot,), name=f"{self._name}-{slot + 1}", daemon=True).start()

    def _work(self, slot: int) -> None:
        finished = self._finished
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, arg = job
            try:
                fn(arg)
            finally:
                finished[slot] += 1
                # an idle worker must not keep its last job alive (an assumed pod holds its pod, its
                # cycle state and its decision record) until another job comes: ThreadPoolExecutor's
                # `del work_item`
                del job, fn, arg

    def shutdown(self) -> list[Any]:
        """Accept no more jobs; return the arguments of those not started, and end the workers
        once their current job is done."""
        with self._lock:
            self._closed = True
            threads = self._threads
        not_started: list[Any] = []
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue_module.Empty:
                break
            if job is not None:
                not_started.append(job[1])
        for _ in range(threads):
            self._jobs.put(None)
        return not_started


class _Slots:
    """A counting semaphore on a C queue of tokens: acquiring and releasing never take a lock
    that a thread holding the GIL's rival could hold (threading.Semaphore's Python-level Condition
    can make the scheduling loop wait for a binding thread's whole time slice)."""

    def __init__(self, size: int) -> None:
        self._tokens: queue_module.SimpleQueue[None] = queue_module.SimpleQueue()
        for _ in range(size):
            self._tokens.put(None)

    def acquire(self, timeout: float) -> bool:
        try:
            self._tokens.get(timeout=timeout)
        except queue_module.Empty:
            return False
        return True

    def release(self) -> None:
        self._tokens.put(None)
