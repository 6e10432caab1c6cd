"""The Scheduler: informers in, decisions out, kube-scheduler's scheduleOne in a loop.

What happens to one pod (kube's schedule_one.go):

1. The pod informer sees a pending pod whose spec.schedulerName names one of our profiles and
   that has no spec.nodeName; it goes into the SchedulingQueue (gated pods wait there).
2. The scheduling cycle, one pod at a time: pop the pod, take a snapshot of the cache (numpy
   arrays), run PreFilter/Filter/Score over all nodes at once (Framework.schedule), and if no node
   fits, PostFilter (DefaultPreemption). On success the pod is *assumed* onto the node in the cache
   at once, so the next cycle already counts it, then Reserve and Permit run.
3. The binding cycle runs on a bounded thread pool while the next pod is scheduled: PreBind, Bind
   (POST pods/binding), PostBind, then the Scheduled event.
4. A failed bind gives the room back (forget). A 409 usually means someone else bound the pod or
   it is being deleted; a pod the informer still shows pending is retried after backoff all the
   same (the API server also answers 409 when etcd failed under the write). Any other error backs
   the pod off and it is tried again. A pod is only ever bound by the API server once: the binding
   subresource refuses a second one.
5. The informer then shows the pod bound and the cache confirms the assumption.

With a `pod_filter` (kube's informer FilterFunc: which pending pods this scheduler queues) several
schedulers may serve one profile, as Part II §4.3's replicas do (minisched.sharding: the filter is
the hash ring's "is it mine?", and the node partition and the capacity ledger are ordinary plugins,
a PreFilter and a Reserve/PreBind/Unreserve one). `resync_ownership()` follows a change of the
filter's answers. A pending pod the filter leaves to another scheduler is not queued, but its
status.nominatedNodeName is counted as a nomination, so this scheduler's filters keep the room that
scheduler's preemption freed for it, as one kube-scheduler would. A PreFilter plugin whose result is
a first choice rather than a limit (WideningPreFilter: a replica's node partition) gets a second
pass over the nodes it widens to when none of its first choice fits.

The loop is deliberately lean: a pod's JSON is never copied, its PodInfo is parsed once per
version when it is queued (as kube does), and the per-cycle snapshot is copy-on-write.

Where minisched differs from kube-scheduler, and why: one handler serves both views of the pod
informer (one listener thread instead of two); the queue moves unschedulable pods by a fixed
plugin -> event table rather than QueueingHints; a pod waiting at Permit holds one binding
worker. Nominated pods are handled as kube does: a node where some wait is filtered twice, with
them added (through the PreFilter extensions) and without, and scoring never counts them.

Shutdown has one deadline (`shutdown_timeout`, 20 s by default; Kubernetes kills a pod 30 s after
SIGTERM) shared by everything that must end: the scheduling loop's current cycle, the binding
cycles, the event and status writes, the informers. Whatever has not finished by then is abandoned
and logged by name: a binding not yet started is forgotten (its pod stays pending for the next
scheduler), a bind already sent either lands or fails whole on the API server (pods/binding is
atomic), unsent events are dropped. The binding workers are daemon threads so that one hung
request cannot hold the process past the deadline (ThreadPoolExecutor's are joined at exit).

Metrics go through `observer`, any object with some of SchedulerMetrics' methods
(observe_attempt, observe_algorithm, observe_scheduled, observe_extension_point, set_pending,
observe_preemption); minisched.observability plugs Prometheus in there.
"""

from __future__ import annotations

import collections
import copy
import logging
import queue as queue_module
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from minisched.clock import Clock, RealClock, pause_unless_stopped
from minisched.cluster.base import Cluster
from minisched.errors import ApiError, BadRequest, NotFound, is_conflict
from minisched.informer import (
    ResourceEventHandlerFuncs,
    SharedInformerFactory,
    strip_managed_fields,
    unwrap_tombstone,
)
from minisched.meta import key_of
from minisched.resources import (
    CSI_NODES,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    PRIORITY_CLASSES,
    STORAGE_CLASSES,
)
from minisched.scheduler.cache import CacheError, SchedulerCache
from minisched.scheduler.events import (
    POD_REASON_SCHEDULER_ERROR,
    POD_REASON_SCHEDULING_GATED,
    POD_REASON_UNSCHEDULABLE,
    EventRecorder,
)
from minisched.scheduler.framework.cluster_event import RegisteredHint
from minisched.scheduler.framework.cycle_state import BINDING_STATUS, CycleState
from minisched.scheduler.framework.decision import Decision
from minisched.scheduler.framework.features import (
    OPPORTUNISTIC_BATCHING,
    POP_FROM_BACKOFF_Q,
    check_feature_gates,
)
from minisched.scheduler.framework.interface import (
    AsyncPreemptor,
    Closer,
    CountsVictims,
    Handle,
    InformerUser,
    Nominator,
    PodActivator,
    PodForgetter,
    UsesPodDisruptionBudgets,
    WideningPreFilter,
)
from minisched.scheduler.framework.listers import (
    Namespaces,
    StoreNamespaces,
    WorkloadLister,
    namespaces_from,
    workloads_from,
)
from minisched.scheduler.framework.profile import (
    PluginRef,
    PluginSet,
    Profile,
    default_profile,
    load_profiles,
)
from minisched.scheduler.framework.runtime import Framework, FrameworkRunner, Nominations
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo, PodSpecError
from minisched.scheduler.queue import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    NODE_ADD,
    NODE_DELETE,
    ClusterEvent,
    QueuedPodInfo,
    SchedulingQueue,
    node_update_events,
    priority_sort_less,
)
from minisched.scheduler.snapshot import NodeTable
from minisched.scheduler.tracing import AttemptTrace, CycleTracer
from minisched.selectors import parse_label_selector

Object = dict[str, Any]

log = logging.getLogger(__name__)

# A pod we could not even read waits for its own update (or the 5-minute flush), not for nodes.
INVALID_POD = "PodSpec"
HOUSEKEEPING_PERIOD = 1.0
API_DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_SHUTDOWN_TIMEOUT = 20.0
DECISIONS_BUDGET_BYTES = 4 * 2**20  # kept decision records: ~75 at 1,000 nodes, ~34 at 5,000
# kube-apiserver's words when a Binding's metadata.resourceVersion is not the pod's any more
STALE_VERSION = "Precondition failed: ResourceVersion in precondition"


class SchedulerObserver(Protocol):
    """The metrics hooks (all optional: the scheduler calls those the observer has)."""

    def observe_attempt(self, result: str, seconds: float) -> None: ...

    def observe_algorithm(self, seconds: float) -> None: ...

    def observe_scheduled(self, attempts: int, seconds_since_first_enqueue: float) -> None: ...

    def observe_extension_point(self, extension_point: str, status: str, seconds: float) -> None: ...

    def set_pending(self, queue: str, count: int) -> None: ...

    def observe_preemption(self, victims: int) -> None: ...


@dataclass
class SchedulerStats:
    """Counters and recent cycle latencies, for the demo, the bench and a curious notebook."""

    scheduled: int = 0
    unschedulable: int = 0
    errors: int = 0
    bound: int = 0
    bind_conflicts: int = 0
    bind_errors: int = 0
    preemptions: int = 0
    victims: int = 0
    # with a pod_filter: pods popped after the filter gave them to another scheduler (a shard's
    # ring changed since they were queued)
    not_owned: int = 0
    # of bind_conflicts, those whose resourceVersion precondition failed: the pod was written after
    # the cycle decided (a legitimate update, or another replica revoked our reservation); retried
    bind_stale_versions: int = 0
    cycle_seconds: collections.deque[float] = field(default_factory=lambda: collections.deque(maxlen=200_000))

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100) of recent scheduling-cycle latencies, in seconds."""
        data = sorted(self.cycle_seconds)
        if not data:
            return 0.0
        idx = min(len(data) - 1, max(0, int(round(q / 100 * (len(data) - 1)))))
        return data[idx]


@dataclass
class ShutdownReport:
    """What stop() finished and what it abandoned at the deadline."""

    seconds: float = 0.0
    deadline: float = 0.0
    abandoned_cycle: str | None = None  # the pod whose scheduling cycle was still running
    bindings_not_started: list[str] = field(default_factory=list)  # forgotten: the pods stay pending
    bindings_in_flight: int = 0  # sent, answer not awaited: each lands or fails whole
    writes_dropped: int = 0  # events and status writes never sent
    informers_running: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.abandoned_cycle or self.bindings_not_started or self.bindings_in_flight
                    or self.writes_dropped or self.informers_running)

    def describe(self) -> str:
        if self.clean:
            return f"shut down cleanly in {self.seconds:.1f} s"
        parts = []
        if self.abandoned_cycle:
            parts.append(f"the scheduling cycle of {self.abandoned_cycle}")
        if self.bindings_not_started:
            names = ", ".join(self.bindings_not_started[:10])
            more = len(self.bindings_not_started) - 10
            parts.append(f"{len(self.bindings_not_started)} bindings not started, their pods left pending "
                         f"({names}{f' and {more} more' if more > 0 else ''})")
        if self.bindings_in_flight:
            parts.append(f"{self.bindings_in_flight} bindings in flight (each lands or fails whole)")
        if self.writes_dropped:
            parts.append(f"{self.writes_dropped} event/status writes unsent")
        if self.informers_running:
            parts.append(f"informers still stopping: {', '.join(self.informers_running)}")
        return (f"shutdown deadline of {self.deadline:g} s reached after {self.seconds:.1f} s; abandoned "
                + "; ".join(parts))


# threads making preemption victims' API calls (kube runs them on goroutines, 16 victims in parallel)
PREEMPTION_WORKERS = 4


class _DaemonWorkers:
    """Up to `size` daemon threads running submitted jobs in order (started as needed).

    Unlike ThreadPoolExecutor, whose workers the interpreter joins at exit, a worker stuck in a
    request that never returns cannot hold the process, and shutdown() hands back the jobs that
    never started, so the caller can undo what they stood for."""

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._jobs: queue_module.SimpleQueue[tuple[Callable[[Any], None], Any] | None] = queue_module.SimpleQueue()
        self._lock = threading.Lock()  # taken by submit() and shutdown() only, never by a worker
        self._threads = 0
        self._submitted = 0
        # jobs finished, one counter per worker, each written by its worker alone: a worker never
        # takes a lock the scheduling loop waits on (under the GIL a contended lock costs the loop
        # the interpreter until the worker lets go of it, often a whole switch interval)
        self._finished: list[int] = []
        self._closed = False

    def submit(self, fn: Callable[[Any], None], arg: Any) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name} workers are shut down")
            self._submitted += 1
            # A new thread only when every thread has a job (a count read while workers run can
            # only be behind, which errs towards starting one more, never one fewer).
            start = self._threads < self._size and self._submitted - sum(self._finished) > self._threads
            if start:
                self._threads += 1
                self._finished.append(0)
                slot = self._threads - 1
        self._jobs.put((fn, arg))
        if start:
            threading.Thread(target=self._work, args=(slot,), name=f"{self._name}-{slot + 1}", daemon=True).start()

    def _work(self, slot: int) -> None:
        finished = self._finished
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, arg = job
            try:
                fn(arg)
            finally:
                finished[slot] += 1
                # an idle worker must not keep its last job alive (an assumed pod holds its pod, its
                # cycle state and its decision record) until another job comes: ThreadPoolExecutor's
                # `del work_item`
                del job, fn, arg

    def shutdown(self) -> list[Any]:
        """Accept no more jobs; return the arguments of those not started, and end the workers
        once their current job is done."""
        with self._lock:
            self._closed = True
            threads = self._threads
        not_started: list[Any] = []
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue_module.Empty:
                break
            if job is not None:
                not_started.append(job[1])
        for _ in range(threads):
            self._jobs.put(None)
        return not_started


class _Slots:
    """A counting semaphore on a C queue of tokens: acquiring and releasing never take a lock
    that a thread holding the GIL's rival could hold (threading.Semaphore's Python-level Condition
    can make the scheduling loop wait for a binding thread's whole time slice)."""

    def __init__(self, size: int) -> None:
        self._tokens: queue_module.SimpleQueue[None] = queue_module.SimpleQueue()
        for _ in range(size):
            self._tokens.put(None)

    def acquire(self, timeout: float) -> bool:
        try:
            self._tokens.get(timeout=timeout)
        except queue_module.Empty:
            return False
        return True

    def release(self) -> None:
        self._tokens.put(None)


class _HandleWiring:
    """What the Scheduler wires into its handles after building them (the queue, the informers it
    starts): one object shared by every profile's copy of the handle."""

    __slots__ = ("informer_factory", "pod_store", "pdb_informer", "namespace_lister", "nominator", "activator")

    def __init__(self) -> None:
        self.informer_factory: SharedInformerFactory | None = None
        self.pod_store: Any = None  # the pod informer's store, once started
        self.pdb_informer: Any = None  # set by Scheduler.start when a plugin reads PDBs
        self.namespace_lister: Namespaces | None = None  # the namespace informer's, once started
        # the queue, once built (after the plugins, as kube's SetPodNominator); until then an empty
        # one, since nothing is nominated before there is a queue
        self.nominator: Nominator = Nominations()
        self.activator: PodActivator | None = None  # the queue too


class SchedulerHandle(FrameworkRunner):
    """What plugins get (kube's framework.Handle, all of interface.Handle): the cluster, the
    latest snapshot, the event recorder, the clock, the queue's nominator and activator, the pods
    waiting at Permit, the informers' listers, and (through FrameworkRunner) the Filter and
    PreFilter-extension runs of its own profile, for preemption's what-ifs.

    The Scheduler builds one and each Framework takes its copy (`for_framework`); the copies share
    the waiting pods and what the Scheduler wires in later (the queue, the informers' stores)."""

    def __init__(self, cluster: Cluster, recorder: EventRecorder, clock: Clock, cache: SchedulerCache) -> None:
        self.cluster = cluster
        self.event_recorder = recorder
        self.clock = clock
        self._cache = cache
        self.framework: Framework | None = None  # set in each framework's copy
        self.waiting: dict[str, _WaitingPod] = {}  # the scheduler's pods held at Permit, by key
        self._wiring = _HandleWiring()

    def for_framework(self, framework: Any) -> SchedulerHandle:
        bound = copy.copy(self)
        bound.framework = framework
        return bound

    # --- wired in by the Scheduler (shared by every copy) ---------------------------------------------

    @property
    def informer_factory(self) -> SharedInformerFactory | None:
        return self._wiring.informer_factory

    @informer_factory.setter
    def informer_factory(self, factory: SharedInformerFactory | None) -> None:
        self._wiring.informer_factory = factory

    @property
    def pod_store(self) -> Any:
        return self._wiring.pod_store

    @pod_store.setter
    def pod_store(self, store: Any) -> None:
        self._wiring.pod_store = store

    @property
    def pdb_informer(self) -> Any:
        return self._wiring.pdb_informer

    @pdb_informer.setter
    def pdb_informer(self, informer: Any) -> None:
        self._wiring.pdb_informer = informer

    @property
    def namespace_lister(self) -> Namespaces:
        lister = self._wiring.namespace_lister
        return lister if lister is not None else namespaces_from(self.cluster)  # before start: the API

    @namespace_lister.setter
    def namespace_lister(self, lister: Namespaces) -> None:
        self._wiring.namespace_lister = lister

    @property
    def workloads(self) -> WorkloadLister:
        # the factory is wired in as the Scheduler is built, before its plugins ask
        return workloads_from(self._wiring.informer_factory, self.cluster)

    @property
    def nominator(self) -> Nominator:
        return self._wiring.nominator

    @nominator.setter
    def nominator(self, nominator: Nominator) -> None:
        self._wiring.nominator = nominator

    @property
    def activator(self) -> PodActivator | None:
        return self._wiring.activator

    @activator.setter
    def activator(self, activator: PodActivator | None) -> None:
        self._wiring.activator = activator

    def activate(self, pod: Object) -> None:
        """kube's Handle.Activate: the pod goes to activeQ now if it is parked or backing off."""
        activator = self._wiring.activator
        if activator is not None:
            activator.activate(key_of(pod))

    # --- pods waiting at Permit ------------------------------------------------------------------

    def waiting_pods(self) -> list[tuple[str, Object]]:
        """(key, pod) of every pod waiting at Permit (kube's IterateOverWaitingPods)."""
        return [(key, w.pod) for key, w in list(self.waiting.items()) if not w.done.is_set()]

    def allow_waiting_pod(self, key: str) -> bool:
        waiting = self.waiting.get(key)
        if waiting is None:
            return False
        waiting.allow()
        return True

    def reject_waiting_pod(self, key: str, plugin: str, message: str) -> bool:
        waiting = self.waiting.get(key)
        if waiting is None:
            return False
        waiting.reject(plugin, message)
        return True

    # --- listers ---------------------------------------------------------------------------------

    def pod_disruption_budgets(self) -> list[Object]:
        """The PodDisruptionBudgets in the informer's cache (kube's pdbLister.List). Without an
        informer (a scheduler driven by hand), one LIST; either way an error is raised, never []."""
        from minisched.scheduler.plugins.default_preemption import PdbsUnavailable

        informer = self.pdb_informer
        if informer is None:
            if self.cluster is None:
                return []  # no API at all (the algorithm driven by hand on a table)
            try:
                return list(self.cluster.list(POD_DISRUPTION_BUDGETS).get("items") or [])
            except ApiError as err:
                raise PdbsUnavailable(f"cannot list PodDisruptionBudgets: {err}") from err
        if not informer.has_synced():
            raise PdbsUnavailable("the PodDisruptionBudget informer has not synced yet")
        return list(informer.store.list())

    def pod_object(self, namespace: str, name: str) -> Object | None:
        """A pod as the informer's store has it (kube's podLister.Get); without an informer, a GET.
        None when it is gone."""
        store = self.pod_store
        if store is not None:
            return store.get_by_key(f"{namespace}/{name}")
        try:
            return self.cluster.get(PODS, name, namespace)
        except NotFound:
            return None

    def snapshot(self) -> NodeTable:
        """The cache's latest (a scheduling cycle's own table is its CycleState's `snapshot`)."""
        return self._cache.snapshot()

    def bound_node(self, key: str) -> str | None:
        """The node a pod ("namespace/name") is bound to, as the informer reports it; None while it
        is pending or only assumed (its binding may still fail)."""
        if self._cache.is_assumed(key):
            return None
        return self._cache.pod_node(key)


_HANDLE_CONTRACT: type[Handle] = SchedulerHandle  # mypy checks it against the Protocol (Go's var _ Handle)


class _WaitingPod:
    """A pod held by a Permit plugin (kube's waitingPod) until allowed, rejected or `deadline`.
    The first verdict stands: a late allow or reject (another group member's) changes nothing."""

    def __init__(self, deadline: float, timeout: float, pod: Object | None = None, plugin: str = "") -> None:
        self.done = threading.Event()
        self.status = Status.success()
        self.deadline = deadline
        self.timeout = timeout
        self.plugin = plugin  # the Permit plugin that asked for the wait: a timeout rejects in its name
        self.pod: Object = pod or {}
        self._lock = threading.Lock()

    def allow(self) -> None:
        with self._lock:
            self.done.set()

    def reject(self, plugin: str, message: str) -> None:
        with self._lock:
            if not self.done.is_set():
                self.status = Status.unschedulable(message, plugin=plugin)
                self.done.set()


@dataclass
class _Assumed:
    """What the binding cycle needs from the scheduling cycle."""

    qpi: QueuedPodInfo
    info: PodInfo
    node: str
    state: CycleState
    framework: Framework
    waiting: _WaitingPod | None
    decision: Decision
    started: float  # perf_counter at the start of the scheduling cycle
    trace: AttemptTrace | None = None
    outcome: tuple[str, Status] = ("scheduled", Status.success())  # for the trace


class Scheduler:
    """A kube-scheduler-shaped scheduler over any `Cluster` (embedded or real).

        sched = Scheduler(cluster)
        sched.start()          # informers, the loop thread, the queue flushers
        ...
        sched.stop()           # graceful: finishes running bindings, flushes events

    or `sched.run(stop_event)` to block until the event is set. Tests can skip the loop thread
    and call `schedule_one()` themselves (after `start(loop=False)`).
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        profiles: Sequence[Profile] | None = None,
        config: str | Path | Mapping[str, Any] | None = None,
        clock: Clock | None = None,
        bind_workers: int = 8,
        max_bindings_in_flight: int = 512,
        percentage_of_nodes_to_score: int | None = None,
        observer: Any = None,
        recorder: EventRecorder | None = None,
        informer_factory: SharedInformerFactory | None = None,
        annotate_decisions: bool = False,
        keep_decisions: int = 100,
        keep_decisions_bytes: int = DECISIONS_BUDGET_BYTES,
        assumed_ttl: float = 30.0,
        registry: Mapping[str, Any] | None = None,
        seed: int | None = None,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
        bind_guard: Callable[[], bool] | None = None,
        tracer: CycleTracer | None = None,
        pod_filter: Callable[[Object], bool] | None = None,
        profile_plugins: Sequence[str] = (),
        feature_gates: Mapping[str, bool] | None = None,
        node_selector: str | None = None,
    ) -> None:
        if profiles is not None and config is not None:
            raise ValueError("give either profiles or config, not both")
        if bind_workers < 1 or max_bindings_in_flight < 1:
            raise ValueError(f"bind_workers ({bind_workers}) and max_bindings_in_flight "
                             f"({max_bindings_in_flight}) must be at least 1")
        if shutdown_timeout < 0:
            raise ValueError(f"shutdown_timeout must not be negative, got {shutdown_timeout}")
        if config is not None:
            profiles = load_profiles(config)
        self.feature_gates = check_feature_gates(feature_gates or {})
        # Which pending pods of our profiles this scheduler queues (kube's FilterFunc on the pod
        # informer); None: all. Part II §4.3's replicas pass their hash ring's "is it mine?".
        self.pod_filter = pod_filter
        # Plugins enabled in every profile (multiPoint), those built later for swap_framework too: a
        # deployment's own, which no profile configuration should drop (a shard's, Part II §4.3).
        self.profile_plugins = tuple(profile_plugins)
        # Scope to the nodes this label selector picks (a chapter's own nodes on a shared cluster):
        # the node informer lists and watches with it, as client-go's WithTweakListOptions does, so
        # other nodes never reach the cache and a node relabelled out of scope leaves it.
        self.node_selector = _checked_selector(node_selector)
        profiles = list(profiles or [default_profile()])
        self.cluster = cluster
        self.clock: Clock = clock or RealClock()
        self.observer = observer
        self.tracer = tracer
        self._tls = threading.local()  # .trace: the attempt traced on this thread, if any
        self.recorder = recorder or EventRecorder(cluster, clock=self.clock)
        self.cache = SchedulerCache(clock=self.clock, assumed_ttl=assumed_ttl, pod_info=self.pod_info)
        self.handle = SchedulerHandle(cluster, self.recorder, self.clock, self.cache)
        # before the frameworks: plugins ask it for the informers they list from (kube's New(handle))
        # kube's pod informer drops managedFields (newPodInformer's trim); ours drops them from every
        # object the scheduler caches, since none of its readers needs them (how much that saves
        # depends on how many writers each object had: a few MiB at 15,000 once-written objects)
        self.factory = informer_factory or SharedInformerFactory(cluster, transform=strip_managed_fields)
        self.handle.informer_factory = self.factory
        self.frameworks: dict[str, Framework] = {}
        self._registry = registry
        self._seed = seed
        self._percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._swaps: dict[str, Framework] = {}  # profile -> framework to use from the next cycle
        self._swaps_lock = threading.Lock()
        for profile in profiles:
            fwk = self._build_framework(profile)
            self.frameworks[profile.scheduler_name] = fwk
        if len(self.frameworks) != len(profiles):
            raise ValueError("two profiles have the same schedulerName")
        first = next(iter(self.frameworks.values()))
        sorts = {name: fwk.points.queue_sort[0].name for name, fwk in self.frameworks.items()}
        if len(set(sorts.values())) > 1:  # one queue for all profiles, so one order (as in kube)
            raise ValueError(f"all profiles must use the same queueSort plugin, got {sorts}")
        sort_plugin = first.points.queue_sort[0]
        # PrioritySort's rule, without two Python calls per heap comparison
        less = priority_sort_less if sort_plugin.name == "PrioritySort" else first.less
        self.queue = SchedulingQueue(
            less=less,
            pre_enqueue=[self._pre_enqueue],
            clock=self.clock,
            priority_of=self._priority_of,
            queueing_hints={name: _queueing_hints(fwk) for name, fwk in self.frameworks.items()},
            profile_of=_scheduler_name,
            pop_from_backoff=self.feature_gates[POP_FROM_BACKOFF_Q],
        )
        self.handle.nominator = self.queue  # kube's SetPodNominator and SetPodActivator
        self.handle.activator = self.queue
        # the victims' API calls of asynchronous preemption (kube: a goroutine per preemptor)
        self._preemption_workers: _DaemonWorkers | None = None
        self._async_preemptors: weakref.WeakKeyDictionary[Framework, list[AsyncPreemptor]] = (
            weakref.WeakKeyDictionary())
        self._wideners: weakref.WeakKeyDictionary[Framework, list[WideningPreFilter]] = weakref.WeakKeyDictionary()
        for fwk in self.frameworks.values():
            self._wire(fwk)
        self.annotate_decisions = annotate_decisions
        # the last decisions, for explaining them: at most `keep_decisions` records and, as a record
        # grows with the nodes (~120 KB at 5,000), at most `keep_decisions_bytes` of their arrays
        self.keep_decisions = keep_decisions
        self.keep_decisions_bytes = keep_decisions_bytes
        self.decisions: collections.OrderedDict[str, Decision] = collections.OrderedDict()
        self._decision_sizes: dict[str, int] = {}
        self._decisions_bytes = 0
        self.stats = SchedulerStats()
        self._priority_classes: dict[str, int] = {}
        self.shutdown_timeout = shutdown_timeout
        # Asked right before each bind; False (a leader that lost its lease) means: do not send it.
        self.bind_guard = bind_guard
        self.fenced_binds = 0
        self.shutdown_report: ShutdownReport | None = None
        self._cycle_pod: str | None = None  # the pod in the running scheduling cycle, for shutdown's log
        self._pool = _DaemonWorkers(bind_workers, "bind")
        self._binding_slots = _Slots(max_bindings_in_flight)
        self._bindings_lock = threading.Lock()
        # bindings handed to the pool (counted by the scheduling loop alone, so it takes no lock
        # for it) and finished (under _bindings_lock); in flight is the difference
        self._bindings_started = 0
        self._bindings_finished = 0
        self._bindings_idle = threading.Condition(self._bindings_lock)
        self._waiting: dict[str, _WaitingPod] = self.handle.waiting
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._started = False
        self._pod_informer: Any = None

    # --- frameworks, and swapping one at run time ---------------------------------------------------

    def _build_framework(self, profile: Profile) -> Framework:
        if self._percentage_of_nodes_to_score is not None:
            profile = replace(profile, percentage_of_nodes_to_score=self._percentage_of_nodes_to_score)
        if self.profile_plugins:
            profile = _with_plugins(profile, self.profile_plugins)
        # No observer nor tracer, no per-point timing calls at all (a few µs per cycle each).
        timed = self.observer is not None or self.tracer is not None
        return Framework(profile, self._registry, handle=self.handle, seed=self._seed,
                         observer=self._observe_point if timed else None,
                         batching=self.feature_gates[OPPORTUNISTIC_BATCHING], clock=self.clock.monotonic)

    def _wire(self, fwk: Framework) -> None:
        # decided once per framework: isinstance against a runtime Protocol inspects the class's
        # attributes (~20 us), and _held asks on every pop
        self._async_preemptors[fwk] = [p for p in fwk.points.post_filter if isinstance(p, AsyncPreemptor)]
        self._wideners[fwk] = [p for p in fwk.points.pre_filter if isinstance(p, WideningPreFilter)]
        for plugin in fwk.points.post_filter:
            if isinstance(plugin, AsyncPreemptor):  # async preemption: workers, and hold preemptors
                if self._preemption_workers is None:
                    self._preemption_workers = _DaemonWorkers(PREEMPTION_WORKERS, "preemption")
                plugin.submit = self._preemption_workers.submit
                self.queue.hold = self._held

    def _held(self, qpi: QueuedPodInfo) -> bool:
        """kube's DefaultPreemption PreEnqueue: a preemptor whose victims are still being asked to
        go waits (it would preempt again); the queue asks on every move, the loop on every pop."""
        fwk = self.frameworks.get(_scheduler_name(qpi.pod))
        if fwk is None:
            return False
        uid = str((qpi.pod.get("metadata") or {}).get("uid") or "")
        return any(p.running_preemption(uid) for p in self._async_preemptors[fwk])

    def build_framework(self, profile: Profile) -> Framework:
        """A framework for `profile`, built as the scheduler builds its own, for `swap_framework`.
        Raises (ValueError, ...) when the profile cannot be built; nothing changes then."""
        if profile.scheduler_name not in self.frameworks:
            raise ValueError(f"no profile named {profile.scheduler_name!r} (have {sorted(self.frameworks)}): "
                             f"profiles are fixed at start, their plugins are not")
        fwk = self._build_framework(profile)
        sort = fwk.points.queue_sort[0].name
        current = next(iter(self.frameworks.values())).points.queue_sort[0].name
        if sort != current:  # one queue for every profile, ordered one way
            raise ValueError(f"queueSort cannot change at run time ({current} -> {sort})")
        self._wire(fwk)
        return fwk

    def swap_framework(self, fwk: Framework) -> None:
        """Use `fwk` for its profile from the next scheduling cycle on. The loop takes it between
        two cycles, so a cycle runs wholly with the old plugins or wholly with the new; bindings
        already handed off finish with the framework that decided them."""
        with self._swaps_lock:
            self._swaps[fwk.profile_name] = fwk

    def _take_swaps(self) -> None:
        with self._swaps_lock:
            swaps, self._swaps = self._swaps, {}
        self.frameworks.update(swaps)
        for name, fwk in swaps.items():
            self.queue.set_queueing_hints(name, _queueing_hints(fwk))

    # --- which pods are ours ----------------------------------------------------------------------

    def responsible_for(self, pod: Object) -> bool:
        return _scheduler_name(pod) in self.frameworks

    @staticmethod
    def _assigned(pod: Object) -> bool:
        return bool((pod.get("spec") or {}).get("nodeName"))

    @staticmethod
    def _terminal(pod: Object) -> bool:
        return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    def _is_pending_for_us(self, pod: Object) -> bool:
        return self._is_pending_for_profiles(pod) and (self.pod_filter is None or self.pod_filter(pod))

    def _is_pending_for_profiles(self, pod: Object) -> bool:
        """Pending and for one of our profiles, whichever scheduler the pod filter gives it to."""
        return not self._assigned(pod) and self.responsible_for(pod) and not self._terminal(pod)

    def _owned(self, pod: Object) -> bool:
        return self.pod_filter is None or not pod or self.pod_filter(pod)

    def resync_ownership(self) -> tuple[int, int]:
        """The pod filter's answers changed (a shard's ring): queue the pending pods that are ours
        now, and drop from the queue those that are not any more (the drain step). Pods in a
        scheduling or binding cycle are left to finish: the pod's 409 and the capacity ledger fence
        them if another replica also tries. Returns (queued, dropped)."""
        informer = self._pod_informer
        if informer is None or self.pod_filter is None:
            return 0, 0
        queued = {q.key for q in self.queue.pods()}
        added = dropped = 0
        for pod in informer.store.list():
            if not self._is_pending_for_profiles(pod):
                continue
            key = key_of(pod)
            if self.pod_filter(pod):
                if key not in queued and self.queue.where(key) is None and not self.cache.is_assumed(key):
                    self.queue.add(pod, self._parsed(pod))
                    added += 1
            elif key in queued:
                self.queue.delete(pod)
                self._foreign_nomination(pod)  # its nomination, if any, still holds room
                dropped += 1
        if added or dropped:
            log.info("ring changed: %d pods newly ours queued, %d no longer ours dropped", added, dropped)
        return added, dropped

    def _is_assigned_live(self, pod: Object) -> bool:
        return self._assigned(pod) and not self._terminal(pod)

    # --- parsing ---------------------------------------------------------------------------------------

    def _priority_of(self, pod: Object) -> int:
        """spec.priority (the API server's admission fills it in), else the PriorityClass by name."""
        spec = pod.get("spec") or {}
        value = spec.get("priority")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        class_name = spec.get("priorityClassName")
        if not class_name:
            return 0
        cached = self._priority_classes.get(class_name)
        if cached is None:
            try:
                cached = int(self.cluster.get(PRIORITY_CLASSES, class_name).get("value") or 0)
            except ApiError:
                cached = 0
            self._priority_classes[class_name] = cached
        return cached

    def pod_info(self, pod: Object) -> PodInfo:
        """PodInfo.from_pod with the priority resolved (PodSpecError for a pod we cannot read)."""
        spec = pod.get("spec") or {}
        if isinstance(spec.get("priority"), int):
            return PodInfo.from_pod(pod)
        return PodInfo.from_pod(pod, priority=self._priority_of(pod))

    def _pre_enqueue(self, pod: Object) -> str | None:
        fwk = self.frameworks.get(_scheduler_name(pod))
        if fwk is None or not fwk.points.pre_enqueue:
            return None
        status = fwk.run_pre_enqueue(pod)
        if status.is_success:
            return None
        if status.plugin != "SchedulingGates":  # for spec.schedulingGates the API server says it
            # the pod shows why it waits, as a gated pod does (recorded asynchronously: we hold the queue's lock)
            self.recorder.pod_scheduled_false(pod, POD_REASON_SCHEDULING_GATED, status.message())
        return status.plugin or "PreEnqueue"

    # --- informer handlers (kube's eventhandlers.go) ----------------------------------------------------

    def _parsed(self, pod: Object) -> PodInfo | None:
        """Parse a pending pod as it is queued (kube does the same); a pod we cannot read is parsed
        again in its cycle, which reports the problem."""
        try:
            return self.pod_info(pod)
        except PodSpecError:
            return None

    def _on_pod_add(self, pod: Object, _initial: bool = False) -> None:
        if self._is_pending_for_us(pod):
            self.queue.add(pod, self._parsed(pod))
        elif self._is_pending_for_profiles(pod):
            self._foreign_nomination(pod)
        elif self._is_assigned_live(pod):
            self.cache.add_pod(pod)
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_ADD, None, pod)  # a spread count rose; an affinity target came
            self.queue.move_gated(ASSIGNED_POD_ADD, None, pod)

    def _on_pod_update(self, old: Object, new: Object) -> None:
        was_pending, now_pending = self._is_pending_for_us(old), self._is_pending_for_us(new)
        if was_pending and now_pending:
            if not self.cache.is_assumed(new):  # a status write of ours while binding: no new try
                self.queue.update(old, new, self._parsed(new))
        elif now_pending:
            self.queue.add(new, self._parsed(new))
        elif was_pending:
            self._pending_gone(old)
        if not now_pending and self._is_pending_for_profiles(new):
            self._foreign_nomination(new)
        elif not now_pending and self._is_pending_for_profiles(old):
            self.queue.delete_nominated(old)  # another replica's pod, bound or finished: its room is taken
        was_assigned, now_assigned = self._is_assigned_live(old), self._is_assigned_live(new)
        if was_assigned and now_assigned:
            self.cache.update_pod(old, new)
            if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
                self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_UPDATE, old, new)  # a label a selector reads
        elif now_assigned:
            self.cache.add_pod(new)  # the binding landed: confirms our assumption
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_ADD, None, new)
            self.queue.move_gated(ASSIGNED_POD_ADD, None, new)  # pods gated until it was bound may go now
        elif was_assigned:
            self._assigned_gone(old)  # finished (Succeeded/Failed): its room is free

    def _on_pod_delete(self, obj: Any) -> None:
        pod = unwrap_tombstone(obj)
        if pod is None:
            return
        if self._is_pending_for_profiles(pod):  # owned or not: the queue may still hold it
            self._pending_gone(pod)
        elif self._is_assigned_live(pod):
            self._assigned_gone(pod)

    def _foreign_nomination(self, pod: Object) -> None:
        """A pending pod of our profiles that the pod filter leaves to another scheduler (a sharded
        replica): its status.nominatedNodeName (written by that scheduler's preemption) still holds
        room on the node, and our filters count it as kube's do a nominated pod, so that our pods do
        not take the room its victims freed."""
        node = str((pod.get("status") or {}).get("nominatedNodeName") or "")
        info = self._parsed(pod) if node else None
        self.queue.nominate(pod, node if info is not None else "", info)

    def _pending_gone(self, pod: Object) -> None:
        self.queue.delete(pod)
        fwk = self.frameworks.get(_scheduler_name(pod))
        for plugin in fwk.points.pre_enqueue if fwk is not None else ():
            if isinstance(plugin, PodForgetter):  # PreEnqueue plugins that remember pods they hold
                plugin.forget(key_of(pod))
        waiting = self._waiting.get(key_of(pod))
        if waiting is not None:
            waiting.reject("", "pod deleted while waiting on permit")

    def _assigned_gone(self, pod: Object) -> None:
        self.cache.remove_pod(pod)
        self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, pod, None)

    def _on_node_add(self, node: Object, _initial: bool = False) -> None:
        self.cache.add_node(node)
        self.queue.move_all_to_active_or_backoff(NODE_ADD, None, node)

    def _on_node_update(self, old: Object, new: Object) -> None:
        self.cache.update_node(old, new)
        for event in node_update_events(old, new):
            self.queue.move_all_to_active_or_backoff(event, old, new)

    def _on_node_delete(self, obj: Any) -> None:
        node = unwrap_tombstone(obj)
        if node is not None:
            self.cache.remove_node(node)
            # a domain gone can lower the skew a spread constraint measures (kube: Node/Delete)
            self.queue.move_all_to_active_or_backoff(NODE_DELETE, node, None)

    def _watch_storage(self) -> None:
        """A change to a storage object the volume plugins read (they asked the factory for its
        informer) may make a parked pod schedulable: move pods, as kube's storage event handlers do."""
        wanted = {(r.group, r.plural): r.kind
                  for r in (PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES, CSI_NODES)}
        for key, informer in self.factory.informers().items():
            kind = wanted.get((key.resource.group, key.resource.plural))
            if kind is None:
                continue

            def on_add(obj: Object, _initial: bool = False, kind: str = kind) -> None:
                self.queue.move_all_to_active_or_backoff(ClusterEvent(kind, "Add"), None, obj)

            def on_update(old: Object, new: Object, kind: str = kind) -> None:
                self.queue.move_all_to_active_or_backoff(ClusterEvent(kind, "Update"), old, new)

            def on_delete(obj: Any, kind: str = kind) -> None:
                self.queue.move_all_to_active_or_backoff(ClusterEvent(kind, "Delete"), unwrap_tombstone(obj), None)

            informer.add_event_handler(ResourceEventHandlerFuncs(on_add, on_update, on_delete))

    def _requeue(self, event: ClusterEvent) -> int:
        """A plugin saw `event` on something it watches: re-check the pods it may help."""
        return self.queue.move_gated(event) + self.queue.move_all_to_active_or_backoff(event)

    def move(self, event: ClusterEvent) -> int:
        """Tell the queue about a cluster event by hand (what the handlers do)."""
        return self.queue.move_all_to_active_or_backoff(event)

    # --- lifecycle --------------------------------------------------------------------------------------

    def start(self, *, loop: bool = True, sync_timeout: float = 60.0, stop: threading.Event | None = None) -> bool:
        """Start informers (and wait for their first lists), the queue flushers, housekeeping and,
        with `loop`, the scheduling loop thread. The wait for the first lists ends early when
        `stop` is set or stop() is called meanwhile (kube-scheduler's WaitForCacheSync(ctx.Done())):
        then nothing more is started, False is returned and the caller still calls stop()."""
        if self._started:
            return not self._stop.is_set()
        self._started = True
        pods = self.factory.informer_for(PODS)
        # with no node_selector, the factory's own default (kube's shared node informer)
        nodes = (self.factory.informer_for(NODES, label_selector=self.node_selector) if self.node_selector
                 else self.factory.informer_for(NODES))
        self._pod_informer = pods
        self.handle.pod_store = pods.store
        # One handler for both views of the pod informer (kube registers two filtered ones): one
        # listener thread instead of two, and a pending->bound transition handled in one place.
        pods.add_event_handler(ResourceEventHandlerFuncs(self._on_pod_add, self._on_pod_update, self._on_pod_delete))
        nodes.add_event_handler(ResourceEventHandlerFuncs(self._on_node_add, self._on_node_update, self._on_node_delete))
        self._watch_storage()
        if any(isinstance(p, UsesPodDisruptionBudgets) and p.uses_pod_disruption_budgets
               for fwk in self.frameworks.values() for p in fwk.points.post_filter):
            self.handle.pdb_informer = self.factory.informer_for(POD_DISRUPTION_BUDGETS)
        # kube-scheduler watches namespaces for the namespaceSelector of pod affinity terms
        self.handle.namespace_lister = StoreNamespaces(self.factory.informer_for(NAMESPACES, namespace=None).store)
        for fwk in self.frameworks.values():
            for plugin in fwk.plugins.values():
                if isinstance(plugin, InformerUser):  # plugins that watch more kinds
                    plugin.register_informers(self.factory, self._requeue)
        self.factory.start()
        asked = _AnyOf(self._stop, stop)
        synced = self.factory.wait_for_cache_sync(sync_timeout, asked)
        if asked.is_set():
            log.info("scheduler stopped before its informers synced")
            return False
        if not all(synced.values()):
            raise TimeoutError(f"informers did not sync within {sync_timeout}s: "
                               f"{[str(k) for k, ok in synced.items() if not ok]}")
        if self.recorder.pod_lookup is None:
            self.recorder.pod_lookup = lambda ns, name: pods.store.get_by_key(f"{ns}/{name}")
        self.recorder.start()
        self.queue.start(self._stop)
        self._spawn(self._housekeeping, "scheduler-housekeeping")
        if loop:
            self._spawn(self._loop, "scheduler-loop")
        return True

    def _spawn(self, target: Any, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def run(self, stop: threading.Event) -> None:
        """Schedule until `stop` is set, then shut down gracefully."""
        self.start()
        stop.wait()
        self.stop()

    def stop(self, timeout: float | None = None) -> ShutdownReport:
        """Graceful shutdown within one deadline (`timeout`, default `shutdown_timeout`, in real
        seconds) shared by all its steps: no new cycles, bindings finish, events are flushed,
        informers stop. What is not done by the deadline is abandoned safely and logged."""
        if self.shutdown_report is not None:
            return self.shutdown_report
        budget = self.shutdown_timeout if timeout is None else timeout
        began = time.monotonic()
        end = began + budget

        def left() -> float:
            return max(0.0, end - time.monotonic())

        report = ShutdownReport(deadline=budget)
        self.shutdown_report = report
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        self.queue.close()
        for waiting in list(self._waiting.values()):  # a pod held at Permit holds a worker
            waiting.reject("", "scheduler shutting down")
        for t in self._threads:
            t.join(left())
        if any(t.is_alive() and t.name == "scheduler-loop" for t in self._threads):
            report.abandoned_cycle = self._cycle_pod or "(between pods)"
        # Queued bindings keep running while time is left; at the deadline, those not started are
        # forgotten (nothing was sent; the pods stay pending) and those running are left to finish.
        finished = self.wait_for_bindings(left())
        for a in self._pool.shutdown():
            report.bindings_not_started.append(a.qpi.key)
            a.framework.run_unreserve(a.state, a.info, a.node)
            self.cache.forget_pod(a.qpi.pod)
            self._binding_done()
        if self._preemption_workers is not None:  # preemptions not started send nothing; running ones finish
            self._preemption_workers.shutdown()
        if not finished:
            with self._bindings_lock:
                report.bindings_in_flight = self._bindings_in_flight
        if self.recorder.flush(left()):
            self.recorder.stop(left())
        else:
            report.writes_dropped = self.recorder.abandon()
        if self._started:
            for key, informer in self.factory.informers().items():
                if not informer.is_stopped():
                    try:
                        informer.stop(left())
                    except RuntimeError:  # never started (a shared factory's other informers)
                        continue
                if not informer.is_stopped():
                    report.informers_running.append(str(key))
        self._close_plugins()
        report.seconds = time.monotonic() - began
        (log.info if report.clean else log.warning)("scheduler %s", report.describe())
        return report

    def close(self) -> None:
        self.stop()

    def _close_plugins(self) -> None:
        """Close every plugin that holds resources (the Closer capability), once each, after the
        loop and the bindings stopped (kube's framework.Close); one that raises is logged."""
        seen: set[int] = set()
        for fwk in self.frameworks.values():
            for plugin in fwk.plugins.values():
                if id(plugin) in seen or not isinstance(plugin, Closer):
                    continue
                seen.add(id(plugin))
                try:
                    plugin.close()
                except Exception:
                    log.exception("closing plugin %s failed", plugin.name)

    @property
    def _bindings_in_flight(self) -> int:
        return self._bindings_started - self._bindings_finished

    def _binding_done(self) -> None:
        with self._bindings_lock:
            self._bindings_finished += 1
            if not self._bindings_in_flight:
                self._bindings_idle.notify_all()
        self._binding_slots.release()

    def __enter__(self) -> Scheduler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.schedule_one()
            except Exception:  # the loop must outlive any one pod
                log.exception("scheduling cycle failed")

    def _housekeeping(self) -> None:
        while not self._stop.is_set():
            self._pause(HOUSEKEEPING_PERIOD)
            self.cache.cleanup_expired()
            if self.observer is not None and hasattr(self.observer, "set_pending"):
                for queue_name, count in self.queue.pending_pods().items():
                    self.observer.set_pending(queue_name, count)

    def _pause(self, seconds: float) -> None:
        """Sleep on the clock (virtual or real), waking at once on stop()."""
        pause_unless_stopped(self.clock, self._wake, self._stop, seconds)

    def wait_for_bindings(self, timeout: float | None = 30.0) -> bool:
        """Block until no binding cycle is running (real seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._bindings_idle:
            while self._bindings_in_flight:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._bindings_idle.wait(left)
        return True

    def pending_pods(self) -> dict[str, int]:
        return self.queue.pending_pods()

    # --- the scheduling cycle ------------------------------------------------------------------------------

    def schedule_one(self, timeout: float | None = 0.5) -> bool:
        """Pop one pod (waiting up to `timeout`) and run its scheduling cycle. False if none came."""
        qpi = self.queue.pop(timeout)
        if qpi is None:
            return False
        self._cycle_pod = qpi.key
        trace = None
        if self.tracer is not None:
            trace = self.tracer.begin(qpi.key, _scheduler_name(qpi.pod), qpi.attempts)
            self._tls.trace = trace
        try:
            self._scheduling_cycle(qpi)
        except Exception as err:  # a bug must cost one attempt, not the pod: it backs off and retries
            log.exception("scheduling cycle for %s failed", qpi.key)
            self.stats.errors += 1
            self.queue.add_unschedulable(qpi, error=True)
            self.recorder.failed_scheduling(qpi.pod, f"scheduler error: {err}")
            if trace is not None:
                trace.decided("error", Status.from_error(err), None, None)
        finally:
            self._cycle_pod = None
            if trace is not None:
                handed = self._tls.trace is None  # _assume_and_bind gave it to a binding cycle
                self._tls.trace = None
                trace.cycle_done(binding=handed)
        return True

    def _scheduling_cycle(self, qpi: QueuedPodInfo) -> None:
        started = time.perf_counter()
        if self._swaps:  # between two cycles: the only place the plugin set may change
            self._take_swaps()
        pod = qpi.pod
        fwk = self.frameworks.get(_scheduler_name(pod))
        if fwk is None or (pod.get("metadata") or {}).get("deletionTimestamp") or self.cache.is_assumed(qpi.key):
            self.queue.done(qpi.key)  # not ours any more, being deleted, or already on its way
            return
        if self.queue.hold is not None and self.queue.hold(qpi):  # came back through backoff while held
            self.queue.add_unschedulable(qpi, rejected_by=qpi.unschedulable_plugins)
            return
        if self.pod_filter is not None and not self.pod_filter(pod):
            self.stats.not_owned += 1
            self.queue.done(qpi.key)  # the filter gave it to another scheduler since it was queued
            return
        info = qpi.pod_info
        if info is None:
            try:
                info = self.pod_info(pod)
            except PodSpecError as err:
                self._fail(qpi, fwk, None, str(err), POD_REASON_UNSCHEDULABLE, rejected_by=[INVALID_POD])
                self._observe_attempt("unschedulable", started)
                return
            qpi.pod_info = info
        nominated_node = self.queue.nominated_node_of(qpi.key)
        if nominated_node and nominated_node != info.nominated_node_name:
            info = replace(info, nominated_node_name=nominated_node)
        state = CycleState()
        snapshot = self.cache.snapshot()
        t_algo = time.perf_counter()
        nominated = self.queue.nominated_infos()
        result = fwk.schedule(info, snapshot, state=state, nominated=nominated, cycle=qpi.scheduling_cycle)
        wideners = self._wideners.get(fwk)
        if wideners and result.node is None and result.status.is_rejected:
            # Nowhere in a first choice (a replica's node partition): once more over the nodes
            # those plugins widen to, as Gödel's schedulers fall back to other partitions.
            wider = CycleState()
            if [p.name for p in wideners if p.widen(state, info, wider)]:  # each one asked
                state = wider
                result = fwk.schedule(info, snapshot, state=state, nominated=nominated,
                                      cycle=qpi.scheduling_cycle)
        self._observe("observe_algorithm", time.perf_counter() - t_algo)
        if self.tracer is not None:
            self._trace_decided("scheduled" if result.node else "unschedulable" if result.status.is_rejected
                                else "error", result.status, result.node, result.decision)
        self._keep_decision(result.decision)
        if result.node is None:
            self._handle_no_fit(qpi, fwk, info, state, result)
            self._observe_attempt("unschedulable" if result.status.is_rejected else "error", started)
            return
        self._assume_and_bind(qpi, fwk, info, state, result.node, result.decision, started)

    def _handle_no_fit(self, qpi: QueuedPodInfo, fwk: Framework, info: PodInfo, state: CycleState,
                       result: Any) -> None:
        status: Status = result.status
        diagnosis = result.diagnosis
        if not status.is_rejected or diagnosis is None:
            self._fail(qpi, fwk, info, status.message() or str(status), POD_REASON_SCHEDULER_ERROR, error=True)
            return
        nominated: str | None = None
        if diagnosis.num_all_nodes == 0:
            # kube's ErrNoNodesAvailable: no FitError, so no PostFilter runs (DynamicResources'
            # would read the cycle state its PreFilter never wrote and fail "not found"), the
            # message is the plain one, and any nomination goes (kube's clearNominatedNode)
            self._fail(qpi, fwk, info, status.message(), POD_REASON_UNSCHEDULABLE, nominated="")
            return
        if fwk.points.post_filter:
            before = _victims_total(fwk)
            nominated, pf_status = fwk.run_post_filter(state, info, diagnosis)
            if pf_status.is_success and nominated:
                victims = _victims_total(fwk) - before
                self.stats.preemptions += 1
                self.stats.victims += victims
                self._observe("observe_preemption", victims)
            elif pf_status.is_error:
                log.warning("preemption for %s failed: %s", info.key, pf_status)
        # kube's FitError text with PostFilter's part: the same words in the decision record as in
        # the event and the PodScheduled condition
        result.decision.message = diagnosis.message()
        self._fail(qpi, fwk, info, result.decision.message, POD_REASON_UNSCHEDULABLE,
                   rejected_by=diagnosis.unschedulable_plugins, nominated=nominated)

    def _fail(
        self, qpi: QueuedPodInfo, fwk: Framework, info: PodInfo | None, message: str, reason: str, *,
        rejected_by: Iterable[str] = (), error: bool = False, nominated: str | None = None,
    ) -> None:
        """kube's handleSchedulingFailure: requeue (unless the pod is gone or bound meanwhile),
        record the nomination, write FailedScheduling and PodScheduled=False."""
        pod = qpi.pod
        if error:
            self.stats.errors += 1
        else:
            self.stats.unschedulable += 1
        current = self._current_pod(qpi.key)
        if current is None or self._assigned(current) or not self._owned(current):
            self.queue.done(qpi.key)  # deleted, bound by someone else, or another replica's now
            return
        if nominated is not None:
            self.queue.nominate(pod, nominated, replace(info, nominated_node_name=nominated) if info else None)
        self.queue.add_unschedulable(qpi, rejected_by=rejected_by, error=error)
        self.recorder.failed_scheduling(pod, message)
        self.recorder.pod_scheduled_false(pod, reason, message, nominated_node_name=nominated)

    def _current_pod(self, key: str) -> Object | None:
        """The informer's latest copy of the pod (None once deleted)."""
        informer = self._pod_informer
        if informer is None:
            return {}  # no informers (a test driving the scheduler by hand): assume it still exists
        obj: Object | None = informer.store.get_by_key(key)
        return obj

    def _assume_and_bind(self, qpi: QueuedPodInfo, fwk: Framework, info: PodInfo, state: CycleState,
                         node: str, decision: Decision, started: float) -> None:
        try:
            self.cache.assume_pod(qpi.pod, node, info)
        except CacheError:
            # The informer already shows it bound (someone else was faster, between our pop and
            # its update): nothing to do.
            self.queue.done(qpi.key)
            return
        status = fwk.run_reserve(state, info, node)
        if not status.is_success:
            fwk.run_unreserve(state, info, node)
            self.cache.forget_pod(qpi.pod)
            self._fail(qpi, fwk, info, status.message() or str(status), POD_REASON_SCHEDULER_ERROR,
                       error=status.is_error, rejected_by=[status.plugin] if status.plugin else ())
            self._observe_attempt("error" if status.is_error else "unschedulable", started)
            return
        status, wait = fwk.run_permit(state, info, node)
        waiting: _WaitingPod | None = None
        if status.is_wait:
            waiting = _WaitingPod(self.clock.monotonic() + wait, wait, qpi.pod, status.plugin)
            self._waiting[qpi.key] = waiting
        elif not status.is_success:
            fwk.run_unreserve(state, info, node)
            self.cache.forget_pod(qpi.pod)
            self._fail(qpi, fwk, info, status.message() or str(status), POD_REASON_UNSCHEDULABLE,
                       error=status.is_error, rejected_by=[status.plugin] if status.plugin else ())
            self._observe_attempt("error" if status.is_error else "unschedulable", started)
            return
        self.queue.assumed(qpi.key)  # in flight until its binding cycle passes Permit
        if self.queue.nominated_node_of(qpi.key) is not None:
            self.queue.delete_nominated(qpi.pod)
        self.stats.scheduled += 1
        self._observe_attempt("scheduled", started, cycle_only=True)
        # Bounded: a slow API server slows the loop instead of piling up; shutdown ends the wait.
        while not self._binding_slots.acquire(timeout=0.1):
            if self._stop.is_set():
                self._abandon_before_binding(qpi, fwk, info, state, node, waiting)
                return
        self._bindings_started += 1
        trace: AttemptTrace | None = None
        if self.tracer is not None:
            trace = getattr(self._tls, "trace", None)
            self._tls.trace = None  # handed on: the binding cycle ends the attempt
        assumed = _Assumed(qpi, info, node, state, fwk, waiting, decision, started, trace)
        try:
            self._pool.submit(self._binding_cycle, assumed)
        except RuntimeError:  # shut down meanwhile: nothing was sent
            self._binding_done()
            self._abandon_before_binding(qpi, fwk, info, state, node, waiting)

    def _abandon_before_binding(self, qpi: QueuedPodInfo, fwk: Framework, info: PodInfo, state: CycleState,
                                node: str, waiting: _WaitingPod | None) -> None:
        """Shutdown came between the decision and its binding: undo the assumption, send nothing."""
        self._waiting.pop(qpi.key, None)
        self.queue.binding_done(qpi)
        fwk.run_unreserve(state, info, node)
        self.cache.forget_pod(qpi.pod)
        log.info("shutting down: %s was not bound to %s and stays pending", qpi.key, node)

    # --- the binding cycle -------------------------------------------------------------------------------

    def allow_waiting_pod(self, key: str) -> bool:
        waiting = self._waiting.get(key)
        if waiting is None:
            return False
        waiting.allow()
        return True

    def reject_waiting_pod(self, key: str, message: str = "rejected") -> bool:
        waiting = self._waiting.get(key)
        if waiting is None:
            return False
        waiting.reject("", message)
        return True

    def _binding_cycle(self, a: _Assumed) -> None:
        if a.trace is not None:
            self._tls.trace = a.trace
        try:
            self._bind(a)
        except Exception:
            log.exception("binding cycle for %s failed", a.qpi.key)
            self._binding_failed(a, Status.from_error(RuntimeError("binding cycle crashed")))
        finally:
            self.queue.binding_done(a.qpi)  # kube's Done (if Permit did not end the attempt already)
            if a.trace is not None:
                self._tls.trace = None
                a.trace.binding_done(*a.outcome)
            self._binding_done()

    def _bind(self, a: _Assumed) -> None:
        if a.waiting is not None:
            # The wait holds one binding worker (kube holds a goroutine); the timeout is on the clock.
            while not a.waiting.done.wait(0.02):
                if self.clock.monotonic() >= a.waiting.deadline:
                    a.waiting.reject(a.waiting.plugin, f"rejected due to timeout after waiting {a.waiting.timeout:g}s at permit")
            self._waiting.pop(a.qpi.key, None)
            if not a.waiting.status.is_success:
                self._binding_failed(a, a.waiting.status)
                return
        # past Permit no failure makes the pod unschedulable: its attempt's events are not needed
        self.queue.binding_done(a.qpi)
        status = a.framework.run_pre_bind(a.state, a.info, a.node)
        if status.is_success and self.bind_guard is not None and not self.bind_guard():
            # Not (surely) the leader any more: the new leader owns this pod. Nothing was sent;
            # undo the assumption and leave the pod pending, without writing anything about it.
            a.framework.run_unreserve(a.state, a.info, a.node)
            self.cache.forget_pod(a.qpi.pod)
            with self._bindings_lock:
                self.fenced_binds += 1
            log.warning("not binding %s to %s: this scheduler no longer holds the leader lease", a.qpi.key, a.node)
            return
        if status.is_success:
            status = a.framework.run_bind(a.state, a.info, a.node)
        if not status.is_success:
            self._binding_failed(a, status)
            return
        self.cache.finish_binding(a.qpi.pod)
        a.framework.run_post_bind(a.state, a.info, a.node)
        with self._bindings_lock:  # several binding threads count at once
            self.stats.bound += 1
        self._observe("observe_attempt", "scheduled", time.perf_counter() - a.started)
        pod = a.qpi.pod
        self.recorder.scheduled(pod, a.node)
        if self.annotate_decisions:
            self.recorder.annotate_decision(pod, a.decision.to_annotation())
        if self.observer is not None and hasattr(self.observer, "observe_scheduled"):
            first = a.qpi.initial_attempt_timestamp
            since = self.clock.monotonic() - first if first is not None else 0.0
            self.observer.observe_scheduled(a.qpi.attempts, since)

    def _binding_failed(self, a: _Assumed, status: Status) -> None:
        """kube's handleBindingCycleError. Forgetting an assumed pod frees its room as a deleted pod
        would: pods parked for lack of it get another chance (an AssignedPodDelete move). After an
        error the move comes at once. After a Permit rejection it comes once the rejected pod is
        back in the queue, and leaves that pod out: moved while the pod was still in flight, the
        event would count for the pod itself and send it to backoff. (The other members of a gang
        rejected together are still in flight, so they do record each other's moves.)"""
        if not status.is_rejected:
            self._requeue_failed_binding(a, status, move=True)
            return
        try:
            self._requeue_failed_binding(a, status, move=False)
        finally:
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, _assumed_pod(a), None, exclude=a.qpi.key)

    def _requeue_failed_binding(self, a: _Assumed, status: Status, *, move: bool) -> None:
        a.outcome = ("unschedulable" if status.is_rejected else "error", status)
        self._observe("observe_attempt", a.outcome[0], time.perf_counter() - a.started)
        # for Unreserve plugins that must tell a refusal from a lost answer (a Timeout: the binding
        # may have landed, so a capacity ledger keeps the pod's room)
        a.state.write(BINDING_STATUS, status)
        a.framework.run_unreserve(a.state, a.info, a.node)
        self.cache.forget_pod(a.qpi.pod)
        if move:
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, _assumed_pod(a), None)
        err = status.error
        if isinstance(err, ApiError) and is_conflict(err):
            # Usually someone else bound it (or it is being deleted), and the informer will say so.
            # But kube-apiserver also answers 409 when etcd failed under the write ("rpc error: code
            # = Unavailable"): nothing was bound. So a pod the informer still shows pending goes back
            # to the queue, as kube-scheduler requeues after any binding error; never dropped.
            stale_version = STALE_VERSION in err.message
            with self._bindings_lock:
                self.stats.bind_conflicts += 1
                if stale_version:
                    self.stats.bind_stale_versions += 1
            current = self._current_pod(a.qpi.key)
            if current is None or self._assigned(current) or not self._owned(current):
                log.info("binding %s to %s: %s; bound, gone or another replica's meanwhile", a.qpi.key, a.node, err)
                return
            log.info("binding %s to %s: %s; the pod still looks pending: retrying after backoff", a.qpi.key, a.node, err)
            if current and current is not a.qpi.pod:
                # The retry decides on the informer's copy, as kube's handleSchedulingFailure does:
                # an update that came while the pod was assumed was not queued, and binding the
                # version we had again would be refused again (a stale resourceVersion).
                a.qpi.pod, a.qpi.pod_info = current, self._parsed(current)
            self.queue.requeue_after_bind_failure(a.qpi)
            return
        if isinstance(err, NotFound):
            return  # deleted meanwhile
        with self._bindings_lock:
            self.stats.bind_errors += 1
        current = self._current_pod(a.qpi.key)
        if current is None or self._assigned(current) or not self._owned(current):
            return
        if status.is_rejected:  # a Permit rejection or timeout: unschedulable, not an error
            message, reason = status.message() or str(status), POD_REASON_UNSCHEDULABLE
            self.queue.requeue_after_bind_failure(a.qpi, rejected_by=[status.plugin] if status.plugin else [])
        else:
            message, reason = f"Binding rejected: {status.message() or status}", POD_REASON_SCHEDULER_ERROR
            self.queue.requeue_after_bind_failure(a.qpi)
        self.recorder.failed_scheduling(a.qpi.pod, message)
        self.recorder.pod_scheduled_false(a.qpi.pod, reason, message)

    # --- observation -----------------------------------------------------------------------------------------

    def _keep_decision(self, decision: Decision) -> None:
        if self.keep_decisions <= 0:
            return
        if self.decisions.pop(decision.pod, None) is not None:
            self._decisions_bytes -= self._decision_sizes.pop(decision.pod)
        self.decisions[decision.pod] = decision
        self._decision_sizes[decision.pod] = size = decision.nbytes  # as kept (a record may change later)
        self._decisions_bytes += size
        while len(self.decisions) > 1 and (len(self.decisions) > self.keep_decisions
                                           or self._decisions_bytes > self.keep_decisions_bytes):
            dropped, _ = self.decisions.popitem(last=False)
            self._decisions_bytes -= self._decision_sizes.pop(dropped)

    def _observe_attempt(self, result: str, started: float, *, cycle_only: bool = False) -> None:
        """The end of a scheduling cycle (its latency goes to stats). The observer's attempt metric
        is kube's: algorithm + binding, so a decided pod is reported when its binding ends."""
        seconds = time.perf_counter() - started
        self.stats.cycle_seconds.append(seconds)
        if not cycle_only:
            self._observe("observe_attempt", result, seconds)
        if self.tracer is not None and result != "scheduled":  # a later failure (Reserve, Permit) wins
            self._trace_decided(result, None, None, None)

    def _trace_decided(self, result: str, status: Status | None, node: str | None, decision: Decision | None) -> None:
        trace: AttemptTrace | None = getattr(self._tls, "trace", None)
        if trace is not None:
            trace.decided(result, status, node, decision)

    def _observe(self, method: str, *args: Any) -> None:
        if self.observer is not None:
            fn = getattr(self.observer, method, None)
            if fn is not None:
                fn(*args)

    def _observe_point(self, point: str, status: str, seconds: float) -> None:
        if self.observer is not None:
            fn = getattr(self.observer, "observe_extension_point", None)
            if fn is not None:
                fn(point, status, seconds)
        if self.tracer is not None:
            trace: AttemptTrace | None = getattr(self._tls, "trace", None)
            if trace is not None:
                trace.point(point, status, seconds)


class _AnyOf:
    """Set when any of its events is (the scheduler's own stop, or its caller's)."""

    def __init__(self, *events: threading.Event | None) -> None:
        self.events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


def _assumed_pod(a: _Assumed) -> Object:
    """The pod as it was assumed (on its node): what a forgotten assumption frees, for the hints
    (kube passes the assumed pod with EventAssignedPodDelete)."""
    pod = a.qpi.pod
    return {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": a.node}}


def _queueing_hints(fwk: Framework) -> dict[ClusterEvent, list[RegisteredHint]]:
    """The profile's queueing-hint map for the queue. A pod we could not read (INVALID_POD, the
    scheduler's own rejector) registers nothing, so only its own update moves it."""
    return {event: list(regs) for event, regs in fwk.queueing_hints.items()}


def _with_plugins(profile: Profile, names: Sequence[str]) -> Profile:
    """`profile` with plugins `names` enabled at multiPoint, after its own (each once)."""
    have = {ref.name for ref in profile.multi_point.enabled}
    added = tuple(PluginRef(name) for name in names if name not in have)
    if not added:
        return profile
    return replace(profile, multi_point=PluginSet(profile.multi_point.enabled + added, profile.multi_point.disabled))


def _victims_total(fwk: Framework) -> int:
    """The pods the profile's PostFilter plugins preempted so far (those that count them)."""
    return sum(p.victims_total for p in fwk.points.post_filter if isinstance(p, CountsVictims))


def _scheduler_name(pod: Object) -> str:
    """spec.schedulerName; the API server fills in "default-scheduler" when a pod names none."""
    return str((pod.get("spec") or {}).get("schedulerName") or API_DEFAULT_SCHEDULER)


__all__ = ["Scheduler", "SchedulerHandle", "SchedulerObserver", "SchedulerStats"]


def _checked_selector(selector: str | None) -> str | None:
    """`selector` if it parses as a label selector (None or "" for every node), else a ValueError
    naming it: a typo must not leave a scheduler that silently sees no nodes."""
    if not selector:
        return None
    try:
        parse_label_selector(selector)
    except BadRequest as err:
        raise ValueError(f"node_selector {selector!r} is not a label selector: {err}") from None
    return selector
