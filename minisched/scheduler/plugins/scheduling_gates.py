"""SchedulingGates (PreEnqueue): a pod with spec.schedulingGates stays out of the active queue."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework.interface import Handle
from minisched.scheduler.framework.status import Status

NAME = "SchedulingGates"

Object = dict[str, Any]


def gates(pod: Object) -> list[str]:
    """The pure rule: the gate names still on the pod (empty: it may be scheduled)."""
    return [str(g.get("name") or "") for g in (pod.get("spec") or {}).get("schedulingGates") or []]


class SchedulingGates:
    name = NAME

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """No cluster event opens a gate: only the pod's own update removing its gates, which the
        queue asks PreEnqueue about directly (kube registers that update as an event)."""
        return []

    def pre_enqueue(self, pod: Object) -> Status:
        waiting = gates(pod)
        if not waiting:
            return Status.success()
        # kube's message: "waiting for scheduling gates: [a b]"
        return Status.unschedulable(
            f"waiting for scheduling gates: [{' '.join(waiting)}]", plugin=NAME, unresolvable=True
        )


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> SchedulingGates:
    return SchedulingGates()
