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
informer (one listener thread instead of two); a pod waiting at Permit holds one binding worker.
Unschedulable pods move as kube 1.35 moves them: each plugin registers the cluster events that may
make its rejection stale, each with an optional queueing hint (EnqueueExtensions), and the queue
asks only the plugins that rejected the pod. Nominated pods are handled as kube does: a node where some wait is filtered twice, with
them added (through the PreFilter extensions) and without, and scoring never counts them.

Shutdown has one deadline (`shutdown_timeout`, 20 s by default; Kubernetes kills a pod 30 s after
SIGTERM) shared by everything that must end: the scheduling loop's current cycle, the binding
cycles, the event and status writes, the informers. Whatever has not finished by then is abandoned
and logged by name: a binding not yet started is forgotten (its pod stays pending for the next
scheduler), a bind already sent either lands or fails whole on the API server (pods/binding is
atomic), unsent events are dropped. The binding workers are daemon threads so that one hung
request cannot hold the process past the deadline (ThreadPoolExecutor's are joined at exit).

Metrics go through `observer`, any object with some of SchedulerObserver's methods (stats.py)
(observe_attempt, observe_algorithm, observe_scheduled, observe_extension_point, set_pending,
observe_preemption); minisched.observability plugs Prometheus in there.

The Scheduler is one class over files named as kube-scheduler's pkg/scheduler: this one (kube's
scheduler.go) builds it and its frameworks and runs its lifecycle; schedule_one.py holds the
scheduling and binding cycles, eventhandlers.py the informer handlers and which pods are ours,
handle.py the Handle plugins get and the pods waiting at Permit, workers.py the binding and
preemption threads, stats.py the counters and the metrics hooks.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from minisched.clock import Clock, RealClock, pause_unless_stopped
from minisched.cluster.base import Cluster
from minisched.errors import ApiError, BadRequest
from minisched.informer import ResourceEventHandlerFuncs, SharedInformerFactory, strip_managed_fields
from minisched.resources import NAMESPACES, NODES, POD_DISRUPTION_BUDGETS, PODS, PRIORITY_CLASSES
from minisched.scheduler.cache import SchedulerCache
from minisched.scheduler.eventhandlers import _EventHandlers, _scheduler_name
from minisched.scheduler.events import POD_REASON_SCHEDULING_GATED, EventRecorder
from minisched.scheduler.framework.cluster_event import RegisteredHint
from minisched.scheduler.framework.decision import Decision
from minisched.scheduler.framework.features import (
    OPPORTUNISTIC_BATCHING,
    POP_FROM_BACKOFF_Q,
    check_feature_gates,
)
from minisched.scheduler.framework.interface import (
    AsyncPreemptor,
    Closer,
    InformerUser,
    UsesPodDisruptionBudgets,
    WideningPreFilter,
)
from minisched.scheduler.framework.listers import StoreNamespaces
from minisched.scheduler.framework.profile import (
    PluginRef,
    PluginSet,
    Profile,
    default_profile,
    load_profiles,
)
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.framework.waiting_pods_map import WaitingPodsMap
from minisched.scheduler.handle import SchedulerHandle
from minisched.scheduler.queue import ClusterEvent, QueuedPodInfo, SchedulingQueue, priority_sort_less
from minisched.scheduler.schedule_one import _ScheduleOne
from minisched.scheduler.stats import SchedulerObserver, SchedulerStats
from minisched.scheduler.tracing import CycleTracer
from minisched.scheduler.workers import _DaemonWorkers, _Slots
from minisched.selectors import parse_label_selector

Object = dict[str, Any]

log = logging.getLogger(__name__)

HOUSEKEEPING_PERIOD = 1.0
DEFAULT_SHUTDOWN_TIMEOUT = 20.0
DECISIONS_BUDGET_BYTES = 4 * 2**20  # kept decision records: ~75 at 1,000 nodes, ~34 at 5,000


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


class Scheduler(_EventHandlers, _ScheduleOne):
    """A kube-scheduler-shaped scheduler over any `Cluster` (embedded or real).

        sched = Scheduler(cluster)
        sched.start()          # informers, the loop thread, the queue flushers
        ...
        sched.stop()           # graceful: finishes running bindings, flushes events

    or `sched.run(stop_event)` to block until the event is set. Tests can skip the loop thread
    and call `schedule_one()` themselves (after `start(loop=False)`).

    Its methods are spread over files as kube's Scheduler's are: _ScheduleOne (schedule_one.py)
    and _EventHandlers (eventhandlers.py) are mixins that only hold them, not objects of their own.
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
        # before the frameworks: plugins ask the handle for the informers they list from (kube's New(handle))
        # kube's pod informer drops managedFields (newPodInformer's trim); ours drops them from every
        # object the scheduler caches, since none of its readers needs them (how much that saves
        # depends on how many writers each object had: a few MiB at 15,000 once-written objects).
        # Its informers stream their initial state (a watch-list, as kube-scheduler 1.35's client-go
        # does by default): a list is held and decoded whole before the trim, which was the peak
        # of our memory at 5,000 nodes.
        self.factory = informer_factory or SharedInformerFactory(
            cluster, transform=strip_managed_fields, watch_list=True)
        self.handle = SchedulerHandle(cluster, self.recorder, self.clock, self.cache, self.factory)
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
        self._waiting: WaitingPodsMap = self.handle.waiting
        self._stop = self.handle.stopping  # plugins waiting in a binding cycle give up when it is set
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
        return any(p.hold(uid) for p in self._async_preemptors[fwk])

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
                    plugin.register_informers(self.factory, self.move)
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
        # a pod held at Permit holds a worker
        self._waiting.iterate(lambda waiting: waiting.reject("", "scheduler shutting down"))
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


class _AnyOf:
    """Set when any of its events is (the scheduler's own stop, or its caller's)."""

    def __init__(self, *events: threading.Event | None) -> None:
        self.events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


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
