"""Lab 8, the instructor's solution."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from minisched.scheduler.framework.strategies import Admitter, Scorer

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


@dataclass(frozen=True)
class _Scoring(Generic[T]):
    name: str
    weight: float
    score: Callable[[T], float]
    normalize: Callable[[list[float]], list[float]] | None


class PluginSet(Generic[T]):
    def __init__(self, plugins: Sequence[object], weights: Mapping[str, float] | None = None) -> None:
        weights = weights or {}
        self._admit: list[Callable[[T], bool]] = []
        self._scoring: list[_Scoring[T]] = []
        self._points: dict[str, list[str]] = {"admit": [], "score": [], "normalize": []}
        for p in plugins:
            name = str(getattr(p, "name", type(p).__name__))
            admits, scores = isinstance(p, Admitter), isinstance(p, Scorer)
            if not (admits or scores):
                raise TypeError(f"plugin {name} implements no extension point (admit or score)")
            if admits:
                self._admit.append(p.admit)  # type: ignore[attr-defined]
                self._points["admit"].append(name)
            if scores:
                normalize = p.normalize if isinstance(p, Normalizer) else None
                self._scoring.append(_Scoring(name, float(weights.get(name, 1.0)), p.score,  # type: ignore[attr-defined]
                                              normalize))
                self._points["score"].append(name)
                if normalize is not None:
                    self._points["normalize"].append(name)
        if not self._scoring:
            raise ValueError("a plugin set needs at least one scorer")

    def points(self) -> dict[str, list[str]]:
        return {point: list(names) for point, names in self._points.items()}

    def rank(self, candidates: Sequence[T]) -> list[Ranked[T]]:
        admitted = [c for c in candidates if all(admit(c) for admit in self._admit)]
        totals = [0.0] * len(admitted)
        for s in self._scoring:
            raw = [float(s.score(c)) for c in admitted]
            if s.normalize is not None:
                raw = list(s.normalize(raw))
                if len(raw) != len(admitted):
                    raise ValueError(f"plugin {s.name}: normalize returned {len(raw)} scores for {len(admitted)}")
            totals = [t + s.weight * r for t, r in zip(totals, raw, strict=True)]
        order = sorted(range(len(admitted)), key=lambda i: -totals[i])  # stable: ties keep input order
        return [Ranked(admitted[i], totals[i]) for i in order]


def new(plugins: Sequence[object], weights: Mapping[str, float] | None = None) -> PluginSet[object]:
    return PluginSet(plugins, weights)
