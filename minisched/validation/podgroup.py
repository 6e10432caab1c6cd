"""PodGroup: kubernetes-sigs/scheduler-plugins' custom resource for gang scheduling.

    apiVersion: scheduling.x-k8s.io/v1alpha1
    kind: PodGroup
    metadata: {name: train, namespace: default}
    spec:
      minMember: 4                 # bind all of them or none
      scheduleTimeoutSeconds: 30   # how long members wait at Permit for the rest

A pod joins a group with the label `scheduling.x-k8s.io/pod-group: <name>` (same namespace).
The CRD below is scheduler-plugins' (manifests/crds/scheduling.x-k8s.io_podgroups.yaml) without
its descriptions; the same object is created on the embedded cluster and on a real API server
(`install_pod_group_crd`), and both then serve and validate PodGroups by its schema.
The Coscheduling plugin (minisched.scheduler.plugins.coscheduling) schedules the groups.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from minisched.errors import AlreadyExists
from minisched.resources import CRDS, Resource

GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
KIND = "PodGroup"
PLURAL = "podgroups"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

Object = dict[str, Any]

_INT32 = {"type": "integer", "format": "int32"}

POD_GROUP_CRD: Object = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": f"{PLURAL}.{GROUP}",
        "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"},
    },
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"kind": KIND, "listKind": "PodGroupList", "plural": PLURAL, "singular": "podgroup",
                  "shortNames": ["pg", "pgs"]},
        "versions": [{
            "name": VERSION,
            "served": True,
            "storage": True,
            "subresources": {"status": {}},
            "additionalPrinterColumns": [
                {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                {"name": "MinMember", "type": "integer", "jsonPath": ".spec.minMember"},
                {"name": "Scheduled", "type": "integer", "jsonPath": ".status.scheduled"},
            ],
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "spec": {
                        "type": "object",
                        "properties": {
                            "minMember": _INT32,
                            "minResources": {
                                "type": "object",
                                "additionalProperties": {
                                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                                    "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                                               r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
                                    "x-kubernetes-int-or-string": True,
                                },
                            },
                            "scheduleTimeoutSeconds": _INT32,
                        },
                    },
                    "status": {
                        "type": "object",
                        "properties": {
                            "failed": _INT32,
                            "occupiedBy": {"type": "string"},
                            "phase": {"type": "string"},
                            "running": _INT32,
                            "scheduleStartTime": {"type": "string", "format": "date-time"},
                            "scheduled": _INT32,
                            "succeeded": _INT32,
                        },
                    },
                },
            }},
        }],
    },
}
PODGROUPS = Resource.from_crd(POD_GROUP_CRD)


def make_pod_group(name: str, min_member: int, *, namespace: str = "default",
                   schedule_timeout_seconds: int | None = None) -> Object:
    spec: Object = {"minMember": min_member}
    if schedule_timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = schedule_timeout_seconds
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def pod_group_of(pod: Object) -> str | None:
    """The name of the group a pod belongs to (its scheduling.x-k8s.io/pod-group label)."""
    return ((pod.get("metadata") or {}).get("labels") or {}).get(POD_GROUP_LABEL) or None


def install_pod_group_crd(cluster: Any, timeout: float = 30.0) -> None:
    """Create the CRD (if missing) and wait until PodGroups are served: a real API server
    establishes a CRD and starts its handler a moment after creating it."""
    with contextlib.suppress(AlreadyExists):
        cluster.create(CRDS, POD_GROUP_CRD)
    deadline = time.monotonic() + timeout
    while True:
        try:
            cluster.list(PODGROUPS, "default")
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
