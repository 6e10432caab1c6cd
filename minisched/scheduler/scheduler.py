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
4. A failed bind gives the room back (forget). A 409 means someone else bound the pod or it is
   being deleted: nothing to retry. Any other error backs the pod off and it is tried again. A pod
   is only ever bound by the API server once: the binding subresource refuses a second one.
5. The informer then shows the pod bound and the cache confirms the assumption.

The loop is deliberately lean: a pod's JSON is never copied, its PodInfo is parsed once per
version when it is queued (as kube does), and the per-cycle snapshot is copy-on-write.

Where minisched differs from kube-scheduler, and why: one handler serves both views of the pod
informer (one listener thread instead of two); the queue moves unschedulable pods by a fixed
plugin -> event table rather than QueueingHints; nominated pods are added to the snapshot once
(kube filters twice, once with them added through the PreFilter extensions and once without,
which matters for InterPodAffinity and PodTopologySpread: minisched counts them everywhere);
a pod waiting at Permit holds one binding worker.

Metrics go through `observer`, any object with some of SchedulerMetrics' methods
(observe_attempt, observe_algorithm, observe_scheduled, observe_extension_point, set_pending,
observe_preemption); minisched.observability plugs Prometheus in there.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from minisched.clock import Clock, RealClock
from minisched.cluster.base import Cluster
from minisched.errors import ApiError, NotFound, is_conflict
from minisched.informer import ResourceEventHandlerFuncs, SharedInformerFactory, unwrap_tombstone
from minisched.meta import key_of
from minisched.resources import NAMESPACES, NODES, PODS, PRIORITY_CLASSES
from minisched.scheduler.cache import CacheError, SchedulerCache
from minisched.scheduler.events import (
    POD_REASON_SCHEDULER_ERROR,
    POD_REASON_UNSCHEDULABLE,
    EventRecorder,
)
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.decision import Decision
from minisched.scheduler.framework.profile import Profile, default_profile, load_profiles
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo, PodSpecError
from minisched.scheduler.plugins.inter_pod_affinity import StoreNamespaces
from minisched.scheduler.queue import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    NODE_ADD,
    PLUGIN_EVENTS,
    ClusterEvent,
    QueuedPodInfo,
    SchedulingQueue,
    node_update_events,
    priority_sort_less,
)
from minisched.scheduler.snapshot import NodeTable

Object = dict[str, Any]

log = logging.getLogger(__name__)

# A pod we could not even read waits for its own update (or the 5-minute flush), not for nodes.
INVALID_POD = "PodSpec"
HOUSEKEEPING_PERIOD = 1.0
API_DEFAULT_SCHEDULER = "default-scheduler"


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
    cycle_seconds: collections.deque[float] = field(default_factory=lambda: collections.deque(maxlen=200_000))

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100) of recent scheduling-cycle latencies, in seconds."""
        data = sorted(self.cycle_seconds)
        if not data:
            return 0.0
        idx = min(len(data) - 1, max(0, int(round(q / 100 * (len(data) - 1)))))
        return data[idx]


class SchedulerHandle:
    """What plugins get (framework Handle): the cluster, the snapshot of the current cycle, the event
    recorder, the clock, and a way to run the Filter plugins (for preemption's what-ifs)."""

    def __init__(self, cluster: Cluster, recorder: EventRecorder, clock: Clock, cache: SchedulerCache) -> None:
        self.cluster = cluster
        self.event_recorder = recorder
        self.clock = clock
        self._cache = cache
        self.framework: Framework | None = None
        self.current: NodeTable | None = None
        self.namespace_lister: Any = None  # namespace labels for namespaceSelector (InterPodAffinity)

    def snapshot(self) -> NodeTable:
        return self.current if self.current is not None else self._cache.snapshot()

    def run_filter_plugins(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        """The verdict of every Filter plugin on a one-node table."""
        assert self.framework is not None
        statuses = self.framework.run_filters(state, pod, nodes)
        return next(iter(statuses.values()), Status.success())

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: PodInfo, victim: PodInfo,
                                            node_name: str) -> Status:
        """PreFilter state as if `victim` were gone from `node_name` (preemption's dry run)."""
        assert self.framework is not None
        return self.framework.run_pre_filter_extension_remove_pod(state, pod, victim, node_name)


class _WaitingPod:
    """A pod held by a Permit plugin (kube's waitingPod) until allowed, rejected or `deadline`."""

    def __init__(self, deadline: float, timeout: float) -> None:
        self.done = threading.Event()
        self.status = Status.success()
        self.deadline = deadline
        self.timeout = timeout

    def allow(self) -> None:
        self.done.set()

    def reject(self, plugin: str, message: str) -> None:
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
        keep_decisions: int = 100,  # a record is ~270 KB at 5,000 nodes
        assumed_ttl: float = 30.0,
        registry: Mapping[str, Any] | None = None,
        seed: int | None = None,
    ) -> None:
        if profiles is not None and config is not None:
            raise ValueError("give either profiles or config, not both")
        if bind_workers < 1 or max_bindings_in_flight < 1:
            raise ValueError(f"bind_workers ({bind_workers}) and max_bindings_in_flight "
                             f"({max_bindings_in_flight}) must be at least 1")
        if config is not None:
            profiles = load_profiles(config)
        profiles = list(profiles or [default_profile()])
        self.cluster = cluster
        self.clock: Clock = clock or RealClock()
        self.observer = observer
        self.recorder = recorder or EventRecorder(cluster, clock=self.clock)
        self.cache = SchedulerCache(clock=self.clock, assumed_ttl=assumed_ttl, pod_info=self.pod_info)
        self.handle = SchedulerHandle(cluster, self.recorder, self.clock, self.cache)
        self.frameworks: dict[str, Framework] = {}
        for profile in profiles:
            if percentage_of_nodes_to_score is not None:
                profile = replace(profile, percentage_of_nodes_to_score=percentage_of_nodes_to_score)
            # No observer, no per-point timing calls at all (they cost a few µs per cycle each).
            fwk = Framework(profile, registry, handle=self.handle, seed=seed,
                            observer=self._observe_point if observer is not None else None)
            self.frameworks[profile.scheduler_name] = fwk
        if len(self.frameworks) != len(profiles):
            raise ValueError("two profiles have the same schedulerName")
        first = next(iter(self.frameworks.values()))
        self.handle.framework = first
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
            plugin_events={**PLUGIN_EVENTS, INVALID_POD: frozenset()},
        )
        for fwk in self.frameworks.values():
            for plugin in fwk.points.post_filter:
                if hasattr(plugin, "nominator"):  # DefaultPreemption clears lower nominations
                    plugin.nominator = self.queue
        self.factory = informer_factory or SharedInformerFactory(cluster)
        self.annotate_decisions = annotate_decisions
        self.keep_decisions = keep_decisions
        self.decisions: collections.OrderedDict[str, Decision] = collections.OrderedDict()
        self.stats = SchedulerStats()
        self._priority_classes: dict[str, int] = {}
        self._pool = ThreadPoolExecutor(max_workers=bind_workers, thread_name_prefix="bind")
        self._binding_slots = threading.BoundedSemaphore(max_bindings_in_flight)
        self._bindings_lock = threading.Lock()
        self._bindings_in_flight = 0
        self._bindings_idle = threading.Condition(self._bindings_lock)
        self._waiting: dict[str, _WaitingPod] = {}
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._started = False
        self._pod_informer: Any = None

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
        return not self._assigned(pod) and self.responsible_for(pod) and not self._terminal(pod)

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
        return None if status.is_success else (status.plugin or "PreEnqueue")

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
        elif self._is_assigned_live(pod):
            self.cache.add_pod(pod)
            self.queue.move_if_any_interested(ASSIGNED_POD_ADD)  # a pod some affinity term waits for

    def _on_pod_update(self, old: Object, new: Object) -> None:
        was_pending, now_pending = self._is_pending_for_us(old), self._is_pending_for_us(new)
        if was_pending and now_pending:
            if not self.cache.is_assumed(new):  # a status write of ours while binding: no new try
                self.queue.update(old, new, self._parsed(new))
        elif now_pending:
            self.queue.add(new, self._parsed(new))
        elif was_pending:
            self._pending_gone(old)
        was_assigned, now_assigned = self._is_assigned_live(old), self._is_assigned_live(new)
        if was_assigned and now_assigned:
            self.cache.update_pod(old, new)
            if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
                self.queue.move_if_any_interested(ASSIGNED_POD_UPDATE)  # a label an affinity term reads
        elif now_assigned:
            self.cache.add_pod(new)  # the binding landed: confirms our assumption
            self.queue.move_if_any_interested(ASSIGNED_POD_ADD)
        elif was_assigned:
            self._assigned_gone(old)  # finished (Succeeded/Failed): its room is free

    def _on_pod_delete(self, obj: Any) -> None:
        pod = unwrap_tombstone(obj)
        if pod is None:
            return
        if self._is_pending_for_us(pod):
            self._pending_gone(pod)
        elif self._is_assigned_live(pod):
            self._assigned_gone(pod)

    def _pending_gone(self, pod: Object) -> None:
        self.queue.delete(pod)
        waiting = self._waiting.get(key_of(pod))
        if waiting is not None:
            waiting.reject("", "pod deleted while waiting on permit")

    def _assigned_gone(self, pod: Object) -> None:
        self.cache.remove_pod(pod)
        self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)

    def _on_node_add(self, node: Object, _initial: bool = False) -> None:
        self.cache.add_node(node)
        self.queue.move_all_to_active_or_backoff(NODE_ADD)

    def _on_node_update(self, old: Object, new: Object) -> None:
        self.cache.update_node(old, new)
        for event in node_update_events(old, new):
            self.queue.move_all_to_active_or_backoff(event)

    def _on_node_delete(self, obj: Any) -> None:
        node = unwrap_tombstone(obj)
        if node is not None:
            self.cache.remove_node(node)

    def move(self, event: ClusterEvent) -> int:
        """Tell the queue about a cluster event by hand (what the handlers do)."""
        return self.queue.move_all_to_active_or_backoff(event)

    # --- lifecycle --------------------------------------------------------------------------------------

    def start(self, *, loop: bool = True, sync_timeout: float = 60.0) -> None:
        """Start informers (and wait for their first lists), the queue flushers, housekeeping and,
        with `loop`, the scheduling loop thread."""
        if self._started:
            return
        self._started = True
        pods = self.factory.informer_for(PODS)
        nodes = self.factory.informer_for(NODES)
        # kube-scheduler watches namespaces for the namespaceSelector of pod affinity terms
        self.handle.namespace_lister = StoreNamespaces(self.factory.informer_for(NAMESPACES, namespace=None).store)
        self._pod_informer = pods
        # One handler for both views of the pod informer (kube registers two filtered ones): one
        # listener thread instead of two, and a pending->bound transition handled in one place.
        pods.add_event_handler(ResourceEventHandlerFuncs(self._on_pod_add, self._on_pod_update, self._on_pod_delete))
        nodes.add_event_handler(ResourceEventHandlerFuncs(self._on_node_add, self._on_node_update, self._on_node_delete))
        self.factory.start()
        synced = self.factory.wait_for_cache_sync(sync_timeout)
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

    def _spawn(self, target: Any, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def run(self, stop: threading.Event) -> None:
        """Schedule until `stop` is set, then shut down gracefully."""
        self.start()
        stop.wait()
        self.stop()

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful shutdown: no new cycles, running bindings finish, events are flushed."""
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        self.queue.close()
        for t in self._threads:
            t.join(timeout)
        self._pool.shutdown(wait=True)
        self.recorder.flush(timeout)
        self.recorder.stop(timeout)
        self.factory.shutdown(timeout)

    def close(self) -> None:
        self.stop()

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
        deadline = self.clock.monotonic() + seconds
        with self._wake:
            while not self._stop.is_set():
                left = deadline - self.clock.monotonic()
                if left <= 0:
                    return
                self.clock.wait(self._wake, left)

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
        try:
            self._scheduling_cycle(qpi)
        except Exception as err:  # a bug must cost one attempt, not the pod: it backs off and retries
            log.exception("scheduling cycle for %s failed", qpi.key)
            self.stats.errors += 1
            self.queue.add_unschedulable(qpi, error=True)
            self.recorder.failed_scheduling(qpi.pod, f"scheduler error: {err}")
        return True

    def _scheduling_cycle(self, qpi: QueuedPodInfo) -> None:
        started = time.perf_counter()
        pod = qpi.pod
        fwk = self.frameworks.get(_scheduler_name(pod))
        if fwk is None or (pod.get("metadata") or {}).get("deletionTimestamp") or self.cache.is_assumed(qpi.key):
            self.queue.done(qpi.key)  # not ours any more, being deleted, or already on its way
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
        placed = [(node, p) for node, p in self.queue.nominated_infos()
                  if p.priority >= info.priority and p.key != info.key]
        if placed:
            snapshot = snapshot.with_pods(placed)
        self.handle.current = snapshot
        self.handle.framework = fwk
        try:
            t_algo = time.perf_counter()
            result = fwk.schedule(info, snapshot, state=state)
            self._observe("observe_algorithm", time.perf_counter() - t_algo)
            self._keep_decision(result.decision)
            if result.node is None:
                self._handle_no_fit(qpi, fwk, info, state, result)
                self._observe_attempt("unschedulable" if result.status.is_rejected else "error", started)
                return
            self._assume_and_bind(qpi, fwk, info, state, result.node, result.decision, started)
        finally:
            self.handle.current = None

    def _handle_no_fit(self, qpi: QueuedPodInfo, fwk: Framework, info: PodInfo, state: CycleState,
                       result: Any) -> None:
        status: Status = result.status
        diagnosis = result.diagnosis
        if not status.is_rejected or diagnosis is None:
            self._fail(qpi, fwk, info, status.message() or str(status), POD_REASON_SCHEDULER_ERROR, error=True)
            return
        nominated: str | None = None
        if fwk.points.post_filter:
            before = sum(getattr(p, "victims_total", 0) for p in fwk.points.post_filter)
            nominated, pf_status = fwk.run_post_filter(state, info, diagnosis)
            if pf_status.is_success and nominated:
                victims = sum(getattr(p, "victims_total", 0) for p in fwk.points.post_filter) - before
                self.stats.preemptions += 1
                self.stats.victims += victims
                self._observe("observe_preemption", victims)
            elif pf_status.is_error:
                log.warning("preemption for %s failed: %s", info.key, pf_status)
        self._fail(qpi, fwk, info, diagnosis.message(), POD_REASON_UNSCHEDULABLE,
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
        if current is None or self._assigned(current):
            self.queue.done(qpi.key)  # deleted, or bound by someone else meanwhile
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
            waiting = _WaitingPod(self.clock.monotonic() + wait, wait)
            self._waiting[qpi.key] = waiting
        elif not status.is_success:
            fwk.run_unreserve(state, info, node)
            self.cache.forget_pod(qpi.pod)
            self._fail(qpi, fwk, info, status.message() or str(status), POD_REASON_UNSCHEDULABLE,
                       error=status.is_error, rejected_by=[status.plugin] if status.plugin else ())
            self._observe_attempt("error" if status.is_error else "unschedulable", started)
            return
        self.queue.done(qpi.key)
        if self.queue.nominated_node_of(qpi.key) is not None:
            self.queue.delete_nominated(qpi.pod)
        self.stats.scheduled += 1
        self._observe_attempt("scheduled", started, cycle_only=True)
        self._binding_slots.acquire()  # bounded: a slow API server slows the loop instead of piling up
        with self._bindings_lock:
            self._bindings_in_flight += 1
        self._pool.submit(self._binding_cycle, _Assumed(qpi, info, node, state, fwk, waiting, decision, started))

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
        try:
            self._bind(a)
        except Exception:
            log.exception("binding cycle for %s failed", a.qpi.key)
            self._binding_failed(a, Status.from_error(RuntimeError("binding cycle crashed")))
        finally:
            with self._bindings_lock:
                self._bindings_in_flight -= 1
                if not self._bindings_in_flight:
                    self._bindings_idle.notify_all()
            self._binding_slots.release()

    def _bind(self, a: _Assumed) -> None:
        if a.waiting is not None:
            # The wait holds one binding worker (kube holds a goroutine); the timeout is on the clock.
            while not a.waiting.done.wait(0.02):
                if self.clock.monotonic() >= a.waiting.deadline:
                    a.waiting.reject("", f"rejected due to timeout after waiting {a.waiting.timeout:g}s at permit")
            self._waiting.pop(a.qpi.key, None)
            if not a.waiting.status.is_success:
                self._binding_failed(a, a.waiting.status)
                return
        status = a.framework.run_pre_bind(a.state, a.info, a.node)
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
        self._observe("observe_attempt", "unschedulable" if status.is_rejected else "error",
                      time.perf_counter() - a.started)
        a.framework.run_unreserve(a.state, a.info, a.node)
        self.cache.forget_pod(a.qpi.pod)
        err = status.error
        if isinstance(err, ApiError) and is_conflict(err):
            # Someone else bound it (or it is being deleted): the informer will tell the cache.
            with self._bindings_lock:
                self.stats.bind_conflicts += 1
            log.info("binding %s to %s: %s; not retrying", a.qpi.key, a.node, err)
            return
        if isinstance(err, NotFound):
            return  # deleted meanwhile
        with self._bindings_lock:
            self.stats.bind_errors += 1
        current = self._current_pod(a.qpi.key)
        if current is None or self._assigned(current):
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
        self.decisions[decision.pod] = decision
        self.decisions.move_to_end(decision.pod)
        while len(self.decisions) > self.keep_decisions:
            self.decisions.popitem(last=False)

    def _observe_attempt(self, result: str, started: float, *, cycle_only: bool = False) -> None:
        """The end of a scheduling cycle (its latency goes to stats). The observer's attempt metric
        is kube's: algorithm + binding, so a decided pod is reported when its binding ends."""
        seconds = time.perf_counter() - started
        self.stats.cycle_seconds.append(seconds)
        if not cycle_only:
            self._observe("observe_attempt", result, seconds)

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


def _scheduler_name(pod: Object) -> str:
    """spec.schedulerName; the API server fills in "default-scheduler" when a pod names none."""
    return str((pod.get("spec") or {}).get("schedulerName") or API_DEFAULT_SCHEDULER)


__all__ = ["Scheduler", "SchedulerHandle", "SchedulerObserver", "SchedulerStats"]
