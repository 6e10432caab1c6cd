"""What `make cluster-up` leaves in a kind cluster, as objects: one description for every emulation.

deploy/kind.yaml makes a cluster named "minisched" with a control-plane node and three workers.
kind names them minisched-control-plane, minisched-worker, minisched-worker2 and minisched-worker3;
kubeadm puts the control-plane label and NoSchedule taint on the first; the workers carry the yaml's
labels (the third also its GPU taint). Every kind node reports the laptop's own capacity, so each is
far bigger than the nodes the chapters make. Fifteen system pods run on them (CoreDNS twice, etcd,
the API server, controller manager and scheduler as static pods, local-path-provisioner, and one
kindnet and one kube-proxy per node), and the default StorageClass `standard` binds volumes only
once a pod using them is scheduled (WaitForFirstConsumer).

`populate(cluster)` creates all of it through the Cluster API, so the embedded cluster
(`MINISCHED_BACKEND=embedded:kind`) and a kind-like test control plane start from the same
population. The nodes are read from deploy/kind.yaml itself (kind_nodes), so the two cannot drift.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import yaml

from minisched.cluster.base import Cluster
from minisched.errors import AlreadyExists
from minisched.objects import make_node, make_pod, make_storage_class, toleration
from minisched.resources import NAMESPACES, NODES, PODS, STORAGE_CLASSES

Object = dict[str, Any]

CLUSTER_NAME = "minisched"
CONTROL_PLANE = f"{CLUSTER_NAME}-control-plane"
WORKERS = (f"{CLUSTER_NAME}-worker", f"{CLUSTER_NAME}-worker2", f"{CLUSTER_NAME}-worker3")
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
DEFAULT_STORAGE_CLASS = "standard"
SYSTEM_NAMESPACES = ("kube-system", "local-path-storage")
KIND_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "kind.yaml"


# What each kind node reports: a kind node is a container that sees the whole laptop, so all four
# report the same machine. A laptop-like one: 8 CPUs, 16 GiB.
KIND_NODE_CAPACITY = {
    "cpu": "8",
    "memory": "16Gi",
    "pods": "110",
    "ephemeral-storage": "100Gi",
    "hugepages-1Gi": "0",
    "hugepages-2Mi": "0",
}
KIND_NODES = (CONTROL_PLANE, *WORKERS)


def kind_config_path() -> Path:
    return KIND_CONFIG


def kind_nodes(config_path: Path | None = None) -> list[Object]:
    """kind's nodes for deploy/kind.yaml, without status conditions: names as kind gives them
    (`<cluster>-control-plane`, `<cluster>-worker`, `-worker2`, ...), the labels kind and kubeadm
    set, the config's own labels and JoinConfiguration taints, and KIND_NODE_CAPACITY. The embedded
    emulation adds a Ready condition (node_objects); the kind-like control plane lets KWOK report it."""
    path = config_path or KIND_CONFIG
    config = yaml.safe_load(path.read_text())
    cluster = config.get("name") or "kind"
    nodes: list[Object] = []
    worker_count = 0
    for entry in config.get("nodes") or []:
        role = entry.get("role", "control-plane")
        if role == "control-plane":
            name = f"{cluster}-control-plane"
            extra_labels = {CONTROL_PLANE_LABEL: "", "node.kubernetes.io/exclude-from-external-load-balancers": ""}
            taints = [{"key": CONTROL_PLANE_LABEL, "effect": "NoSchedule"}]
        elif role == "worker":
            worker_count += 1
            name = f"{cluster}-worker" + (str(worker_count) if worker_count > 1 else "")
            extra_labels, taints = {}, []
        else:
            raise ValueError(f"{path}: node role {role!r} is neither control-plane nor worker")
        taints += _config_taints(entry)
        labels = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            **extra_labels,
            **{k: str(v) for k, v in (entry.get("labels") or {}).items()},
        }
        nodes.append({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints} if taints else {},
            "status": {"capacity": dict(KIND_NODE_CAPACITY), "allocatable": dict(KIND_NODE_CAPACITY)},
        })
    if not nodes or not any(CONTROL_PLANE_LABEL in n["metadata"]["labels"] for n in nodes):
        raise ValueError(f"{path}: a kind config needs a control-plane node")
    return nodes


def _config_taints(entry: Object) -> list[Object]:
    """Taints from a node's kubeadmConfigPatches (JoinConfiguration/InitConfiguration nodeRegistration)."""
    taints: list[Object] = []
    for patch in entry.get("kubeadmConfigPatches") or []:
        for doc in yaml.safe_load_all(patch):
            registration = (doc or {}).get("nodeRegistration") or {}
            taints += [dict(t) for t in registration.get("taints") or []]
    return taints


def node_objects() -> list[Object]:
    """kind's four nodes: Ready (heartbeat now, as make_node's), with the labels and taints kubeadm
    and deploy/kind.yaml give them."""
    nodes = kind_nodes()
    for node in nodes:
        node["status"]["conditions"] = make_node(node["metadata"]["name"])["status"]["conditions"]
    return nodes


def _system_pod(name: str, namespace: str, node: str, *, cpu: str | None = None, memory: str | None = None,
                critical: str = "system-node-critical", labels: dict[str, str] | None = None) -> Object:
    pod = make_pod(name, namespace=namespace, cpu=cpu, memory=memory, scheduler_name="default-scheduler",
                   node_name=node, priority_class_name=critical, labels=labels,
                   tolerations=[toleration(operator="Exists")])  # the add-ons and static pods run anywhere
    return pod


def system_pod_objects() -> list[Object]:
    """kind's 15 system pods, bound (requests as kind v0.33's manifests and kubeadm's give them)."""
    cp = CONTROL_PLANE
    pods = [
        _system_pod("coredns-674b8bbfcf-4xkzq", "kube-system", cp, cpu="100m", memory="70Mi",
                    critical="system-cluster-critical", labels={"k8s-app": "kube-dns"}),
        _system_pod("coredns-674b8bbfcf-9wbdn", "kube-system", cp, cpu="100m", memory="70Mi",
                    critical="system-cluster-critical", labels={"k8s-app": "kube-dns"}),
        _system_pod(f"etcd-{cp}", "kube-system", cp, cpu="100m", memory="100Mi", labels={"component": "etcd"}),
        _system_pod(f"kube-apiserver-{cp}", "kube-system", cp, cpu="250m",
                    labels={"component": "kube-apiserver"}),
        _system_pod(f"kube-controller-manager-{cp}", "kube-system", cp, cpu="200m",
                    labels={"component": "kube-controller-manager"}),
        _system_pod(f"kube-scheduler-{cp}", "kube-system", cp, cpu="100m", labels={"component": "kube-scheduler"}),
        _system_pod("local-path-provisioner-7dc846544d-ql2rx", "local-path-storage", cp,
                    critical="system-cluster-critical", labels={"app": "local-path-provisioner"}),
    ]
    for i, node in enumerate(KIND_NODES):
        suffix = "abcd"[i] * 5
        pods.append(_system_pod(f"kindnet-{suffix}", "kube-system", node, cpu="100m", memory="50Mi",
                                labels={"app": "kindnet"}))
        pods.append(_system_pod(f"kube-proxy-{suffix}", "kube-system", node, labels={"k8s-app": "kube-proxy"}))
    return pods


def storage_class_object() -> Object:
    """kind's default StorageClass: local-path volumes, bound when the first pod using one is placed."""
    return make_storage_class(DEFAULT_STORAGE_CLASS, provisioner="rancher.io/local-path",
                              binding_mode="WaitForFirstConsumer", default=True)


def populate(cluster: Cluster) -> None:
    """Create kind's nodes, its system pods (Running) and its default StorageClass in `cluster`;
    what exists already is left as it is (so this may run twice)."""
    from minisched.cluster.embedded.kubelet import Kubelet  # noqa: PLC0415 (uses only the Cluster API)

    for namespace in SYSTEM_NAMESPACES:
        with contextlib.suppress(AlreadyExists):
            cluster.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for node in node_objects():
        with contextlib.suppress(AlreadyExists):
            cluster.create(NODES, node)
    with contextlib.suppress(AlreadyExists):
        cluster.create(STORAGE_CLASSES, storage_class_object())
    kubelet = Kubelet(cluster)
    for pod in system_pod_objects():
        try:
            created = cluster.create(PODS, pod)
        except AlreadyExists:
            continue
        kubelet.start(created)
