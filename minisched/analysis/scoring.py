"""§3.3: the book's balanced-allocation formula beside kube-scheduler's, and how score plugins combine.

The book: "take the node's allocated fractions (e.g. [0.6, 0.4]), compute their standard deviation,
and 100 - round(50 * stddev) is the score". kube-scheduler's NodeResourcesBalancedAllocation
(minisched.scheduler.plugins.node_resources_balanced_allocation, which this module calls):
score = int((1 - std) * 100), std the population standard deviation of min(requested/allocatable, 1)
over cpu and memory, with the pod being scheduled counted in `requested`.

Where they differ:
- scale: the book multiplies std by 50, kube by 100, so the book's penalty is half of kube's;
- range: with two resources std is at most 0.5, so the book's scores span 75..100 and kube's 50..100.
  Weighted against other plugins (each 0..100), the book's balanced allocation counts half as much,
  which can change which node wins (`book_vs_kube_pick`);
- rounding: the book rounds (Go's math.Round, half away from zero), kube truncates toward zero;
- the book does not say population or sample std; with two resources sample std is sqrt(2) times larger.
Both fall as the fractions spread, so on balanced allocation alone they rank nodes the same (up to ties).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.interface import MAX_NODE_SCORE
from minisched.scheduler.plugins.node_resources_balanced_allocation import balanced_score
from minisched.scheduler.plugins.node_resources_fit import least_requested_score

_SCALE = 10**9  # fractions are passed to kube's integer-input scorer as requested/_SCALE


def go_round(x: float) -> int:
    """Go's math.Round: halves away from zero (Python's round() sends them to the even neighbour)."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def std(fractions: Sequence[float], *, sample: bool = False) -> float:
    n = len(fractions)
    if n < 2:
        return 0.0
    mean = sum(fractions) / n
    return math.sqrt(sum((f - mean) ** 2 for f in fractions) / (n - 1 if sample else n))


def book_balanced_score(fractions: Sequence[float], *, sample: bool = False) -> int:
    """The book's formula: 100 - round(50 * stddev(fractions))."""
    return MAX_NODE_SCORE - go_round(50 * std(fractions, sample=sample))


def kube_balanced_score(fractions: Sequence[float]) -> int:
    """kube-scheduler's formula, through minisched's plugin: int((1 - std) * 100), fractions capped at 1."""
    requested = [round(f * _SCALE) for f in fractions]
    return balanced_score(requested, [_SCALE] * len(fractions))


@dataclass(frozen=True)
class BalancedComparison:
    fractions: tuple[float, ...]
    std: float
    book: int
    book_sample_std: int
    kube: int

    @property
    def difference(self) -> int:
        return self.book - self.kube


def compare_balanced(requested: Sequence[int], allocatable: Sequence[int]) -> BalancedComparison:
    """Both formulas for one node: requested (including the incoming pod) over allocatable."""
    fractions = tuple(min(r / a, 1.0) for r, a in zip(requested, allocatable, strict=True) if a)
    return BalancedComparison(
        fractions=fractions,
        std=std(fractions),
        book=book_balanced_score(fractions),
        book_sample_std=book_balanced_score(fractions, sample=True),
        kube=balanced_score(list(requested), list(allocatable)),
    )


def two_resource_grid(steps: int = 11) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """fractions f (cpu on one axis, memory on the other) and both scores on the steps x steps grid."""
    f = np.linspace(0.0, 1.0, steps)
    book = np.zeros((steps, steps), np.int64)
    kube = np.zeros((steps, steps), np.int64)
    for i, cpu in enumerate(f):
        for j, mem in enumerate(f):
            book[i, j] = book_balanced_score([float(cpu), float(mem)])
            kube[i, j] = kube_balanced_score([float(cpu), float(mem)])
    return f, book, kube


def least_allocated_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """NodeResourcesFit's LeastAllocated score, cpu and memory weighted 1 each (kube's default)."""
    scores = [least_requested_score(r, a) for r, a in zip(requested, allocatable, strict=True) if a]
    return sum(scores) // len(scores) if scores else 0


def weighted_total(scores: Mapping[str, int], weights: Mapping[str, int]) -> int:
    """The framework's final score: sum of weight * (normalised) score over the score plugins."""
    return sum(weights.get(plugin, 1) * s for plugin, s in scores.items())


def book_vs_kube_pick(
    nodes: Mapping[str, tuple[Sequence[int], Sequence[int]]], *, balanced_weight: int = 1, least_weight: int = 1,
) -> dict[str, dict[str, int] | str]:
    """Total of LeastAllocated + BalancedAllocation per node under each formula, and each pick.

    `nodes` maps a node name to (requested including the pod, allocatable) for cpu and memory."""
    book: dict[str, int] = {}
    kube: dict[str, int] = {}
    for name, (requested, allocatable) in nodes.items():
        least = least_allocated_score(requested, allocatable)
        comparison = compare_balanced(requested, allocatable)
        book[name] = least_weight * least + balanced_weight * comparison.book
        kube[name] = least_weight * least + balanced_weight * comparison.kube
    return {
        "book": book,
        "kube": kube,
        "book_pick": max(sorted(book), key=lambda n: book[n]),
        "kube_pick": max(sorted(kube), key=lambda n: kube[n]),
    }
