"""Builders for the objects that chapters, labs and tests make again and again.

They return the API's own JSON (dicts) with only the fields given, so that what a notebook prints
is what `kubectl get -o json` would show after the server fills in metadata.
"""

from __future__ import annotations

from typing import Any

Object = dict[str, Any]

DEFAULT_SCHEDULER_NAME = "minisched"


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
) -> Object:
    """A Node with capacity = allocatable, a Ready condition and optional taints and images."""
    resources: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": pods}
    if ephemeral_storage is not None:
        resources["ephemeral-storage"] = ephemeral_storage
    resources.update(extra_resources or {})
    node: Object = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}
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
) -> Object:
    """A single-container Pod with the given requests, ready to be scheduled by `scheduler_name`."""
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
