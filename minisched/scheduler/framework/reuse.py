"""The cross-cycle reuse cache: what the last cycle for one pod signature found, kept for the
next pod with that signature.

A stream of alike pods (a Deployment scaling up: same requests, tolerations, affinity, ports,
images; equal signatures, signature.py, the same signer OpportunisticBatching uses) asks the same
questions cycle after cycle, and between two cycles only the nodes that got or lost a pod have
changed. So the verdicts and raw scores of the last cycle for that signature are kept here, and
only those nodes are judged again by the plugins that read pods; any node change (added, removed,
relabelled, retainted) discards it all. Unlike batching, it needs no plugin's consent per pod: a
cycle whose active filters read other nodes (spreading, pod affinity) neither looks up nor keeps. It is on by default
(`Framework(reuse=...)`); tests/scheduler/framework/test_reuse*.py check that the decisions are
identical to judging afresh.
kube-scheduler has no file for this: its nearest relatives are 1.34's pod signatures and 1.35's
OpportunisticBatching (framework/runtime/batch.go, here batch.py), which keeps one cycle's sorted
scores for the next pod with the same signature. The algorithm (algorithm.py) looks an entry up
(which re-runs the filters that read pods on the changed nodes) and remembers a new one; the
runtime's Score (runtime.py) takes an entry's raw scores and keeps the scores it computed.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.decision import PluginScores
from minisched.scheduler.framework.interface import FilterPlugin, FilterResult
from minisched.scheduler.framework.signature import Signature
from minisched.scheduler.framework.status import PluginError
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

IntArray = npt.NDArray[np.int64]

REUSE_ENTRIES = 32  # pod signatures kept, the least recently used dropped first
# Below this many nodes, judging every node afresh is cheaper than the bookkeeping of reuse
# (measured with bench/algorithm_bench.py: at 100 nodes reuse cost ~35 µs more per pod, at 1,000
# it saved ~35 µs, at 5,000 ~370 µs).
REUSE_MIN_NODES = 400


@dataclass
class ReuseEntry:
    """One pod signature's verdicts over every node, as of (node_version, pod_version)."""

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
    # rows changed since `raw` was last brought up to date: a cycle that scores nothing (one feasible
    # node, or none) leaves them for the next one that scores (None: none)
    unscored: npt.NDArray[np.intp] | None = None

    def same_total(self, rows: npt.NDArray[np.intp], added: list[IntArray]) -> IntArray:
        """The sum of `added`: the last cycle's total array when it summed the very same arrays over
        the same rows (then _best reads its best and ties from here too), else summed now."""
        last = self.total
        if (last is not None and last[0] is rows and len(last[1]) == len(added)
                and all(a is b for a, b in zip(last[1], added, strict=True))):
            return last[2]
        total = summed(len(rows), added)
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

    def raw_scores(self, state: CycleState, pod: PodInfo, nodes: NodeTable, dirty: npt.NDArray[np.intp] | None,
                   p: Any, reads_pods: bool) -> IntArray:
        """Raw scores of every node, this entry's re-scored on the changed nodes (`dirty`) when the
        plugin reads pods; the same array as before when none of those scores moved."""
        full = self.raw.get(p.name)
        if full is None:
            full = np.asarray(p.score(state, pod, nodes, np.arange(len(nodes), dtype=np.intp)), np.int64)
        elif dirty is not None and dirty.size and reads_pods:
            fresh = p.score(state, pod, nodes, dirty)
            if not same(full[dirty], np.asarray(fresh, np.int64)):  # unchanged: the same array, kept scores hold
                full = full.copy()
                full[dirty] = fresh
        self.raw[p.name] = full
        return full


def summed(n: int, added: list[IntArray]) -> IntArray:
    total = np.zeros(n, np.int64)
    for weighted in added:
        total += weighted
    return total


def best_of(total: IntArray, entry: ReuseEntry | None) -> tuple[int, npt.NDArray[np.intp]]:
    """The highest total and the positions that reach it."""
    if entry is not None and entry.total is not None and entry.total[2] is total:
        return entry.total[3], entry.total[4]
    best = int(total.max())
    return best, np.flatnonzero(total == best)


def same(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> bool:
    """np.array_equal without its conversions (it runs several times a cycle). Integers and booleans
    of one dtype are equal when their bytes are (~0.2 us a call, where `(a == b).all()` costs
    ~1.3 us); a few values of other dtypes (a changed node's reasons: uint8 against int64), as
    Python values; anything else element by element (floats: -0.0 == 0.0)."""
    if a.shape != b.shape:
        return False
    if a.dtype == b.dtype and a.dtype.kind in "biu":
        return a.tobytes() == b.tobytes()
    if a.size <= 16:
        return bool(a.tolist() == b.tolist())
    return bool((a == b).all())


class ReuseCache:
    """The last cycle's entry per pod signature (at most REUSE_ENTRIES of them), for snapshots of
    at least `min_nodes` nodes; `hits` counts the cycles that started from an entry. `sign` is the
    profile's signer (signature.PodSigner.sign, the one batching uses too): a pod it cannot sign is
    judged afresh and not kept."""

    def __init__(self, sign: Callable[[PodInfo], Signature | None], min_nodes: int = REUSE_MIN_NODES) -> None:
        self.sign = sign
        self.min_nodes = min_nodes
        self.entries: collections.OrderedDict[Signature, ReuseEntry] = collections.OrderedDict()
        self.hits = 0
        # (the filters list last looked up with, their names): the same list comes cycle after cycle
        self._filter_names: tuple[Sequence[FilterPlugin], tuple[str, ...]] | None = None

    def lookup(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, filters: Sequence[FilterPlugin],
        reads_pods: Mapping[str, bool], row_filters: Mapping[str, bool] | None = None,
    ) -> tuple[ReuseEntry | None, npt.NDArray[np.intp] | None]:
        """The entry for `pod`'s signature brought up to date with `nodes` (the changed nodes judged
        again by the active `filters` that read pods), and the rows whose raw scores are to be
        brought up to date (those nodes, and any left by cycles that scored nothing); (None, None)
        when there is none or it cannot be brought up to date (then it is dropped)."""
        if not nodes.frozen:
            return None, None
        key = self.sign(pod)
        entry = None if key is None else self.entries.get(key)
        if key is None or entry is None:
            return None, None
        last = self._filter_names
        if last is not None and last[0] is filters:  # the framework's list of the last cycle (active_filters)
            active = last[1]
        else:
            active = tuple(p.name for p in filters)
            self._filter_names = (filters, active)
        changed = nodes.nodes_changed_since(entry.node_version, entry.pod_version)
        if changed is None or active != entry.filter_names or len(nodes) != len(entry.passed):
            del self.entries[key]
            return None, None
        row = nodes.row
        dirty = np.array(sorted({r for r in map(row, changed) if r is not None}), np.intp)
        results = entry.results  # copied before a verdict changes: earlier decisions hold this list
        passed, first_fail = entry.passed, entry.first_fail
        rejudged = False  # did any verdict on a dirty row change? (if not, passed/first_fail stand)
        if dirty.size:
            # one changed node (the usual drain: the one that got the last pod) is judged on its row by
            # a RowFilter (`row_filters`), else on a view of its row; several, on a table of them
            one = int(dirty[0]) if dirty.size == 1 else -1
            view: NodeTable | None = None
            for k, p in enumerate(filters):
                if not reads_pods[p.name]:
                    continue
                try:
                    if one >= 0 and row_filters and row_filters.get(p.name):
                        fresh = p.filter_row(state, pod, nodes, one)  # type: ignore[attr-defined]
                    else:
                        if view is None:
                            view = nodes._row_view(one) if one >= 0 else nodes._subset(dirty)
                        fresh = p.filter(state, pod, view)
                except Exception as e:
                    raise PluginError(p.name, e, "Filter") from e
                old = results[k]
                if fresh.everyone_passed and old.everyone_passed:
                    continue
                if (same(fresh.passed, old.passed[dirty]) and same(fresh.reasons, old.reasons[dirty])
                        and fresh.unresolvable is None and old.unresolvable is None
                        and ((fresh.messages == old.messages and fresh.code == old.code) or fresh.everyone_passed
                             or bool(fresh.passed.all()))):
                    continue  # the usual case in a drain: the node that got a pod still judged the same
                if (fresh.messages and old.messages and (fresh.messages != old.messages or fresh.code != old.code)) or (
                    fresh.unresolvable is not None or old.unresolvable is not None
                ):
                    del self.entries[key]  # reasons numbered differently, or per-row codes: start over
                    return None, None
                new_passed = np.array(old.passed, np.bool_)
                new_reasons = np.array(old.reasons, np.int64)
                new_passed[dirty] = fresh.passed
                new_reasons[dirty] = fresh.reasons
                code = old.code if old.messages else fresh.code
                if results is entry.results:
                    results = list(results)
                results[k] = FilterResult(new_passed, new_reasons, old.messages or fresh.messages, code)
                rejudged = True
            if rejudged:
                passed = passed.copy()
                first_fail = first_fail.copy()
                passed[dirty] = True
                first_fail[dirty] = -1
                for k, r in enumerate(results):
                    bad = dirty[~r.passed[dirty] & passed[dirty]]
                    first_fail[bad] = k
                    passed[bad] = False
        self.hits += 1
        self.entries.move_to_end(key)
        # brought up to date in place (only the scheduling loop uses it): what earlier cycles'
        # decisions hold of it (its verdict list and arrays) is replaced, never changed
        entry.node_version, entry.pod_version = nodes.node_version, nodes.pod_version
        entry.results, entry.passed, entry.first_fail = results, passed, first_fail
        if entry.unscored is not None:
            dirty = np.union1d(entry.unscored, dirty)
        entry.unscored = dirty  # until Score brings `raw` up to date (Framework.run_score_plugins)
        return entry, dirty

    def remember(
        self, pod: PodInfo, nodes: NodeTable, filter_names: tuple[str, ...], results: list[FilterResult],
        passed: npt.NDArray[np.bool_], first_fail: npt.NDArray[np.int64],
    ) -> ReuseEntry | None:
        """Keep this cycle's verdicts for `pod`'s signature (None: it has none, nothing kept)."""
        key = self.sign(pod)
        if key is None:
            return None
        entry = ReuseEntry(nodes.node_version, nodes.pod_version, filter_names, results, passed, first_fail, {})
        self.entries[key] = entry
        while len(self.entries) > REUSE_ENTRIES:
            self.entries.popitem(last=False)
        return entry


__all__ = ["REUSE_ENTRIES", "REUSE_MIN_NODES", "ReuseCache", "ReuseEntry", "best_of", "same", "summed"]
