"""One small Protocol per extension point, as kube-scheduler's framework/interface.go.

The one change from kube: Filter and Score see every node at once. `filter` gets the whole
snapshot (a NodeTable) and returns a FilterResult, a pass mask over its rows with reason codes;
`score` gets the rows that passed and returns an int64 score per row. Each plugin module also keeps
a pure per-node function beside the vectorised method, and tests check the two agree.

A plugin is any object with a `name` and the methods of the points it implements; the framework
finds the points with isinstance() against these runtime-checkable Protocols.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.cluster_event import ClusterEvent, ClusterEventWithHint
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo

if TYPE_CHECKING:
    from minisched.clock import Clock
    from minisched.cluster.base import Cluster
    from minisched.informer import SharedInformerFactory
    from minisched.scheduler.framework.listers import Namespaces, StorageLister, WorkloadLister
    from minisched.scheduler.snapshot import NodeTable

Object = dict[str, Any]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


@dataclass(frozen=True)
class FilterResult:
    """A filter's verdict on every row of the snapshot.

    `reasons[i]` (any unsigned or int64 dtype) is a bitmask over `messages` for a failing row (a node can fail for several
    reasons at once, e.g. "Insufficient cpu" and "Insufficient memory"); `code` says whether
    preemption could help the failing rows (UNSCHEDULABLE) or not (UNSCHEDULABLE_AND_UNRESOLVABLE)."""

    passed: BoolArray
    reasons: IntArray
    messages: tuple[str, ...]
    code: Code = Code.UNSCHEDULABLE
    everyone_passed: bool = False  # set by all_pass(), so the runtime can skip the mask work
    # rows that fail UNSCHEDULABLE_AND_UNRESOLVABLE when the rest fail with `code` (a plugin that
    # fails nodes for two kinds of reason, as PodTopologySpread does); None: all rows use `code`
    unresolvable: BoolArray | None = None

    def code_at(self, row: int) -> Code:
        if self.unresolvable is not None and self.unresolvable[row]:
            return Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return self.code

    @classmethod
    def all_pass(cls, n: int) -> FilterResult:
        """Every row passes. Shared and read-only per size: most filters say this for most pods,
        and decision records keep results, so they should cost neither time nor memory."""
        cached = _ALL_PASS.get(n)
        if cached is None:
            passed, reasons = np.ones(n, np.bool_), np.zeros(n, np.uint8)
            passed.flags.writeable = reasons.flags.writeable = False
            cached = cls(passed, reasons, (), everyone_passed=True)  # type: ignore[arg-type]
            if len(_ALL_PASS) > 64:
                _ALL_PASS.clear()
            _ALL_PASS[n] = cached
        return cached

    @classmethod
    def fail_where(cls, failed: BoolArray, message: str, code: Code = Code.UNSCHEDULABLE) -> FilterResult:
        """Rows in `failed` fail for `message`; the reason bits are a uint8 view of the mask."""
        return cls(~failed, failed.view(np.uint8), (message,), code)

    def reasons_at(self, row: int) -> tuple[str, ...]:
        bits = int(self.reasons[row])
        return tuple(m for i, m in enumerate(self.messages) if bits >> i & 1)

    def status_at(self, row: int, plugin: str = "") -> Status:
        if self.passed[row]:
            return Status.success()
        return Status(self.code_at(row), self.reasons_at(row), plugin)


_ALL_PASS: dict[int, FilterResult] = {}


@runtime_checkable
class EventRecorder(Protocol):
    """Writes a Kubernetes Event about `regarding` (the events layer implements it), and the pod
    status writes that go out on the same queue of API calls."""

    def event(self, regarding: Object, event_type: str, reason: str, message: str) -> None: ...

    def set_nominated_node(self, pod: Object, node_name: str) -> None:
        """Write the pod's status.nominatedNodeName ("": clear it), as kube's clearNominatedNodeName."""
        ...


class Nominator(Protocol):
    """kube's PodNominator as plugins see it: the pods that preemption (or an earlier scheduler,
    through status.nominatedNodeName) nominated to a node, waiting for the room made for them."""

    def nominated_pods(self) -> dict[str, list[Object]]:
        """node name -> the pods nominated to it."""
        ...

    def nominate(self, pod: Object, node_name: str, info: Any = None) -> None: ...

    def delete_nominated(self, pod: Object) -> None: ...


class PodActivator(Protocol):
    """kube's PodActivator: what moves a parked or backing-off pod to activeQ (the queue)."""

    def activate(self, key: str) -> bool: ...


class WaitingPod(Protocol):
    """A pod held at Permit (kube's fwk.WaitingPod): it waits until every Permit plugin that
    returned Wait allows it, each plugin with its own timeout; one Reject rejects it."""

    @property
    def pod(self) -> Object:
        """The pod (kube's GetPod)."""
        ...

    def pending_plugins(self) -> list[str]:
        """The Permit plugins that asked it to wait and have not allowed it yet (GetPendingPlugins)."""
        ...

    def allow(self, plugin: str) -> None:
        """`plugin` lets it go; the last pending plugin to allow it sends it on to binding."""
        ...

    def reject(self, plugin: str, message: str) -> None:
        """Unschedulable, in `plugin`'s name: the pod's attempt ends and it goes back to the queue."""
        ...


class PluginsRunner(Protocol):
    """kube's PluginsRunner: the handle's own profile's plugins, run for a plugin that asks
    (preemption's dry run judges nodes with some pods taken off)."""

    def filter_plugins(self) -> Sequence[FilterPlugin]:
        """The profile's Filter plugins, in order."""
        ...

    def pre_filter_plugins(self) -> Sequence[PreFilterPlugin]:
        """The profile's PreFilter plugins, in order."""
        ...

    def run_filters(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> dict[str, Status]:
        """Every node of `nodes` -> the Status of its first rejecting filter (Success if none)."""
        ...

    def run_filter_plugins(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        """kube's RunFilterPlugins: the verdict of the Filter plugins on a one-node table."""
        ...

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: PodInfo, nodes: NodeTable,
                                               node_name: str, removed: Sequence[PodInfo] = ()) -> Status:
        """kube's RunFilterPluginsWithNominatedPods: node `node_name` of `nodes` without `removed`,
        judged with the pods nominated there (state.nominated) and without them."""
        ...

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo,
                                         node_name: str) -> Status:
        """PreFilter state as if `pod_to_add` ran on `node_name` (kube's RunPreFilterExtensionAddPod)."""
        ...

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                                            node_name: str) -> Status:
        """PreFilter state as if `pod_to_remove` were gone from `node_name` (a victim in the dry run)."""
        ...


@runtime_checkable
class Handle(PluginsRunner, Protocol):
    """What the framework gives plugins (kube's framework.Handle), complete: a plugin calls what it
    needs and never asks whether the handle has it. Two implementations, SimpleHandle (a framework
    run by hand: no waiting pods, its own nominations, informers that nothing starts) and the Scheduler's
    SchedulerHandle; tests check both against this Protocol.

    Each Framework has its own handle (kube's handle is its framework): the one given to
    `Framework(handle=...)` is copied with `for_framework`, so the PluginsRunner methods run that
    profile's plugins. What belongs to one scheduling cycle (its snapshot, the pods nominated for
    it) is in the CycleState, not here."""

    # --- the API and what the scheduler keeps of it ---------------------------------------------------

    @property
    def cluster(self) -> Cluster | None:
        """The API (None: a framework driven by hand on a table, with no API at all)."""
        ...

    @property
    def event_recorder(self) -> EventRecorder: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def stopping(self) -> threading.Event:
        """Set when the scheduler stops (kube cancels its context): a plugin that waits in a binding
        cycle (VolumeBinding's PreBind) waits on this, and gives up once it is set."""
        ...

    def snapshot(self) -> NodeTable:
        """The latest snapshot of the nodes. A plugin in a scheduling cycle reads that cycle's
        table (`state.snapshot`, or the table it is given) instead."""
        ...

    def pod_object(self, namespace: str, name: str) -> Object | None:
        """A pod as the informer's store has it (kube's podLister.Get); None when it is gone."""
        ...

    def bound_node(self, key: str) -> str | None:
        """The node a pod ("namespace/name") is bound to; None while pending or only assumed."""
        ...

    def pod_disruption_budgets(self) -> list[Object]:
        """The PodDisruptionBudgets (kube's pdbLister.List). Raises when they are not known (an
        informer not synced yet, a failed LIST): an error, never a made-up empty list."""
        ...

    @property
    def informer_factory(self) -> SharedInformerFactory:
        """The scheduler's informers (kube's SharedInformerFactory), for a plugin that watches more
        kinds. Never None: a handle with no informers running (a Framework run by hand) has one
        that nothing starts, whose informers stay empty. Plugins that only read objects use the
        listers below."""
        ...

    @property
    def storage(self) -> StorageLister:
        """PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes (the volume
        plugins' listers, kube's from SharedInformerFactory): from the informers, else given,
        else none exist."""
        ...

    @property
    def namespace_lister(self) -> Namespaces:
        """Namespace labels (InterPodAffinity's namespaceSelector): from an informer, else read
        through the cluster, else none exist."""
        ...

    @property
    def workloads(self) -> WorkloadLister:
        """Services and controllers (PodTopologySpread's default selectors): from the informers,
        else read through the cluster, else none exist; or given directly (tests, benchmarks)."""
        ...

    # --- the queue ------------------------------------------------------------------------------

    @property
    def nominator(self) -> Nominator: ...

    def activate(self, pod: Object) -> None:
        """Move the pod to activeQ now if it is parked or backing off (kube's Handle.Activate)."""
        ...

    # --- pods waiting at Permit (kube's IterateOverWaitingPods, GetWaitingPod, RejectWaitingPod) ----

    def iterate_over_waiting_pods(self, callback: Callable[[WaitingPod], None]) -> None:
        """Call `callback` with every pod held at Permit; it may allow or reject them."""
        ...

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        """The pod with this UID held at Permit; None when it is not waiting."""
        ...

    def reject_waiting_pod(self, uid: str) -> bool:
        """Reject the pod with this UID if it waits at Permit (kube's Reject("", "removed"));
        False when it is not waiting."""
        ...

    # --- the framework's side -----------------------------------------------------------------------

    def for_framework(self, framework: Any) -> Handle:
        """This handle for one Framework (runtime.Framework; called by its constructor, not by
        plugins): the same cluster, queue and waiting pods, that framework's plugins to run."""
        ...


@runtime_checkable
class Plugin(Protocol):
    name: str


class QueuedPod(Protocol):
    """What QueueSort compares: a queued pod's priority and when it entered the queue."""

    @property
    def priority(self) -> int: ...

    @property
    def timestamp(self) -> float: ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: Object) -> Status: ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: QueuedPod, b: QueuedPod) -> bool: ...


@dataclass(frozen=True)
class PreFilterResult:
    """PreFilter may narrow the nodes worth filtering (None: all of them)."""

    node_names: frozenset[str] | None = None


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]: ...


@runtime_checkable
class WideningPreFilter(PreFilterPlugin, Protocol):
    """A PreFilter plugin whose PreFilterResult is a first choice, not a limit (a sharded replica's
    node partition, Part II §4.3; kube has no such point, Gödel's schedulers fall back to other
    partitions this way). When no node fits, the scheduler asks `widen` with the cycle's `state` and
    a fresh `wider` one; if a plugin says yes (having written into `wider` what its PreFilter then
    answers), the cycle runs once more on `wider`."""

    def widen(self, state: CycleState, pod: PodInfo, wider: CycleState) -> bool: ...


@runtime_checkable
class PreFilterExtensions(Plugin, Protocol):
    """For preemption: update what PreFilter stored as if `pod_to_add` ran (or stopped) on a node."""

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_name: str) -> Status: ...

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult: ...


class OneNodeWhatIf(Protocol):
    """One filter's verdict on one node, kept up to date in plain Python while pods come off and go
    back (preemption's dry run asks after every victim put back). `status()` must say what
    `filter` would say on that node's row with the same pods on it."""

    def add(self, pod: PodInfo) -> None: ...

    def remove(self, pod: PodInfo) -> None: ...

    def status(self) -> Status: ...


@runtime_checkable
class RowFilter(FilterPlugin, Protocol):
    """A Filter plugin that judges row `row` of `nodes` as `filter` judges a one-row table of that
    node, without making one (~4 us): the reuse cache asks it about the node that changed since
    the last cycle, every cycle (reuse.py)."""

    def filter_row(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> FilterResult: ...


@runtime_checkable
class OneNodeWhatIfFilter(FilterPlugin, Protocol):
    """A Filter plugin that can answer for one node without a table per question. Only for plugins
    whose verdict reads nothing that PreFilter extensions (AddPod/RemovePod) move."""

    def one_node_what_if(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> OneNodeWhatIf: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    """Runs when no node passed Filter (DefaultPreemption). `statuses` are the failing nodes' verdicts."""

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[str | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """Raw scores for `rows` (the feasible rows of `nodes`), one int64 per row."""

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> IntArray: ...


@runtime_checkable
class NormalizeScorePlugin(Plugin, Protocol):
    """Score plugins whose raw scores are not already 0..100 map them there (kube's ScoreExtensions)."""

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    """Status WAIT with a timeout holds the pod; the runtime engineer's waiting-pods map releases it."""

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]: ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    """Status SKIP passes the pod to the next bind plugin."""

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


# --- capabilities beyond the extension points -----------------------------------------------------
# The framework and the scheduler find these with isinstance() once, when a profile is built; no
# attribute is probed by name. (The pod signer, kube's SignPlugin, is signature.SignPlugin.)


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    """kube's EnqueueExtensions: the events after which a pod this plugin rejected may fit, each with
    an optional queueing hint. A plugin without it is asked again on every event (as kube)."""

    def events_to_register(self) -> Sequence[ClusterEventWithHint]: ...


@runtime_checkable
class InformerUser(Plugin, Protocol):
    """A plugin that watches more kinds than pods and nodes: the scheduler calls this before it
    starts its informers, with its SharedInformerFactory and `requeue(event)`, which tells the
    queue about a change the plugin saw (gated and parked pods its hints accept move)."""

    def register_informers(self, factory: Any, requeue: Callable[[ClusterEvent], int]) -> None: ...


@runtime_checkable
class PodForgetter(Plugin, Protocol):
    """A PreEnqueue plugin that remembers the pods it holds: told when one is deleted."""

    def forget(self, key: str) -> None: ...


@runtime_checkable
class AsyncPreemptor(Plugin, Protocol):
    """A PostFilter plugin whose API calls run off the scheduling cycle (kube's async preemption):
    the scheduler gives it workers (`submit`; when a call failed the plugin asks the handle to
    `activate` the preemptor), and asks `hold(uid)` before moving or popping a preemptor (kube's
    PreEnqueue of DefaultPreemption: True while its victims are still being asked to go). A pod
    held is activated by the plugin when its run ends: the event the refused move carried is not
    coming again."""

    submit: Callable[[Callable[[Any], None], Any], None] | None

    def running_preemption(self, uid: str) -> bool: ...

    def hold(self, uid: str) -> bool: ...


@runtime_checkable
class UsesPodDisruptionBudgets(Plugin, Protocol):
    """A plugin that reads PodDisruptionBudgets (DefaultPreemption): the scheduler starts their
    informer for it, behind the handle's `pod_disruption_budgets()`."""

    uses_pod_disruption_budgets: bool


@runtime_checkable
class CountsVictims(Plugin, Protocol):
    """A PostFilter plugin that counts the pods it preempted, for the scheduler's statistics."""

    victims_total: int


@runtime_checkable
class Closer(Plugin, Protocol):
    """A plugin holding resources (threads, connections): closed when the scheduler stops."""

    def close(self) -> None: ...


@runtime_checkable
class DeclaresPodReads(Plugin, Protocol):
    """A Filter or Score plugin that says what its verdicts read, so the framework may reuse an
    earlier cycle's verdicts: `reads_pods` (the pods on the node), `reads_other_nodes` (anything
    beyond the node's own row: pods in its domain, storage objects). Reuse needs every Filter and
    Score plugin to declare this; a plugin without `reads_other_nodes` reads only its own node."""

    reads_pods: bool


@runtime_checkable
class ReadsOtherNodes(Plugin, Protocol):
    reads_other_nodes: bool


@dataclass(frozen=True)
class ExtensionPoint:
    """One extension point: its KubeSchedulerConfiguration name, the framework's attribute for its
    plugin list, and the Protocol a plugin needs for it."""

    name: str
    attr: str
    protocol: type


EXTENSION_POINT_TABLE: tuple[ExtensionPoint, ...] = (
    ExtensionPoint("preEnqueue", "pre_enqueue", PreEnqueuePlugin),
    ExtensionPoint("queueSort", "queue_sort", QueueSortPlugin),
    ExtensionPoint("preFilter", "pre_filter", PreFilterPlugin),
    ExtensionPoint("filter", "filter", FilterPlugin),
    ExtensionPoint("postFilter", "post_filter", PostFilterPlugin),
    ExtensionPoint("preScore", "pre_score", PreScorePlugin),
    ExtensionPoint("score", "score", ScorePlugin),
    ExtensionPoint("reserve", "reserve", ReservePlugin),
    ExtensionPoint("permit", "permit", PermitPlugin),
    ExtensionPoint("preBind", "pre_bind", PreBindPlugin),
    ExtensionPoint("bind", "bind", BindPlugin),
    ExtensionPoint("postBind", "post_bind", PostBindPlugin),
)
"""The twelve points, once: the framework builds its per-point lists and checks from this table."""

EXTENSION_POINTS: Mapping[str, type] = {p.name: p.protocol for p in EXTENSION_POINT_TABLE}
"""KubeSchedulerConfiguration's names for the points, and the Protocol a plugin needs for each."""

ExtensionPointName = str
PluginList = Sequence[Plugin]
