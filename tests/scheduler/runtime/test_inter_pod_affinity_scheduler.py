"""InterPodAffinity end to end with the Scheduler, on the embedded cluster and the real control
plane: anti-affinity spreads replicas one per node / per zone and leaves the extra one pending with
kube-scheduler's FailedScheduling text; a pod waiting for its affinity target is scheduled when the
target arrives; a higher-priority pod's anti-affinity is satisfied by preempting the pod in the way."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.cluster import Cluster
from minisched.cluster.embedded import EmbeddedCluster, Kubelet
from minisched.controlplane import fake_node
from minisched.errors import NotFound
from minisched.objects import make_pod
from minisched.resources import EVENTS, NODES, PODS, PRIORITY_CLASSES
from minisched.scheduler.events import events_for
from minisched.scheduler.scheduler import Scheduler
from tests.plugins.backends import BACKENDS
from tests.scheduler.runtime.helpers import wait_for_nodes, wait_until

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest) -> Iterator[tuple[Cluster, str, str]]:
    """(cluster, namespace, a prefix for node names) on each backend, with three nodes: two in zone
    a, one in zone b. On the real control plane they are KWOK nodes, removed afterwards."""
    if request.param == "embedded":
        cluster: Cluster = request.getfixturevalue("embedded_cluster")
        namespace = "default"
    else:
        cluster = request.getfixturevalue("real_cluster")
        namespace = request.getfixturevalue("real_namespace")
    prefix = f"ipa-{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i}" for i in range(3)]
    for name, zone in zip(names, ("a", "a", "b"), strict=True):
        cluster.create(NODES, fake_node(name, cpu="4", memory="16Gi", labels={ZONE: zone}))
    yield cluster, namespace, prefix
    if request.param != "embedded":
        for name in names:
            with contextlib.suppress(NotFound):
                cluster.delete(NODES, name)


@pytest.fixture
def sched(env: tuple[Cluster, str, str]) -> Iterator[Scheduler]:
    cluster, _, _ = env
    s = Scheduler(cluster, bind_workers=4)
    s.start()
    wait_for_nodes(s, len(cluster.list(NODES)["items"]), timeout=30)
    yield s
    s.stop()


def replica(name: str, namespace: str, app: str, topology_key: str, **kw: Any) -> dict[str, Any]:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology_key}]}}
    return make_pod(name, namespace=namespace, cpu="100m", memory="64Mi", labels={"app": app}, affinity=anti, **kw)


def node_of(cluster: Cluster, namespace: str, name: str) -> str | None:
    return cluster.get(PODS, name, namespace)["spec"].get("nodeName")


def failed_scheduling(cluster: Cluster, sched: Scheduler, namespace: str, name: str) -> str:
    def message() -> str | None:
        sched.recorder.flush()
        events = events_for(cluster, cluster.get(PODS, name, namespace), "FailedScheduling")
        return events[-1]["message"] if events else None
    return str(wait_until(message, 30, f"FailedScheduling for {name}"))


def test_anti_affinity_spreads_replicas_one_per_node(env: tuple[Cluster, str, str], sched: Scheduler) -> None:
    cluster, ns, prefix = env
    total = len(cluster.list(NODES)["items"])
    assert total == 3, f"the cluster should hold only this test's nodes, has {total}"
    for i in range(4):
        cluster.create(PODS, replica(f"web-{i}", ns, f"web-{prefix}", HOST))
    placed = wait_until(lambda: [n for i in range(4) if (n := node_of(cluster, ns, f"web-{i}"))] if sum(
        1 for i in range(4) if node_of(cluster, ns, f"web-{i}")) == 3 else None, 30, "three replicas bound")
    assert sorted(placed) == sorted(f"{prefix}-{i}" for i in range(3))  # one per node
    pending = next(f"web-{i}" for i in range(4) if not node_of(cluster, ns, f"web-{i}"))
    assert failed_scheduling(cluster, sched, ns, pending) == (
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. "
        "no new claims to deallocate, preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")
    # a replica goes: its node is free for the pending one (assigned-pod Delete)
    gone = next(f"web-{i}" for i in range(4) if f"web-{i}" != pending)
    freed = node_of(cluster, ns, gone)
    cluster.delete(PODS, gone, ns, grace_period_seconds=0)
    wait_until(lambda: node_of(cluster, ns, pending) == freed, 30, "the pending replica on the freed node")


def test_anti_affinity_by_zone_and_affinity_waits_for_its_target(
        env: tuple[Cluster, str, str], sched: Scheduler) -> None:
    cluster, ns, prefix = env
    app = f"api-{prefix}"
    for i in range(3):
        cluster.create(PODS, replica(f"api-{i}", ns, app, ZONE))
    wait_until(lambda: sum(1 for i in range(3) if node_of(cluster, ns, f"api-{i}")) == 2, 30, "two replicas bound")
    zones = {cluster.get(NODES, n)["metadata"]["labels"][ZONE]
             for i in range(3) if (n := node_of(cluster, ns, f"api-{i}"))}
    assert zones == {"a", "b"}
    pending = next(f"api-{i}" for i in range(3) if not node_of(cluster, ns, f"api-{i}"))
    assert failed_scheduling(cluster, sched, ns, pending).startswith(
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules.")

    # required affinity to a pod that is not there yet: UnschedulableAndUnresolvable, so no preemption
    near = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": f"db-{prefix}"}}, "topologyKey": ZONE}]}}
    cluster.create(PODS, make_pod("near-db", namespace=ns, cpu="100m", memory="64Mi", affinity=near))
    assert failed_scheduling(cluster, sched, ns, "near-db") == (
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. "
        "no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    # the target arrives in zone b: the assigned-pod Add moves the waiting pod, which follows it
    cluster.create(PODS, make_pod("db", namespace=ns, cpu="100m", memory="64Mi", labels={"app": f"db-{prefix}"},
                                  node_name=f"{prefix}-2"))
    wait_until(lambda: node_of(cluster, ns, "near-db") == f"{prefix}-2", 30, "near-db next to db in zone b")

    # a running pod is relabelled into a target (an assigned-pod label Update, and the cache re-reads it)
    near_cache = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": f"cache-{prefix}"}}, "topologyKey": HOST}]}}
    cluster.create(PODS, make_pod("near-cache", namespace=ns, cpu="100m", memory="64Mi", affinity=near_cache))
    assert failed_scheduling(cluster, sched, ns, "near-cache").startswith(
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules.")
    cluster.patch(PODS, "db", {"metadata": {"labels": {"app": f"cache-{prefix}"}}}, ns)
    wait_until(lambda: node_of(cluster, ns, "near-cache") == f"{prefix}-2", 30, "near-cache on the relabelled pod's node")


def test_preemption_removes_the_pod_that_breaks_anti_affinity(
        env: tuple[Cluster, str, str], sched: Scheduler) -> None:
    cluster, ns, prefix = env
    low, high = f"ipa-low-{prefix}", f"ipa-high-{prefix}"
    cluster.create(PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                      "metadata": {"name": low}, "value": 10})
    cluster.create(PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                      "metadata": {"name": high}, "value": 1000})
    try:
        app = f"solo-{prefix}"
        # one low-priority replica in each zone
        for i, node in enumerate((f"{prefix}-0", f"{prefix}-2")):
            cluster.create(PODS, make_pod(f"old-{i}", namespace=ns, cpu="100m", memory="64Mi", labels={"app": app},
                                          priority_class_name=low, node_name=node))
        wait_until(lambda: sched.cache.snapshot().count_pods(lambda p: p.namespace == ns).sum() == 2, 30,
                   "the replicas in the cache")
        cluster.create(PODS, replica("new", ns, app, ZONE, priority_class_name=high))
        # The nomination is transient on a real API server: binding clears status.nominatedNodeName
        # (ClearingNominatedNodeNameAfterBinding), and with KWOK finishing the victim's deletion at
        # once the pod can be nominated, bound and cleared between two polls. Read the node the
        # preemption chose from whichever is there; the Preempted event below proves it preempted.
        def nominated_or_bound() -> str | None:
            pod = cluster.get(PODS, "new", ns)
            return pod["status"].get("nominatedNodeName") or pod["spec"].get("nodeName")
        nominated = wait_until(nominated_or_bound, 30, "the preemptor nominated")
        victim = "old-0" if nominated in (f"{prefix}-0", f"{prefix}-1") else "old-1"
        survivor = {"old-0": "old-1", "old-1": "old-0"}[victim]

        def terminating(name: str) -> bool:
            pods = {p["metadata"]["name"]: p for p in cluster.list(PODS, ns)["items"]}
            return name not in pods or bool(pods[name]["metadata"].get("deletionTimestamp"))

        wait_until(lambda: terminating(victim), 30, f"{victim} preempted")
        assert not terminating(survivor)  # one victim is enough: the other zone's replica stays
        if isinstance(cluster, EmbeddedCluster):
            Kubelet(cluster).sync()  # the graceful deletion completes (KWOK does it on the real one)
        node = wait_until(lambda: node_of(cluster, ns, "new"), 60, "the high-priority replica bound after preemption")
        assert node == nominated
        sched.recorder.flush()
        uid = cluster.get(PODS, "new", ns)["metadata"]["uid"]
        preempted = {e["message"] for e in cluster.list(EVENTS, ns)["items"] if e.get("reason") == "Preempted"}
        assert preempted == {f"Preempted by pod {uid} on node {nominated}"}
    finally:
        for name in (low, high):
            with contextlib.suppress(NotFound):
                cluster.delete(PRIORITY_CLASSES, name)


def test_match_label_keys_are_merged_into_the_selector_on_create(env: tuple[Cluster, str, str]) -> None:
    """kube-apiserver folds matchLabelKeys / mismatchLabelKeys into labelSelector when the pod is
    created (the scheduler reads the selector alone); the embedded server does the same."""
    cluster, ns, _ = env
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST,
            "matchLabelKeys": ["pod-template-hash", "absent"], "mismatchLabelKeys": ["tenant"]}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term],
                                    "preferredDuringSchedulingIgnoredDuringExecution": [
                                        {"weight": 10, "podAffinityTerm": {**term, "topologyKey": ZONE}}]}}
    pod = make_pod("keys", namespace=ns, labels={"app": "web", "pod-template-hash": "abc", "tenant": "t1"},
                   affinity=affinity, scheduler_name="nobody")
    stored = cluster.create(PODS, pod)["spec"]["affinity"]["podAntiAffinity"]
    merged = [{"key": "pod-template-hash", "operator": "In", "values": ["abc"]},
              {"key": "tenant", "operator": "NotIn", "values": ["t1"]}]
    required = stored["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert required["labelSelector"] == {"matchLabels": {"app": "web"}, "matchExpressions": merged}
    assert required["matchLabelKeys"] == ["pod-template-hash", "absent"]  # kept as written
    preferred = stored["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert preferred["labelSelector"]["matchExpressions"] == merged
