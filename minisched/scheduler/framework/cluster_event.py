"""Cluster events and queueing hints: how a plugin says which changes may help the pods it rejected.

kube-scheduler 1.35's framework.ClusterEvent, ClusterEventWithHint and QueueingHintFn
(k8s.io/kube-scheduler/framework/types.go). A plugin that rejects pods registers, through
`events_to_register()` (the EnqueueExtensions capability in interface.py), the events after which a
pod it rejected may fit, each with an optional hint: a function of (the pod, the object before,
the object after) that answers QUEUE (this change may help: try again) or QUEUE_SKIP (it cannot).
No hint means QUEUE. The framework gathers every plugin's registrations into one map per profile
(event -> [(plugin, hint)]) and the scheduling queue asks it when an event arrives.

kube's ActionType is a bit set (`Add | UpdateNodeAllocatable`); here an event is one (resource,
action) pair, and a plugin registers each pair it cares about (`events(...)` builds several with
one hint).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

Object = dict[str, Any]


class ClusterEvent(NamedTuple):
    """Something that changed in the cluster, as kube's framework.ClusterEvent (resource, action)."""

    resource: str  # "Node", "Pod" (an assigned pod), "UnscheduledPod", "*", or a storage kind
    action: str  # "Add", "Delete", "UpdateNodeAllocatable", "UpdateNodeLabel", "UpdateNodeTaint", ...

    def __str__(self) -> str:
        return f"{self.resource}{self.action}"

    def matches(self, other: ClusterEvent) -> bool:
        """Does a registration for `self` cover `other`? ("*" matches any resource or action, as
        kube's MatchClusterEvents)."""
        return (self.resource in ("*", other.resource)) and (self.action in ("*", other.action))


NODE_ADD = ClusterEvent("Node", "Add")
NODE_DELETE = ClusterEvent("Node", "Delete")
NODE_ALLOCATABLE_CHANGE = ClusterEvent("Node", "UpdateNodeAllocatable")
NODE_LABEL_CHANGE = ClusterEvent("Node", "UpdateNodeLabel")
# kube counts spec.unschedulable with the taints: NodeUnschedulable registers for UpdateNodeTaint.
NODE_TAINT_CHANGE = ClusterEvent("Node", "UpdateNodeTaint")
NODE_CONDITION_CHANGE = ClusterEvent("Node", "UpdateNodeCondition")
ASSIGNED_POD_ADD = ClusterEvent("Pod", "Add")
ASSIGNED_POD_UPDATE = ClusterEvent("Pod", "Update")
ASSIGNED_POD_DELETE = ClusterEvent("Pod", "Delete")
# A pending pod's own change (kube's unschedulablePod resource): recorded for that pod alone.
UNSCHEDULED_POD_UPDATE = ClusterEvent("UnscheduledPod", "Update")
UNSCHEDULABLE_TIMEOUT = ClusterEvent("*", "UnschedulableTimeout")
WILDCARD_EVENT = ClusterEvent("*", "*")


class QueueingHint(enum.Enum):
    """kube's fwk.QueueingHint: whether an event may make a rejected pod schedulable."""

    QUEUE_SKIP = 0
    QUEUE = 1


QUEUE, QUEUE_SKIP = QueueingHint.QUEUE, QueueingHint.QUEUE_SKIP

QueueingHintFn = Callable[[Object, Object | None, Object | None], QueueingHint]
"""(the rejected pod, the changed object before, after) -> QUEUE or QUEUE_SKIP. `before` is None
for an add, `after` None for a delete. An exception counts as QUEUE (as kube: never strand a pod)."""


@dataclass(frozen=True)
class ClusterEventWithHint:
    """One registration: `event`, and the hint that filters it (None: every such event queues)."""

    event: ClusterEvent
    hint: QueueingHintFn | None = None


def events(hint: QueueingHintFn | None, *cluster_events: ClusterEvent) -> list[ClusterEventWithHint]:
    """Several events with one hint (kube writes them as one ActionType bit set)."""
    return [ClusterEventWithHint(e, hint) for e in cluster_events]


@dataclass(frozen=True)
class RegisteredHint:
    """One plugin's hint for an event in a profile's map."""

    plugin: str
    hint: QueueingHintFn | None


QueueingHintMap = Mapping[ClusterEvent, Sequence[RegisteredHint]]
"""A profile's registrations: event -> the plugins that registered it, with their hints."""


def hint_map(registrations: Iterable[tuple[str, Iterable[ClusterEventWithHint]]]) -> dict[ClusterEvent, list[RegisteredHint]]:
    """The map from (plugin, its registrations) pairs, in plugin order."""
    out: dict[ClusterEvent, list[RegisteredHint]] = {}
    for plugin, regs in registrations:
        for reg in regs:
            if not isinstance(reg, ClusterEventWithHint):
                raise TypeError(f"plugin {plugin!r} registered {reg!r}: events_to_register() must return "
                                f"ClusterEventWithHint items (framework.cluster_event.events builds them)")
            out.setdefault(reg.event, []).append(RegisteredHint(plugin, reg.hint))
    return out


def ask_hint(hint: QueueingHintFn | None, pod: Object, old: Object | None, new: Object | None) -> QueueingHint:
    """The hint's answer; no hint, or a hint that raised, is QUEUE (kube: an error means Queue)."""
    if hint is None:
        return QUEUE
    try:
        answer = hint(pod, old, new)
    except Exception:
        return QUEUE
    return answer if isinstance(answer, QueueingHint) else QUEUE


def node_update_events(old: Object, new: Object) -> list[ClusterEvent]:
    """The events a node update amounts to (kube's nodeSchedulingPropertiesChange)."""
    out: list[ClusterEvent] = []
    old_status, new_status = old.get("status") or {}, new.get("status") or {}
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if old_status.get("allocatable") != new_status.get("allocatable"):
        out.append(NODE_ALLOCATABLE_CHANGE)
    if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
        out.append(NODE_LABEL_CHANGE)
    if old_spec.get("taints") != new_spec.get("taints") or bool(old_spec.get("unschedulable")) != bool(
        new_spec.get("unschedulable")
    ):
        out.append(NODE_TAINT_CHANGE)
    if _condition_statuses(old_status) != _condition_statuses(new_status):
        out.append(NODE_CONDITION_CHANGE)
    return out


def _condition_statuses(status: Object) -> dict[str, str]:
    # Heartbeat timestamps change every few seconds; only the statuses matter for scheduling.
    return {c.get("type", ""): c.get("status", "") for c in status.get("conditions") or []}
