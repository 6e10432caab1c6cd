"""Pluggable strategies, typed: `typing.Protocol` and `Generic` in the place of Go's interface{}
and type parameters (Part II §2.2).

The book's `Processor[T]` and `Sync[T]` are here as written, so a type checker can be run on a
mistake (a `Processor[str]` handed to `sync` over ints is an `arg-type` error before anything
runs). `Pipeline[T]` is the pattern minisched's `Framework` uses: plugins are any objects that
have the methods of the extension points they implement; the framework asks which points each
plugin implements ONCE, when it is built (isinstance against runtime-checkable Protocols costs
microseconds, because it looks up every member), keeps the bound methods in plain lists, and the
cycle only calls them.
"""

from __future__ import annotations

import contextlib
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

__all__ = [
    "Admitter",
    "Pipeline",
    "Processor",
    "Scorer",
    "check_costs",
    "extension_point_cost",
    "protocol_checks",
    "sync",
]

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class Processor(Protocol[T]):
    """The book's generic strategy: same type in and out."""

    def process(self, item: T) -> T: ...


def sync(src: Sequence[T], processor: Processor[T]) -> list[T]:
    """The book's Sync: every item through the processor (the checker ties T to both)."""
    return [processor.process(item) for item in src]


@runtime_checkable
class Admitter(Protocol[T_contra]):
    """An extension point: may this item be chosen at all?"""

    name: str

    def admit(self, item: T_contra) -> bool: ...


@runtime_checkable
class Scorer(Protocol[T_contra]):
    """An extension point: how good is this item (higher is better)?"""

    name: str

    def score(self, item: T_contra) -> float: ...


@dataclass(frozen=True)
class Choice(Generic[T]):
    item: T | None
    score: float
    admitted: int


class Pipeline(Generic[T]):
    """Plugins resolved into extension points when the pipeline is built; `choose` runs the
    admitters then the weighted scorers over the candidates and returns the best."""

    def __init__(self, plugins: Sequence[object], weights: dict[str, float] | None = None) -> None:
        weights = weights or {}
        self._admit: list[Callable[[T], bool]] = []
        self._score: list[tuple[float, Callable[[T], float]]] = []
        unused = []
        for p in plugins:
            points = 0
            if isinstance(p, Admitter):
                self._admit.append(p.admit)
                points += 1
            if isinstance(p, Scorer):
                self._score.append((float(weights.get(p.name, 1.0)), p.score))
                points += 1
            if not points:
                unused.append(type(p).__name__)
        if unused:
            raise TypeError(f"these plugins implement no extension point (admit or score): {', '.join(unused)}")
        if not self._score:
            raise ValueError("a pipeline needs at least one scorer")
        self.admitters = len(self._admit)
        self.scorers = len(self._score)

    def choose(self, candidates: Sequence[T]) -> Choice[T]:
        best: T | None = None
        best_score = float("-inf")
        admitted = 0
        for item in candidates:
            if not all(admit(item) for admit in self._admit):
                continue
            admitted += 1
            total = sum(w * score(item) for w, score in self._score)
            if total > best_score:
                best, best_score = item, total
        return Choice(best, best_score if best is not None else 0.0, admitted)


def check_costs(plugin: object, n: int = 20_000) -> dict[str, float]:
    """Seconds per check, measured now: isinstance against a runtime Protocol, hasattr of the one
    method, and calling an already-resolved bound method. Timings: print, never compare."""
    if n < 1:
        raise ValueError(f"measure at least one check, got {n}")
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    for _ in range(n):
        isinstance(plugin, Scorer)
    out["isinstance(plugin, Scorer)"] = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        hasattr(plugin, "score")
    out["hasattr(plugin, 'score')"] = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        callable(getattr(plugin, "score", None))
    out["callable(getattr(plugin, 'score', None))"] = (time.perf_counter() - t0) / n
    return out


def extension_point_cost(plugin: object, points: Iterable[type], n: int = 2_000) -> float:
    """Seconds to ask `plugin` once about every Protocol in `points` (isinstance each), measured
    now: what a framework would pay per plugin if it asked inside the cycle instead of at build.
    Timings: print, never compare."""
    protocols = list(points)
    if n < 1 or not protocols:
        raise ValueError(f"measure at least one round over at least one extension point, got n={n}, "
                         f"{len(protocols)} points")
    t0 = time.perf_counter()
    for _ in range(n):
        for proto in protocols:
            isinstance(plugin, proto)
    return (time.perf_counter() - t0) / n


@contextlib.contextmanager
def protocol_checks() -> Iterator[list[type]]:
    """Record every isinstance() against a Protocol class made inside the block (the Protocol
    metaclass's __instancecheck__ is what isinstance calls for them). Not thread-safe: for tests
    and notebooks, one block at a time."""
    meta: Any = typing._ProtocolMeta
    original = meta.__instancecheck__
    seen: list[type] = []

    def counting(cls: type, instance: object) -> bool:
        seen.append(cls)
        return bool(original(cls, instance))

    meta.__instancecheck__ = counting
    try:
        yield seen
    finally:
        meta.__instancecheck__ = original
