"""Lab 12, the instructor's solution."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
from pydantic import Field

from minisched.informer import ResourceEventHandlerFuncs, SharedInformerFactory
from minisched.resources import Resource
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import MAX_NODE_SCORE, Handle
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable
from minisched.validation.crd import crd_for
from minisched.validation.model import ResourceModel

NAME = "LabelPreference"
GROUP, VERSION, KIND, PLURAL = "labs.minisched.dev", "v1alpha1", "LabelPreference", "labelpreferences"


class LabelPreferenceSpec(ResourceModel):
    label: str = Field(min_length=1, max_length=63, description="The node label whose value is scored.")
    weights: dict[str, Annotated[int, Field(ge=0, le=100)]] = Field(
        min_length=1, description="The score, 0..100, of each value of the label.")


CRD: dict[str, Any] = crd_for(LabelPreferenceSpec, group=GROUP, version=VERSION, kind=KIND, plural=PLURAL,
                              scope="Cluster", description="Score nodes by the value of one of their labels.")
LABEL_PREFERENCES = Resource.from_crd(CRD)


class LabelPreferenceScore:
    name = NAME

    def __init__(self) -> None:
        self.preferences: list[tuple[str, dict[str, int]]] = []  # (label, weights) of each object

    def set_preferences(self, objects: Iterable[Mapping[str, Any]]) -> None:
        preferences = []
        for obj in objects:
            spec = obj.get("spec") or {}
            preferences.append((str(spec.get("label", "")), {str(k): int(v) for k, v in (spec.get("weights") or {}).items()}))
        self.preferences = preferences  # one assignment: a cycle sees the old list or the new one

    def follow(self, factory: SharedInformerFactory) -> None:
        informer = factory.informer_for(LABEL_PREFERENCES)

        def refresh(*_: Any) -> None:
            self.set_preferences(informer.store.list())

        informer.add_event_handler(ResourceEventHandlerFuncs(refresh, refresh, refresh))

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable,
              rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
        total = np.zeros(len(rows), np.int64)
        for label, weights in self.preferences:
            column = nodes.label_column(label)
            if column is None:
                continue
            values = column[rows]
            for value, weight in weights.items():
                wanted = nodes.label_value_id(label, value)
                if wanted is not None:
                    total[values == wanted] += weight
        return np.minimum(total, MAX_NODE_SCORE)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> LabelPreferenceScore:
    plugin = LabelPreferenceScore()
    if handle is not None:  # built without a handle (a check on a table), it follows nothing
        plugin.follow(handle.informer_factory)
    return plugin
