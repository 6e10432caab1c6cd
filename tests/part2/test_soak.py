"""The soak driver on the embedded cluster: rounds complete, nothing is left behind, and a leak
of one object per pod shows up as a slope."""

from __future__ import annotations

import collections
from collections.abc import Iterator

import pytest

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node
from minisched.observability.runtime import MemorySample, MemoryWatch
from minisched.observability.soak import print_verdicts, run_soak
from minisched.resources import EVENTS, PODS
from minisched.scheduler.events import EventRecorder
from minisched.scheduler.scheduler import Scheduler


@pytest.fixture
def running() -> Iterator[tuple[EmbeddedCluster, Scheduler]]:
    # Bounded buffers fill during a warm-up; lower their bounds so a few rounds get past it:
    # the event correlator keeps 4,096 recent events (client-go's LRU size; max_correlated=30
    # below), the node table's pod-change log 4,096 changes, the server's watch history
    # `history_window` changes.
    cluster = EmbeddedCluster(seed=0, history_window=200)
    for i in range(4):
        cluster.create("nodes", make_node(f"node-{i}", cpu="32", memory="64Gi", pods="200"))
    sched = Scheduler(cluster, seed=0, recorder=EventRecorder(cluster, max_correlated=30))
    sched.stats.cycle_seconds = collections.deque(maxlen=50)  # a bound the soak fills quickly
    sched.cache.table.pod_log_limit = 64
    sched.start()
    yield cluster, sched
    sched.stop()
    cluster.close()


def test_soak_rounds_leave_nothing_behind(running: tuple[EmbeddedCluster, Scheduler]) -> None:
    cluster, sched = running
    watch = MemoryWatch().start()
    try:
        seen: list[int] = []
        result = run_soak(cluster, sched, watch, rounds=3, pods_per_round=60, on_round=lambda r, s: seen.append(r))
    finally:
        watch.stop()
    assert (result.rounds, result.pods, seen) == (3, 180, [0, 1, 2])
    assert sched.stats.bound == 180 and sched.cache.pod_count() == 0
    assert cluster.list(PODS)["items"] == [] and cluster.list(EVENTS, "default")["items"] == []
    assert len(result.series("rss_bytes")) == 3 and len(result.round_seconds) == 3
    with pytest.raises(ValueError, match="warm-up"):
        result.growth_after_warmup(3)


def test_each_round_waits_for_its_events_to_be_written(running: tuple[EmbeddedCluster, Scheduler]) -> None:
    """On a real API server the event writer lags the bindings: a round must not sample (nor expire
    the events) while writes still wait in its queue."""
    import time

    cluster, sched = running
    create = cluster.create

    def slow_event_writes(resource, obj, *args, **kwargs):  # type: ignore[no-untyped-def]
        if resource == EVENTS or getattr(resource, "plural", "") == "events":
            time.sleep(0.01)
        return create(resource, obj, *args, **kwargs)

    cluster.create = slow_event_writes  # type: ignore[method-assign]
    queued: list[int] = []
    watch = MemoryWatch().start()
    try:
        run_soak(cluster, sched, watch, rounds=2, pods_per_round=20,
                 on_round=lambda r, s: queued.append(sched.recorder._queue.qsize()))
    finally:
        watch.stop()
        cluster.create = create  # type: ignore[method-assign]
    assert queued == [0, 0]
    assert cluster.list(EVENTS, "default")["items"] == []  # every event was written, then expired


def test_a_leak_of_one_object_per_pod_is_a_slope(running: tuple[EmbeddedCluster, Scheduler]) -> None:
    cluster, sched = running
    watch = MemoryWatch().start()
    leaked: list[object] = []

    def leak(r: int, s: MemorySample) -> None:
        if r >= 0:
            leaked.extend(object() for _ in range(300))  # five 16-byte objects per pod

    try:
        clean = run_soak(cluster, sched, watch, rounds=8, pods_per_round=60)
        leaky = run_soak(cluster, sched, watch, rounds=6, pods_per_round=60, prefix="leaky", on_round=leak)
    finally:
        watch.stop()
    # each leaked object is one pymalloc block: 300 blocks per round of 60 pods, far above the
    # round-to-round noise of objects in flight (a few hundred blocks up or down)
    assert leaky.slope_after_warmup(2) >= 250, leaky.series("allocated_blocks")
    assert abs(clean.slope_after_warmup(4)) < 150, clean.series("allocated_blocks")


def test_budget_stops_after_the_minimum(running: tuple[EmbeddedCluster, Scheduler]) -> None:
    cluster, sched = running
    with MemoryWatch() as watch:
        result = run_soak(cluster, sched, watch, rounds=50, pods_per_round=10, budget_seconds=0.0, min_rounds=2)
    assert result.rounds == 2


def test_event_correlator_bound_is_configurable() -> None:
    cluster = EmbeddedCluster(seed=0)
    try:
        recorder = EventRecorder(cluster, asynchronous=False, max_correlated=2)
        for i in range(5):
            pod = cluster.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
                                        "spec": {"containers": [{"name": "c", "image": "i"}]}}, "default")
            recorder.scheduled(pod, "node-a")
        assert len(recorder._correlated) == 2 and recorder.written == 5
        with pytest.raises(ValueError, match="max_correlated"):
            EventRecorder(cluster, max_correlated=0)
    finally:
        cluster.close()


def test_verdicts_pass_only_when_every_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert print_verdicts([("slope 1 < 2", True), ("blocks 3 < 4", True)], "flat") is True
    assert print_verdicts([("slope 5 < 2", False), ("blocks 3 < 4", True)], "flat") is False
    lines = capsys.readouterr().out.split("\n")
    assert [line for line in lines if line] == [
        "PASS  slope 1 < 2", "PASS  blocks 3 < 4", "PASS  flat",
        "FAIL  slope 5 < 2", "PASS  blocks 3 < 4", "FAIL  flat",
    ]
    with pytest.raises(ValueError, match="no checks"):
        print_verdicts([], "flat")


def test_collector_phases_pull_each_lever_at_its_round_and_put_everything_back() -> None:
    import gc

    from minisched.observability.runtime import GCPauseRecorder, forced_collection
    from minisched.observability.soak import CollectorPhases

    defaults = gc.get_threshold()
    seen = []
    with GCPauseRecorder() as recorder, CollectorPhases(2, 3, threshold_factor=4) as phases:
        for r in range(phases.total_rounds):
            forced_collection()  # the soak's sample after round r
            phases.after_round(r)
            seen.append((gc.get_freeze_count() > 0, gc.get_threshold()[0]))
    assert phases.rounds == [3, 3, 3] and len(phases.starts) == 3
    assert seen[:2] == [(False, defaults[0])] * 2  # warm-up and the default phase's start
    assert seen[4] == (True, defaults[0]) and seen[7] == (True, 4 * defaults[0])
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == defaults  # restored after the last round
    summary = phases.summary(recorder, pods_per_round=10)
    assert [p.name for p in summary] == ["default collector", "after gc.freeze()", "frozen, threshold0 x4"]
    assert [p.pods for p in summary] == [30, 30, 30]
    assert all(p.forced_full_p50 > 0 for p in summary)
    with pytest.raises(ValueError, match="rounds_per_phase"):
        CollectorPhases(1, 0)
