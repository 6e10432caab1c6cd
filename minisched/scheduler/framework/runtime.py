"""The plugin runtime: a profile's plugins, instantiated and run extension point by extension point
(kube's framework/runtime/framework.go, frameworkImpl).

`Framework` builds the per-point plugin lists from the extension point table, the per-profile
queueing-hint map and the pod signer (signature.py), and runs each point's plugins as kube's
Run*Plugins do: in profile order, each plugin's error wrapped as kube wraps it (`running Reserve plugin "Foo":
...`), naming the plugin. Filter and Score run once per plugin over all nodes as numpy operations.
`schedule(pod, snapshot)` hands the cycle to the algorithm (algorithm.py, kube's schedule_one.go:
find the nodes that fit, prioritize, select the host), which calls back into the Run* methods here
and keeps the cross-cycle reuse cache (reuse.py). Reserve, Permit and the binding points are run
by the scheduler loop through the run_* methods.
"""

from __future__ import annotations

import copy
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from minisched.clock import Clock, RealClock
from minisched.cluster.base import Cluster
from minisched.errors import NotFound
from minisched.meta import key_of
from minisched.resources import POD_DISRUPTION_BUDGETS, PODS
from minisched.scheduler.framework.algorithm import (
    MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND,
    MIN_FEASIBLE_NODES_TO_FIND,
    NO_NODES_AVAILABLE,
    ScheduleAlgorithm,
    ScheduleResult,
    num_feasible_nodes_to_find,
)
from minisched.scheduler.framework.batch import OpportunisticBatch
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
    PodForgetter,
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
    RowFilter,
    ScorePlugin,
    WaitingPod,
)
from minisched.scheduler.framework.listers import (
    InformerStorage,
    Namespaces,
    StaticStorage,
    StorageLister,
    WorkloadLister,
    namespaces_from,
    workloads_from,
)
from minisched.scheduler.framework.profile import PluginSet, Profile, default_profile
from minisched.scheduler.framework.registry import PluginFactory, Registry
from minisched.scheduler.framework.reuse import REUSE_MIN_NODES, ReuseCache, ReuseEntry, same, summed
from minisched.scheduler.framework.signature import PodSigner, Signature
from minisched.scheduler.framework.status import Code, PluginError, Status, plugin_error_message
from minisched.scheduler.framework.types import PodInfo, PodSpecError
from minisched.scheduler.snapshot import NodeTable

if TYPE_CHECKING:
    from minisched.informer import SharedInformerFactory

Object = dict[str, Any]
IntArray = npt.NDArray[np.int64]
Observer = Callable[[str, str, float], None]  # (extension point, status label, seconds)

log = logging.getLogger(__name__)

MAX_PERMIT_TIMEOUT = 15 * 60.0


def plugin_error(point: str, plugin: str, error: BaseException) -> Status:
    """An Error status for a plugin that raised at `point`, naming it."""
    return Status(Code.ERROR, (plugin_error_message(point, plugin, error),), plugin, error)


def _named(point: str, plugin: str, status: Status) -> Status:
    """A plugin's non-success status with the plugin named; an Error's message wrapped as kube
    wraps it (a rejection's reasons are the user's text and stay as they are)."""
    if status.is_error and not (status.reasons and status.reasons[0].startswith("running ")):
        return Status(Code.ERROR, (plugin_error_message(point, plugin, status.message()),), plugin, status.error)
    return status.with_plugin(plugin)


class FrameworkRunner:
    """The PluginsRunner half of a Handle, written once for SimpleHandle and SchedulerHandle: the
    plugins of the one Framework the handle serves (`framework`, set by `for_framework`)."""

    framework: Framework | None

    def _framework(self) -> Framework:
        if self.framework is None:
            raise RuntimeError("this handle serves no framework: Framework(handle=h) gives its plugins "
                               "h.for_framework(framework), which runs that framework's plugins")
        return self.framework

    def filter_plugins(self) -> Sequence[FilterPlugin]:
        return self._framework().points.filter

    def pre_filter_plugins(self) -> Sequence[PreFilterPlugin]:
        return self._framework().points.pre_filter

    def run_filters(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> dict[str, Status]:
        return self._framework().run_filters(state, pod, nodes)

    def run_filter_plugins(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        framework = self._framework()
        if len(nodes) == 1:
            return framework.run_filters_on_one_node(state, pod, nodes)
        statuses = framework.run_filters(state, pod, nodes)
        return next(iter(statuses.values()), Status.success())

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: PodInfo, nodes: NodeTable,
                                               node_name: str, removed: Sequence[PodInfo] = ()) -> Status:
        return self._framework().run_filters_with_nominated_pods(state, pod, nodes, node_name, removed)

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo,
                                         node_name: str) -> Status:
        return self._framework().run_pre_filter_extension_add_pod(state, pod, pod_to_add, node_name)

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                                            node_name: str) -> Status:
        return self._framework().run_pre_filter_extension_remove_pod(state, pod, pod_to_remove, node_name)


class Nominations:
    """A Nominator kept in memory: a framework run without a scheduling queue still remembers the
    nominations its preemptions make (the queue is the Scheduler's nominator)."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Object]] = {}

    def nominated_pods(self) -> dict[str, list[Object]]:
        return {node: list(pods.values()) for node, pods in self._by_node.items() if pods}

    def nominate(self, pod: Object, node_name: str, info: Any = None) -> None:
        self.delete_nominated(pod)
        self._by_node.setdefault(node_name, {})[key_of(pod)] = pod

    def delete_nominated(self, pod: Object) -> None:
        key = key_of(pod)
        for pods in self._by_node.values():
            pods.pop(key, None)


class DiscardEvents:
    """The event recorder of a handle with no API to write to: events and status writes go nowhere."""

    def event(self, regarding: Object, event_type: str, reason: str, message: str) -> None:
        pass

    def set_nominated_node(self, pod: Object, node_name: str) -> None:
        pass


class SimpleHandle(FrameworkRunner):
    """A complete Handle from parts, for a Framework run by hand (tests, benchmarks, notebooks):
    what it is not given it answers honestly empty. No pods wait at Permit (nothing here holds
    them), nominations are its own, events are dropped, and with no `cluster` there are no pods
    to look up and no PodDisruptionBudgets. Without an `informer_factory`, a plugin that asks for
    one gets a real one that nothing starts (its informers stay empty); the listers not given read
    the informers given, else the cluster on each call (workloads, namespaces), else see no objects."""

    def __init__(self, cluster: Cluster | None = None, snapshot_fn: Callable[[], NodeTable] | None = None,
                 event_recorder: EventRecorder | None = None,
                 informer_factory: SharedInformerFactory | None = None,  # for plugins that list other objects
                 workloads: WorkloadLister | None = None,  # or those objects' listers directly (tests, benchmarks)
                 namespace_lister: Namespaces | None = None, nominator: Nominator | None = None,
                 clock: Clock | None = None, framework: Framework | None = None,
                 storage: StorageLister | None = None) -> None:
        self.cluster = cluster
        self.snapshot_fn = snapshot_fn
        self.event_recorder: EventRecorder = event_recorder if event_recorder is not None else DiscardEvents()
        self._informer_factory = informer_factory
        self._own_factory: SharedInformerFactory | None = None  # made if a plugin asks and none was given
        self._storage = storage
        self._workloads = workloads
        self._namespace_lister = namespace_lister
        self.nominator: Nominator = nominator if nominator is not None else Nominations()
        self.clock: Clock = clock if clock is not None else RealClock()
        self.framework = framework
        self.stopping = threading.Event()  # nothing stops a framework run by hand but its caller

    def for_framework(self, framework: Any) -> SimpleHandle:
        bound = copy.copy(self)
        bound.framework = framework
        return bound

    @property
    def informer_factory(self) -> SharedInformerFactory:
        if self._informer_factory is None:
            if self._own_factory is None:
                # a real factory that nothing starts (nothing here runs informers), so the informers
                # a plugin asks it for stay empty; over an empty cluster when there is no API at all
                from minisched.cluster.embedded import EmbeddedCluster
                from minisched.informer import SharedInformerFactory

                self._own_factory = SharedInformerFactory(self.cluster if self.cluster is not None
                                                          else EmbeddedCluster())
            return self._own_factory
        return self._informer_factory

    @property
    def workloads(self) -> WorkloadLister:
        # made when first asked (PodTopologySpread with default constraints, as it is built): an
        # informer-backed one registers its informers with the factory
        if self._workloads is None:
            self._workloads = workloads_from(self._informer_factory, self.cluster)
        return self._workloads

    @property
    def storage(self) -> StorageLister:
        if self._storage is None:
            self._storage = (InformerStorage(self._informer_factory) if self._informer_factory is not None
                             else StaticStorage())
        return self._storage

    @property
    def namespace_lister(self) -> Namespaces:
        if self._namespace_lister is None:
            self._namespace_lister = namespaces_from(self.cluster)
        return self._namespace_lister

    def snapshot(self) -> NodeTable:
        return self.snapshot_fn() if self.snapshot_fn is not None else NodeTable()

    def pod_object(self, namespace: str, name: str) -> Object | None:
        if self.cluster is None:
            return None
        try:
            return self.cluster.get(PODS, name, namespace)
        except NotFound:
            return None

    def bound_node(self, key: str) -> str | None:
        namespace, _, name = key.partition("/")
        pod = self.pod_object(namespace, name)
        return ((pod or {}).get("spec") or {}).get("nodeName") or None

    def pod_disruption_budgets(self) -> list[Object]:
        if self.cluster is None:
            return []
        return list(self.cluster.list(POD_DISRUPTION_BUDGETS).get("items") or [])

    def activate(self, pod: Object) -> None:
        pass  # no queue holds pods here

    def iterate_over_waiting_pods(self, callback: Callable[[WaitingPod], None]) -> None:
        pass  # nothing here holds pods at Permit

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return None

    def reject_waiting_pod(self, uid: str) -> bool:
        return False


# What Go writes as `var _ framework.Handle = &SimpleHandle{}`: mypy checks the class against the
# Protocol here, not only where one happens to be passed (tests/scheduler/framework/test_handle.py
# checks the same at run time).
_HANDLE_CONTRACT: type[Handle] = SimpleHandle


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
        # this framework's own copy of the handle (kube's handle is its framework): its plugins run
        # this profile's filters when they ask the handle to; without one, an honest empty handle
        self.handle: Handle = (handle if handle is not None else SimpleHandle()).for_framework(self)
        self.observer = observer
        self.percentage_of_nodes_to_score = (
            self.profile.percentage_of_nodes_to_score
            if self.profile.percentage_of_nodes_to_score is not None
            else percentage_of_nodes_to_score
        )
        self.plugins: dict[str, Plugin] = {
            name: reg.create(name, self.profile.args_for(name), self.handle) for name in self.profile.plugin_names()
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
        # asked once here: an isinstance on a runtime Protocol costs ~10 µs, and the scheduler needs
        # this list each time a pending pod goes (bound or deleted)
        self.pod_forgetters: list[PodForgetter] = [p for p in self.points.pre_enqueue if isinstance(p, PodForgetter)]
        # the plugins that may read the cycle state after Permit (Unreserve is a Reserve plugin's):
        # what a binding in flight keeps of it (CycleState.drop_scheduling_cycle_entries), every cycle
        points = self.points
        self.binding_cycle_plugins: frozenset[str] = frozenset(
            p.name for plugins in (points.reserve, points.permit, points.pre_bind, points.bind, points.post_bind)
            for p in plugins)
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
        # One signer for both caches (signature.py); each cache keeps its own rule for using it.
        self._last_active_filters: tuple[frozenset[str], list[Any]] | None = None  # see active_filters
        self._last_cross_node: tuple[list[Any], bool] | None = None  # see cross_node_filters
        self.signer = PodSigner((self.points.pre_filter, self.points.filter, self.points.pre_score, self.points.score))
        self.unsignable_plugins = self.signer.unsignable_plugins
        self.reuse = reuse and self.signer.signers is not None and all(
            isinstance(p, DeclaresPodReads) and isinstance(p.reads_pods, bool)
            for p in (*self.points.filter, *self.points.score)
        )
        # decided once per plugin: no attribute looked up per cycle
        self.reads_pods: Mapping[str, bool] = {name: not isinstance(p, DeclaresPodReads) or bool(p.reads_pods)
                                               for name, p in self.plugins.items()}
        # filters that judge one row of a table without a one-row table (RowFilter), for reuse's lookups
        self.row_filters: Mapping[str, bool] = {p.name: isinstance(p, RowFilter) for p in self.points.filter}
        self._reads_other_nodes = {
            name: isinstance(p, ReadsOtherNodes) and bool(p.reads_other_nodes) for name, p in self.plugins.items()}
        # kube 1.35's OpportunisticBatching (batch.py): on unless turned off, as its feature gate.
        # `clock` (monotonic seconds) ages the kept scores; the scheduler passes its own.
        self.batch: OpportunisticBatch | None = (
            OpportunisticBatch(self.signer.batch_signature, clock=clock or time.monotonic) if batching else None)
        self.algorithm = ScheduleAlgorithm(
            self, seed=seed, reuse=ReuseCache(self.signer.sign, reuse_min_nodes) if self.reuse else None)

    def sign_pod(self, pod: PodInfo) -> Signature | None:
        """kube's SignPod, what batching keys on: None when a plugin of the profile has no sign_pod,
        cannot sign `pod` or refuses to batch it."""
        return self.signer.batch_signature(pod)

    def pod_signature(self, pod: PodInfo) -> Signature | None:
        """The same signature without batching's refusals, what the reuse cache keys on."""
        return self.signer.sign(pod)

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

    def observe(self, point: str, status: Status, started: float) -> None:
        """Report how long `point` took since `started` to the observer (the scheduler's metrics)."""
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
        cycle: int | None = None,
    ) -> ScheduleResult:
        """Choose a node for `pod` in snapshot `nodes`: kube's SchedulePod, run by `self.algorithm`
        (algorithm.py) with the pods nominated elsewhere set in the cycle state here.

        `nominated`: (node, pod) of pods nominated by earlier preemptions. As kube's
        RunFilterPluginsWithNominatedPods, a node with nominated pods of at least this pod's priority
        must pass the filters twice: with those pods added (so this pod does not take their room)
        and without them (so it does not rely on pods that may never come, e.g. for pod affinity).
        Only that node's own nominated pods are added, and scoring sees the plain snapshot.
        `cycle`: the scheduling queue's cycle count (kube's CurrentCycle), which batching compares
        with the last one; without it, this call is the one after the last."""
        state = state if state is not None else CycleState()
        state.nominated = nominated_by_node(pod, nominated)
        state.snapshot = nodes
        return self.algorithm.schedule_pod(state, pod, nodes, cycle=cycle)

    def run_pre_filter_plugins(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[npt.NDArray[np.bool_] | None, list[str], Status]:
        """kube's RunPreFilterPlugins: each PreFilter plugin in order until one does not succeed
        (its status, naming it, is the verdict; a Skip leaves the plugin's Filter out of this
        cycle). Returns the rows the plugins' results allow (None: no plugin narrowed them), the
        plugins that narrowed them, and the status."""
        n = len(nodes)
        allowed: npt.NDArray[np.bool_] | None = None
        narrowed_by: list[str] = []
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
                return allowed, narrowed_by, _named("PreFilter", p.name, status)
            if result is not None and result.node_names is not None:
                narrowed_by.append(p.name)
                mask = np.zeros(n, np.bool_)
                for name in result.node_names:
                    row = nodes.row(name)
                    if row is not None:
                        mask[row] = True
                allowed = mask if allowed is None else allowed & mask
        self.observe("PreFilter", Status.success(), t0)
        return allowed, narrowed_by, Status.success()

    def active_filters(self, state: CycleState) -> list[Any]:
        """The Filter plugins of this cycle, in profile order: those whose PreFilter said Skip left out.
        The same list as the last call's while the same plugins skipped (a cycle asks ~3 times, and
        a stream of alike pods skips alike): callers read it, never change it."""
        skipped = state.skip_filter
        if not skipped:
            return self.points.filter
        last = self._last_active_filters
        if last is not None and last[0] == skipped:
            return last[1]
        active = [p for p in self.points.filter if p.name not in skipped]
        self._last_active_filters = (frozenset(skipped), active)
        return active

    def run_filter_plugins(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[list[FilterResult], npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
        """Every active filter over every row; `first_fail[row]` is the index of the first filter
        (in profile order) that rejected the row, -1 if none did."""
        n = len(nodes)
        passed = np.ones(n, np.bool_)
        first_fail = np.full(n, -1, np.int64)
        results = []
        for k, p in enumerate(self.active_filters(state)):
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
        for p in self.active_filters(state):
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

    def verdicts_with_nominated(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> dict[str, Status]:
        """Each node with nominated pods -> the filters' verdict with those pods added. When every
        active filter judges a node by its own pods alone, one vectorised pass over a copy with all
        nominated pods placed gives each node exactly its own verdict (and thousands of nominations,
        as after a wave of preemptions, cost one pass, not one per node); otherwise node by node."""
        if self.cross_node_filters(state):
            return {name: self._filter_with_added(state, pod, nodes, name) for name in state.nominated}
        placed = [(name, p) for name, pods in state.nominated.items() if nodes.row(name) is not None for p in pods]
        results, passed, first_fail = self.run_filter_plugins(state, pod, nodes.with_pods(placed))
        active = self.active_filters(state)
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
        results, passed, first_fail = self.run_filter_plugins(state, pod, nodes)
        active = self.active_filters(state)
        out = {}
        for row, name in enumerate(nodes.names):
            k = int(first_fail[row])
            out[name] = Status.success() if k < 0 else results[k].status_at(row, active[k].name)
        return out

    def run_score_plugins(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        rows: npt.NDArray[np.intp],
        decision: Decision,
        entry: ReuseEntry | None = None,
        dirty: npt.NDArray[np.intp] | None = None,
    ) -> Status:
        """kube's RunPreScorePlugins, then RunScorePlugins over `rows` (the feasible nodes): each
        plugin's scores normalised, checked and weighted into `decision`, and their total. With a
        reuse `entry`, a plugin's scores come from it where nothing they depend on changed."""
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
            # ReuseEntry.raw_scores) and the feasible rows are the same: no normalising, checking, weighing
            reusing = entry is not None and not self._reads_other_nodes[p.name]
            kept = entry.scored.get(p.name) if reusing and entry is not None else None
            try:
                if reusing and entry is not None:
                    full = entry.raw_scores(state, pod, nodes, dirty, p, self.reads_pods[p.name])
                    if kept is not None and kept[1] is full and (kept[0] is rows or same(kept[0], rows)):
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
        if entry is not None:
            entry.unscored = None  # every plugin's raw scores are up to date
            decision.total = entry.same_total(rows, added)
        else:
            decision.total = summed(len(rows), added)
        return Status.success()

    def cross_node_filters(self, state: CycleState) -> bool:
        """Is an active filter's verdict on one node moved by pods on other nodes (topology
        spreading)? Then re-judging only the changed nodes would be wrong: no reuse this cycle."""
        active = self.active_filters(state)
        last = self._last_cross_node
        if last is not None and last[0] is active:  # the same list as the last cycle's: the same answer
            return last[1]
        cross = any(self._reads_other_nodes[p.name] for p in active)
        self._last_cross_node = (active, cross)
        return cross

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
        self.observe("PostFilter", status, t0)
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
        self.observe("Reserve", status, t0)
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

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, dict[str, float]]:
        """kube's RunPermitPlugins: Success, a rejection (the first, naming its plugin), or Wait
        with how long each plugin that returned Wait holds the pod (capped at MAX_PERMIT_TIMEOUT)."""
        t0 = time.perf_counter()
        outcome = self._permit(state, pod, node_name)
        self.observe("Permit", outcome[0], t0)
        return outcome

    def _permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, dict[str, float]]:
        waits: dict[str, float] = {}
        for p in self.points.permit:
            try:
                status, timeout = p.permit(state, pod, node_name)
            except Exception as e:
                return plugin_error("Permit", p.name, e), {}
            if status.is_wait:
                waits[p.name] = min(timeout, MAX_PERMIT_TIMEOUT)
            elif not status.is_success:
                return _named("Permit", p.name, status), {}
        if waits:
            return Status.wait(), waits
        return Status.success(), {}

    def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        t0 = time.perf_counter()
        status = Status.success()
        for p in self.points.pre_bind:
            status = _call("PreBind", p.name, p.pre_bind, state, pod, node_name)
            if not status.is_success:
                status = _named("PreBind", p.name, status)
                break
        self.observe("PreBind", status, t0)
        return status

    def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """The first bind plugin that does not Skip decides."""
        t0 = time.perf_counter()
        for p in self.points.bind:
            status = _call("Bind", p.name, p.bind, state, pod, node_name)
            if status.is_skip:
                continue
            self.observe("Bind", status, t0)
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
        self.observe("PostBind", Status.success(), t0)
        return errors


def _call(point: str, plugin: str, fn: Callable[..., Status], *args: Any) -> Status:
    try:
        return fn(*args)
    except Exception as e:
        return plugin_error(point, plugin, e)


__all__: Sequence[str] = (
    "Framework",
    "ScheduleResult",
    "SimpleHandle",
    "PluginError",
    "plugin_error",
    "plugin_error_message",
    "nominated_by_node",
    "num_feasible_nodes_to_find",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "NO_NODES_AVAILABLE",
    "REUSE_MIN_NODES",
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
