"""Lab 2 starter: fill in CordonReconciler.reconcile (see README.md)."""

from __future__ import annotations

from typing import Any

from minisched.cluster.base import Cluster
from minisched.controllers.reconciler import Kind, Request, Result, raw_kind
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
        raise NotImplementedError("reconcile")  # your code here


def new(cluster: Cluster) -> CordonReconciler:
    return CordonReconciler(cluster)
