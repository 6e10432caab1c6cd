"""Pod-specific server behaviour: graceful deletion, pods/binding and pods/eviction.

Follows pkg/registry/core/pod (strategy.go CheckGracefulDelete, storage.go BindingREST) and
pkg/registry/core/pod/storage/eviction.go, including the PodDisruptionBudget check.
"""

from __future__ import annotations

import math
from typing import Any

from minisched.errors import ApiError, Cause, Forbidden, InternalError, TooManyRequests
from minisched.selectors import from_label_selector_json

from .statuses import conflict

Object = dict[str, Any]

TERMINAL_PHASES = ("Succeeded", "Failed")


def grace_period(pod: Object, requested: int | None) -> int:
    """How long a pod deletion waits (CheckGracefulDelete): unbound or terminal pods go at once."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    period = requested if requested is not None else int(spec.get("terminationGracePeriodSeconds") or 0)
    if not spec.get("nodeName"):
        period = 0
    if status.get("phase") in TERMINAL_PHASES:
        period = 0
    return 1 if period < 0 else period


def binding_precondition_error(pod: Object, uid: str | None, resource_version: str | None) -> ApiError | None:
    """The Binding's metadata.uid and metadata.resourceVersion, checked as storage preconditions on
    the pod before anything else (BindingREST.setPodNodeAndMetadata passes them to
    GuaranteedUpdate): the storage error comes back as a 409 on "pods", not "pods/binding"."""
    meta = pod["metadata"]
    if uid and uid != meta["uid"]:
        return _precondition_failed(pod, f"UID in precondition: {uid}, UID in object meta: {meta['uid']}")
    if resource_version and resource_version != meta["resourceVersion"]:
        return _precondition_failed(pod, f"ResourceVersion in precondition: {resource_version}, "
                                         f"ResourceVersion in object meta: {meta['resourceVersion']}")
    return None


def _precondition_failed(pod: Object, why: str) -> ApiError:
    meta = pod["metadata"]
    key = f"/registry/pods/{meta['namespace']}/{meta['name']}"
    return conflict("pods", meta["name"], f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
                                          f"AdditionalErrorMsg: Precondition failed: {why}")


def binding_error(pod: Object) -> ApiError | None:
    """Why the pod cannot be bound (the API server answers 409 Conflict on pods/binding)."""
    name = pod["metadata"]["name"]
    if pod["metadata"].get("deletionTimestamp"):
        return conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return conflict("pods/binding", name, f'pod {name} is already assigned to node "{node}"')
    if (pod.get("spec") or {}).get("schedulingGates"):
        return conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
    return None


# Node labels the PodTopologyLabels admission plugin (beta, on by default in 1.35) copies onto a pod
# bound to (or created on) that node.
TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")


def topology_labels(node: Object | None) -> dict[str, str]:
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    return {k: labels[k] for k in TOPOLOGY_LABELS if k in labels}


def copy_labels(pod: Object, labels: dict[str, str]) -> None:
    if labels:
        pod["metadata"]["labels"] = {**(pod["metadata"].get("labels") or {}), **labels}


def set_condition(pod: Object, condition: Object, now: str) -> None:
    """Add or replace a status condition; lastTransitionTime moves only when the status changes."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    for i, c in enumerate(conditions):
        if c.get("type") == condition["type"]:
            changed = c.get("status") != condition.get("status")
            conditions[i] = {**c, **condition, "lastTransitionTime": now if changed else c.get("lastTransitionTime")}
            return
    conditions.append({**condition, "lastProbeTime": None, "lastTransitionTime": now})


def copy_for_bind(stored: Object) -> Object:
    """The next version of a stored pod, for `bind` to write into: new containers for what bind
    changes (metadata, spec, status and its conditions list), the rest shared with `stored`. Safe
    because stored objects are never changed in place (every write stores a new object)."""
    pod = dict(stored)
    pod["metadata"] = dict(stored["metadata"])
    pod["spec"] = dict(stored.get("spec") or {})
    status = pod["status"] = dict(stored.get("status") or {})
    if "conditions" in status:
        status["conditions"] = list(status["conditions"] or [])
    return pod


def bind(pod: Object, node_name: str, now: str, node: Object | None = None) -> None:
    """What a successful pods/binding writes (setPodNodeAndMetadata): spec.nodeName, the node's
    topology labels, no nominatedNodeName (ClearingNominatedNodeNameAfterBinding, on by default in
    1.35) and PodScheduled=True."""
    pod["spec"]["nodeName"] = node_name
    copy_labels(pod, topology_labels(node))
    status = pod.setdefault("status", {})
    status.pop("nominatedNodeName", None)
    set_condition(pod, {"type": "PodScheduled", "status": "True"}, now)


def is_ready(pod: Object) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def can_ignore_pdb(pod: Object) -> bool:
    """Pods that are not running (or already going) can always be evicted (eviction.go canIgnorePDB)."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def matching_pdbs(pod: Object, pdbs: list[Object]) -> list[Object]:
    labels = pod["metadata"].get("labels") or {}
    out = []
    for pdb in pdbs:
        selector = (pdb.get("spec") or {}).get("selector")
        if selector is None:
            continue
        if from_label_selector_json(selector).matches(labels) and selector != {}:
            out.append(pdb)
    return out


def _scaled(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


def computed_pdb_status(pdb: Object, pods: list[Object]) -> Object:
    """The disruption controller's arithmetic, for a cluster that runs none: over the pods the PDB
    selects, healthy = Ready and not being deleted."""
    spec = pdb.get("spec") or {}
    selector = from_label_selector_json(spec.get("selector"))
    selected = [p for p in pods if selector.matches(p["metadata"].get("labels") or {})]
    expected = len(selected)
    healthy = sum(1 for p in selected if is_ready(p) and not p["metadata"].get("deletionTimestamp"))
    if "maxUnavailable" in spec:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, round_up=True))
    else:
        desired = _scaled(spec.get("minAvailable", 1), expected, round_up=True)
    return {
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "disruptionsAllowed": max(0, healthy - desired),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
    }


def eviction_check(pod: Object, pdb: Object, status: Object) -> None:
    """Raise the API server's answer when the budget forbids evicting `pod`."""
    name = pdb["metadata"]["name"]
    if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
        raise _too_many(f"The disruption budget {name} is still being processed by the server.")
    if status.get("disruptionsAllowed", 0) < 0:
        raise Forbidden(f'poddisruptionbudgets.policy "{name}" is forbidden: pdb disruptions allowed is negative')
    if not is_ready(pod) and status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0) > 0:
        return  # an unhealthy pod may go while the budget is met (IfHealthyBudget)
    if status.get("disruptionsAllowed", 0) == 0:
        raise _too_many(
            f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods and has "
            f"{status.get('currentHealthy', 0)} currently"
        )


def _too_many(cause: str) -> TooManyRequests:
    return TooManyRequests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        causes=[Cause(field="", message=cause, reason="DisruptionBudget")],
        details={"retryAfterSeconds": 10},
    )


def too_many_pdbs() -> InternalError:
    return InternalError("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
