"""Lab 12 starter: the LabelPreference schema and plugin (see README.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.informer import SharedInformerFactory
from minisched.resources import Resource
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import Handle
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable
from minisched.validation.crd import crd_for
from minisched.validation.model import ResourceModel

NAME = "LabelPreference"
GROUP, VERSION, KIND, PLURAL = "labs.minisched.dev", "v1alpha1", "LabelPreference", "labelpreferences"


class LabelPreferenceSpec(ResourceModel):
    label: str  # your constraints here (pydantic Field)
    weights: dict[str, int]


CRD: dict[str, Any] = crd_for(LabelPreferenceSpec, group=GROUP, version=VERSION, kind=KIND, plural=PLURAL,
                              scope="Cluster", description="Score nodes by the value of one of their labels.")
LABEL_PREFERENCES = Resource.from_crd(CRD)


class LabelPreferenceScore:
    name = NAME

    def __init__(self) -> None:
        self.preferences: list[tuple[str, dict[str, int]]] = []  # (label, weights) of each object

    def set_preferences(self, objects: Iterable[Mapping[str, Any]]) -> None:
        raise NotImplementedError("set_preferences")  # your code here

    def follow(self, factory: SharedInformerFactory) -> None:
        raise NotImplementedError("follow")  # your code here

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable,
              rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
        raise NotImplementedError("score")  # your code here


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> LabelPreferenceScore:
    plugin = LabelPreferenceScore()
    if handle is not None:  # built without a handle (a check on a table), it follows nothing
        plugin.follow(handle.informer_factory)
    return plugin
