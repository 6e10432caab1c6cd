"""The scheduling algorithm: given a pod and a snapshot, which node (kube's schedule_one.go:
schedulePod, findNodesThatFitPod, evaluateNominatedNode, findNodesThatPassFilters,
numFeasibleNodesToFind, prioritizeNodes, and the pick: selectHost up to 1.34, sortedNodeScores in
1.35; before 1.23 all of it was core/generic_scheduler.go's genericScheduler).

PreFilter, the pod's nominated node first (or batching's hint), Filter, the percentageOfNodesToScore
cut with its rotating start, PreScore and Score, and the pick: ties broken at random, as kube's
selectHost did up to 1.34 (1.35 leaves equal totals in its heap's order unless an extender scores).
The algorithm runs no plugin itself: it asks the framework (runtime.py, kube's
framework/runtime/framework.go) through `PluginRunner`, as schedule_one.go asks framework.Framework.
A pod shaped like one scheduled before starts from that cycle's verdicts (reuse.py).
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.batch import OpportunisticBatch, SortedScoredNodes
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.decision import Decision
from minisched.scheduler.framework.diagnosis import Diagnosis
from minisched.scheduler.framework.interface import FilterPlugin, FilterResult
from minisched.scheduler.framework.reuse import ReuseCache, ReuseEntry, best_of
from minisched.scheduler.framework.status import Code, PluginError, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES_AVAILABLE = "no nodes available to schedule pods"


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """kube's numFeasibleNodesToFind: how many feasible nodes are enough to stop filtering.

    Under 100 nodes, all. percentage 0 means adaptive: 50% minus 1% per 125 nodes, at least 5%.
    Never fewer than 100."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass
class ScheduleResult:
    node: str | None
    status: Status
    decision: Decision
    diagnosis: Diagnosis | None = None

    @property
    def evaluated(self) -> int:
        return self.decision.evaluated

    @property
    def feasible(self) -> int:
        return self.decision.feasible


class PluginRunner(Protocol):
    """What the algorithm asks of the framework (runtime.Framework): run an extension point's
    plugins, and say what the active filters read."""

    @property
    def profile_name(self) -> str: ...

    batch: OpportunisticBatch | None
    percentage_of_nodes_to_score: int  # the profile's, or the configuration's (0: adaptive)
    reads_pods: Mapping[str, bool]  # plugin -> do its verdicts depend on the pods on a node
    row_filters: Mapping[str, bool]  # filter plugin -> can it judge one row alone (interface.RowFilter)

    def observe(self, point: str, status: Status, started: float) -> None: ...

    def run_pre_filter_plugins(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[npt.NDArray[np.bool_] | None, list[str], Status]: ...

    def active_filters(self, state: CycleState) -> list[FilterPlugin]: ...

    def cross_node_filters(self, state: CycleState) -> bool: ...

    def run_filter_plugins(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[list[FilterResult], npt.NDArray[np.bool_], npt.NDArray[np.int64]]: ...

    def run_filters_on_one_node(self, state: CycleState, pod: PodInfo, node: NodeTable) -> Status: ...

    def run_filters_with_nominated_pods(self, state: CycleState, pod: PodInfo, nodes: NodeTable, node_name: str,
                                        removed: Sequence[PodInfo] = ()) -> Status: ...

    def verdicts_with_nominated(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> dict[str, Status]: ...

    def run_score_plugins(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp], decision: Decision,
        entry: ReuseEntry | None = None, dirty: npt.NDArray[np.intp] | None = None,
    ) -> Status: ...


class ScheduleAlgorithm:
    """One framework's scheduling algorithm and what it carries from cycle to cycle: where the
    next percentageOfNodesToScore search starts, the random source that breaks ties, the cycle
    count batching compares, and the reuse cache (None: judge every node afresh each cycle).
    kube keeps nextStartNodeIndex on its Scheduler, shared by the profiles; here each framework
    (profile) has its own."""

    def __init__(self, framework: PluginRunner, *, seed: int | None = None, reuse: ReuseCache | None = None) -> None:
        self.framework = framework
        self.next_start_node_index = 0
        self.reuse = reuse
        self._rng = random.Random(seed)
        self._tiebreak = np.random.default_rng(seed)  # the order of equal totals in batching's kept list
        self._cycles = 0  # scheduling cycles counted here when the caller gives none

    def schedule_pod(self, state: CycleState, pod: PodInfo, nodes: NodeTable, *,
                     cycle: int | None = None) -> ScheduleResult:
        """kube's schedulePod, with the pods nominated elsewhere already in `state` (see
        runtime.Framework.schedule). A plugin that raised is an Error result naming it."""
        started = time.perf_counter()
        n = len(nodes)
        decision = Decision(pod.key, self.framework.profile_name, nodes.names)
        if n == 0:
            status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_NODES_AVAILABLE,))
            decision.message = NO_NODES_AVAILABLE
            return ScheduleResult(None, status, decision, Diagnosis(0))
        if cycle is None:
            cycle = self._cycles + 1
        self._cycles = cycle
        try:
            result = self._schedule(state, pod, nodes, decision, cycle)
        except PluginError as e:  # a plugin bug must not kill the loop: the pod backs off and retries
            result = ScheduleResult(None, e.status(), decision)
        except Exception as e:
            result = ScheduleResult(None, Status.from_error(e), decision)
        self.framework.observe("SchedulePod", result.status, started)
        return result

    def _schedule(self, state: CycleState, pod: PodInfo, nodes: NodeTable, decision: Decision,
                  cycle: int = 0) -> ScheduleResult:
        fwk = self.framework
        n = len(nodes)
        names = nodes.names
        # kube's pluginsWithNodes: the PreFilter plugins that narrowed the nodes are rejectors of a
        # pod that fits none of the rest (a cluster event may widen what they allow)
        allowed, narrowed_by, status = fwk.run_pre_filter_plugins(state, pod, nodes)
        if not status.is_success:
            if status.is_rejected:
                diagnosis = Diagnosis.from_pre_filter(n, list(names), status)
                decision.message = diagnosis.message()
                return ScheduleResult(None, Status(status.code, (decision.message,), status.plugin), decision, diagnosis)
            return ScheduleResult(None, status, decision)

        # batching: the next node of the last cycle's sorted scores, if that cycle is reusable
        batch = fwk.batch
        hint, signature = "", None
        if batch is not None:
            hint, signature = batch.get_node_hint(pod, cycle, functools.partial(self._rejects, state, pod, nodes))

        # the nominated node first: if the pod still fits there, it goes there without scoring;
        # with none, the hint is tried the same way (kube's evaluateNominatedNode)
        first = pod.nominated_node_name or hint
        if first and self._fits_alone(state, pod, nodes, first, allowed, decision,
                                         narrow=not pod.nominated_node_name):
            decision.chosen = first
            if pod.nominated_node_name:
                decision.nominated = True
            else:
                decision.hinted = True
            if batch is not None:
                batch.store_schedule_results(signature, hint, first, None, cycle)
            return ScheduleResult(first, Status.success(), decision)

        t0 = time.perf_counter()
        cache = self.reuse
        reusable = (cache is not None and n >= cache.min_nodes and allowed is None
                    and not fwk.cross_node_filters(state))
        entry: ReuseEntry | None = None
        dirty: npt.NDArray[np.intp] | None = None
        if reusable and cache is not None:
            entry, dirty = cache.lookup(state, pod, nodes, fwk.active_filters(state), fwk.reads_pods,
                                        fwk.row_filters)
        if entry is not None:
            results, passed, first_fail = entry.results, entry.passed, entry.first_fail
        else:
            results, passed, first_fail = fwk.run_filter_plugins(state, pod, nodes)
            if reusable and cache is not None and nodes.frozen:
                entry = cache.remember(pod, nodes, tuple(p.name for p in fwk.active_filters(state)),
                                       results, passed, first_fail)
        if allowed is not None:
            # kube does not filter nodes outside a PreFilter result: they fail for that reason alone
            passed = passed & allowed
            first_fail = np.where(allowed, first_fail, -1)
        # nodes where nominated pods wait: judged again with them added; a rejection there is the
        # node's verdict (kube's first pass is the one with the nominated pods)
        with_nominated: dict[str, Status] = {}
        if state.nominated:
            passed, first_fail = passed.copy(), first_fail.copy()
            for name, status in fwk.verdicts_with_nominated(state, pod, nodes).items():
                row = nodes.row(name)
                if row is None or (allowed is not None and not allowed[row]):
                    continue
                if status.is_error:
                    return ScheduleResult(None, status, decision)
                if not status.is_success:
                    passed[row] = False
                    first_fail[row] = -1
                    with_nominated[name] = status
        fwk.observe("Filter", Status.success(), t0)

        # percentageOfNodesToScore: stop once enough feasible nodes are found, starting where the
        # last cycle stopped, so every node gets its turn (kube asks the framework for the percentage too)
        to_find = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score, n)
        start = self.next_start_node_index % n
        processed = n
        if to_find < n:
            order = np.roll(np.arange(n, dtype=np.intp), -start) if start else np.arange(n, dtype=np.intp)
            cum = np.cumsum(passed[order])
            if cum[-1] >= to_find:
                processed = int(np.searchsorted(cum, to_find)) + 1
        self.next_start_node_index = (start + processed) % n
        if processed < n:
            evaluated = order[:processed]
            feasible = evaluated[passed[evaluated]]
            decision.first_fail = first_fail[evaluated]
        else:  # all examined: plain row order, so plugins see "every row" and skip fancy indexing
            evaluated = _every_row(n)
            feasible = entry.feasible_rows(passed) if entry is not None else np.flatnonzero(passed)
            decision.first_fail = first_fail
        decision.evaluated_rows = evaluated
        decision.filter_plugins = [p.name for p in fwk.active_filters(state)]
        decision.filter_results = results
        decision.feasible_rows = feasible

        if feasible.size == 0:
            extra = dict(with_nominated)  # nothing fit, so every node was evaluated
            if allowed is not None:
                # kube 1.35's absent-nodes status (schedule_one.go findNodesThatFitPod): the
                # narrowing plugins, sorted, as Go prints a []string
                outside = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                 (f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(set(narrowed_by)))}]",))
                extra |= {names[int(r)]: outside for r in evaluated if not allowed[r]}
            diagnosis = Diagnosis.from_filters(
                n, list(names), evaluated, decision.filter_plugins, results, decision.first_fail, extra
            )
            diagnosis.unschedulable_plugins.update(narrowed_by)
            decision.message = diagnosis.message()
            return ScheduleResult(None, Status(Code.UNSCHEDULABLE, (decision.message,)), decision, diagnosis)

        if feasible.size == 1:  # kube skips scoring when there is nothing to choose between
            decision.total = np.zeros(1, np.int64)
            decision.chosen = names[int(feasible[0])]
            if batch is not None:
                batch.store_schedule_results(signature, hint, decision.chosen, None, cycle)
            return ScheduleResult(decision.chosen, Status.success(), decision)

        # prioritizeNodes, then selectHost
        t0 = time.perf_counter()
        status = fwk.run_score_plugins(state, pod, nodes, feasible, decision, entry, dirty)
        fwk.observe("Score", status, t0)
        if not status.is_success:
            return ScheduleResult(None, status, decision)
        best, ties = best_of(decision.total, entry)
        pick = int(ties[0]) if ties.size == 1 else int(ties[self._rng.randrange(ties.size)])
        decision.chosen = names[int(feasible[pick])]
        if batch is not None:
            batch.store_schedule_results(signature, hint, decision.chosen, self._others(names, feasible, pick, decision),
                                         cycle)
        return ScheduleResult(decision.chosen, Status.success(), decision)

    def _fits_alone(self, state: CycleState, pod: PodInfo, nodes: NodeTable, name: str,
                    allowed: npt.NDArray[np.bool_] | None, decision: Decision, narrow: bool = False) -> bool:
        """Does `pod` pass the filters on node `name` alone (with the pods nominated there, as
        kube's findNodesThatPassFilters on one node)? If so, the decision records that node: in
        rows of the whole snapshot, or with `narrow` (a hint, where every microsecond counts) as a
        record of that one node, the only one evaluated."""
        fwk = self.framework
        row = nodes.row(name)
        if row is None or (allowed is not None and not allowed[row]):
            return False
        view = nodes.for_node(name)
        results, passed, _ = fwk.run_filter_plugins(state, pod, view)
        if passed[0] and name in state.nominated:
            with_them = fwk.run_filters_with_nominated_pods(state, pod, nodes, name)
            passed[0] = with_them.is_success
        if not passed[0]:
            return False
        decision.filter_plugins = [p.name for p in fwk.active_filters(state)]
        decision.first_fail = np.array([-1], np.int64)
        if narrow:
            decision.node_names = view.names
            decision.evaluated_rows = decision.feasible_rows = np.zeros(1, np.intp)
            decision.filter_results = results
            return True
        n = len(nodes)
        decision.evaluated_rows = np.array([row], np.intp)
        decision.filter_results = [_widen(r, n, row) for r in results]
        decision.feasible_rows = np.array([row], np.intp)
        return True

    def _rejects(self, state: CycleState, pod: PodInfo, nodes: NodeTable, name: str) -> bool | None:
        """Batching's check on the node chosen last: None if it is gone, else whether the filters
        reject `pod` there now (kube's RunFilterPlugins: an error is no rejection)."""
        if nodes.row(name) is None:
            return None
        try:
            status = self.framework.run_filters_on_one_node(state, pod, nodes.for_node(name))
        except PluginError:
            return False
        return status.is_rejected

    def _others(self, names: Sequence[str], feasible: npt.NDArray[np.intp], pick: int,
                decision: Decision) -> SortedScoredNodes:
        """The scored nodes but the chosen one, for batching (sorted when first asked)."""
        return SortedScoredNodes(names, feasible, decision.total, self._tiebreak, chosen=pick)


@functools.lru_cache(maxsize=8)
def _every_row(n: int) -> npt.NDArray[np.intp]:
    """0..n-1 as rows, read-only and shared by the decisions of every cycle that examines all n
    nodes (an array made per cycle otherwise)."""
    rows = np.arange(n, dtype=np.intp)
    rows.flags.writeable = False
    return rows


def _widen(result: FilterResult, n: int, row: int) -> FilterResult:
    """A one-row filter result placed at `row` of an n-row snapshot (for the decision record)."""
    passed = np.ones(n, np.bool_)
    reasons = np.zeros(n, np.int64)
    passed[row] = result.passed[0]
    reasons[row] = result.reasons[0]
    unresolvable = None
    if result.unresolvable is not None:
        unresolvable = np.zeros(n, np.bool_)
        unresolvable[row] = result.unresolvable[0]
    return FilterResult(passed, reasons, result.messages, result.code, unresolvable=unresolvable)


__all__: Sequence[str] = (
    "MIN_FEASIBLE_NODES_TO_FIND",
    "NO_NODES_AVAILABLE",
    "PluginRunner",
    "ScheduleAlgorithm",
    "ScheduleResult",
    "num_feasible_nodes_to_find",
)
