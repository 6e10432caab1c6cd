"""Lab 11 starter: fill in NamespaceNodeSelector (see README.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minisched.cluster.base import Cluster
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

NAME = "NamespaceNodeSelector"
ANNOTATION = "scheduler.alpha.kubernetes.io/node-selector"


class NamespaceNodeSelector:
    name = NAME

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        raise NotImplementedError("filter")  # your code here


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> NamespaceNodeSelector:
    raise NotImplementedError("new")  # your code here: take the cluster from the handle
