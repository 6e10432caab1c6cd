"""Builders for the objects that chapters, labs and tests make again and again.

They return the API's own JSON (dicts) with only the fields given, so that what a notebook prints
is what `kubectl get -o json` would show after the server fills in metadata.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

Object = dict[str, Any]

DEFAULT_SCHEDULER_NAME = "minisched"
# Nodes a chapter creates carry this label (value: the chapter's id, e.g. "ch03-3"): the chapter's
# scheduler sees only them on a shared cluster, and KWOK on kind keeps nodes with this key alive.
CHAPTER_LABEL = "minisched.dev/chapter"


def chapter_selector(chapter: str) -> str:
    """The label selector for the nodes chapter `chapter` made (for Scheduler(node_selector=...))."""
    return f"{CHAPTER_LABEL}={chapter}"


def make_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    ephemeral_storage: str | None = None,
    extra_resources: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[Object] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    images: list[tuple[str, int]] | None = None,
    chapter: str | None = None,
) -> Object:
    """A Node with capacity = allocatable, a Ready condition and optional taints and images.

    `chapter` puts the label `minisched.dev/chapter=<chapter>` on it (see CHAPTER_LABEL). The Ready
    condition carries heartbeat and transition times of now, as a kubelet's first status does: a
    node lifecycle controller (kind's) treats a Ready condition without a heartbeat as stale and
    marks the node unreachable at once."""
    if chapter is not None and not chapter:
        raise ValueError("make_node: chapter must be a non-empty chapter id such as 'ch03-3', or None")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    resources: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": pods}
    if ephemeral_storage is not None:
        resources["ephemeral-storage"] = ephemeral_storage
    resources.update(extra_resources or {})
    node: Object = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {}),
                       **({CHAPTER_LABEL: chapter} if chapter else {})},
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False",
                 "reason": "KubeletReady" if ready else "KubeletNotReady",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}
            ],
        },
    }
    if annotations:
        node["metadata"]["annotations"] = dict(annotations)
    if taints:
        node["spec"]["taints"] = [dict(t) for t in taints]
    if unschedulable:
        node["spec"]["unschedulable"] = True
    if images:
        node["status"]["images"] = [{"names": [image], "sizeBytes": size} for image, size in images]
    return node


def make_pod(
    name: str,
    *,
    namespace: str = "default",
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    limits: dict[str, str] | None = None,
    extra_requests: dict[str, str] | None = None,
    image: str = "registry.k8s.io/pause:3.10",
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    priority: int | None = None,
    priority_class_name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: Object | None = None,
    tolerations: list[Object] | None = None,
    node_name: str | None = None,
    host_ports: list[int] | None = None,
    scheduling_gates: list[str] | None = None,
    claims: list[str] | None = None,
    volumes: list[Object] | None = None,
) -> Object:
    """A single-container Pod with the given requests, ready to be scheduled by `scheduler_name`.
    `claims` names PersistentVolumeClaims it mounts (a volume each); `volumes` adds other volumes."""
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extra_requests or {})
    container: Object = {"name": "main", "image": image, "resources": {}}
    if requests:
        container["resources"]["requests"] = requests
    limits = dict(limits or {})
    for resource, amount in (extra_requests or {}).items():
        # Extended resources and hugepages cannot be overcommitted: the API server refuses a request
        # without an equal limit ("Limit must be set for non overcommitable resources").
        if ("/" in resource and "kubernetes.io/" not in resource) or resource.startswith("hugepages-"):
            limits.setdefault(resource, amount)
    if limits:
        container["resources"]["limits"] = limits
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p, "protocol": "TCP"} for p in host_ports]
    spec: Object = {"schedulerName": scheduler_name, "containers": [container]}
    if priority is not None:
        spec["priority"] = priority
    if priority_class_name is not None:
        spec["priorityClassName"] = priority_class_name
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if node_name:
        spec["nodeName"] = node_name
    if scheduling_gates:
        spec["schedulingGates"] = [{"name": g} for g in scheduling_gates]
    pod_volumes = [{"name": f"claim-{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims or [])]
    pod_volumes += [dict(v) for v in volumes or []]
    if pod_volumes:
        spec["volumes"] = pod_volumes
    pod: Object = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if labels:
        pod["metadata"]["labels"] = dict(labels)
    if annotations:
        pod["metadata"]["annotations"] = dict(annotations)
    return pod


def make_priority_class(name: str, value: int, *, global_default: bool = False) -> Object:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": global_default,
    }


def make_namespace(name: str, labels: dict[str, str] | None = None) -> Object:
    ns: Object = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    if labels:
        ns["metadata"]["labels"] = dict(labels)
    return ns


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> Object:
    t: Object = {"key": key, "effect": effect}
    if value:
        t["value"] = value
    return t


def toleration(
    key: str = "", value: str = "", effect: str = "", operator: str = "Equal"
) -> Object:
    t: Object = {"operator": operator}
    if key:
        t["key"] = key
    if value:
        t["value"] = value
    if effect:
        t["effect"] = effect
    return t


# --- storage ------------------------------------------------------------------------------------

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"


def make_claim(
    name: str,
    *,
    namespace: str = "default",
    storage: str = "1Gi",
    access_modes: tuple[str, ...] = ("ReadWriteOnce",),
    storage_class: str | None = None,
    volume_name: str | None = None,
) -> Object:
    """A PersistentVolumeClaim. `volume_name` makes it bound to that PersistentVolume, as the
    PV controller leaves a bound claim (spec.volumeName and the bind-completed annotation);
    `storage_class=""` asks for no class (None: the default class, if any)."""
    claim: Object = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"accessModes": list(access_modes), "resources": {"requests": {"storage": storage}}},
    }
    if storage_class is not None:
        claim["spec"]["storageClassName"] = storage_class
    if volume_name is not None:
        claim["spec"]["volumeName"] = volume_name
        claim["metadata"]["annotations"] = {BIND_COMPLETED: "yes"}
    return claim


def make_volume(
    name: str,
    *,
    storage: str = "1Gi",
    access_modes: tuple[str, ...] = ("ReadWriteOnce",),
    storage_class: str | None = None,
    labels: dict[str, str] | None = None,
    node_affinity: list[Object] | None = None,
    csi_driver: str | None = None,
    claim: tuple[str, str] | None = None,
) -> Object:
    """A PersistentVolume: a hostPath one, or a CSI one with `csi_driver`. `node_affinity` is its
    list of required nodeSelectorTerms; `claim` (namespace, name) its claimRef."""
    source: Object = ({"csi": {"driver": csi_driver, "volumeHandle": name}} if csi_driver
                      else {"hostPath": {"path": f"/mnt/{name}"}})
    volume: Object = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": storage}, "accessModes": list(access_modes), **source},
    }
    if labels:
        volume["metadata"]["labels"] = dict(labels)
    if storage_class is not None:
        volume["spec"]["storageClassName"] = storage_class
    if node_affinity is not None:
        volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": node_affinity}}
    if claim is not None:
        volume["spec"]["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    return volume


def make_storage_class(
    name: str,
    *,
    provisioner: str = "example.com/csi",
    binding_mode: str | None = None,
    default: bool = False,
) -> Object:
    """A StorageClass; `binding_mode` "WaitForFirstConsumer" delays binding to scheduling."""
    sc: Object = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
    }
    if binding_mode is not None:
        sc["volumeBindingMode"] = binding_mode
    if default:
        sc["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return sc


def make_csi_node(name: str, drivers: dict[str, int | None]) -> Object:
    """A CSINode for node `name`: each CSI driver and how many of its volumes the node can attach
    (None: no limit published)."""
    specs = []
    for driver, count in drivers.items():
        entry: Object = {"name": driver, "nodeID": name}
        if count is not None:
            entry["allocatable"] = {"count": count}
        specs.append(entry)
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": specs}}
