"""Lab 1 starter: fill in node_score and SpotAvoidance.score (see README.md)."""

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


def node_score(pod: PodInfo, node: dict[str, Any]) -> int:
    """0 for a spot node unless the pod says spot is fine, else 100."""
    raise NotImplementedError("node_score")  # your code here


class SpotAvoidance:
    name = NAME

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        raise NotImplementedError("score")  # your code here


def new(args: Mapping[str, Any] | None, handle: Any) -> SpotAvoidance:
    return SpotAvoidance()
