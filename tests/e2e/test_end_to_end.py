"""minisched end to end on a real control plane, as the RBAC identity deploy/rbac.yaml grants.

100 KWOK nodes (4 zones, 10 tainted GPU nodes, 10 bigger SSD nodes) and 1,000 pods in two waves:
first 950 of low and mid priority (plain pods, zone affinity, GPU pods that tolerate the taint, and
50 that can never fit), then 100 high-priority pods into a cluster that is nearly full on CPU, so
they can only land by preempting low-priority pods. One watch observes every pod throughout.
"""

from __future__ import annotations

import collections
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from minisched.cluster.real import RealCluster
from minisched.controlplane import ControlPlane, fake_node, node_is_ready, wait_for
from minisched.controlplane.observe import PodObserver
from minisched.objects import make_pod, make_priority_class, taint, toleration
from minisched.scheduler.scheduler import Scheduler

pytestmark = [pytest.mark.realcluster, pytest.mark.slow]

NODES = 100
GPU_NODES = 10  # kwok-node-0..9: tainted gpu=true:NoSchedule, labelled accel=gpu
SSD_NODES = 10  # the last ten: twice the memory, labelled disk=ssd
LOW, MID, GPU, NEVER, HIGH = 700, 150, 50, 50, 100


def _nodes(cluster: RealCluster) -> None:
    specs = []
    for i in range(NODES):
        labels = {"topology.kubernetes.io/zone": f"z{i % 4}"}
        options: dict[str, Any] = {"cpu": "4", "memory": "16Gi"}
        if i < GPU_NODES:
            labels["accel"] = "gpu"
            options["taints"] = [taint("gpu", "true")]
        elif i >= NODES - SSD_NODES:
            labels["disk"] = "ssd"
            options["memory"] = "32Gi"
        specs.append(fake_node(f"kwok-node-{i}", labels=labels, **options))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: cluster.create("nodes", n), specs))
    wait_for(lambda: sum(node_is_ready(n) for n in cluster.list("nodes")["items"]) == NODES, 120,
             "KWOK to report every node Ready")


def _first_wave(ns: str) -> list[dict[str, Any]]:
    pods = []
    for i in range(LOW):
        pods.append(make_pod(f"low-{i}", namespace=ns, cpu="400m", memory="512Mi", priority_class_name="e2e-low"))
    zone_affinity = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z0", "z1"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}],
    }}
    for i in range(MID):
        pods.append(make_pod(f"mid-{i}", namespace=ns, cpu="200m", memory="1Gi", priority_class_name="e2e-mid",
                             affinity=zone_affinity))
    for i in range(GPU):
        pods.append(make_pod(f"gpu-{i}", namespace=ns, cpu="500m", memory="2Gi", priority_class_name="e2e-mid",
                             node_selector={"accel": "gpu"}, tolerations=[toleration("gpu", "true", "NoSchedule")]))
    for i in range(NEVER):  # no node has this zone, and preemption cannot change labels
        pods.append(make_pod(f"never-{i}", namespace=ns, cpu="100m", memory="128Mi", priority_class_name="e2e-high",
                             node_selector={"topology.kubernetes.io/zone": "nowhere"}))
    # Interleave the kinds, so affinity pods and plain pods compete for the same nodes.
    return [pods[j] for i in range(0, 7) for j in range(i, len(pods), 7)]


def _create_all(cluster: RealCluster, pods: list[dict[str, Any]]) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: cluster.create("pods", p), pods))


@pytest.fixture
def scheduler_as_minisched(control_plane: ControlPlane, minisched_rbac: Any) -> Any:
    """A Scheduler in this process on a RealCluster authenticated as User minisched (a client
    certificate from the control plane's CA), which deploy/rbac.yaml binds to ClusterRole minisched."""
    cluster = RealCluster.from_kubeconfig(path=str(control_plane.write_user_kubeconfig("minisched")))
    sched = Scheduler(cluster, bind_workers=16)
    yield sched
    sched.stop()
    cluster.close()


@pytest.mark.timeout(420)
def test_minisched_schedules_a_thousand_pods_with_preemption_as_its_own_identity(
    real_cluster: RealCluster, real_namespace: str, scheduler_as_minisched: Scheduler
) -> None:
    ns, sched = real_namespace, scheduler_as_minisched
    for name, value in (("e2e-low", 100), ("e2e-mid", 1000), ("e2e-high", 100000)):
        real_cluster.create("priorityclasses.scheduling.k8s.io", make_priority_class(name, value))
    _nodes(real_cluster)
    nodes = real_cluster.list("nodes")["items"]
    assert len(nodes) == NODES
    sched.start()
    started = time.monotonic()
    with PodObserver(real_cluster, namespace=ns, nodes=nodes) as obs:
        first = _first_wave(ns)
        _create_all(real_cluster, first)
        feasible = {f"{ns}/{p['metadata']['name']}" for p in first if not p["metadata"]["name"].startswith("never")}
        never = {f"{ns}/{p['metadata']['name']}" for p in first} - feasible
        obs.wait_for(lambda o: all(o.pods.get(k) and o.pods[k].bound for k in feasible)
                     and all(o.pods.get(k) and o.pods[k].unschedulable for k in never),
                     timeout=150, what="the first wave to be bound (or unschedulable)")
        first_wave_seconds = time.monotonic() - started
        # Nearly full on CPU now: the high-priority wave fits only by preempting low-priority pods.
        high = [make_pod(f"high-{i}", namespace=ns, cpu="700m", memory="1Gi", priority_class_name="e2e-high")
                for i in range(HIGH)]
        _create_all(real_cluster, high)
        high_keys = {f"{ns}/high-{i}" for i in range(HIGH)}
        obs.wait_for(lambda o: all(o.pods.get(k) and o.pods[k].bound for k in high_keys),
                     timeout=150, what="every high-priority pod to be bound")
        # Pods reach Running through KWOK (it plays kubelet for the fake nodes).
        obs.wait_for(lambda o: all(r.phase == "Running" for r in o.pods.values() if r.bound and not r.deleted
                                   and not r.terminating),
                     timeout=120, what="bound pods to be Running")
        records = dict(obs.pods)
        overcommits = list(obs.overcommits)
    total_seconds = time.monotonic() - started
    sched.recorder.flush(30)

    # Bound exactly once, never moved.
    twice = {k: r.bindings for k, r in records.items() if r.bindings > 1}
    moved = {k: r.node_changes for k, r in records.items() if r.node_changes}
    assert not twice, f"pods bound more than once: {twice}"
    assert not moved, f"pods whose nodeName changed: {moved}"
    assert not overcommits, f"over-committed nodes: {overcommits[:5]}"
    # Every pod that can fit was bound; the impossible ones never were, and say why.
    assert all(records[k].bindings == 1 for k in feasible | high_keys)
    assert all(records[k].bindings == 0 and records[k].unschedulable for k in never)
    assert "node affinity/selector" in records[sorted(never)[0]].unschedulable_message
    # Placement constraints held.
    node_labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes}
    for k, r in records.items():
        if r.node is None:
            continue
        labels = node_labels[r.node]
        name = k.split("/")[1]
        if name.startswith("gpu"):
            assert labels.get("accel") == "gpu", k
        else:
            assert labels.get("accel") != "gpu", f"{k} landed on tainted {r.node}"
        if name.startswith("mid"):
            assert labels["topology.kubernetes.io/zone"] in ("z0", "z1"), k
    # Preemption happened: victims (low priority) are gone, the preemptors bound, nominations seen.
    victims = {k for k, r in records.items() if r.deleted}
    assert victims, "no pod was preempted"
    # Only pods of lower priority than the preemptors (low, mid) may be victims; never another high one.
    assert all(records[k].priority < 100000 for k in victims), sorted(victims)[:5]
    assert any(k.split("/")[1].startswith("low-") for k in victims)
    assert sched.stats.preemptions > 0 and sched.stats.victims >= len(victims)
    nominated = {k for k in high_keys if records[k].nominated}
    assert nominated, "no preemptor was seen with status.nominatedNodeName"
    for k in victims:
        with pytest.raises(Exception, match="not found|NotFound"):
            real_cluster.get("pods", k.split("/")[1], ns)
    # Events: Scheduled for every binding, FailedScheduling for the impossible pods and the preemptors.
    events = real_cluster.list("events", ns)["items"]
    by_reason: dict[str, set[str]] = collections.defaultdict(set)
    for e in events:
        by_reason[e["reason"]].add(f"{ns}/{e['involvedObject']['name']}")
    bound = {k for k, r in records.items() if r.bindings}
    assert bound <= by_reason["Scheduled"], f"{len(bound - by_reason['Scheduled'])} bound pods lack a Scheduled event"
    assert never <= by_reason["FailedScheduling"]
    assert nominated <= by_reason["FailedScheduling"]
    print(f"\n1,000 pods on {NODES} KWOK nodes as User minisched: first wave {first_wave_seconds:.1f}s, "
          f"all Running after {total_seconds:.1f}s; {len(victims)} victims for {HIGH} preemptors "
          f"({len(nominated)} seen nominated); stats {sched.stats.bound} bound, "
          f"{sched.stats.unschedulable} unschedulable attempts, {sched.stats.bind_conflicts} bind conflicts")
