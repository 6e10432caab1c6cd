"""The kind-like control plane behaves as `make cluster-up`'s kind cluster does where the workbook
notices: default admission, kube-controller-manager's controllers, kind's nodes and system pods, and
KWOK keeping fake and chapter nodes alive past the node-monitor grace period.

One plane for the module (its start takes a while); the pace test waits past the 50 s grace period
once and checks both sides of it (a chapter node kept alive, a node nobody heartbeats lost)."""

from __future__ import annotations

import ipaddress
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from minisched.cluster.kindcluster import kind_config_path
from minisched.controlplane import (
    CHAPTER_NODE_LABEL,
    KIND_POD_CIDR,
    SYSTEM_POD_COUNT,
    ControlPlane,
    fake_node,
    wait_for,
)
from minisched.controlplane.kindlike import (
    SERVICE_ACCOUNTS,
    node_is_settled,
    pod_is_running,
    system_pods,
)
from minisched.errors import NotFound
from minisched.objects import make_node, make_pod
from tests.plugins.controlplane import control_plane_fixtures

pytestmark = pytest.mark.realcluster

control_plane, _real_cluster_shared, _baseline, real_cluster = control_plane_fixtures("module", kind_like=True)

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
NODE_MONITOR_GRACE_SECONDS = 50  # kube-controller-manager 1.35's default --node-monitor-grace-period


def _taint_keys(node: dict[str, Any]) -> set[str]:
    return {t["key"] for t in (node.get("spec") or {}).get("taints") or []}


def _if(predicate: Callable[[dict[str, Any]], bool], obj: dict[str, Any]) -> dict[str, Any] | None:
    """`obj` when it satisfies `predicate` (for wait_for, which returns the first truthy value)."""
    return obj if predicate(obj) else None


def _ready_status(node: dict[str, Any]) -> str | None:
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c.get("status") for c in conditions if c.get("type") == "Ready"), None)


def test_kinds_four_nodes_and_fifteen_system_pods_are_up(real_cluster: Any, control_plane: ControlPlane) -> None:
    names = control_plane.kind_node_names
    assert names == ["minisched-control-plane", "minisched-worker", "minisched-worker2", "minisched-worker3"]
    nodes = {n["metadata"]["name"]: n for n in real_cluster.list("nodes")["items"]}
    for name in names:
        node = nodes[name]
        assert node_is_settled(node), (name, node.get("status"), node["spec"].get("taints"))
        # kube-controller-manager's node IPAM gave each a /24 of kind's pod subnet.
        assert ipaddress.ip_network(node["spec"]["podCIDR"]).subnet_of(ipaddress.ip_network(KIND_POD_CIDR))
    control = nodes["minisched-control-plane"]
    assert "node-role.kubernetes.io/control-plane" in control["metadata"]["labels"]
    assert {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"} in control["spec"]["taints"]
    # The workers carry deploy/kind.yaml's labels and taints.
    config = yaml.safe_load(kind_config_path().read_text())
    workers = [n for n in config["nodes"] if n["role"] == "worker"]
    for name, entry in zip(names[1:], workers, strict=True):
        for key, value in entry.get("labels", {}).items():
            assert nodes[name]["metadata"]["labels"][key] == value, (name, key)
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in nodes["minisched-worker3"]["spec"][
        "taints"
    ]

    pods = system_pods(real_cluster, names)
    assert len(pods) == SYSTEM_POD_COUNT == 15
    assert all(pod_is_running(p) for p in pods), [p["metadata"]["name"] for p in pods if not pod_is_running(p)]
    by_prefix: Counter[str] = Counter()
    for p in pods:
        name = p["metadata"]["name"]
        prefix = next(
            (c for c in ("kindnet", "kube-proxy", "coredns", "local-path-provisioner") if name.startswith(c + "-")),
            name,
        )
        by_prefix[prefix] += 1
    assert by_prefix == {
        "kindnet": 4,
        "kube-proxy": 4,
        "coredns": 2,
        "local-path-provisioner": 1,
        "etcd-minisched-control-plane": 1,
        "kube-apiserver-minisched-control-plane": 1,
        "kube-controller-manager-minisched-control-plane": 1,
        "kube-scheduler-minisched-control-plane": 1,
    }
    for daemon in ("kindnet", "kube-proxy"):
        assert {p["spec"]["nodeName"] for p in pods if p["metadata"]["name"].startswith(daemon + "-")} == set(names)

    standard = real_cluster.get("storageclasses.storage.k8s.io", "standard")
    assert standard["provisioner"] == "rancher.io/local-path"
    assert standard["volumeBindingMode"] == "WaitForFirstConsumer"
    assert standard["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"


def test_a_new_namespace_gets_a_default_service_account_and_pods_a_token_volume(real_cluster: Any) -> None:
    namespace = f"kind-sa-{uuid.uuid4().hex[:6]}"
    real_cluster.create("namespaces", {"metadata": {"name": namespace}})
    # kube-controller-manager's service-account controller creates it; ServiceAccount admission then
    # refuses pods until it exists, as on kind.
    wait_for(lambda: real_cluster.get(SERVICE_ACCOUNTS, "default", namespace), 30, "the default ServiceAccount")
    pod = real_cluster.create(
        "pods", make_pod("with-token", namespace=namespace, scheduler_name="nobody-schedules-this")
    )
    assert pod["spec"]["serviceAccountName"] == "default"
    projected = [v for v in pod["spec"]["volumes"] if v["name"].startswith("kube-api-access-")]
    assert projected, pod["spec"]["volumes"]
    sources = projected[0]["projected"]["sources"]
    assert any("serviceAccountToken" in s for s in sources)
    mounts = pod["spec"]["containers"][0]["volumeMounts"]
    assert any(m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount" for m in mounts)


def test_a_new_node_is_tainted_not_ready_until_kwok_reports_it_ready(real_cluster: Any) -> None:
    created = real_cluster.create("nodes", fake_node("kind-like-newcomer"))
    # TaintNodesByCondition admission: every Node starts with the not-ready taint.
    assert {"key": NOT_READY, "effect": "NoSchedule"} in created["spec"]["taints"]
    # KWOK reports Ready=True; the node lifecycle controller then lifts the taint.
    node = wait_for(
        lambda: _if(node_is_settled, real_cluster.get("nodes", "kind-like-newcomer")),
        30,
        "the new node to be Ready and untainted",
    )
    assert NOT_READY not in _taint_keys(node)


def test_the_garbage_collector_deletes_a_pod_whose_owner_is_gone(real_cluster: Any, real_namespace: str) -> None:
    wait_for(lambda: real_cluster.get(SERVICE_ACCOUNTS, "default", real_namespace), 30, "the default ServiceAccount")
    owner = real_cluster.create("configmaps", {"metadata": {"name": "owner", "namespace": real_namespace}})
    pod = make_pod("owned", namespace=real_namespace, scheduler_name="nobody-schedules-this")
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    ]
    real_cluster.create("pods", pod)
    real_cluster.delete("configmaps", "owner", real_namespace)

    def pod_gone() -> bool:
        try:
            real_cluster.get("pods", "owned", real_namespace)
        except NotFound:
            return True
        return False

    wait_for(pod_gone, 60, "the garbage collector to delete the orphaned pod")


def test_kwok_keeps_chapter_nodes_alive_past_the_grace_period_and_others_are_lost(real_cluster: Any) -> None:
    # A chapter node as minisched.objects makes it (no KWOK annotation: the chapter label is what KWOK
    # selects), and one that neither carries the label nor is annotated, so nothing heartbeats it.
    real_cluster.create("nodes", make_node("pace-chapter", labels={CHAPTER_NODE_LABEL: "test-pace"}))
    real_cluster.create("nodes", make_node("pace-unmanaged"))
    started = time.monotonic()

    def lost() -> dict[str, Any] | None:
        node = real_cluster.get("nodes", "pace-unmanaged")
        return node if _ready_status(node) == "Unknown" and UNREACHABLE in _taint_keys(node) else None

    # Meanwhile the chapter node must stay usable every time we look.
    def chapter_node_checked() -> None:
        node = real_cluster.get("nodes", "pace-chapter")
        elapsed = time.monotonic() - started
        assert node_is_settled(node), (f"after {elapsed:.0f}s", node["status"].get("conditions"), node["spec"])

    wait_for(lambda: chapter_node_checked() or True, 30, "the chapter node to be Ready and untainted")
    lost_node = None
    while time.monotonic() - started < NODE_MONITOR_GRACE_SECONDS + 15:
        chapter_node_checked()
        lost_node = lost_node or lost()
        time.sleep(2)
    lost_node = lost_node or wait_for(lost, 30, "the unmanaged node to turn unreachable")
    assert {"key": UNREACHABLE, "effect": "NoSchedule"} in [
        {"key": t["key"], "effect": t["effect"]} for t in lost_node["spec"]["taints"]
    ]
    chapter_node_checked()
    # Polling can miss a flap (Unknown, then KWOK's node-initialize stage puts Ready back at once); the
    # node lifecycle controller's events cannot: it records NodeNotReady for every node it loses.
    def not_ready_events(node: str) -> list[dict[str, Any]]:
        events = real_cluster.list("events", field_selector=f"involvedObject.name={node}")["items"]
        return [e for e in events if e.get("reason") == "NodeNotReady"]

    wait_for(lambda: not_ready_events("pace-unmanaged"), 30, "the NodeNotReady event of the unmanaged node")
    assert not_ready_events("pace-chapter") == []
    # Its heartbeat is its Lease, renewed by KWOK as a kubelet renews it.
    lease = real_cluster.get("leases.coordination.k8s.io", "pace-chapter", "kube-node-lease")
    assert lease["spec"]["holderIdentity"] and lease["spec"]["renewTime"]
    # Still schedulable: kube-scheduler places a pod there and KWOK runs it.
    real_cluster.create(
        "pods",
        make_pod(
            "pace-pod",
            namespace="default",
            scheduler_name="default-scheduler",
            node_selector={CHAPTER_NODE_LABEL: "test-pace"},
        ),
    )
    running = wait_for(
        lambda: _if(pod_is_running, real_cluster.get("pods", "pace-pod", "default")),
        30,
        "the pod on the chapter node to run",
    )
    assert running["spec"]["nodeName"] == "pace-chapter"


def test_a_wait_for_first_consumer_volume_binds_where_minisched_places_its_pod(
    real_cluster: Any, real_namespace: str
) -> None:
    # Delayed binding end to end: minisched's VolumeBinding writes the chosen volume's claimRef in
    # PreBind, kube-controller-manager's PV controller binds the claim, and only then is the pod bound.
    from minisched.objects import make_claim, make_storage_class, make_volume
    from minisched.scheduler.scheduler import Scheduler

    tag = uuid.uuid4().hex[:6]
    chapter = f"test-wffc-{tag}"
    nodes = [f"wffc-{side}-{tag}" for side in ("a", "b")]
    for name in nodes:
        real_cluster.create("nodes", make_node(name, labels={CHAPTER_NODE_LABEL: chapter, "kubernetes.io/hostname": name}))
    sc = real_cluster.create("storageclasses.storage.k8s.io", make_storage_class(
        f"local-{tag}", provisioner="kubernetes.io/no-provisioner", binding_mode="WaitForFirstConsumer"))
    pv_name = f"wffc-pv-{tag}"
    real_cluster.create("persistentvolumes", make_volume(pv_name, storage_class=sc["metadata"]["name"], node_affinity=[
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [nodes[1]]}]}]))
    real_cluster.create("persistentvolumeclaims", make_claim("data", namespace=real_namespace,
                                                             storage_class=sc["metadata"]["name"]))
    for name in nodes:
        wait_for(lambda name=name: _if(node_is_settled, real_cluster.get("nodes", name)), 30, f"{name} Ready")
    sched = Scheduler(real_cluster, bind_workers=2, node_selector=f"{CHAPTER_NODE_LABEL}={chapter}")
    sched.start()
    try:
        real_cluster.create("pods", make_pod("db", namespace=real_namespace, claims=["data"]))
        placed = wait_for(lambda: real_cluster.get("pods", "db", real_namespace)["spec"].get("nodeName"), 60,
                          "the pod bound")
    finally:
        sched.stop()
    assert placed == nodes[1]
    pvc = real_cluster.get("persistentvolumeclaims", "data", real_namespace)
    assert pvc["spec"]["volumeName"] == pv_name and pvc["status"]["phase"] == "Bound"
    assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"  # the PV controller's
    pv = wait_for(lambda: _if(lambda v: v["status"]["phase"] == "Bound", real_cluster.get("persistentvolumes", pv_name)),
                  30, "the volume Bound")
    assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
    real_cluster.delete("pods", "db", real_namespace, grace_period_seconds=0)
    real_cluster.delete("persistentvolumeclaims", "data", real_namespace)
    real_cluster.delete("persistentvolumes", pv_name)
    real_cluster.delete("storageclasses.storage.k8s.io", sc["metadata"]["name"])
    for name in nodes:
        real_cluster.delete("nodes", name)
