"""Framework: a profile's plugins, instantiated and run extension point by extension point.

`schedule(pod, snapshot)` is kube-scheduler's SchedulePod: PreFilter, the pod's nominated node
first, Filter, the percentageOfNodesToScore cut with its rotating start, PreScore, Score,
NormalizeScore, weights, and the pick (ties broken at random, as kube's selectHost did up to 1.34;
1.35 leaves equal totals in its heap's order unless an extender scores). Filter and
Score run once per plugin over all nodes as numpy operations. Reserve, Permit and the binding
points are run by the scheduler loop through the run_* methods.

With `reuse` (the default), a pod shaped like one scheduled before (same requests, tolerations,
affinity, ports, images) starts from that cycle's verdicts and only the nodes whose pods changed
since are judged again; tests check that the decisions are identical to judging afresh.
"""

from __future__ import annotations

import collections
import functools
import logging
import random
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.cluster.base import Cluster
from minisched.scheduler.framework.batch import (
    OpportunisticBatch,
    Signature,
    SortedScoredNodes,
    batchable_plugins,
)
from minisched.scheduler.framework.batch import sign_pod as sign_with
from minisched.scheduler.framework.cluster_event import (
    WILDCARD_EVENT,
    ClusterEventWithHint,
    RegisteredHint,
    hint_map,
)
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.decision import Decision, PluginScores
from minisched.scheduler.framework.diagnosis import Diagnosis
from minisched.scheduler.framework.interface import (
    EXTENSION_POINT_TABLE,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    DeclaresPodReads,
    EnqueueExtensions,
    EventRecorder,
    FilterPlugin,
    FilterResult,
    Handle,
    Nominator,
    NormalizeScorePlugin,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    QueuedPod,
    QueueSortPlugin,
    ReadsOtherNodes,
    ReservePlugin,
    ScorePlugin,
)
from minisched.scheduler.framework.profile import PluginSet, Profile, default_profile
from minisched.scheduler.framework.registry import PluginFactory, Registry
from minisched.scheduler.framework.reuse import _REUSE_ENTRIES, _best, _Reusable, _same, _signature, _summed
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo, PodSpecError
from minisched.scheduler.snapshot import NodeTable

Object = dict[str, Any]
IntArray = npt.NDArray[np.int64]
Observer = Callable[[str, str, float], None]  # (extension point, status label, seconds)

log = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
# Below this many nodes, judging every node afresh is cheaper than the bookkeeping of reuse
# (measured with bench/algorithm_bench.py: at 100 nodes reuse cost ~35 µs more per pod, at 1,000
# it saved ~35 µs, at 5,000 ~370 µs).
REUSE_MIN_NODES = 400
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
MAX_PERMIT_TIMEOUT = 15 * 60.0
NO_NODES_AVAILABLE = "no nodes available to schedule pods"
# Named as the rejector of a pod that found no room among the nodes `schedule(only=...)` allowed (a
# shard's partition): no plugin registered events for it, so any event may help it.
PARTITION = "NodePartition"


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """kube's numFeasibleNodesToFind: how many feasible nodes are enough to stop filtering.

    Under 100 nodes, all. percentage 0 means adaptive: 50% minus 1% per 125 nodes, at least 5%.
    Never fewer than 100."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class PluginError(RuntimeError):
    """A plugin raised: carries which one, so the error status can name it (kube's
    `running <Point> plugin "<name>": <error>`)."""

    def __init__(self, plugin: str, error: BaseException, point: str = "") -> None:
        super().__init__(plugin_error_message(point, plugin, error))
        self.plugin = plugin
        self.error = error
        self.point = point

    def status(self) -> Status:
        return Status(Code.ERROR, (str(self),), self.plugin, self.error)


def plugin_error_message(point: str, plugin: str, error: object) -> str:
    """kube's wrapping of a plugin's error at every extension point: `running Reserve plugin
    "Foo": <error>` (the point named when known)."""
    where = f"{point} plugin" if point else "plugin"
    return f'running {where} "{plugin}": {error}'


def plugin_error(point: str, plugin: str, error: BaseException) -> Status:
    """An Error status for a plugin that raised at `point`, naming it."""
    return Status(Code.ERROR, (plugin_error_message(point, plugin, error),), plugin, error)


def _named(point: str, plugin: str, status: Status) -> Status:
    """A plugin's non-success status with the plugin named; an Error's message wrapped as kube
    wraps it (a rejection's reasons are the user's text and stay as they are)."""
    if status.is_error and not (status.reasons and status.reasons[0].startswith("running ")):
        return Status(Code.ERROR, (plugin_error_message(point, plugin, status.message()),), plugin, status.error)
    return status.with_plugin(plugin)


@dataclass
class SimpleHandle:
    """A Handle from parts: the scheduler passes its cluster, its cache's snapshot and its recorder."""

    cluster: Cluster | None = None
    snapshot_fn: Callable[[], NodeTable] | None = None
    event_recorder: EventRecorder | None = None
    informer_factory: Any = None  # for plugins that list other objects (PodTopologySpread's defaults)
    workloads: Any = None  # or those objects' listers directly (tests, benchmarks)
    nominator: Nominator | None = None

    def snapshot(self) -> NodeTable:
        if self.snapshot_fn is None:
            raise RuntimeError("this handle has no snapshot source")
        return self.snapshot_fn()


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


@dataclass
class _Points:
    """The profile's plugins per extension point, in profile order (built from EXTENSION_POINT_TABLE;
    one field per row of it, named by its `attr`)."""

    pre_enqueue: list[PreEnqueuePlugin] = field(default_factory=list)
    queue_sort: list[QueueSortPlugin] = field(default_factory=list)
    pre_filter: list[PreFilterPlugin] = field(default_factory=list)
    filter: list[FilterPlugin] = field(default_factory=list)
    post_filter: list[PostFilterPlugin] = field(default_factory=list)
    pre_score: list[PreScorePlugin] = field(default_factory=list)
    score: list[ScorePlugin] = field(default_factory=list)
    reserve: list[ReservePlugin] = field(default_factory=list)
    permit: list[PermitPlugin] = field(default_factory=list)
    pre_bind: list[PreBindPlugin] = field(default_factory=list)
    bind: list[BindPlugin] = field(default_factory=list)
    post_bind: list[PostBindPlugin] = field(default_factory=list)


def nominated_by_node(pod: PodInfo, nominated: Iterable[tuple[str, PodInfo]]) -> dict[str, list[PodInfo]]:
    """node -> the pods nominated there that `pod` must leave room for: at least its priority, and
    not the pod itself (kube's addGENominatedPods)."""
    out: dict[str, list[PodInfo]] = {}
    for node, other in nominated:
        if other.priority >= pod.priority and other.key != pod.key:
            out.setdefault(node, []).append(other)
    return out


class Framework:
    """One profile's plugins, ready to run. Not thread-safe across scheduling cycles (they are
    serial, as in kube); binding points may run concurrently if the plugins allow it."""

    def __init__(
        self,
        profile: Profile | None = None,
        registry: Mapping[str, PluginFactory] | None = None,
        handle: Handle | None = None,
        *,
        percentage_of_nodes_to_score: int = 0,
        seed: int | None = None,
        observer: Observer | None = None,
        reuse: bool = True,
        reuse_min_nodes: int = REUSE_MIN_NODES,
        batching: bool = True,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if registry is None:
            from minisched.scheduler.plugins import default_registry  # plugins build on this module

            registry = default_registry()
        reg = registry if isinstance(registry, Registry) else Registry(registry)
        self.profile = profile or default_profile()
        self.handle = handle
        self.observer = observer
        self.percentage_of_nodes_to_score = (
            self.profile.percentage_of_nodes_to_score
            if self.profile.percentage_of_nodes_to_score is not None
            else percentage_of_nodes_to_score
        )
        self.next_start_node_index = 0
        self._rng = random.Random(seed)
        self.plugins: dict[str, Plugin] = {
            name: reg.create(name, self.profile.args_for(name), handle) for name in self.profile.plugin_names()
        }
        # one list per row of the extension point table, by its config name and as a typed field
        self._by_point: dict[str, list[Any]] = {}
        for ext in EXTENSION_POINT_TABLE:
            for ref in self.profile.points.get(ext.name, PluginSet()).enabled:
                if not isinstance(self.plugins[ref.name], ext.protocol):
                    raise ValueError(f"plugin {ref.name!r} does not implement the {ext.name} extension point")
            names = self.profile.enabled_at(ext.name, functools.partial(self._implements, proto=ext.protocol))
            self._by_point[ext.name] = [self.plugins[n] for n in names]
        self.points = _Points(**{ext.attr: self._by_point[ext.name] for ext in EXTENSION_POINT_TABLE})
        self.queueing_hints = self._queueing_hints()
        if len(self.points.queue_sort) != 1:
            raise ValueError(
                f"profile {self.profile.scheduler_name!r} needs exactly one queueSort plugin, "
                f"has {[p.name for p in self.points.queue_sort]}"
            )
        if not self.points.bind:
            raise ValueError(f"profile {self.profile.scheduler_name!r} needs at least one bind plugin")
        self.weights = {p.name: self.profile.score_weight(p.name) for p in self.points.score}
        # isinstance against a runtime Protocol is slow (it inspects attributes): decide once
        self._normalizes = {p.name: isinstance(p, NormalizeScorePlugin) for p in self.points.score}
        # Reusing an earlier cycle's verdicts for a pod of the same shape is only sound when every
        # filter and score plugin says what its results depend on (`reads_pods`).
        self.reuse = reuse and all(
            isinstance(p, DeclaresPodReads) and isinstance(p.reads_pods, bool)
            for p in (*self.points.filter, *self.points.score)
        )
        # decided once per plugin: no attribute looked up per cycle
        self._reads_pods = {name: not isinstance(p, DeclaresPodReads) or bool(p.reads_pods)
                            for name, p in self.plugins.items()}
        self._reads_other_nodes = {
            name: isinstance(p, ReadsOtherNodes) and bool(p.reads_other_nodes) for name, p in self.plugins.items()}
        self.reuse_min_nodes = reuse_min_nodes
        self._reusable: collections.OrderedDict[tuple[Any, ...], _Reusable] = collections.OrderedDict()
        self.reuse_hits = 0
        # kube 1.35's OpportunisticBatching (batch.py): on unless turned off, as its feature gate.
        # `clock` (monotonic seconds) ages the kept scores; the scheduler passes its own.
        self.signers, self.unsignable_plugins = batchable_plugins(
            (self.points.pre_filter, self.points.filter, self.points.pre_score, self.points.score))
        self.batch: OpportunisticBatch | None = (
            OpportunisticBatch(self.sign_pod, clock=clock or time.monotonic) if batching else None)
        self._tiebreak = np.random.default_rng(seed)  # the order of equal totals in the kept list
        self._cycles = 0  # scheduling cycles counted here when the caller gives none

    def sign_pod(self, pod: PodInfo) -> Signature | None:
        """kube's SignPod: None when a plugin of the profile cannot sign `pod` (or has no sign_pod)."""
        return sign_with(self.signers, pod)

    def _implements(self, name: str, proto: type) -> bool:
        return isinstance(self.plugins[name], proto)

    @property
    def profile_name(self) -> str:
        return self.profile.scheduler_name

    def plugin_names(self, point: str) -> list[str]:
        """The plugins at `point` (its KubeSchedulerConfiguration name), in order."""
        try:
            return [p.name for p in self._by_point[point]]
        except KeyError:
            raise ValueError(f"no extension point {point!r} (have {', '.join(self._by_point)})") from None

    def _queueing_hints(self) -> dict[Any, list[RegisteredHint]]:
        """kube's per-profile queueingHintMap: event -> [(plugin, hint)] from every plugin that can
        reject a pod (PreEnqueue, PreFilter, Filter, Reserve, Permit). A plugin without
        EnqueueExtensions registers every event with no hint (kube's fillEventToPluginMap)."""
        rejectors: dict[str, Plugin] = {}
        for point in ("preEnqueue", "preFilter", "filter", "reserve", "permit"):
            for p in self._by_point[point]:
                rejectors.setdefault(p.name, p)
        registrations: list[tuple[str, list[ClusterEventWithHint]]] = []
        for name, plugin in rejectors.items():
            if isinstance(plugin, EnqueueExtensions):
                registrations.append((name, list(plugin.events_to_register())))
            else:
                registrations.append((name, [ClusterEventWithHint(WILDCARD_EVENT)]))
        return hint_map(registrations)

    def _observe(self, point: str, status: Status, started: float) -> None:
        if self.observer is not None:
            self.observer(point, status.code.label, time.perf_counter() - started)

    # ------------------------------------------------------------ queueing
    def run_pre_enqueue(self, pod: Object) -> Status:
        for p in self.points.pre_enqueue:
            status = _call("PreEnqueue", p.name, p.pre_enqueue, pod)
            if not status.is_success:
                return _named("PreEnqueue", p.name, status)
        return Status.success()

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        plugin: QueueSortPlugin = self.points.queue_sort[0]
        return plugin.less(a, b)

    # ------------------------------------------------------------ scheduling cycle
    def schedule_object(self, pod: Object, nodes: NodeTable, **kwargs: Any) -> tuple[PodInfo | None, ScheduleResult]:
        """Parse and schedule; a pod that cannot be parsed comes back UnschedulableAndUnresolvable
        with the parse error as its reason (what FailedScheduling should say)."""
        try:
            info = PodInfo.from_pod(pod)
        except PodSpecError as e:
            meta = pod.get("metadata") or {}
            key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
            status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (str(e),), "PodInfo")
            return None, ScheduleResult(None, status, Decision(key, self.profile_name, nodes.names, message=str(e)))
        return info, self.schedule(info, nodes, **kwargs)

    def schedule(
        self,
        pod: PodInfo,
        nodes: NodeTable,
        *,
        state: CycleState | None = None,
        nominated: Iterable[tuple[str, PodInfo]] = (),
        only: Collection[str] | None = None,
        cycle: int | None = None,
    ) -> ScheduleResult:
        """Choose a node for `pod` in snapshot `nodes` (kube's SchedulePod).

        `nominated`: (node, pod) of pods nominated by earlier preemptions. As kube's
        RunFilterPluginsWithNominatedPods, a node with nominated pods of at least this pod's priority
        must pass the filters twice: with those pods added (so this pod does not take their room)
        and without them (so it does not rely on pods that may never come, e.g. for pod affinity).
        Only that node's own nominated pods are added, and scoring sees the plain snapshot.
        `only`: node names the pod may be placed on (a shard's partition); the plugins still see
        every node (spreading and affinity count the whole cluster), as with a PreFilter result.
        `cycle`: the scheduling queue's cycle count (kube's CurrentCycle), which batching compares
        with the last one; without it, this call is the one after the last."""
        started = time.perf_counter()
        state = state if state is not None else CycleState()
        state.nominated = nominated_by_node(pod, nominated)
        n = len(nodes)
        decision = Decision(pod.key, self.profile_name, nodes.names)
        if n == 0:
            status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_NODES_AVAILABLE,))
            decision.message = NO_NODES_AVAILABLE
            return ScheduleResult(None, status, decision, Diagnosis(0))
        if cycle is None:
            cycle = self._cycles + 1
        self._cycles = cycle
        try:
            result = self._schedule(state, pod, nodes, decision, only, cycle)
        except PluginError as e:  # a plugin bug must not kill the loop: the pod backs off and retries
            result = ScheduleResult(None, e.status(), decision)
        except Exception as e:
            result = ScheduleResult(None, Status.from_error(e), decision)
        self._observe("SchedulePod", result.status, started)
        return result

    def _schedule(self, state: CycleState, pod: PodInfo, nodes: NodeTable, decision: Decision,
                  only: Collection[str] | None = None, cycle: int = 0) -> ScheduleResult:
        n = len(nodes)
        names = nodes.names
        allowed: npt.NDArray[np.bool_] | None = None
        # kube's pluginsWithNodes: the PreFilter plugins that narrowed the nodes are rejectors of a
        # pod that fits none of the rest (a cluster event may widen what they allow)
        narrowed_by: list[str] = [PARTITION] if only is not None else []
        if only is not None:
            allowed = np.zeros(n, np.bool_)
            for name in only:
                row = nodes.row(name)
                if row is not None:
                    allowed[row] = True
        t0 = time.perf_counter()
        for p in self.points.pre_filter:
            try:
                result, status = p.pre_filter(state, pod, nodes)
            except Exception as e:
                raise PluginError(p.name, e, "PreFilter") from e
            if status.is_skip:
                state.skip_filter.add(p.name)
                continue
            if not status.is_success:
                status = _named("PreFilter", p.name, status)
                if status.is_rejected:
                    diagnosis = Diagnosis.from_pre_filter(n, list(names), status)
                    decision.message = diagnosis.message()
                    return ScheduleResult(None, Status(status.code, (decision.message,), p.name), decision, diagnosis)
                return ScheduleResult(None, status, decision)
            if result is not None and result.node_names is not None:
                narrowed_by.append(p.name)
                mask = np.zeros(n, np.bool_)
                for name in result.node_names:
                    row = nodes.row(name)
                    if row is not None:
                        mask[row] = True
                allowed = mask if allowed is None else allowed & mask
        self._observe("PreFilter", Status.success(), t0)

        # batching: the next node of the last cycle's sorted scores, if that cycle is reusable
        batch = self.batch
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
        reusable = (self.reuse and n >= self.reuse_min_nodes and allowed is None
                    and not self._cross_node_filters(state))
        entry, dirty = self._reuse_filters(state, pod, nodes) if reusable else (None, None)
        if entry is not None:
            results, passed, first_fail = entry.results, entry.passed, entry.first_fail
        else:
            results, passed, first_fail = self._run_filters(state, pod, nodes)
            if reusable and nodes.frozen:
                entry = self._remember(pod, nodes, state, results, passed, first_fail)
        if allowed is not None:
            # kube does not filter nodes outside a PreFilter result: they fail for that reason alone
            passed = passed & allowed
            first_fail = np.where(allowed, first_fail, -1)
        # nodes where nominated pods wait: judged again with them added; a rejection there is the
        # node's verdict (kube's first pass is the one with the nominated pods)
        with_nominated: dict[str, Status] = {}
        if state.nominated:
            passed, first_fail = passed.copy(), first_fail.copy()
            for name, status in self._verdicts_with_nominated(state, pod, nodes).items():
                row = nodes.row(name)
                if row is None or (allowed is not None and not allowed[row]):
                    continue
                if status.is_error:
                    return ScheduleResult(None, status, decision)
                if not status.is_success:
                    passed[row] = False
                    first_fail[row] = -1
                    with_nominated[name] = status
        self._observe("Filter", Status.success(), t0)

        # percentageOfNodesToScore: stop once enough feasible nodes are found, starting where the
        # last cycle stopped, so every node gets its turn
        to_find = num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, n)
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
            evaluated = np.arange(n, dtype=np.intp)
            feasible = entry.feasible_rows(passed) if entry is not None else np.flatnonzero(passed)
            decision.first_fail = first_fail
        decision.evaluated_rows = evaluated
        decision.filter_plugins = [p.name for p in self._active_filters(state)]
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

        t0 = time.perf_counter()
        status = self._run_scores(state, pod, nodes, feasible, decision, entry, dirty)
        self._observe("Score", status, t0)
        if not status.is_success:
            return ScheduleResult(None, status, decision)
        best, ties = _best(decision.total, entry)
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
        row = nodes.row(name)
        if row is None or (allowed is not None and not allowed[row]):
            return False
        view = nodes.for_node(name)
        results, passed, _ = self._run_filters(state, pod, view)
        if passed[0] and name in state.nominated:
            with_them = self.run_filters_with_nominated_pods(state, pod, nodes, name)
            passed[0] = with_them.is_success
        if not passed[0]:
            return False
        decision.filter_plugins = [p.name for p in self._active_filters(state)]
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
            status = self.run_filters_on_one_node(state, pod, nodes.for_node(name))
        except PluginError:
            return False
        return status.is_rejected

    def _others(self, names: Sequence[str], feasible: npt.NDArray[np.intp], pick: int,
                decision: Decision) -> SortedScoredNodes:
        """The scored nodes but the chosen one, for batching (sorted when first asked)."""
        return SortedScoredNodes(names, feasible, decision.total, self._tiebreak, chosen=pick)

    def _active_filters(self, state: CycleState) -> list[Any]:
        if not state.skip_filter:
            return self.points.filter
        return [p for p in self.points.filter if p.name not in state.skip_filter]

    def _run_filters(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[list[FilterResult], npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
        """Every active filter over every row; `first_fail[row]` is the index of the first filter
        (in profile order) that rejected the row, -1 if none did."""
        n = len(nodes)
        passed = np.ones(n, np.bool_)
        first_fail = np.full(n, -1, np.int64)
        results = []
        for k, p in enumerate(self._active_filters(state)):
            try:
                r = p.filter(state, pod, nodes)
            except Exception as e:
                raise PluginError(p.name, e, "Filter") from e
            if r.passed.shape != (n,):
                raise RuntimeError(f"filter plugin {p.name} returned {r.passed.shape} verdicts for {n} nodes")
            results.append(r)
            if r.everyone_passed:
                continue
            newly = passed & ~r.passed
            first_fail[newly] = k
            passed &= r.passed
        return results, passed, first_fail

    def run_filters_on_one_node(self, state: CycleState, pod: PodInfo, node: NodeTable) -> Status:
        """kube's RunFilterPlugins on a one-row table (preemption's what-if node): the active
        filters in profile order, stopping at the first that rejects; its Status is the verdict."""
        for p in self._active_filters(state):
            try:
                r = p.filter(state, pod, node)
            except Exception as e:
                raise PluginError(p.name, e, "Filter") from e
            if not (r.everyone_passed or r.passed[0]):
                return r.status_at(0, p.name)
        return Status.success()

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo,
                                         node_name: str) -> Status:
        """Tell the PreFilter plugins with extensions that `pod_to_add` now runs on `node_name`
        (kube's RunPreFilterExtensionAddPod); plugins that skipped this cycle are left out."""
        return self._run_pre_filter_extensions("add_pod", state, pod, pod_to_add, node_name)

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                                            node_name: str) -> Status:
        """... that `pod_to_remove` no longer runs on `node_name` (preemption's dry run of a victim)."""
        return self._run_pre_filter_extensions("remove_pod", state, pod, pod_to_remove, node_name)

    def _run_pre_filter_extensions(self, method: str, state: CycleState, pod: PodInfo, other: PodInfo,
                                   node_name: str) -> Status:
        for p in self.points.pre_filter:
            if p.name in state.skip_filter or not isinstance(p, PreFilterExtensions):
                continue
            fn = p.add_pod if method == "add_pod" else p.remove_pod
            point = "AddPod on PreFilter" if method == "add_pod" else "RemovePod on PreFilter"
            status = _call(point, p.name, fn, state, pod, other, node_name)
            if not status.is_success:
                return _named(point, p.name, status)
        return Status.success()

    def run_filters_with_nominated_pods(self, state: CycleState, pod: PodInfo, nodes: NodeTable, node_name: str,
                                        removed: Sequence[PodInfo] = ()) -> Status:
        """kube's RunFilterPluginsWithNominatedPods on node `node_name` of `nodes` with `removed`
        taken off: with the pods nominated there added (PreFilter state told through AddPod), then,
        if that passed, without them. The first rejection is the verdict."""
        if node_name in state.nominated:
            status = self._filter_with_added(state, pod, nodes, node_name, removed)
            if not status.is_success:
                return status
        view = nodes.for_node(node_name, removed=removed)
        return next(iter(self.run_filters(state, pod, view).values()), Status.success())

    def _verdicts_with_nominated(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> dict[str, Status]:
        """Each node with nominated pods -> the filters' verdict with those pods added. When every
        active filter judges a node by its own pods alone, one vectorised pass over a copy with all
        nominated pods placed gives each node exactly its own verdict (and thousands of nominations,
        as after a wave of preemptions, cost one pass, not one per node); otherwise node by node."""
        if self._cross_node_filters(state):
            return {name: self._filter_with_added(state, pod, nodes, name) for name in state.nominated}
        placed = [(name, p) for name, pods in state.nominated.items() if nodes.row(name) is not None for p in pods]
        results, passed, first_fail = self._run_filters(state, pod, nodes.with_pods(placed))
        active = self._active_filters(state)
        out = {}
        for name in state.nominated:
            row = nodes.row(name)
            if row is None:
                continue
            k = int(first_fail[row])
            out[name] = Status.success() if passed[row] else results[k].status_at(row, active[k].name)
        return out

    def _filter_with_added(self, state: CycleState, pod: PodInfo, nodes: NodeTable, node_name: str,
                           removed: Sequence[PodInfo] = ()) -> Status:
        added = state.nominated[node_name]
        with_them = state.clone()
        for other in added:
            status = self.run_pre_filter_extension_add_pod(with_them, pod, other, node_name)
            if not status.is_success:
                return status
        view = nodes.for_node(node_name, removed=removed, added=added)
        return next(iter(self.run_filters(with_them, pod, view).values()), Status.success())

    def run_filters(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> dict[str, Status]:
        """Filter verdicts per node (node -> Status of its first failing filter, Success if none):
        what preemption uses on `snapshot.for_node(name, removed=victims)` views."""
        results, passed, first_fail = self._run_filters(state, pod, nodes)
        active = self._active_filters(state)
        out = {}
        for row, name in enumerate(nodes.names):
            k = int(first_fail[row])
            out[name] = Status.success() if k < 0 else results[k].status_at(row, active[k].name)
        return out

    def _run_scores(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        rows: npt.NDArray[np.intp],
        decision: Decision,
        entry: _Reusable | None = None,
        dirty: npt.NDArray[np.intp] | None = None,
    ) -> Status:
        for pre in self.points.pre_score:
            status = _call("PreScore", pre.name, pre.pre_score, state, pod, nodes, rows)
            if status.is_skip:
                state.skip_score.add(pre.name)
            elif not status.is_success:
                return _named("PreScore", pre.name, status)
        added: list[IntArray] = []  # each plugin's weighted scores, summed into the total at the end
        p: Any
        for p in self.points.score:
            if p.name in state.skip_score:
                if entry is not None:
                    entry.raw.pop(p.name, None)  # not kept up to date while skipped
                    entry.scored.pop(p.name, None)
                continue
            # with a reuse entry, a plugin's scores are those of the last cycle when its raw scores of
            # every node are the same array (no changed node, or none whose score moved: see
            # _reused_scores) and the feasible rows are the same: no normalising, checking, weighing
            reusing = entry is not None and not self._reads_other_nodes[p.name]
            kept = entry.scored.get(p.name) if reusing and entry is not None else None
            try:
                if reusing and entry is not None:
                    full = self._reused_scores(state, pod, nodes, entry, dirty, p)
                    if kept is not None and kept[1] is full and (kept[0] is rows or _same(kept[0], rows)):
                        added.append(kept[3])
                        decision.score_plugins[p.name] = kept[2]
                        continue
                    raw = full if len(rows) == len(full) else full[rows]
                else:
                    raw = np.asarray(p.score(state, pod, nodes, rows), np.int64)
                normalized = p.normalize_score(state, pod, raw) if self._normalizes[p.name] else raw
            except Exception as e:
                return plugin_error("Score", p.name, e)
            if raw.shape != rows.shape:
                return Status.from_error(RuntimeError(f"score plugin {p.name} returned {raw.shape} scores"), p.name)
            if normalized.size and (normalized.min() < MIN_NODE_SCORE or normalized.max() > MAX_NODE_SCORE):
                bad = int(normalized[(normalized < MIN_NODE_SCORE) | (normalized > MAX_NODE_SCORE)][0])
                return Status.from_error(
                    ValueError(f"plugin {p.name} returns an invalid score {bad}, it should in the range of "
                               f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"), p.name
                )
            scores = PluginScores(raw, normalized, self.weights[p.name])
            weighted = scores.weighted
            added.append(weighted)
            decision.score_plugins[p.name] = scores
            if reusing and entry is not None:
                entry.scored[p.name] = (rows, entry.raw[p.name], scores, weighted)
        decision.total = entry.same_total(rows, added) if entry is not None else _summed(len(rows), added)
        return Status.success()

    # ------------------------------------------------------------ reuse across cycles
    # A stream of pods of one shape (a Deployment scaling up) asks the same questions cycle after
    # cycle, and between two cycles only the nodes that got or lost a pod have changed. So the
    # verdicts of the last cycle for that shape are kept, and only those nodes are judged again
    # by the plugins that read pods (kube-scheduler 1.34's pod "signatures" serve the same idea).
    # Any node change (added, removed, relabelled, retainted) discards everything.

    def _cross_node_filters(self, state: CycleState) -> bool:
        """Is an active filter's verdict on one node moved by pods on other nodes (topology
        spreading)? Then re-judging only the changed nodes would be wrong: no reuse this cycle."""
        return any(self._reads_other_nodes[p.name] for p in self._active_filters(state))

    def _reuse_filters(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[_Reusable | None, npt.NDArray[np.intp] | None]:
        if not nodes.frozen:
            return None, None
        key = _signature(pod)
        entry = self._reusable.get(key)
        if entry is None:
            return None, None
        active = tuple(p.name for p in self._active_filters(state))
        changed = nodes.nodes_changed_since(entry.node_version, entry.pod_version)
        if changed is None or active != entry.filter_names or len(nodes) != len(entry.passed):
            del self._reusable[key]
            return None, None
        dirty = np.array(sorted(r for r in (nodes.row(name) for name in changed) if r is not None), np.intp)
        results = list(entry.results)
        passed, first_fail = entry.passed, entry.first_fail
        rejudged = False  # did any verdict on a dirty row change? (if not, passed/first_fail stand)
        if dirty.size:
            # one changed node (the usual drain: the one that got the last pod) is a view of its row
            view = nodes._row_view(int(dirty[0])) if dirty.size == 1 else nodes._subset(dirty)
            filters = self._active_filters(state)
            for k, p in enumerate(filters):
                if not self._reads_pods[p.name]:
                    continue
                try:
                    fresh = p.filter(state, pod, view)
                except Exception as e:
                    raise PluginError(p.name, e, "Filter") from e
                old = results[k]
                if fresh.everyone_passed and old.everyone_passed:
                    continue
                if (_same(fresh.passed, old.passed[dirty]) and _same(fresh.reasons, old.reasons[dirty])
                        and fresh.unresolvable is None and old.unresolvable is None
                        and ((fresh.messages == old.messages and fresh.code == old.code) or bool(fresh.passed.all()))):
                    continue  # the usual case in a drain: the node that got a pod still judged the same
                if (fresh.messages and old.messages and (fresh.messages != old.messages or fresh.code != old.code)) or (
                    fresh.unresolvable is not None or old.unresolvable is not None
                ):
                    del self._reusable[key]  # reasons numbered differently, or per-row codes: start over
                    return None, None
                new_passed = np.array(old.passed, np.bool_)
                new_reasons = np.array(old.reasons, np.int64)
                new_passed[dirty] = fresh.passed
                new_reasons[dirty] = fresh.reasons
                code = old.code if old.messages else fresh.code
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
        self.reuse_hits += 1
        self._reusable.move_to_end(key)
        updated = _Reusable(nodes.node_version, nodes.pod_version, active, results, passed, first_fail, dict(entry.raw),
                            dict(entry.scored), entry.feasible, entry.total)
        self._reusable[key] = updated
        return updated, dirty

    def _remember(
        self, pod: PodInfo, nodes: NodeTable, state: CycleState, results: list[FilterResult],
        passed: npt.NDArray[np.bool_], first_fail: npt.NDArray[np.int64],
    ) -> _Reusable:
        entry = _Reusable(nodes.node_version, nodes.pod_version,
                          tuple(p.name for p in self._active_filters(state)), results, passed, first_fail, {})
        self._reusable[_signature(pod)] = entry
        while len(self._reusable) > _REUSE_ENTRIES:
            self._reusable.popitem(last=False)
        return entry

    def _reused_scores(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, entry: _Reusable,
        dirty: npt.NDArray[np.intp] | None, p: Any,
    ) -> IntArray:
        """Raw scores of every node, the entry's re-scored on the changed nodes (`dirty`) when the
        plugin reads pods; the same array as before when none of those scores moved."""
        full = entry.raw.get(p.name)
        if full is None:
            full = np.asarray(p.score(state, pod, nodes, np.arange(len(nodes), dtype=np.intp)), np.int64)
        elif dirty is not None and dirty.size and self._reads_pods[p.name]:
            fresh = p.score(state, pod, nodes, dirty)
            if not _same(full[dirty], np.asarray(fresh, np.int64)):  # unchanged: the same array, kept scores hold
                full = full.copy()
                full[dirty] = fresh
        entry.raw[p.name] = full
        return full

    # ------------------------------------------------------------ after a node is chosen
    def run_post_filter(
        self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
    ) -> tuple[str | None, Status]:
        """PostFilter (preemption) after no node fit, as kube's RunPostFilterPlugins: the plugins
        run in order until one succeeds or says UnschedulableAndUnresolvable (then its status and
        its nomination stand, the others' reasons go), or fails otherwise (an Error, and any code
        PostFilter has no use for, is an Error with no nomination). When every plugin rejected the
        pod, their reasons are joined, the first of them is named, and the nomination is the last
        one a plugin gave. The nomination is a node, "" to void the pod's (kube's ModeOverride with
        no node; preemption found no candidate), or None to keep it. The status' message becomes
        the diagnosis' PostFilter message, as kube's schedulePod sets it."""
        statuses = diagnosis.statuses()
        reasons: list[str] = []
        rejector = ""  # kube's: the first plugin that failed
        nominated: str | None = None  # kube's `result`: the last meaningful (non-noop) one
        t0 = time.perf_counter()  # one observation for the extension point, as kube's metric has it
        for p in self.points.post_filter:
            try:
                node, status = p.post_filter(state, pod, statuses)
            except Exception as e:
                status = plugin_error("PostFilter", p.name, e)
                node = None
            if status.is_success:
                return self._post_filter_done(diagnosis, node, status, t0)
            if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return self._post_filter_done(diagnosis, node, status.with_plugin(p.name), t0)
            if not status.is_rejected:
                error = Status(Code.ERROR, status.reasons, p.name, status.error)
                return self._post_filter_done(diagnosis, None, error, t0)
            if node is not None:
                nominated = node
            reasons.extend(status.reasons)
            rejector = rejector or p.name
        return self._post_filter_done(diagnosis, nominated, Status(Code.UNSCHEDULABLE, tuple(reasons), rejector), t0)

    def _post_filter_done(self, diagnosis: Diagnosis, nominated: str | None, status: Status,
                          t0: float) -> tuple[str | None, Status]:
        self._observe("PostFilter", status, t0)
        diagnosis.post_filter_msg = status.message()
        return nominated, status

    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Reserve in order; on failure the caller runs run_unreserve (as kube's scheduler does)."""
        t0 = time.perf_counter()
        status = Status.success()
        for p in self.points.reserve:
            status = _call("Reserve", p.name, p.reserve, state, pod, node_name)
            if not status.is_success:
                status = _named("Reserve", p.name, status)
                break
        self._observe("Reserve", status, t0)
        return status

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> list[Status]:
        """Every Reserve plugin's Unreserve, in reverse order, each even if an earlier one raised
        (kube: Unreserve must not fail, and one plugin's bug must not leave the others' room held).
        Returns the errors, naming their plugins (empty when all went well)."""
        errors: list[Status] = []
        for p in reversed(self.points.reserve):
            try:
                p.unreserve(state, pod, node_name)
            except Exception as e:
                errors.append(plugin_error("Unreserve", p.name, e))
                log.exception("Unreserve of %s for %s on %s raised; the other plugins still unreserve",
                              p.name, pod.key, node_name)
        return errors

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        """(Success|Wait|rejection, how long to wait). Any rejection wins over Wait."""
        t0 = time.perf_counter()
        outcome = self._permit(state, pod, node_name)
        self._observe("Permit", outcome[0], t0)
        return outcome

    def _permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        wait, waiter = 0.0, ""
        for p in self.points.permit:
            try:
                status, timeout = p.permit(state, pod, node_name)
            except Exception as e:
                return plugin_error("Permit", p.name, e), 0.0
            if status.is_wait:
                timeout = min(timeout, MAX_PERMIT_TIMEOUT)
                if timeout > wait:  # the plugin whose wait lasts longest: its timeout rejects the pod
                    wait, waiter = timeout, p.name
            elif not status.is_success:
                return _named("Permit", p.name, status), 0.0
        return (Status.wait(waiter), wait) if wait else (Status.success(), 0.0)

    def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        t0 = time.perf_counter()
        status = Status.success()
        for p in self.points.pre_bind:
            status = _call("PreBind", p.name, p.pre_bind, state, pod, node_name)
            if not status.is_success:
                status = _named("PreBind", p.name, status)
                break
        self._observe("PreBind", status, t0)
        return status

    def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """The first bind plugin that does not Skip decides."""
        t0 = time.perf_counter()
        for p in self.points.bind:
            status = _call("Bind", p.name, p.bind, state, pod, node_name)
            if status.is_skip:
                continue
            self._observe("Bind", status, t0)
            return status if status.is_success else _named("Bind", p.name, status)
        return Status.from_error(RuntimeError("all bind plugins skipped the pod"))

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> list[Status]:
        """Every PostBind plugin (informational: the pod is bound); one that raises does not stop
        the rest. Returns the errors, naming their plugins."""
        t0 = time.perf_counter()
        errors: list[Status] = []
        for p in self.points.post_bind:
            try:
                p.post_bind(state, pod, node_name)
            except Exception as e:
                errors.append(plugin_error("PostBind", p.name, e))
                log.exception("PostBind of %s for %s raised", p.name, pod.key)
        self._observe("PostBind", Status.success(), t0)
        return errors


def _call(point: str, plugin: str, fn: Callable[..., Status], *args: Any) -> Status:
    try:
        return fn(*args)
    except Exception as e:
        return plugin_error(point, plugin, e)


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
    "Framework",
    "ScheduleResult",
    "SimpleHandle",
    "num_feasible_nodes_to_find",
    "FilterPlugin",
    "ScorePlugin",
    "PreFilterPlugin",
    "PostFilterPlugin",
    "PreScorePlugin",
    "ReservePlugin",
    "PermitPlugin",
    "PreBindPlugin",
    "BindPlugin",
    "PostBindPlugin",
    "PreEnqueuePlugin",
)
