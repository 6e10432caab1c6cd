"""Defect 2 of issue 17: preemption read PodDisruptionBudgets with a LIST on every attempt, inside the
scheduling loop, and took any error of that LIST for "there are no PDBs". Now they come from an
informer; a LIST error after sync changes nothing, and before sync preemption fails with a status."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import ServiceUnavailable
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, POD_DISRUPTION_BUDGETS, PODS, resolve
from minisched.scheduler.events import events_for
from minisched.scheduler.plugins.default_preemption import DefaultPreemption
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import priority_classes, wait_for_nodes, wait_until


class PdbListSpy:
    """A Cluster that forwards everything to `inner`, counting PDB LISTs and failing them on demand."""

    def __init__(self, inner: EmbeddedCluster) -> None:
        self.inner = inner
        self.pdb_lists = 0
        self.fail_pdb_lists = False

    def list(self, resource: Any, *args: Any, **kwargs: Any) -> Any:
        if resolve(resource) == POD_DISRUPTION_BUDGETS:
            self.pdb_lists += 1
            if self.fail_pdb_lists:
                raise ServiceUnavailable("etcdserver: request timed out")
        return self.inner.list(resource, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def cluster(clock: VirtualClock) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(clock=clock)
    priority_classes(c, low=10, medium=20, high=1000)
    yield c
    c.close()


def _guarded_and_free(cluster: EmbeddedCluster) -> None:
    """n1 runs "guarded" (the lowest priority, so the natural victim) under a PDB allowing no
    disruption; n2 runs "free" (a little more important, no PDB)."""
    cluster.create(NODES, make_node("n1", cpu="1"))
    cluster.create(NODES, make_node("n2", cpu="1"))
    cluster.create(PODS, make_pod("guarded", cpu="1", memory=None, priority_class_name="low", node_name="n1",
                                  labels={"app": "db"}))
    cluster.create(PODS, make_pod("free", cpu="1", memory=None, priority_class_name="medium", node_name="n2",
                                  labels={"app": "web"}))
    cluster.create(POD_DISRUPTION_BUDGETS, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
    })


def _terminating(cluster: EmbeddedCluster) -> set[str]:
    return {p["metadata"]["name"] for p in cluster.list(PODS)["items"] if p["metadata"].get("deletionTimestamp")}


def _start(spy: PdbListSpy, clock: VirtualClock) -> Scheduler:
    sched = Scheduler(spy, clock=clock, seed=1)
    sched.start()
    wait_for_nodes(sched, 2)
    wait_until(lambda: sched.cache.pod_count() == 2, what="pods in cache")
    pdbs = getattr(sched.handle, "pdb_informer", None)
    if pdbs is not None:
        wait_until(lambda: len(pdbs.store.list()) == 1, what="the PDB in the informer")
    return sched


def _preemption(sched: Scheduler) -> DefaultPreemption:
    plugin = next(p for f in sched.frameworks.values() for p in f.points.post_filter if isinstance(p, DefaultPreemption))
    assert isinstance(plugin, DefaultPreemption)
    return plugin


def test_preemption_attempts_do_not_list_pdbs(cluster: EmbeddedCluster, clock: VirtualClock) -> None:
    _guarded_and_free(cluster)
    spy = PdbListSpy(cluster)
    sched = _start(spy, clock)
    try:
        lists_at_start = spy.pdb_lists
        # Five pods too big for any node even with every victim gone: five preemption attempts.
        for i in range(5):
            cluster.create(PODS, make_pod(f"huge-{i}", cpu="8", memory=None, priority_class_name="high"))
        wait_until(lambda: _preemption(sched).attempts_total >= 5, what="five preemption attempts")
        assert spy.pdb_lists == lists_at_start <= 1, (
            f"{spy.pdb_lists - lists_at_start} PDB LISTs during preemption: they must come from the informer")
    finally:
        sched.stop()


def test_a_failing_pdb_list_after_sync_does_not_mean_no_pdbs(cluster: EmbeddedCluster, clock: VirtualClock) -> None:
    _guarded_and_free(cluster)
    spy = PdbListSpy(cluster)
    sched = _start(spy, clock)
    try:
        spy.fail_pdb_lists = True  # an API blip: every PDB LIST from now on fails
        cluster.create(PODS, make_pod("vip", cpu="1", memory=None, priority_class_name="high"))
        wait_until(lambda: _terminating(cluster), what="a victim")
        assert _terminating(cluster) == {"free"}, "the PDB-protected pod was preempted"
    finally:
        sched.stop()


def test_before_the_pdb_informer_syncs_preemption_fails_with_a_status(
    cluster: EmbeddedCluster, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    _guarded_and_free(cluster)
    spy = PdbListSpy(cluster)
    sched = _start(spy, clock)
    try:
        informer = sched.handle.pdb_informer
        informer.has_synced = lambda: False  # as before its first list: nothing is known
        with caplog.at_level(logging.WARNING, logger="minisched.scheduler.scheduler"):
            cluster.create(PODS, make_pod("vip", cpu="1", memory=None, priority_class_name="high"))
            wait_until(lambda: _preemption(sched).attempts_total >= 1, what="a preemption attempt")
            wait_until(lambda: events_for(cluster, cluster.get(PODS, "vip", "default"), "FailedScheduling"),
                       what="FailedScheduling")
        assert not _terminating(cluster), "preempted without knowing the PDBs"
        assert any("PodDisruptionBudget informer has not synced" in r.getMessage() for r in caplog.records), caplog.text
        assert (cluster.get(PODS, "vip", "default")["status"].get("nominatedNodeName") or "") == ""
    finally:
        sched.stop()
