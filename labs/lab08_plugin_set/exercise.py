"""Lab 8 starter: fill in PluginSet (see README.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from minisched.scheduler.framework.strategies import Admitter, Scorer  # noqa: F401 (yours to use)

T = TypeVar("T")


@runtime_checkable
class Normalizer(Protocol):
    """kube's NormalizeScore: a scorer's raw scores over all admitted candidates, rescaled."""

    name: str

    def normalize(self, scores: list[float]) -> list[float]: ...


@dataclass(frozen=True)
class Ranked(Generic[T]):
    item: T
    score: float


class PluginSet(Generic[T]):
    def __init__(self, plugins: Sequence[object], weights: Mapping[str, float] | None = None) -> None:
        raise NotImplementedError("PluginSet")  # your code here: resolve every plugin, once

    def points(self) -> dict[str, list[str]]:
        raise NotImplementedError("points")  # your code here

    def rank(self, candidates: Sequence[T]) -> list[Ranked[T]]:
        raise NotImplementedError("rank")  # your code here


def new(plugins: Sequence[object], weights: Mapping[str, float] | None = None) -> PluginSet[object]:
    return PluginSet(plugins, weights)
