"""The scheduler at scale on the embedded cluster: 5,000 pods on 500 nodes.

Checked from the API server's side, not the scheduler's: every schedulable pod is bound exactly once,
no node holds more than it can (cpu, memory, pods), and every pod that cannot fit has a
FailedScheduling event giving the right reasons.
"""

from __future__ import annotations

import collections
import random
import threading

import pytest

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod, taint, toleration
from minisched.quantity import parse_quantity
from minisched.resources import EVENTS, NODES, PODS
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import wait_for_nodes, wait_until

NODES_TOTAL = 500
TAINTED = 50  # dedicated=infra:NoSchedule
PODS_TOTAL = 5_000
TOO_BIG = 25  # ask for more cpu than any node has
NOWHERE = 25  # select a zone no node is in


def _amount(resource: str, text: str) -> int:
    q = parse_quantity(text)
    return q.milli_value() if resource == "cpu" else q.value()


@pytest.mark.slow
def test_5000_pods_on_500_nodes_bound_once_never_overcommitted_failures_explained() -> None:
    rng = random.Random(7)
    cluster = EmbeddedCluster()
    binds: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    real_bind = cluster.bind

    def counting_bind(namespace: str, name: str, node_name: str, *, uid: str | None = None) -> None:
        real_bind(namespace, name, node_name, uid=uid)
        with lock:
            binds[f"{namespace}/{name}"] += 1

    cluster.bind = counting_bind  # type: ignore[method-assign]
    for i in range(NODES_TOTAL):
        taints = [taint("dedicated", "infra")] if i < TAINTED else None
        cluster.create(NODES, make_node(f"node-{i:03d}", cpu=rng.choice(["2", "4", "8"]),
                                        memory=rng.choice(["4Gi", "8Gi", "16Gi"]), pods="40",
                                        labels={"zone": f"zone-{i % 5}"}, taints=taints))
    sched = Scheduler(cluster, bind_workers=4)
    sched.start()
    try:
        wait_for_nodes(sched, NODES_TOTAL)
        expected_unschedulable: dict[str, str] = {}
        for i in range(PODS_TOTAL):
            name = f"pod-{i:04d}"
            if i < TOO_BIG:
                pod = make_pod(name, cpu="16", memory="1Gi")
                expected_unschedulable[name] = (
                    f"0/{NODES_TOTAL} nodes are available: {NODES_TOTAL - TAINTED} Insufficient cpu, "
                    f"{TAINTED} node(s) had untolerated taint(s). no new claims to deallocate, "
                    "preemption: "
                    # kube 1.35: 16 cpus are beyond every node's allocatable (2-8): preemption cannot help
                    f"0/{NODES_TOTAL} nodes are available: {NODES_TOTAL} Preemption is not helpful for "
                    "scheduling."
                )
            elif i < TOO_BIG + NOWHERE:
                pod = make_pod(name, node_selector={"zone": "zone-9"})
                # each node counts under the first filter that rejects it: TaintToleration runs first
                expected_unschedulable[name] = (
                    f"0/{NODES_TOTAL} nodes are available: {NODES_TOTAL - TAINTED} node(s) didn't match Pod's "
                    f"node affinity/selector, {TAINTED} node(s) had untolerated taint(s). "
                    f"no new claims to deallocate, preemption: 0/{NODES_TOTAL} nodes are available: "
                    f"{NODES_TOTAL} Preemption is not "
                    "helpful for scheduling."
                )
            else:
                tolerations = [toleration("dedicated", "infra", "NoSchedule")] if i % 10 == 0 else None
                pod = make_pod(name, cpu=rng.choice(["50m", "100m", "250m"]),
                               memory=rng.choice(["64Mi", "128Mi", "256Mi"]), tolerations=tolerations)
            cluster.create(PODS, pod)
        schedulable = PODS_TOTAL - len(expected_unschedulable)
        wait_until(lambda: sched.stats.bound >= schedulable and
                   sched.pending_pods()["unschedulable"] == len(expected_unschedulable),
                   timeout=120, what="every pod decided")
        sched.wait_for_bindings()
        sched.recorder.flush(60)

        pods = cluster.list(PODS)["items"]
        bound = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}
        assert len(bound) == schedulable
        assert set(binds.values()) == {1} and len(binds) == schedulable, "each pod bound exactly once"
        assert not set(bound) & set(expected_unschedulable)

        # no node over-committed, computed from the API objects themselves
        allocatable = {n["metadata"]["name"]: n["status"]["allocatable"] for n in cluster.list(NODES)["items"]}
        used: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        for p in pods:
            node = p["spec"].get("nodeName")
            if not node:
                continue
            used[node]["pods"] += 1
            for c in p["spec"]["containers"]:
                for resource, text in (c.get("resources", {}).get("requests") or {}).items():
                    used[node][resource] += _amount(resource, text)
        for node, totals in used.items():
            for resource, amount in totals.items():
                assert amount <= _amount(resource, allocatable[node][resource]), f"{node} over-committed {resource}"
        tainted_nodes = {f"node-{i:03d}" for i in range(TAINTED)}
        for name, node in bound.items():
            if node in tainted_nodes:
                assert int(name.split("-")[1]) % 10 == 0, f"{name} landed on tainted {node} without toleration"

        # each unschedulable pod: a FailedScheduling event with kube-scheduler's summary
        failed = collections.defaultdict(list)
        for e in cluster.list(EVENTS, "default")["items"]:
            if e["reason"] == "FailedScheduling":
                failed[e["involvedObject"]["name"]].append(e["message"])
        for name, message in expected_unschedulable.items():
            assert failed[name] == [message], name
        assert sched.stats.bind_conflicts == 0 and sched.stats.errors == 0
    finally:
        sched.stop()
        cluster.close()
