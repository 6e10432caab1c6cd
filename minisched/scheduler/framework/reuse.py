"""The cross-cycle reuse cache: what one pod shape's last cycle found, kept for the next pod of
that shape.

A stream of pods of one shape (a Deployment scaling up) asks the same questions cycle after cycle,
and between two cycles only the nodes that got or lost a pod have changed. So the verdicts and raw
scores of the last cycle for that shape are kept here, and only those nodes are judged again by the
plugins that read pods; any node change (added, removed, relabelled, retainted) discards it all.
kube-scheduler has no file for this: its nearest relatives are 1.34's pod signatures and 1.35's
OpportunisticBatching (framework/runtime/batch.go, here batch.py), which keeps one cycle's sorted
scores for the next pod with the same signature. The algorithm (algorithm.py) consults the cache,
the runtime (runtime.py) runs the plugins on the changed nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.decision import PluginScores
from minisched.scheduler.framework.interface import FilterResult
from minisched.scheduler.framework.types import PodInfo

IntArray = npt.NDArray[np.int64]

_REUSE_ENTRIES = 32


@dataclass
class _Reusable:
    """One pod shape's verdicts over every node, as of (node_version, pod_version)."""

    node_version: int
    pod_version: int
    filter_names: tuple[str, ...]
    results: list[FilterResult]
    passed: npt.NDArray[np.bool_]
    first_fail: npt.NDArray[np.int64]
    raw: dict[str, IntArray]  # score plugin -> raw score of every node
    # score plugin -> (the rows it scored, `raw` of every node then, its scores, weighted): while its
    # raw scores are that same array and the feasible rows the same, so are its scores
    scored: dict[str, tuple[npt.NDArray[np.intp], IntArray, PluginScores, IntArray]] = field(default_factory=dict)
    feasible: tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]] | None = None  # (passed, its true rows)
    # the last total: (its rows, the weighted scores summed, the total, its best, the rows of the best)
    total: tuple[npt.NDArray[np.intp], list[IntArray], IntArray, int, npt.NDArray[np.intp]] | None = None

    def same_total(self, rows: npt.NDArray[np.intp], added: list[IntArray]) -> IntArray:
        """The sum of `added`: the last cycle's total array when it summed the very same arrays over
        the same rows (then _best reads its best and ties from here too), else summed now."""
        last = self.total
        if (last is not None and last[0] is rows and len(last[1]) == len(added)
                and all(a is b for a, b in zip(last[1], added, strict=True))):
            return last[2]
        total = _summed(len(rows), added)
        total.flags.writeable = False  # shared by the decisions of the cycles that reuse it
        best = int(total.max())
        self.total = (rows, added, total, best, np.flatnonzero(total == best))
        return total

    def feasible_rows(self, passed: npt.NDArray[np.bool_]) -> npt.NDArray[np.intp]:
        """np.flatnonzero(passed), as the same array while `passed` is (no verdict changed): the
        scores kept in `scored` are then reused on identity, with no comparison over every node."""
        if self.feasible is None or self.feasible[0] is not passed:
            rows = np.flatnonzero(passed)
            rows.flags.writeable = False  # shared by the decisions of every cycle that reuses it
            self.feasible = (passed, rows)
        return self.feasible[1]


def _summed(n: int, added: list[IntArray]) -> IntArray:
    total = np.zeros(n, np.int64)
    for weighted in added:
        total += weighted
    return total


def _best(total: IntArray, entry: _Reusable | None) -> tuple[int, npt.NDArray[np.intp]]:
    """The highest total and the positions that reach it."""
    if entry is not None and entry.total is not None and entry.total[2] is total:
        return entry.total[3], entry.total[4]
    best = int(total.max())
    return best, np.flatnonzero(total == best)


def _same(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> bool:
    """np.array_equal for two arrays of one dtype, without its conversions (a few us a call)."""
    return a.shape == b.shape and bool((a == b).all())


def _signature(pod: PodInfo) -> tuple[Any, ...]:
    """What the in-tree filters and scores read from a pod: two pods with equal signatures get
    equal verdicts on the same nodes."""
    spreading = (pod.namespace, pod.labels, pod.spread_constraints) if pod.spread_constraints else ()
    return (
        tuple(sorted(pod.requests.items())), pod.nonzero_cpu, pod.nonzero_memory, pod.incoming_nonzero_cpu,
        pod.incoming_nonzero_memory, pod.tolerations,
        pod.node_selector, pod.required_terms, pod.preferred_terms, pod.host_ports, pod.images, pod.node_name,
        spreading,
    )

