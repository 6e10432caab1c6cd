"""NodeLabelScore (Score): prefer nodes whose label `label` has the value `value`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import MAX_NODE_SCORE, Handle, ScorePlugin
from minisched.scheduler.framework.registry import PluginFactory
from minisched.scheduler.framework.signature import Fragment
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

NAME = "NodeLabelScore"


def node_score(node: Mapping[str, Any], label: str, value: str) -> int:
    """The pure rule for one node object."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return MAX_NODE_SCORE if labels.get(label) == value else 0


class NodeLabelScore:
    name = NAME
    reads_pods = False  # the score depends only on the node objects

    def __init__(self, label: str, value: str) -> None:
        self.label, self.value = label, value

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[Fragment], Status]:
        """Nothing of the pod is read: alike pods stay alike, and the framework may carry a cycle's
        results to the next one (kube's SignPlugin)."""
        return (), Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable,
              rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
        column = nodes.label_column(self.label)
        wanted = nodes.label_value_id(self.label, self.value)
        if column is None or wanted is None:
            return np.zeros(len(rows), np.int64)
        return np.where(column[rows] == wanted, MAX_NODE_SCORE, 0).astype(np.int64)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> NodeLabelScore:
    args = dict(args or {})
    label, value = args.get("label"), args.get("value")
    if not isinstance(label, str) or not label or not isinstance(value, str):
        raise ValueError(f"{NAME} needs args {{label: <key>, value: <value>}} (strings), got {args!r}")
    return NodeLabelScore(label, value)


# mypy checks the class against the Score Protocol, and `new` against the registry's factory type
_CONTRACT: type[ScorePlugin] = NodeLabelScore
_FACTORY: PluginFactory = new
