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
population. tests/partone/test_scoping.py checks the nodes against deploy/kind.yaml.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from minisched.cluster.base import Cluster
from minisched.errors import AlreadyExists
from minisched.objects import make_node, make_pod, make_storage_class, taint, toleration
from minisched.resources import NAMESPACES, NODES, PODS, STORAGE_CLASSES

Object = dict[str, Any]

CLUSTER_NAME = "minisched"
CONTROL_PLANE = f"{CLUSTER_NAME}-control-plane"
WORKERS = (f"{CLUSTER_NAME}-worker", f"{CLUSTER_NAME}-worker2", f"{CLUSTER_NAME}-worker3")
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
DEFAULT_STORAGE_CLASS = "standard"
SYSTEM_NAMESPACES = ("kube-system", "local-path-storage")
# a laptop's capacity, as each kind node reports the host's (8 cores, 16 GiB here)
LAPTOP_CPU, LAPTOP_MEMORY, LAPTOP_PODS = "8", "16Gi", "110"


@dataclass(frozen=True)
class KindNode:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect)


KIND_NODES = (
    KindNode(CONTROL_PLANE, {CONTROL_PLANE_LABEL: ""}, ((CONTROL_PLANE_LABEL, "", "NoSchedule"),)),
    KindNode(WORKERS[0], {"topology.kubernetes.io/zone": "zone-a", "environment": "prod"}),
    KindNode(WORKERS[1], {"topology.kubernetes.io/zone": "zone-b", "environment": "staging",
                          "node.kubernetes.io/lifecycle": "spot"}),
    KindNode(WORKERS[2], {"topology.kubernetes.io/zone": "zone-b", "environment": "prod",
                          "node.kubernetes.io/instance-type": "g4dn.xlarge"},
             (("nvidia.com/gpu", "present", "NoSchedule"),)),
)


def node_objects() -> list[Object]:
    """kind's four nodes: Ready, with the labels and taints kubeadm and deploy/kind.yaml give them."""
    nodes = []
    for spec in KIND_NODES:
        node = make_node(spec.name, cpu=LAPTOP_CPU, memory=LAPTOP_MEMORY, pods=LAPTOP_PODS,
                         ephemeral_storage="100Gi", labels={"kubernetes.io/os": "linux", **spec.labels},
                         taints=[taint(k, v, e) for k, v, e in spec.taints] or None)
        nodes.append(node)
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
    for i, node in enumerate(n.name for n in KIND_NODES):
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
