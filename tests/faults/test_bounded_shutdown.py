"""Defect 3 of issue 17: shutdown waited for the loop, then for hung bindings, then for the whole event
backlog, each with its own 30 s (80 s seen with etcd down). Now one deadline bounds all of it, and
what could not finish is abandoned safely and named in the log."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS, resolve
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import wait_for_nodes, wait_until

EVENTS = resolve("events")


class StuckCluster:
    """Forwards to `inner`; binds and/or event writes block until `release` is set (an API server
    that accepted the connection and never answers), or take `write_delay` seconds each."""

    def __init__(self, inner: EmbeddedCluster, *, hang_binds: bool = False, hang_events: bool = False,
                 write_delay: float = 0.0) -> None:
        self.inner = inner
        self.hang_binds = hang_binds
        self.hang_events = hang_events
        self.write_delay = write_delay
        self.release = threading.Event()
        self.binds_started = 0
        self._lock = threading.Lock()

    def bind(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self.binds_started += 1
        if self.hang_binds:
            self.release.wait()
        self.inner.bind(*args, **kwargs)

    def create(self, resource: Any, *args: Any, **kwargs: Any) -> Any:
        if resolve(resource) == EVENTS:
            if self.hang_events:
                self.release.wait()
            elif self.write_delay:
                time.sleep(self.write_delay)
        return self.inner.create(resource, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def embedded() -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster()
    c.create(NODES, make_node("n1", cpu="64", memory="256Gi", pods="500"))
    yield c
    c.close()


def _stop_within(sched: Scheduler, timeout: float) -> tuple[float, Any]:
    """stop(timeout) in a thread, so a regression fails the test instead of hanging it."""
    box: dict[str, Any] = {}
    began = time.monotonic()
    t = threading.Thread(target=lambda: box.setdefault("report", sched.stop(timeout)), daemon=True)
    t.start()
    t.join(timeout + 10)
    elapsed = time.monotonic() - began
    assert not t.is_alive(), f"stop({timeout:g}) still running after {elapsed:.1f} s"
    return elapsed, box.get("report")


def test_hung_bindings_are_abandoned_at_the_deadline(
    embedded: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = StuckCluster(embedded, hang_binds=True)
    sched = Scheduler(stuck, bind_workers=4)
    try:
        sched.start()
        wait_for_nodes(sched, 1)
        for i in range(12):
            embedded.create(PODS, make_pod(f"p{i}", cpu="10m", memory=None))
        # 4 workers stuck in their binds, the other 8 decided and queued behind them.
        wait_until(lambda: stuck.binds_started == 4 and sched.stats.scheduled == 12, what="binds hanging")
        with caplog.at_level(logging.WARNING, logger="minisched.scheduler.scheduler"):
            elapsed, report = _stop_within(sched, 2.0)
        assert elapsed < 3.5, f"shutdown took {elapsed:.1f} s with a 2 s deadline"
        assert report.bindings_in_flight == 4
        assert len(report.bindings_not_started) == 8
        # Nothing half-done: the bindings never started are forgotten, so no pod stays assumed.
        assert all(not sched.cache.is_assumed(f"default/{k.split('/')[1]}") for k in report.bindings_not_started)
        message = next(r.getMessage() for r in caplog.records if "shutdown deadline" in r.getMessage())
        assert "8 bindings not started" in message and "4 bindings in flight" in message, message
    finally:
        stuck.release.set()
    # Released, the 4 binds in flight land (each whole); the 8 abandoned ones were never sent.
    wait_until(lambda: sum(1 for p in embedded.list(PODS)["items"] if p["spec"].get("nodeName")) == 4,
               what="the 4 in-flight binds to land")
    time.sleep(0.2)
    assert sum(1 for p in embedded.list(PODS)["items"] if p["spec"].get("nodeName")) == 4


def test_an_event_backlog_is_cut_at_the_deadline(embedded: EmbeddedCluster) -> None:
    slow = StuckCluster(embedded, write_delay=0.02)
    sched = Scheduler(slow, bind_workers=8)
    sched.start()
    wait_for_nodes(sched, 1)
    for i in range(300):
        embedded.create(PODS, make_pod(f"p{i}", cpu="10m", memory=None))
    wait_until(lambda: sched.stats.bound == 300, what="300 bindings")
    # ~300 Scheduled events at 20 ms each: 6 s of backlog against a 1 s deadline.
    elapsed, report = _stop_within(sched, 1.0)
    assert elapsed < 2.5, f"shutdown took {elapsed:.1f} s with a 1 s deadline"
    assert report.writes_dropped > 0
    assert sched.recorder.dropped >= report.writes_dropped


def test_a_clean_shutdown_reports_nothing_abandoned(embedded: EmbeddedCluster) -> None:
    sched = Scheduler(embedded)
    sched.start()
    wait_for_nodes(sched, 1)
    embedded.create(PODS, make_pod("p", cpu="10m", memory=None))
    wait_until(lambda: sched.stats.bound == 1, what="the binding")
    report = sched.stop()
    assert report.clean, report.describe()
    assert sched.stop() is report  # idempotent


def _start_in_thread(sched: Scheduler, **kwargs: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}
    t = threading.Thread(target=lambda: box.setdefault("started", sched.start(**kwargs)), daemon=True)
    t.start()
    return t, box


def test_stop_ends_the_wait_for_informers_that_cannot_list(embedded: EmbeddedCluster) -> None:
    """An API server that cannot list (etcd down) kept Scheduler.start waiting its whole 60 s sync
    timeout, and stop() could not end that: a SIGTERM or a lost lease meanwhile waited it out.
    Now stop() ends the wait (kube-scheduler's WaitForCacheSync(ctx.Done())) and nothing starts."""
    embedded.faults.fail_next(10**6, verbs={"list", "watch"})  # a watch-list, then its fallback list
    sched = Scheduler(embedded)
    thread, box = _start_in_thread(sched)  # sync_timeout: the default 60 s
    try:
        wait_until(lambda: embedded.faults.injected >= 2, what="the informers' lists to fail")
        assert thread.is_alive()
        began = time.monotonic()
        report = sched.stop(5.0)
        thread.join(15)
        assert not thread.is_alive(), "start() still waiting for its informers 15 s after stop()"
        assert time.monotonic() - began < 10
        assert box["started"] is False
        assert not sched._threads  # no loop, flushers or housekeeping were started
        assert report.informers_running == [], report.describe()
    finally:
        embedded.faults.clear()
        sched.stop()


def test_the_callers_stop_event_ends_the_wait_too(embedded: EmbeddedCluster) -> None:
    embedded.faults.fail_next(10**6, verbs={"list", "watch"})  # a watch-list, then its fallback list
    sched = Scheduler(embedded)
    cancelled = threading.Event()
    thread, box = _start_in_thread(sched, stop=cancelled)
    try:
        wait_until(lambda: embedded.faults.injected >= 2, what="the informers' lists to fail")
        cancelled.set()
        thread.join(15)
        assert not thread.is_alive(), "start() still waiting 15 s after its stop event was set"
        assert box["started"] is False and not sched._threads  # no loop, flushers or housekeeping
    finally:
        embedded.faults.clear()
        sched.stop(5.0)
