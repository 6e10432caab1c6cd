"""Three of kube-scheduler v1.35's default-profile behaviours, end to end on every backend:
a ReplicaSet's pods spread by PodTopologySpread's system defaults, a pod whose pod-level requests
(spec.resources) fit nowhere, and host ports of sidecar vs regular init containers."""

from __future__ import annotations

import collections
import uuid
from typing import Any

from minisched.cluster import Cluster
from minisched.objects import make_namespace, make_node, make_pod
from minisched.resources import NODES, PODS, REPLICA_SETS
from minisched.scheduler.events import events_for
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import wait_until

Object = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"


def _setup(cluster: Cluster, nodes: list[tuple[str, str, str]]) -> tuple[str, str, list[str]]:
    """A namespace and nodes (name suffix, zone, cpu) that only this test's pods select."""
    tag = uuid.uuid4().hex[:6]
    ns = f"parity-{tag}"
    cluster.create("namespaces", make_namespace(ns))
    names = []
    for suffix, zone, cpu in nodes:
        name = f"par-{tag}-{suffix}"
        cluster.create(NODES, make_node(name, cpu=cpu, memory="64Gi", labels={ZONE: zone, "parity": tag}))
        names.append(name)
    return ns, tag, names


def _failed_message(cluster: Cluster, sched: Scheduler, pod: Object) -> str:
    sched.recorder.flush()
    (event,) = wait_until(lambda: events_for(cluster, pod, "FailedScheduling"), timeout=30, what="FailedScheduling")
    message: str = event["message"]
    return message


def test_replicaset_pods_spread_by_system_default_constraints(cluster: Cluster) -> None:
    # one big node that LeastAllocated alone would fill with every replica, three small ones
    ns, tag, nodes = _setup(cluster, [("big", "z1", "64"), ("a", "z1", "4"), ("b", "z2", "4"), ("c", "z2", "4")])
    rs = cluster.create(REPLICA_SETS, {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
        "spec": {"replicas": 8, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}}}, ns)
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs["metadata"]["uid"],
             "controller": True}
    with Scheduler(cluster, bind_workers=2) as sched:
        wait_until(lambda: len(sched.cache.node_names()) >= 4, timeout=30, what="nodes in the cache")
        # the replica set controller's part, done by hand (no controller-manager runs here)
        for i in range(8):
            pod = make_pod(f"web-{i}", namespace=ns, labels={"app": "web"}, node_selector={"parity": tag})
            pod["metadata"]["ownerReferences"] = [owner]
            cluster.create(PODS, pod)
            wait_until(lambda i=i: cluster.get(PODS, f"web-{i}", ns)["spec"].get("nodeName"), timeout=30,
                       what=f"web-{i} bound")
        placed = collections.Counter(cluster.get(PODS, f"web-{i}", ns)["spec"]["nodeName"] for i in range(8))
        # spread over every node and both zones, not piled onto the big one
        assert set(placed) == set(nodes), placed
        assert max(placed.values()) - min(placed.values()) <= 1, placed
        # the last replica's decision: PodTopologySpread scored (weight 2) and its best node is the one chosen
        decision = sched.decisions[f"{ns}/web-7"]
        spread = decision.score_plugins["PodTopologySpread"]
        assert spread.weight == 2


def test_pod_level_requests_that_fit_nowhere(cluster: Cluster) -> None:
    ns, tag, _ = _setup(cluster, [("a", "z1", "4"), ("b", "z2", "4")])
    pod = make_pod("big-pod-level", namespace=ns, cpu="100m", node_selector={"parity": tag})
    pod["spec"]["resources"] = {"requests": {"cpu": "5"}}  # the containers ask little, the pod 5 cores
    with Scheduler(cluster, bind_workers=2) as sched:
        wait_until(lambda: len(sched.cache.node_names()) >= 2, timeout=30, what="nodes in the cache")
        created = cluster.create(PODS, pod)
        message = _failed_message(cluster, sched, created)
    assert "2 Insufficient cpu" in message and "preemption: " in message, message
    assert cluster.get(PODS, "big-pod-level", ns)["spec"].get("nodeName") is None


def _with_init_port(name: str, ns: str, tag: str, node: str, *, sidecar: bool) -> Object:
    pod = make_pod(name, namespace=ns, node_selector={"parity": tag})
    init: Object = {"name": "init", "image": "busybox", "ports": [{"containerPort": 8080, "hostPort": 8080}]}
    if sidecar:
        init["restartPolicy"] = "Always"
    pod["spec"]["initContainers"] = [init]
    return pod


def test_sidecar_host_port_conflicts_a_regular_init_containers_does_not(cluster: Cluster) -> None:
    ns, tag, (node,) = _setup(cluster, [("only", "z1", "4")])
    holder = make_pod("holder", namespace=ns, host_ports=[8080], node_name=node)
    cluster.create(PODS, holder)
    with Scheduler(cluster, bind_workers=2) as sched:
        wait_until(lambda: sched.cache.pod_count() >= 1 and node in sched.cache.node_names(), timeout=30,
                   what="the holder in the cache")
        regular = cluster.create(PODS, _with_init_port("regular-init", ns, tag, node, sidecar=False))
        wait_until(lambda: cluster.get(PODS, "regular-init", ns)["spec"].get("nodeName") == node, timeout=30,
                   what="the regular-init pod bound beside the holder")
        sidecar = cluster.create(PODS, _with_init_port("sidecar", ns, tag, node, sidecar=True))
        message = _failed_message(cluster, sched, sidecar)
    assert "1 node(s) didn't have free ports for the requested pod ports" in message, message
    assert regular["metadata"]["name"] == "regular-init"
