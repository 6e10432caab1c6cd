"""Why a pod fits nowhere, in kube-scheduler's words.

kube-scheduler's FitError message counts, over the nodes it examined, each reason the first failing
filter gave, writes "<count> <reason>" for each, sorts those strings (as strings: "10 x" sorts before
"2 y"), and joins them:

    0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient cpu.

A PreFilter rejection replaces the per-node part; PostFilter's message (DefaultPreemption's, itself
a FitError text ending in its own period, "preemption: 0/5 nodes are available: ...") is appended
after a space, with no period of its own (kube v1.35; older releases added one, hence "..").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from minisched.scheduler.framework.interface import FilterResult
from minisched.scheduler.framework.status import Code, Status

NO_NODE_AVAILABLE = "0/{} nodes are available"


def fit_error_message(
    num_all_nodes: int, reason_counts: Mapping[str, int], *, pre_filter_msg: str = "", post_filter_msg: str = ""
) -> str:
    """kube's FitError.Error()."""
    msg = NO_NODE_AVAILABLE.format(num_all_nodes) + ":"
    if pre_filter_msg:
        msg += f" {pre_filter_msg}."
    else:
        histogram = sorted(f"{count} {reason}" for reason, count in reason_counts.items())
        if histogram:
            msg += f" {', '.join(histogram)}."
    if post_filter_msg:
        msg += f" {post_filter_msg}"
    return msg


@dataclass
class Diagnosis:
    """The failing nodes' verdicts from one attempt (kube's framework.Diagnosis).

    `reason_counts`, `unschedulable_plugins` and `message()` are ready at once; the per-node lists
    (node_names, node_plugin, node_code, node_reasons) are filled on the first call of
    `statuses()` or `all_unresolvable`, since building them loops over every failing node."""

    num_all_nodes: int
    node_names: list[str] = field(default_factory=list)  # nodes that failed, in evaluation order
    node_plugin: list[str] = field(default_factory=list)  # the first filter each failed
    node_code: list[Code] = field(default_factory=list)
    node_reasons: list[tuple[str, ...]] = field(default_factory=list)
    reason_counts: dict[str, int] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    # the per-node lists cost a Python loop over failing nodes: built only when someone asks
    _pending: Callable[[Diagnosis], None] | None = field(default=None, repr=False, compare=False)

    def _materialize(self) -> None:
        if self._pending is not None:
            build, self._pending = self._pending, None
            build(self)

    def message(self) -> str:
        return fit_error_message(
            self.num_all_nodes, self.reason_counts,
            pre_filter_msg=self.pre_filter_msg, post_filter_msg=self.post_filter_msg,
        )

    def statuses(self) -> dict[str, Status]:
        """Node name -> the status of its first failing filter (what PostFilter plugins get)."""
        self._materialize()
        return {
            name: Status(code, reasons, plugin)
            for name, code, reasons, plugin in zip(
                self.node_names, self.node_code, self.node_reasons, self.node_plugin, strict=True
            )
        }

    @property
    def all_unresolvable(self) -> bool:
        """No node could be helped by preemption."""
        self._materialize()
        return all(c == Code.UNSCHEDULABLE_AND_UNRESOLVABLE for c in self.node_code)

    @classmethod
    def from_pre_filter(cls, num_all_nodes: int, node_names: list[str], status: Status) -> Diagnosis:
        d = cls(num_all_nodes, pre_filter_msg=status.message())
        d.node_names = list(node_names)
        d.node_plugin = [status.plugin] * len(node_names)
        d.node_code = [status.code] * len(node_names)
        d.node_reasons = [status.reasons] * len(node_names)
        if status.plugin:
            d.unschedulable_plugins.add(status.plugin)
        return d

    @classmethod
    def from_filters(
        cls,
        num_all_nodes: int,
        names: list[str],
        rows: np.ndarray,
        plugins: list[str],
        results: list[FilterResult],
        first_fail: np.ndarray,
        extra: Mapping[str, Status] | None = None,
    ) -> Diagnosis:
        """Build from vectorised filter results: `rows` are the evaluated rows, `first_fail[i]` the
        index of the first plugin that rejected row rows[i] (-1 if it passed). `extra`: statuses for
        nodes rejected before filtering (e.g. outside a PreFilter result)."""
        d = cls(num_all_nodes)
        ff = first_fail
        failed_pos = np.flatnonzero(ff >= 0)
        for k, (plugin, result) in enumerate(zip(plugins, results, strict=True)):
            mine = failed_pos[ff[failed_pos] == k]
            if mine.size == 0:
                continue
            d.unschedulable_plugins.add(plugin)
            bits = result.reasons[rows[mine]]
            for b, message in enumerate(result.messages):
                count = int(((bits >> b) & 1).sum())
                if count:
                    d.reason_counts[message] = d.reason_counts.get(message, 0) + count
        extra = dict(extra or {})
        for status in extra.values():
            if status.plugin:  # a filter's rejection judged apart (a node with nominated pods)
                d.unschedulable_plugins.add(status.plugin)
            for reason in status.reasons:
                d.reason_counts[reason] = d.reason_counts.get(reason, 0) + 1

        def build(d: Diagnosis) -> None:
            for pos in failed_pos:
                k = int(ff[pos])
                row = int(rows[pos])
                d.node_names.append(names[row])
                d.node_plugin.append(plugins[k])
                d.node_code.append(results[k].code_at(row))
                d.node_reasons.append(results[k].reasons_at(row))
            for name, status in extra.items():
                d.node_names.append(name)
                d.node_plugin.append(status.plugin)
                d.node_code.append(status.code)
                d.node_reasons.append(status.reasons)

        d._pending = build
        return d
