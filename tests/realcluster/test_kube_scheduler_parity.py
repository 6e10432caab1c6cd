"""minisched beside kube-scheduler v1.35 itself (default profile) on the real control plane: the
same situations, each scheduler on its own twin set of nodes, and the same outcome and the
same FailedScheduling words (node counts included: both see every node of the cluster).

- a ReplicaSet's pods with no constraints of their own, spread by the system default constraints;
- a pod whose pod-level requests (spec.resources) fit nowhere;
- a pod with pod-level requests whose containers' non-zero defaults decide NodeResourcesFit's score;
- the FailedScheduling wording kube 1.35 changed: TaintToleration's, and that of the nodes outside
  NodeAffinity's PreFilterResult;
- a sidecar's host port that conflicts, and a regular init container's that does not.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from minisched.controlplane import ControlPlane
from minisched.objects import make_namespace, make_node, make_pod, taint
from minisched.resources import NODES, PODS, REPLICA_SETS
from minisched.scheduler.events import events_for
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import wait_until

pytestmark = [pytest.mark.realcluster]

KUBE = "kube-parity"  # a kube-scheduler profile with every default plugin
MINI = "minisched"
ZONE = "topology.kubernetes.io/zone"
Object = dict[str, Any]


@pytest.fixture
def kube_scheduler(control_plane: ControlPlane, real_cluster: Any) -> Iterator[None]:
    control_plane.start_scheduler({"profiles": [{"schedulerName": KUBE}], "percentageOfNodesToScore": 100,
                                   "clientConnection": {"qps": 500, "burst": 1000}}, name=KUBE)
    try:
        yield
    finally:
        control_plane.stop_component(KUBE)


def _twins(cluster: Any, nodes: list[tuple[str, str, str]],
           node_args: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, tuple[str, str, list[str]]]:
    """For each scheduler: a namespace, a tag its pods select nodes by, and its own copy of `nodes`
    ((suffix, zone, cpu), 64Gi of memory; `node_args` adds make_node's arguments by suffix)."""
    out = {}
    for who in (KUBE, MINI):
        tag = f"{who[:4]}-{uuid.uuid4().hex[:6]}"
        ns = f"parity-{tag}"
        cluster.create("namespaces", make_namespace(ns))
        names = []
        for suffix, zone, cpu in nodes:
            name = f"{tag}-{suffix}"
            args = {"memory": "64Gi", **(node_args or {}).get(suffix, {})}
            cluster.create(NODES, make_node(name, cpu=cpu, labels={ZONE: zone, "parity": tag}, **args))
            names.append(name)
        out[who] = (ns, tag, names)
    return out


def _failed(cluster: Any, pod: Object, sched: Scheduler | None) -> str:
    def message() -> str | None:
        if sched is not None:
            sched.recorder.flush()
        events = events_for(cluster, pod, "FailedScheduling")
        return str(events[0].get("message") or events[0].get("note") or "") if events else None

    found: str = wait_until(message, timeout=60, what="FailedScheduling")
    return found


def _bound(cluster: Any, name: str, ns: str) -> str | None:
    node: str | None = cluster.get(PODS, name, ns)["spec"].get("nodeName")
    return node


def test_replicaset_spread_matches_kube_scheduler(real_cluster: Any, kube_scheduler: None) -> None:
    twins = _twins(real_cluster, [("big", "z1", "64"), ("a", "z1", "4"), ("b", "z2", "4"), ("c", "z2", "4")])
    placed: dict[str, collections.Counter[str]] = {}
    with Scheduler(real_cluster, bind_workers=2) as sched:
        wait_until(lambda: len(sched.cache.node_names()) >= 8, timeout=60, what="nodes in the cache")
        for who, (ns, tag, _) in twins.items():
            rs = real_cluster.create(REPLICA_SETS, {
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
                "spec": {"replicas": 8, "selector": {"matchLabels": {"app": "web"}}, "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "pause"}]}}}}, ns)
            owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs["metadata"]["uid"],
                     "controller": True}
            for i in range(8):  # one at a time, as a rollout's pods come
                pod = make_pod(f"web-{i}", namespace=ns, labels={"app": "web"}, node_selector={"parity": tag},
                               scheduler_name=who)
                pod["metadata"]["ownerReferences"] = [owner]
                real_cluster.create(PODS, pod)
                wait_until(lambda i=i, ns=ns: _bound(real_cluster, f"web-{i}", ns), timeout=60, what=f"{who} web-{i}")
            placed[who] = collections.Counter(
                str(_bound(real_cluster, f"web-{i}", ns)).rsplit("-", 1)[1] for i in range(8))
    # both spread the replicas two per node (the big node alone would take all eight by resources)
    assert placed[KUBE] == placed[MINI] == collections.Counter({"big": 2, "a": 2, "b": 2, "c": 2}), placed


def test_pod_level_requests_message_matches_kube_scheduler(real_cluster: Any, kube_scheduler: None) -> None:
    twins = _twins(real_cluster, [("a", "z1", "4"), ("b", "z2", "4")])
    messages = {}
    with Scheduler(real_cluster, bind_workers=2) as sched:
        wait_until(lambda: len(sched.cache.node_names()) >= 4, timeout=60, what="nodes in the cache")
        for who, (ns, tag, _) in twins.items():
            pod = make_pod("pod-level", namespace=ns, cpu="100m", node_selector={"parity": tag}, scheduler_name=who)
            pod["spec"]["resources"] = {"requests": {"cpu": "5"}}
            created = real_cluster.create(PODS, pod)
            messages[who] = _failed(real_cluster, created, sched if who == MINI else None)
    assert "2 Insufficient cpu" in messages[KUBE], messages
    assert messages[MINI] == messages[KUBE], messages


def test_pod_level_requests_score_matches_kube_scheduler(real_cluster: Any, kube_scheduler: None) -> None:
    """Pod level {cpu 1}, containers {memory 64Mi}, {}, {}: as the incoming pod kube scores memory
    64Mi + 2 x 200Mi (each container without a request counts the default beside the pod level),
    which makes the roomy node win; 64Mi alone would pick the small one (the numbers are worked out
    in tests/scheduler/plugins/test_pod_level_resources_and_ports.py)."""
    twins = _twins(real_cluster, [("small", "z1", "4"), ("roomy", "z1", "2")],
                   node_args={"small": {"memory": "512Mi"}, "roomy": {"memory": "4Gi"}})
    placed = {}
    with Scheduler(real_cluster, bind_workers=2) as sched:
        wait_until(lambda: len(sched.cache.node_names()) >= 4, timeout=60, what="nodes in the cache")
        for who, (ns, tag, _) in twins.items():
            pod = make_pod("pod-level", namespace=ns, cpu=None, memory=None, node_selector={"parity": tag},
                           scheduler_name=who)
            pod["spec"]["containers"] = [
                {"name": "c0", "image": "pause", "resources": {"requests": {"memory": "64Mi"}}},
                {"name": "c1", "image": "pause"}, {"name": "c2", "image": "pause"}]
            pod["spec"]["resources"] = {"requests": {"cpu": "1"}}
            real_cluster.create(PODS, pod)
            placed[who] = wait_until(lambda ns=ns: _bound(real_cluster, "pod-level", ns), timeout=60, what=f"{who} bound")
    assert str(placed[KUBE]).endswith("-roomy"), placed
    assert str(placed[MINI]).endswith("-roomy"), placed


def test_filter_wording_changed_in_1_35_matches_kube_scheduler(real_cluster: Any, kube_scheduler: None) -> None:
    """Two FailedScheduling texts kube 1.35 words anew: TaintToleration names no taint
    ("node(s) had untolerated taint(s)"), and the nodes outside NodeAffinity's PreFilterResult (a
    pod pinned by metadata.name) "didn't satisfy plugin(s) [NodeAffinity]"."""
    twins = _twins(real_cluster, [("tainted", "z1", "8"), ("small", "z1", "1")],
                   node_args={"tainted": {"taints": [taint("dedicated", "infra")]}})
    messages: dict[str, dict[str, str]] = {}
    with Scheduler(real_cluster, bind_workers=2) as sched:
        wait_until(lambda: len(sched.cache.node_names()) >= 4, timeout=60, what="nodes in the cache")
        for who, (ns, tag, (_, small)) in twins.items():
            tainted_out = make_pod("tainted-out", namespace=ns, cpu="2", node_selector={"parity": tag},
                                   scheduler_name=who)
            pinned = make_pod("pinned", namespace=ns, cpu="2", scheduler_name=who, affinity={"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [small]}]}]}}})
            created = [real_cluster.create(PODS, p) for p in (tainted_out, pinned)]
            messages[who] = {p["metadata"]["name"]: _failed(real_cluster, p, sched if who == MINI else None)
                             for p in created}
    assert "2 node(s) had untolerated taint(s)" in messages[KUBE]["tainted-out"], messages
    assert "3 node(s) didn't satisfy plugin(s) [NodeAffinity]" in messages[KUBE]["pinned"], messages
    assert messages[MINI] == messages[KUBE], messages


def test_init_container_host_ports_match_kube_scheduler(real_cluster: Any, kube_scheduler: None) -> None:
    twins = _twins(real_cluster, [("only", "z1", "4")])
    outcome: dict[str, tuple[str | None, str]] = {}
    with Scheduler(real_cluster, bind_workers=2) as sched:
        wait_until(lambda: len(sched.cache.node_names()) >= 2, timeout=60, what="nodes in the cache")
        for who, (ns, tag, (node,)) in twins.items():
            real_cluster.create(PODS, make_pod("holder", namespace=ns, host_ports=[8080], node_name=node))
            wait_until(lambda node=node: sched.cache.snapshot().pods_on(node), timeout=60, what="holder seen")
            pods = {}
            for name, sidecar in (("regular-init", False), ("sidecar", True)):
                pod = make_pod(name, namespace=ns, node_selector={"parity": tag}, scheduler_name=who)
                init: Object = {"name": "init", "image": "busybox",
                                "ports": [{"containerPort": 8080, "hostPort": 8080}]}
                if sidecar:
                    init["restartPolicy"] = "Always"
                pod["spec"]["initContainers"] = [init]
                pods[name] = real_cluster.create(PODS, pod)
            wait_until(lambda ns=ns: _bound(real_cluster, "regular-init", ns), timeout=60, what=f"{who} regular-init")
            outcome[who] = (_bound(real_cluster, "regular-init", ns),
                            _failed(real_cluster, pods["sidecar"], sched if who == MINI else None))
    (kube_node, kube_msg), (mini_node, mini_msg) = outcome[KUBE], outcome[MINI]
    assert kube_node is not None and kube_node.endswith("-only") and mini_node is not None
    assert "didn't have free ports for the requested pod ports" in kube_msg, kube_msg
    assert mini_msg == kube_msg, outcome
