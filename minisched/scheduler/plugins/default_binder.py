"""DefaultBinder (Bind): POST pods/binding. A 409 comes back as an error Status carrying the
Conflict, so the runtime can tell "someone else bound it" from other failures.

The Binding carries the pod's UID as a precondition, and the resourceVersion the cycle state holds
under BIND_RESOURCE_VERSION if any (a sharded replica's binding: refused if the pod was written since)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minisched.errors import ApiError
from minisched.scheduler.framework.cycle_state import BIND_RESOURCE_VERSION, CycleState
from minisched.scheduler.framework.interface import Handle
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo

NAME = "DefaultBinder"


class DefaultBinder:
    name = NAME

    def __init__(self, handle: Handle | None) -> None:
        self.handle = handle

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        cluster = self.handle.cluster if self.handle is not None else None
        if cluster is None:
            return Status.from_error(RuntimeError("DefaultBinder has no cluster to bind through"), NAME)
        try:
            resource_version = state.get(BIND_RESOURCE_VERSION)
            if resource_version:
                cluster.bind(pod.namespace, pod.name, node_name, uid=pod.uid or None,
                             resource_version=resource_version)
            else:  # as kube-scheduler binds (and as a Cluster wrapper that predates the argument takes it)
                cluster.bind(pod.namespace, pod.name, node_name, uid=pod.uid or None)
        except ApiError as e:
            return Status.from_error(e, NAME)
        return Status.success()


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> DefaultBinder:
    return DefaultBinder(handle)
