"""The independent observer the real-replica tests rely on (minisched.controlplane.invariants):
each violation it must catch is produced here on purpose, on the embedded cluster, by writing
what a broken scheduler would write."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.cluster.embedded import EmbeddedCluster
from minisched.controlplane.invariants import ClusterObserver, tolerates
from minisched.objects import make_node, make_pod, taint, toleration
from minisched.resources import NODES, PODS


@pytest.fixture
def cluster() -> EmbeddedCluster:
    return EmbeddedCluster()


def _observe(cluster: EmbeddedCluster, **options: Any) -> ClusterObserver:
    return ClusterObserver(cluster, namespace="default", **options).start()


def _settle(obs: ClusterObserver, predicate: Any, what: str) -> None:
    obs.wait_for(predicate, 10, what)


def test_a_clean_run_passes(cluster: EmbeddedCluster) -> None:
    cluster.create(NODES, make_node("n1", cpu="1"))
    for i in range(3):
        cluster.create(PODS, make_pod(f"p{i}", cpu="300m"))
    obs = _observe(cluster)
    try:
        for i in range(3):
            cluster.bind("default", f"p{i}", "n1")
        _settle(obs, lambda o: o.bound_count() == 3, "3 bound")
        report = obs.check(expect_bound=["p0", "p1", "p2"])
        assert report.ok, report
        assert report.bound == 3
    finally:
        obs.stop()


def test_over_allocatable_is_caught_on_a_node_created_after_the_observer(cluster: EmbeddedCluster) -> None:
    obs = _observe(cluster)
    try:
        cluster.create(NODES, make_node("late", cpu="1"))
        _settle(obs, lambda o: "late" in o.nodes, "the node seen")
        for name in ("a", "b"):
            cluster.create(PODS, make_pod(name, cpu="600m"))
            cluster.bind("default", name, "late")  # the API server takes both
        _settle(obs, lambda o: o.bound_count() == 2, "2 bound")
        report = obs.check()
        assert [(o.node, o.resource) for o in report.overcommits] == [("late", "cpu")]
        assert not report.ok
    finally:
        obs.stop()


def test_a_node_shrinking_under_its_pods_is_an_overcommit(cluster: EmbeddedCluster) -> None:
    node = cluster.create(NODES, make_node("n1", cpu="2"))
    cluster.create(PODS, make_pod("a", cpu="1500m"))
    cluster.bind("default", "a", "n1")
    obs = _observe(cluster)
    try:
        assert obs.check().ok
        node["status"]["allocatable"]["cpu"] = "1"
        cluster.update(NODES, node, subresource="status")
        _settle(obs, lambda o: o.overcommits, "the shrink seen")
        assert obs.overcommits[0].after == "MODIFIED node n1"
    finally:
        obs.stop()


class _ScriptedWatch:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events, self.stopped = events, threading.Event()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield from self.events
        self.stopped.wait(30)

    def stop(self) -> None:
        self.stopped.set()


class _ScriptedServer:
    """Lists nothing, then sends each resource's scripted watch events once: what a server that let
    a binding change a pod's nodeName would send (the real and the embedded one refuse the update)."""

    def __init__(self, events: dict[str, list[dict[str, Any]]]) -> None:
        self.events = events

    def list(self, resource: str, namespace: str | None = None, **_: Any) -> dict[str, Any]:
        return {"items": [], "metadata": {"resourceVersion": "1"}}

    def watch(self, resource: str, namespace: str | None = None, **_: Any) -> _ScriptedWatch:
        return _ScriptedWatch(self.events.pop(resource, []))


def test_a_nodename_that_changes_is_a_double_binding() -> None:
    pod = make_pod("p")
    on_a = {**pod, "spec": {**pod["spec"], "nodeName": "a"}}
    on_b = {**pod, "spec": {**pod["spec"], "nodeName": "b"}}
    server = _ScriptedServer({"pods": [{"type": "ADDED", "object": pod}, {"type": "MODIFIED", "object": on_a},
                                       {"type": "MODIFIED", "object": on_b}]})
    obs = ClusterObserver(server, namespace="default", watch_events=False).start()
    try:
        _settle(obs, lambda o: o.events_seen == 3, "3 events")
        assert obs.check().bound_twice == ["default/p: nodeName a then ['b']"]
    finally:
        obs.stop()


def test_a_pod_deleted_and_created_again_elsewhere_is_not_a_double_binding(cluster: EmbeddedCluster) -> None:
    cluster.create(NODES, make_node("n1"))
    cluster.create(NODES, make_node("n2"))
    cluster.create(PODS, make_pod("p"))
    obs = _observe(cluster)
    try:
        cluster.bind("default", "p", "n1")
        _settle(obs, lambda o: o.bound_count() == 1, "bound")
        cluster.delete(PODS, "p", "default", grace_period_seconds=0)
        _settle(obs, lambda o: "default/p" not in o.pod_objects, "deleted")
        cluster.create(PODS, make_pod("p"))
        cluster.bind("default", "p", "n2")
        _settle(obs, lambda o: (r := o.record("default/p")) is not None and r.node == "n2", "bound again")
        assert obs.check().ok
    finally:
        obs.stop()


def test_two_scheduled_events_for_one_pod_are_two_successful_bindings(cluster: EmbeddedCluster) -> None:
    cluster.create(NODES, make_node("n1"))
    cluster.create(PODS, make_pod("p"))
    obs = _observe(cluster)
    try:
        cluster.bind("default", "p", "n1")
        # The pod's update and the events arrive on separate watches: wait for the binding too,
        # or the check can run while the observer still sees the pod pending.
        _settle(obs, lambda o: o.bound_count() == 1, "the pod bound")
        for replica in ("r1", "r2"):
            cluster.create("events", {
                "metadata": {"name": f"p.{replica}", "namespace": "default"},
                "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
                "reason": "Scheduled", "message": f"{replica} bound it", "type": "Normal",
            }, "default")
            if replica == "r1":
                _settle(obs, lambda o: o.scheduled_count("default/p") == 1, "one event")
                assert obs.check().ok
        _settle(obs, lambda o: o.scheduled_count("default/p") == 2, "two events")
        doubles = obs.check().bound_twice
        assert len(doubles) == 1 and "2 Scheduled events" in doubles[0]
    finally:
        obs.stop()


def test_pending_pods_that_fit_are_reported_and_ones_that_do_not_are_not(cluster: EmbeddedCluster) -> None:
    cluster.create(NODES, make_node("small", cpu="1"))
    cluster.create(NODES, make_node("tainted", cpu="8", taints=[taint("dedicated", "x")]))
    cluster.create(NODES, make_node("cordoned", cpu="8", unschedulable=True))
    cluster.create(PODS, make_pod("filler", cpu="800m"))
    cluster.bind("default", "filler", "small")
    cluster.create(PODS, make_pod("big", cpu="2"))  # fits only the tainted or cordoned nodes: no
    cluster.create(PODS, make_pod("tiny", cpu="100m"))  # fits small
    cluster.create(PODS, make_pod("elsewhere", cpu="100m", scheduler_name="other"))  # not ours
    cluster.create(PODS, make_pod("tolerant", cpu="2", tolerations=[toleration("dedicated", "x")]))
    obs = _observe(cluster, scheduler_name="minisched")
    try:
        assert obs.pending_that_fit() == ["default/tiny fits small", "default/tolerant fits tainted"]
        report = obs.check(expect_bound=["filler", "big"])
        assert report.unbound == ["default/big"]
    finally:
        obs.stop()


@pytest.mark.parametrize(
    ("tol", "expected"),
    [
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "k", "operator": "Equal", "value": "w"}, False),
        ({"key": "k", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),
        ({"operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_tolerates(tol: dict[str, str], expected: bool) -> None:
    pod = {"spec": {"tolerations": [tol]}}
    assert tolerates(pod, {"key": "k", "value": "v", "effect": "NoSchedule"}) is expected
