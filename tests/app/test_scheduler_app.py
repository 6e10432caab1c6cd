"""SchedulerApp: the scheduler process with metrics, health and leader election, as `minisched run`
runs it. Real time with short leases (a lease of 1.5 s), on the embedded cluster."""

from __future__ import annotations

import gc
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from minisched.app import SchedulerApp
from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.observability import runtime
from minisched.resources import LEASES

FAST_LEASE = {"lease_duration": 1.5, "renew_deadline": 1.0, "retry_period": 0.2}


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def bound(cluster: EmbeddedCluster) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"]
            for p in cluster.list("pods", "default")["items"] if p["spec"].get("nodeName")}


def start(app: SchedulerApp) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=app.run, args=(stop,), daemon=True)
    thread.start()
    return stop, thread


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def cluster():
    c = EmbeddedCluster()
    c.create("nodes", make_node("n1"))
    yield c
    c.close()


def test_without_leader_election_it_schedules_and_serves_metrics(cluster):
    app = SchedulerApp(cluster, metrics_port=0)
    stop, thread = start(app)
    try:
        cluster.create("pods", make_pod("p1"))
        wait_until(lambda: bound(cluster) == {"p1": "n1"}, "p1 to be bound")
        assert app.server is not None
        wait_until(lambda: app.server.serving and http_get(app.server.url + "/readyz")[0] == 200,
                   "/readyz to answer 200")
        status, body = http_get(app.server.url + "/metrics")
        assert status == 200
        assert 'scheduler_schedule_attempts_total{profile="minisched",result="scheduled"} 1.0' in body
        # the memory watch beside them, sampled when run() starts: RSS and the allocators' books
        assert "process_resident_memory_bytes" in body and "minisched_pymalloc_allocated_blocks" in body
        if runtime._LIBC is not None:
            assert "minisched_glibc_malloc_in_use_bytes" in body and "minisched_pymalloc_arenas" in body
    finally:
        stop.set()
        thread.join(20)
    assert not thread.is_alive() and not app.lost_lease


def test_a_standby_takes_over_when_the_leader_stops_and_no_pod_is_bound_twice(cluster):
    a = SchedulerApp(cluster, leader_elect=True, identity="sched-a", lease_namespace="default", **FAST_LEASE)
    stop_a, thread_a = start(a)
    wait_until(lambda: a.scheduler is not None, "sched-a to lead")
    b = SchedulerApp(cluster, leader_elect=True, identity="sched-b", lease_namespace="default",
                     metrics_port=0, **FAST_LEASE)
    stop_b, thread_b = start(b)
    try:
        cluster.create("pods", make_pod("p1"))
        wait_until(lambda: "p1" in bound(cluster), "p1 to be bound by the leader")
        assert b.scheduler is None  # the standby schedules nothing
        assert b.server is not None
        # the app makes its server before run() starts it: under load the test can get here first
        wait_until(lambda: b.server.serving and http_get(b.server.url + "/readyz")[0] == 200,
                   "the standby to be ready")
        stop_a.set()
        thread_a.join(20)
        assert not thread_a.is_alive() and not a.lost_lease  # released on shutdown, not lost
        wait_until(lambda: b.scheduler is not None, "sched-b to take over")
        assert cluster.get(LEASES, "minisched", "default")["spec"]["holderIdentity"] == "sched-b"
        cluster.create("pods", make_pod("p2"))
        wait_until(lambda: "p2" in bound(cluster), "p2 to be bound by the new leader")
    finally:
        stop_a.set()
        stop_b.set()
        thread_b.join(20)
    assert a.scheduler is not None and b.scheduler is not None
    assert a.scheduler.stats.bound + b.scheduler.stats.bound == 2
    assert a.scheduler.stats.bind_conflicts + b.scheduler.stats.bind_conflicts == 0


def test_a_leader_that_loses_its_lease_stops_scheduling_and_returns(cluster):
    # A shutdown deadline well inside the join below: with the API server gone, whatever still has
    # to reach it waits out the deadline (20 s by default, as long as the join, so a loaded run lost)
    app = SchedulerApp(cluster, leader_elect=True, identity="sched-a", lease_namespace="default",
                       shutdown_timeout=5.0, **FAST_LEASE)
    stop, thread = start(app)
    try:
        wait_until(lambda: app.scheduler is not None, "sched-a to lead")
        factory = app.scheduler.factory  # type: ignore[union-attr]

        def synced() -> bool:  # every informer listed: the outage below hits a running scheduler
            started = factory.wait_for_cache_sync(0)
            return bool(started) and len(started) == len(factory.informers()) and all(started.values())

        wait_until(synced, "sched-a's informers to sync")
        cluster.faults.fail_next(10_000)  # the API server goes away: renewals fail past the deadline
        thread.join(20)
        assert not thread.is_alive(), "run() must return once the lease is lost"
        assert app.lost_lease
    finally:
        stop.set()


def test_a_lease_lost_while_the_informers_cannot_list_returns_at_once(cluster):
    """The lease is lost while the scheduler still waits for its informers' first lists (the API
    server can no longer list, then answers nothing at all). Before, Scheduler.start waited out its
    60 s sync timeout before run() could see the lost lease; now the lost lease ends that wait."""
    cluster.faults.fail_next(10**6, verbs={"list", "watch"})  # the lease is won, the informers never sync
    app = SchedulerApp(cluster, leader_elect=True, identity="sched-a", lease_namespace="default",
                       shutdown_timeout=5.0, **FAST_LEASE)
    stop, thread = start(app)
    try:
        wait_until(lambda: app.scheduler is not None, "sched-a to lead")
        wait_until(lambda: cluster.faults.injected >= 2, "the informers' lists to fail")
        cluster.faults.fail_next(10**6)  # now every request fails: renewals too
        thread.join(20)
        assert not thread.is_alive(), "run() must return once the lease is lost, synced or not"
        assert app.lost_lease
        sched = app.scheduler
        assert sched is not None and not sched._threads  # its loop never started
        # ...and it was shut down (before, run() returned while the leading thread still waited in
        # Scheduler.start, its informers running, for the rest of the 60 s sync timeout)
        leading = getattr(app.elector, "leading_thread", None)
        assert leading is None or not leading.is_alive(), "the leading thread still waits for the sync"
        assert sched.shutdown_report is not None
    finally:
        cluster.faults.clear()
        stop.set()
        thread.join(20)


def test_a_stop_while_the_informers_cannot_list_returns_at_once(cluster):
    cluster.faults.fail_next(10**6, verbs={"list", "watch"})  # a watch-list, then its fallback list
    app = SchedulerApp(cluster, shutdown_timeout=5.0)
    stop, thread = start(app)
    try:
        wait_until(lambda: app.scheduler is not None and cluster.faults.injected >= 2,
                   "the informers' lists to fail")
        stop.set()
        thread.join(20)
        assert not thread.is_alive(), "run() must return within its shutdown deadline of a stop"
    finally:
        cluster.faults.clear()
        stop.set()


def test_the_memory_watch_samples_while_running_and_stops_with_the_app(cluster):
    app = SchedulerApp(cluster, memory_sample_interval=0.05, malloc_trim=True)
    stop, thread = start(app)
    try:
        wait_until(lambda: len(app.memory.samples) >= 3, "three memory samples")
    finally:
        stop.set()
        thread.join(20)
    assert not thread.is_alive()
    assert app.memory.samples[0].label == "start" and app.memory.samples[-1].label == "periodic"
    assert app.memory.trims >= 1
    n = len(app.memory.samples)
    time.sleep(0.3)  # the sampler stopped with the app
    assert len(app.memory.samples) == n
    with pytest.raises(ValueError, match="memory_sample_interval"):
        SchedulerApp(cluster, memory_sample_interval=0)


def test_a_service_keeps_a_short_latency_log(cluster):
    """`minisched run` exports latencies as histograms; its in-memory log of cycle latencies held
    200,000 floats (6 MiB when full, rising for hours in the real-control-plane soak's tracemalloc
    top differences); a service keeps the newest 1,000."""
    from minisched.app import SERVICE_CYCLE_LOG

    app = SchedulerApp(cluster)
    sched = app._new_scheduler()
    assert sched.stats.cycle_seconds.maxlen == SERVICE_CYCLE_LOG == 1_000
    for _ in range(3 * SERVICE_CYCLE_LOG):
        sched._observe_attempt("scheduled", 0.0, cycle_only=True)
    assert len(sched.stats.cycle_seconds) == SERVICE_CYCLE_LOG


def test_buffers_resize_what_a_service_keeps(cluster):
    """`buffers` (MINISCHED_BUFFERS for `minisched run`) is how a short soak lowers the bounded
    buffers it would otherwise take for leaks while they fill."""
    from minisched.app import SERVICE_BUFFERS

    sched = SchedulerApp(cluster)._new_scheduler()
    assert (sched.recorder.max_correlated, sched.cache.table.pod_log_limit, sched.stats.cycle_seconds.maxlen) == (
        SERVICE_BUFFERS["event-correlator"], SERVICE_BUFFERS["pod-change-log"], SERVICE_BUFFERS["cycle-log"]) == (
        4096, 4096, 1_000)
    app = SchedulerApp(cluster, buffers={"event-correlator": 64, "pod-change-log": 32, "cycle-log": 16,
                                         "memory-samples": 2})
    sched = app._new_scheduler()
    assert (sched.recorder.max_correlated, sched.cache.table.pod_log_limit, sched.stats.cycle_seconds.maxlen,
            app.memory.samples.maxlen) == (64, 32, 16, 2)
    with pytest.raises(ValueError, match="unknown buffer 'cycle_log'; known: event-correlator"):
        SchedulerApp(cluster, buffers={"cycle_log": 16})
    with pytest.raises(ValueError, match="memory-samples must be an integer of at least 1, got 0"):
        SchedulerApp(cluster, buffers={"memory-samples": 0})
    with pytest.raises(ValueError, match="recorder_factory exclude each other"):
        SchedulerApp(cluster, buffers={"event-correlator": 64}, recorder_factory=lambda c: None)  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize("freeze_heap", [False, True])
def test_only_an_app_that_owns_its_process_freezes_the_heap_once_its_informers_have_listed(cluster, freeze_heap):
    gc.unfreeze()
    for i in range(200):  # listed objects the freeze must take
        cluster.create("pods", make_pod(f"listed-{i}", node_name="elsewhere"))
    app = SchedulerApp(cluster, freeze_heap=freeze_heap)
    stop, thread = start(app)
    try:
        wait_until(lambda: app.scheduler is not None and app._informers_synced() is None, "the informers to sync")
        cluster.create("pods", make_pod("p1"))
        wait_until(lambda: "p1" in bound(cluster), "p1 to be bound")
        frozen = gc.get_freeze_count()
    finally:
        stop.set()
        thread.join(20)
        gc.unfreeze()
    if freeze_heap:
        assert frozen > 200 * 10  # the pods' dicts and lists among them
    else:
        assert frozen == 0  # a notebook's or a test's process is left as it was
