"""Lab 2, the instructor's solution."""

from __future__ import annotations

from typing import Any

from minisched.cluster.base import Cluster
from minisched.controllers.reconciler import Kind, Request, Result, raw_kind
from minisched.errors import NotFound
from minisched.resources import NODES

DRAIN = "minisched.dev/drain"
CORDONED_BY = "minisched.dev/cordoned-by"
ME = "cordon-reconciler"


class CordonReconciler:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    @property
    def primary(self) -> Kind[dict[str, Any]]:
        return raw_kind(NODES)

    @property
    def owned(self) -> None:
        return None

    def reconcile(self, request: Request) -> Result:
        try:
            node = self.cluster.get("nodes", request.name)
        except NotFound:
            return Result()  # deleted: nothing left to drive
        annotations = node["metadata"].get("annotations") or {}
        unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        wants_drain = annotations.get(DRAIN) == "true"
        if wants_drain and not unschedulable:
            self.cluster.patch("nodes", request.name, {
                "metadata": {"annotations": {CORDONED_BY: ME}}, "spec": {"unschedulable": True}})
        elif not wants_drain and annotations.get(CORDONED_BY) == ME:
            self.cluster.patch("nodes", request.name, {
                "metadata": {"annotations": {CORDONED_BY: None}}, "spec": {"unschedulable": None}})
        return Result()


def new(cluster: Cluster) -> CordonReconciler:
    return CordonReconciler(cluster)
