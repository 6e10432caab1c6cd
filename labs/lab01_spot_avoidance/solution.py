"""Lab 1, the instructor's solution."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

NAME = "SpotAvoidance"
SPOT_LABEL = "node.kubernetes.io/lifecycle"
SPOT_OK_ANNOTATION = "minisched.dev/spot-ok"


def spot_ok(pod: PodInfo) -> bool:
    annotations = (pod.pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(SPOT_OK_ANNOTATION) == "true"


def node_score(pod: PodInfo, node: dict[str, Any]) -> int:
    """0 for a spot node unless the pod says spot is fine, else 100."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return 0 if labels.get(SPOT_LABEL) == "spot" and not spot_ok(pod) else 100


class SpotAvoidance:
    name = NAME

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        scores = np.full(len(rows), 100, np.int64)
        column, spot = nodes.label_column(SPOT_LABEL), nodes.label_value_id(SPOT_LABEL, "spot")
        if spot_ok(pod) or column is None or spot is None:
            return scores  # no node is spot, or the pod does not mind
        scores[column[rows] == spot] = 0
        return scores


def new(args: Mapping[str, Any] | None, handle: Any) -> SpotAvoidance:
    return SpotAvoidance()
