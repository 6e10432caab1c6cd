"""One decision flow, written twice: with threads and queues, and with asyncio (Part II §2.1).

The book's flow: a request reaches a decision entry, several strategies judge it concurrently, an
aggregator collects their answers, and a `select` with a timeout turns a late strategy into a
fallback ("timeout") instead of a stuck request:

    select {
    case d := <-decisions: results <- execute(task, d)
    case <-time.After(500 * time.Millisecond): results <- Result{Status: "timeout"}
    }

Python has no select over channels. Threads get the same effect from one inbox per request that
every strategy writes to, read with `get(timeout=...)` until the deadline (`select_inbox`).
asyncio gets it from `asyncio.timeout()` around the await (`select_async`). A strategy is a plain
function (threads) or a coroutine function (asyncio) from a task to a score; the two flows return
the same outcomes for the same strategies, which the tests check.

`spawn_costs` measures what the book calls "nanosecond goroutines" in Python's terms: a thread
started and joined, a task created and awaited, an item through a thread-pool executor.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "Outcome",
    "Task",
    "TIMEOUT",
    "decide_async",
    "decide_threaded",
    "route_decisions",
    "select_async",
    "select_inbox",
    "spawn_costs",
]

T = TypeVar("T")
TIMEOUT = "timeout"


@dataclass(frozen=True)
class Task:
    id: int
    payload: Any = None


@dataclass(frozen=True)
class Outcome:
    """What the aggregator decided for one task: `status` is "decided" when every strategy answered
    in time, "timeout" when the deadline cut some off (their names are in `missing`); `score` adds
    the answers that arrived (a fallback of 0 when none did)."""

    task_id: int
    status: str
    score: float
    answered: tuple[str, ...]
    missing: tuple[str, ...]


def _outcome(task: Task, names: Sequence[str], answers: Mapping[str, float]) -> Outcome:
    answered = tuple(n for n in names if n in answers)
    missing = tuple(n for n in names if n not in answers)
    return Outcome(task.id, "decided" if not missing else TIMEOUT, float(sum(answers.values())), answered, missing)


# ------------------------------------------------------------------------------------ threads


def select_inbox(inbox: queue.Queue[tuple[str, T]], deadline: float) -> tuple[str, T] | None:
    """Go's select over several channels plus time.After, for threads: every source writes
    (its name, its value) into one inbox; wait for the next until `deadline` (time.monotonic());
    None when the deadline passed first."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        try:
            return inbox.get_nowait()
        except queue.Empty:
            return None
    try:
        return inbox.get(timeout=remaining)
    except queue.Empty:
        return None


def decide_threaded(
    tasks: Sequence[Task],
    strategies: Mapping[str, Callable[[Task], float]],
    *,
    timeout: float,
    workers: int = 8,
) -> list[Outcome]:
    """Each task fans out to every strategy on a thread pool; the aggregator reads the task's inbox
    until all answered or `timeout` passed. Tasks are aggregated concurrently (one aggregator
    thread per task, from a second pool), so one slow task does not hold up the others."""
    names = list(strategies)

    def judge(task: Task, name: str, inbox: queue.Queue[tuple[str, float]]) -> None:
        inbox.put((name, strategies[name](task)))

    def aggregate(task: Task, pool: ThreadPoolExecutor) -> Outcome:
        inbox: queue.Queue[tuple[str, float]] = queue.Queue()
        deadline = time.monotonic() + timeout
        for name in names:
            pool.submit(judge, task, name, inbox)
        answers: dict[str, float] = {}
        while len(answers) < len(names):
            got = select_inbox(inbox, deadline)
            if got is None:
                break
            answers[got[0]] = got[1]
        return _outcome(task, names, answers)

    with (
        ThreadPoolExecutor(max_workers=max(workers, 1), thread_name_prefix="strategy") as judges,
        ThreadPoolExecutor(max_workers=max(workers, 1), thread_name_prefix="aggregate") as aggregators,
    ):
        futures = [aggregators.submit(aggregate, task, judges) for task in tasks]
        return [f.result() for f in futures]


# ------------------------------------------------------------------------------------ asyncio


async def select_async(awaitable: Awaitable[T], timeout: float) -> T | None:
    """select with a timeout for asyncio: the awaitable's value, or None after `timeout` seconds."""
    try:
        async with asyncio.timeout(timeout):
            return await awaitable
    except TimeoutError:
        return None


async def decide_async(
    tasks: Sequence[Task],
    strategies: Mapping[str, Callable[[Task], Awaitable[float]]],
    *,
    timeout: float,
) -> list[Outcome]:
    """The same flow on one event loop: per task a TaskGroup of strategies writing into an
    asyncio.Queue, read under one `asyncio.timeout` for the whole task; strategies still running
    at the deadline are cancelled when the group exits."""
    names = list(strategies)

    async def aggregate(task: Task) -> Outcome:
        inbox: asyncio.Queue[tuple[str, float]] = asyncio.Queue()
        answers: dict[str, float] = {}

        async def judge(name: str) -> None:
            await inbox.put((name, await strategies[name](task)))

        async def collect() -> None:
            while len(answers) < len(names):
                name, value = await inbox.get()
                answers[name] = value

        async with asyncio.TaskGroup() as group:
            judges = [group.create_task(judge(name)) for name in names]
            await select_async(collect(), timeout)
            for j in judges:
                j.cancel()  # the late ones: their answers would come after the decision
        return _outcome(task, names, answers)

    async with asyncio.TaskGroup() as group:
        running = [group.create_task(aggregate(task)) for task in tasks]
    return [r.result() for r in running]


# ------------------------------------------------------------------------------------ costs


def _noop() -> None:
    return None


async def _anoop() -> None:
    return None


def spawn_costs(n: int = 2000) -> dict[str, float]:
    """Seconds per unit of concurrency, measured now: a thread started and joined, an asyncio
    task created and awaited (inside a running loop), an item submitted to a thread-pool executor
    and its result read. Timings: print them, never compare them."""
    if n < 1:
        raise ValueError(f"measure at least one spawn, got {n}")
    started = time.perf_counter()
    for _ in range(n):
        t = threading.Thread(target=_noop)
        t.start()
        t.join()
    thread = (time.perf_counter() - started) / n

    async def tasks() -> float:
        t0 = time.perf_counter()
        pending = [asyncio.create_task(_anoop()) for _ in range(n)]
        await asyncio.gather(*pending)
        return (time.perf_counter() - t0) / n

    # a loop of its own on a thread of its own: works also where a loop already runs (Jupyter)
    measured: list[float] = []
    runner = threading.Thread(target=lambda: measured.append(asyncio.run(tasks())))
    runner.start()
    runner.join()
    task = measured[0]
    with ThreadPoolExecutor(max_workers=4) as pool:
        pool.submit(_noop).result()  # workers started outside the measurement
        t0 = time.perf_counter()
        futures = [pool.submit(_noop) for _ in range(n)]
        for f in futures:
            f.result()
        item = (time.perf_counter() - t0) / n
    return {"thread start+join": thread, "asyncio task": task, "executor item": item}


def route_decisions(tasks: int, *, shared: bool, step: float = 0.01, timeout: float = 2.0) -> list[tuple[int, int | None]]:
    """The book's `scheduleTask(task, decisions, results)` for `tasks` tasks at once, each a
    thread waiting on its `decisions` channel; task i's strategy answers after (tasks - i) * step
    seconds (the first task's answer comes last). With `shared=True` every task reads the one
    channel the book's signature implies, so each takes whichever decision arrives next, not its
    own; with `shared=False` each has its own inbox (what `select_inbox` does). Returns
    (task, task the received decision was for), None on timeout, in task order."""
    if tasks < 1 or step <= 0:
        raise ValueError(f"need at least one task and a positive step, got tasks={tasks}, step={step}")
    one: queue.Queue[int] = queue.Queue()
    inboxes: list[queue.Queue[int]] = [one if shared else queue.Queue() for _ in range(tasks)]
    received: list[int | None] = [None] * tasks
    waiting = threading.Barrier(tasks + 1)

    def schedule_task(i: int) -> None:
        waiting.wait()
        try:
            received[i] = inboxes[i].get(timeout=timeout)
        except queue.Empty:
            received[i] = None

    threads = [threading.Thread(target=schedule_task, args=(i,), daemon=True) for i in range(tasks)]
    for t in threads:
        t.start()
    waiting.wait()  # every task is waiting before the first decision is sent
    started = time.monotonic()
    for i in sorted(range(tasks), key=lambda i: tasks - i):  # answers in order of their latency
        time.sleep(max(0.0, started + (tasks - i) * step - time.monotonic()))
        inboxes[i].put(i)
    for t in threads:
        t.join()
    return list(enumerate(received))
