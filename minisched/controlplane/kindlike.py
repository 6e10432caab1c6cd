"""What a kind cluster holds before a student does anything: its nodes, system pods and StorageClass.

`make cluster-up` creates kind's cluster from deploy/kind.yaml: a control-plane node and three
workers, and in kube-system kind's 15 pods (kind v0.33, Kubernetes 1.35):

- on the control-plane node, the mirror pods of kubeadm's static pods: etcd, kube-apiserver,
  kube-controller-manager and kube-scheduler (a kubelet creates them, owned by their Node);
- the DaemonSets kindnet (CNI) and kube-proxy, one pod per node: 4 + 4;
- the Deployments coredns (2 replicas) and, in local-path-storage, local-path-provisioner (1),
  which kube-scheduler places;
- the default StorageClass `standard` (rancher.io/local-path, WaitForFirstConsumer).

The kind-like test control plane (`ControlPlaneOptions(kind_like=True)`) creates the same objects
so that what the chapters meet there is what they meet on kind; KWOK plays the kubelets, so the
nodes carry KWOK's annotation and their pods run without containers. The DaemonSets skip nodes
labelled `minisched.dev/chapter`, as `make cluster-up` patches kind's own (hack/kind.sh): otherwise
every node a chapter creates would carry a kindnet pod (100m CPU, 50Mi requested) and a kube-proxy
pod, and a chapter's arithmetic of what fits would differ on kind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from minisched.cluster import kindcluster
from minisched.controlplane.kwok import CHAPTER_NODE_LABEL, KWOK_NODE_ANNOTATION
from minisched.resources import Resource

Object = dict[str, Any]

# kind's defaults (kubeadm's pod and service subnets, as kind passes them).
KIND_POD_CIDR = "10.244.0.0/16"
KIND_SERVICE_CIDR = "10.96.0.0/16"
KIND_DNS_SERVICE_IP = "10.96.0.10"
CONTROL_PLANE_ROLE_LABEL = kindcluster.CONTROL_PLANE_LABEL
SYSTEM_POD_COUNT = 15  # 4 mirror pods + 4 kindnet + 4 kube-proxy + 2 coredns + 1 local-path-provisioner

DAEMON_SETS = Resource("apps", "v1", "daemonsets", "DaemonSet", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)

# Kept off chapter nodes, as hack/kind.sh patches kind's DaemonSets (see the module docstring).
_NOT_ON_CHAPTER_NODES = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": CHAPTER_NODE_LABEL, "operator": "DoesNotExist"}]}]
        }
    }
}


def kind_nodes(config_path: Path | None = None) -> list[Object]:
    """kind's nodes (minisched.cluster.kindcluster.kind_nodes) as KWOK-managed Node objects.

    They have no conditions yet: KWOK reports them Ready, which lifts the not-ready taint that
    admission puts on every new Node, as a kubelet's first status does on kind."""
    nodes = kindcluster.kind_nodes(config_path)
    for node in nodes:
        node["metadata"]["annotations"] = {KWOK_NODE_ANNOTATION: "fake"}
    return nodes


def _container(name: str, image: str, requests: dict[str, str], limits: dict[str, str] | None = None) -> Object:
    resources: Object = {"requests": dict(requests)}
    if limits:
        resources["limits"] = dict(limits)
    return {"name": name, "image": image, "resources": resources}


def mirror_pods(control_plane_node: Object) -> list[Object]:
    """The mirror pods of kubeadm's static pods on the control-plane node, as its kubelet creates them:
    bound, owned by the Node (so the garbage collector removes them with it), node-critical."""
    node_name = control_plane_node["metadata"]["name"]
    owner = {
        "apiVersion": "v1",
        "kind": "Node",
        "name": node_name,
        "uid": control_plane_node["metadata"]["uid"],
        "controller": True,
    }
    components = {  # kubeadm's requests
        "etcd": ("registry.k8s.io/etcd:3.6.5-0", {"cpu": "100m", "memory": "100Mi"}),
        "kube-apiserver": ("registry.k8s.io/kube-apiserver:v1.35.4", {"cpu": "250m"}),
        "kube-controller-manager": ("registry.k8s.io/kube-controller-manager:v1.35.4", {"cpu": "200m"}),
        "kube-scheduler": ("registry.k8s.io/kube-scheduler:v1.35.4", {"cpu": "100m"}),
    }
    pods = []
    for component, (image, requests) in components.items():
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{component}-{node_name}",
                    "namespace": "kube-system",
                    "labels": {"component": component, "tier": "control-plane"},
                    "annotations": {
                        "kubernetes.io/config.mirror": f"{component}-static",
                        "kubernetes.io/config.source": "file",
                    },
                    "ownerReferences": [dict(owner)],
                },
                "spec": {
                    "nodeName": node_name,
                    "hostNetwork": True,
                    "priorityClassName": "system-node-critical",
                    "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
                    "containers": [_container(component, image, requests)],
                },
            }
        )
    return pods


def _pod_template(labels: dict[str, str], spec: Object) -> Object:
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def system_objects() -> Iterator[tuple[Resource | str, Object]]:
    """kind's namespace, service accounts, DaemonSets, Deployments, DNS Service and StorageClass, in
    the order to create them (service accounts before the workloads that name them: ServiceAccount
    admission rejects a pod whose account does not exist)."""
    yield "namespaces", {"metadata": {"name": "local-path-storage"}}
    for namespace, account in (
        ("kube-system", "kindnet"),
        ("kube-system", "kube-proxy"),
        ("kube-system", "coredns"),
        ("local-path-storage", "local-path-provisioner-service-account"),
    ):
        yield SERVICE_ACCOUNTS, {"metadata": {"name": account, "namespace": namespace}}

    kindnet_labels = {"app": "kindnet", "k8s-app": "kindnet", "tier": "node"}
    yield DAEMON_SETS, {
        "metadata": {"name": "kindnet", "namespace": "kube-system", "labels": dict(kindnet_labels)},
        "spec": {
            "selector": {"matchLabels": {"app": "kindnet"}},
            "template": _pod_template(
                kindnet_labels,
                {
                    "serviceAccountName": "kindnet",
                    "hostNetwork": True,
                    "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
                    "affinity": _NOT_ON_CHAPTER_NODES,
                    "containers": [
                        _container(
                            "kindnet-cni",
                            "docker.io/kindest/kindnetd:v20250512-df8de77b",
                            {"cpu": "100m", "memory": "50Mi"},
                            {"cpu": "100m", "memory": "50Mi"},
                        )
                    ],
                },
            ),
        },
    }
    yield DAEMON_SETS, {
        "metadata": {"name": "kube-proxy", "namespace": "kube-system", "labels": {"k8s-app": "kube-proxy"}},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
            "template": _pod_template(
                {"k8s-app": "kube-proxy"},
                {
                    "serviceAccountName": "kube-proxy",
                    "hostNetwork": True,
                    "priorityClassName": "system-node-critical",
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, {"operator": "Exists"}],
                    "affinity": _NOT_ON_CHAPTER_NODES,
                    "containers": [_container("kube-proxy", "registry.k8s.io/kube-proxy:v1.35.4", {})],
                },
            ),
        },
    }
    dns_labels = {"k8s-app": "kube-dns"}
    yield DEPLOYMENTS, {
        "metadata": {"name": "coredns", "namespace": "kube-system", "labels": dict(dns_labels)},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": dict(dns_labels)},
            "template": _pod_template(
                dns_labels,
                {
                    "serviceAccountName": "coredns",
                    "priorityClassName": "system-cluster-critical",
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [
                        {"key": "CriticalAddonsOnly", "operator": "Exists"},
                        {"key": CONTROL_PLANE_ROLE_LABEL, "effect": "NoSchedule"},
                    ],
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "labelSelector": {
                                            "matchExpressions": [
                                                {"key": "k8s-app", "operator": "In", "values": ["kube-dns"]}
                                            ]
                                        },
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }
                            ]
                        }
                    },
                    "containers": [
                        _container(
                            "coredns",
                            "registry.k8s.io/coredns/coredns:v1.12.4",
                            {"cpu": "100m", "memory": "70Mi"},
                            {"memory": "170Mi"},
                        )
                    ],
                },
            ),
        },
    }
    yield "services", {
        "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": dict(dns_labels)},
        "spec": {
            "selector": dict(dns_labels),
            "clusterIP": KIND_DNS_SERVICE_IP,
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
            ],
        },
    }
    provisioner_labels = {"app": "local-path-provisioner"}
    yield DEPLOYMENTS, {
        "metadata": {"name": "local-path-provisioner", "namespace": "local-path-storage"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(provisioner_labels)},
            "template": _pod_template(
                provisioner_labels,
                {
                    "serviceAccountName": "local-path-provisioner-service-account",
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [
                        {"key": CONTROL_PLANE_ROLE_LABEL, "operator": "Equal", "effect": "NoSchedule"},
                    ],
                    "containers": [
                        _container(
                            "local-path-provisioner", "docker.io/kindest/local-path-provisioner:v20250214-acbabc1a", {}
                        )
                    ],
                },
            ),
        },
    }
    yield "storageclasses.storage.k8s.io", {
        "metadata": {
            "name": "standard",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "rancher.io/local-path",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def populate(cluster: Any, config_path: Path | None = None) -> list[str]:
    """Create kind's nodes and system objects on `cluster` (a RealCluster as admin); returns the node
    names. The pods come from their controllers and KWOK: see wait_until_settled."""
    nodes = [cluster.create("nodes", node) for node in kind_nodes(config_path)]
    control_plane = next(n for n in nodes if CONTROL_PLANE_ROLE_LABEL in n["metadata"]["labels"])
    for pod in mirror_pods(control_plane):
        cluster.create("pods", pod)
    for resource, obj in system_objects():
        cluster.create(resource, obj)
    return [n["metadata"]["name"] for n in nodes]


def node_is_settled(node: Object) -> bool:
    """Ready, and without the taints that mean it is not (yet) usable: not-ready, unreachable."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    condition_taints = {
        t.get("key") for t in (node.get("spec") or {}).get("taints") or []
    } & {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    return ready and not condition_taints


def pod_is_running(pod: Object) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and not (pod.get("metadata") or {}).get("deletionTimestamp")


def system_pods(cluster: Any, node_names: list[str] | set[str]) -> list[Object]:
    """The pods in kube-system and local-path-storage on kind's nodes."""
    names = set(node_names)
    found = []
    for namespace in ("kube-system", "local-path-storage"):
        found += [
            p
            for p in cluster.list("pods", namespace=namespace)["items"]
            if (p.get("spec") or {}).get("nodeName") in names
        ]
    return found


def settled(cluster: Any, node_names: list[str]) -> str | None:
    """None once kind's nodes are settled and its 15 system pods Running; else what is still missing."""
    nodes = {n["metadata"]["name"]: n for n in cluster.list("nodes")["items"]}
    unsettled = [name for name in node_names if name not in nodes or not node_is_settled(nodes[name])]
    if unsettled:
        return f"nodes not Ready and untainted yet: {', '.join(unsettled)}"
    pods = system_pods(cluster, node_names)
    running = [p for p in pods if pod_is_running(p)]
    if len(running) < SYSTEM_POD_COUNT:
        return f"{len(running)} of kind's {SYSTEM_POD_COUNT} system pods Running ({len(pods)} exist)"
    return None
