"""The decision record: what every plugin said about every node in one scheduling attempt.

Like kube-scheduler-simulator's annotations, it keeps each filter plugin's verdict per node, and each
score plugin's raw, normalised and weighted score per feasible node, plus the node chosen. It holds
the cycle's numpy arrays, so recording costs nothing on the hot path; the readable forms
(`filter_verdicts`, `scores`, `rows`, `to_annotation`) are built when someone asks.

minisched runs every filter on every evaluated node (vectorised, that costs the same), so the record
shows all verdicts; kube stops at a node's first failing filter, and `first_failure` is that one,
which the FailedScheduling message counts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.interface import FilterResult

PASSED = "passed"
SIMULATOR_PREFIX = "kube-scheduler-simulator.sigs.k8s.io/"
IntArray = npt.NDArray[np.int64]

_NO_ROWS: npt.NDArray[np.intp] = np.zeros(0, np.intp)
_NO_INTS: IntArray = np.zeros(0, np.int64)
_NO_ROWS.flags.writeable = False  # shared by every fresh Decision: never written, only replaced
_NO_INTS.flags.writeable = False


@dataclass
class PluginScores:
    raw: IntArray
    normalized: IntArray
    weight: int

    @property
    def weighted(self) -> IntArray:
        return self.normalized * self.weight


@dataclass
class Decision:
    pod: str
    profile: str
    node_names: Sequence[str]  # the snapshot's node names, indexed by row
    evaluated_rows: npt.NDArray[np.intp] = field(default_factory=lambda: _NO_ROWS)
    filter_plugins: list[str] = field(default_factory=list)
    filter_results: list[FilterResult] = field(default_factory=list)
    first_fail: npt.NDArray[np.int64] = field(default_factory=lambda: _NO_INTS)  # per evaluated row
    feasible_rows: npt.NDArray[np.intp] = field(default_factory=lambda: _NO_ROWS)
    score_plugins: dict[str, PluginScores] = field(default_factory=dict)
    total: IntArray = field(default_factory=lambda: _NO_INTS)  # per feasible row
    chosen: str | None = None
    message: str = ""  # the FailedScheduling message when nothing fit
    nominated: bool = False  # decided on the pod's nominated node alone
    hinted: bool = False  # decided on batching's hint alone (the last cycle's next best node)

    @property
    def nbytes(self) -> int:
        """Bytes held by this record's arrays (an array shared with another record counts in each)."""
        n = self.evaluated_rows.nbytes + self.first_fail.nbytes + self.feasible_rows.nbytes + self.total.nbytes
        for r in self.filter_results:
            n += r.passed.nbytes + r.reasons.nbytes + (0 if r.unresolvable is None else r.unresolvable.nbytes)
        for scores in self.score_plugins.values():
            n += scores.raw.nbytes + scores.normalized.nbytes
        return n

    @property
    def evaluated(self) -> int:
        return len(self.evaluated_rows)

    @property
    def feasible(self) -> int:
        return len(self.feasible_rows)

    def first_failure(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Node -> (plugin, reasons) of the first filter that rejected it (kube's view)."""
        out = {}
        for pos in np.flatnonzero(self.first_fail >= 0):
            row = int(self.evaluated_rows[pos])
            k = int(self.first_fail[pos])
            out[self.node_names[row]] = (self.filter_plugins[k], self.filter_results[k].reasons_at(row))
        return out

    def filter_verdicts(self) -> dict[str, dict[str, str]]:
        """Node -> plugin -> "passed" or its reasons, for every evaluated node."""
        out: dict[str, dict[str, str]] = {}
        for row in self.evaluated_rows:
            r = int(row)
            out[self.node_names[r]] = {
                plugin: PASSED if result.passed[r] else ", ".join(result.reasons_at(r))
                for plugin, result in zip(self.filter_plugins, self.filter_results, strict=True)
            }
        return out

    def scores(self) -> dict[str, dict[str, dict[str, int]]]:
        """Node -> plugin -> {"raw", "normalized", "weighted"}, for every feasible node."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        for i, row in enumerate(self.feasible_rows):
            out[self.node_names[int(row)]] = {
                plugin: {"raw": int(s.raw[i]), "normalized": int(s.normalized[i]), "weighted": int(s.weighted[i])}
                for plugin, s in self.score_plugins.items()
            }
        return out

    def final_scores(self) -> dict[str, int]:
        return {self.node_names[int(r)]: int(t) for r, t in zip(self.feasible_rows, self.total, strict=True)}

    def rows(self) -> list[dict[str, Any]]:
        """One row per evaluated node, best total first, ready for a table widget:
        node, feasible, the first failing plugin and reason, each plugin's weighted score, total."""
        first = self.first_failure()
        feasible_pos = {int(r): i for i, r in enumerate(self.feasible_rows)}
        table = []
        for row in self.evaluated_rows:
            r = int(row)
            name = self.node_names[r]
            entry: dict[str, Any] = {"node": name, "feasible": r in feasible_pos}
            if name in first:
                plugin, reasons = first[name]
                entry["filtered_by"] = plugin
                entry["reason"] = ", ".join(reasons)
            i = feasible_pos.get(r)
            for plugin, s in self.score_plugins.items():
                entry[plugin] = int(s.weighted[i]) if i is not None else None
            entry["total"] = int(self.total[i]) if i is not None and len(self.total) else None
            entry["chosen"] = name == self.chosen
            table.append(entry)
        table.sort(key=lambda e: (e["total"] is None, -(e["total"] or 0), e["node"]))
        return table

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "profile": self.profile,
            "chosen": self.chosen,
            "evaluated": self.evaluated,
            "feasible": self.feasible,
            "message": self.message,
            "filter": self.filter_verdicts(),
            "score": self.scores(),
            "final": self.final_scores(),
        }

    def simulator_annotations(self) -> dict[str, str]:
        """The record in kube-scheduler-simulator's pod annotations (filter-result, score-result,
        finalscore-result, selected-node), so its web UI and tools can read minisched's decisions.

        As in kube, a node's filter results stop at its first failing plugin; scores are strings."""
        filters: dict[str, dict[str, str]] = {}
        for pos, row in enumerate(self.evaluated_rows):
            r = int(row)
            stop = int(self.first_fail[pos]) if len(self.first_fail) else -1
            upto = len(self.filter_plugins) if stop < 0 else stop + 1
            filters[self.node_names[r]] = {
                plugin: PASSED if result.passed[r] else ", ".join(result.reasons_at(r))
                for plugin, result in zip(self.filter_plugins[:upto], self.filter_results[:upto], strict=True)
            }
        scores = self.scores()
        out = {
            SIMULATOR_PREFIX + "filter-result": _compact(filters),
            SIMULATOR_PREFIX + "score-result": _compact(
                {node: {p: str(v["raw"]) for p, v in by.items()} for node, by in scores.items()}),
            SIMULATOR_PREFIX + "finalscore-result": _compact(
                {node: {p: str(v["weighted"]) for p, v in by.items()} for node, by in scores.items()}),
        }
        if self.chosen:
            out[SIMULATOR_PREFIX + "selected-node"] = self.chosen
        return out

    def to_annotation(self, max_nodes: int = 50) -> str:
        """Compact JSON for a pod annotation: the chosen node, failures grouped by reason (not
        per node), and the top `max_nodes` final scores with each plugin's weighted part."""
        failures: dict[str, int] = {}
        for plugin, reasons in self.first_failure().values():
            for reason in reasons:
                key = f"{plugin}: {reason}"
                failures[key] = failures.get(key, 0) + 1
        order = np.argsort(-self.total, kind="stable")[:max_nodes]
        top = []
        for i in order:
            row = int(self.feasible_rows[int(i)])
            top.append({
                "node": self.node_names[row],
                "total": int(self.total[int(i)]),
                "plugins": {p: int(s.weighted[int(i)]) for p, s in self.score_plugins.items()},
            })
        doc = {
            "chosen": self.chosen,
            "evaluated": self.evaluated,
            "feasible": self.feasible,
            "filtered": failures,
            "scores": top,
        }
        if self.message:
            doc["message"] = self.message
        return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def _compact(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)
