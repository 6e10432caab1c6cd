"""The Scheduler's scheduling cycle and binding cycle (kube's pkg/scheduler/schedule_one.go):
pop a pod, run the framework over the nodes, handle no fit (PostFilter), assume, Reserve and
Permit; then, on a binding worker, wait at Permit, PreBind, Bind, PostBind, and handle a failed
binding. The decisions kept for explaining them and the metrics and trace hooks are here too.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from minisched.clock import Clock
from minisched.errors import ApiError, NotFound, is_conflict
from minisched.scheduler.cache import CacheError, SchedulerCache
from minisched.scheduler.eventhandlers import _scheduler_name
from minisched.scheduler.events import POD_REASON_SCHEDULER_ERROR, POD_REASON_UNSCHEDULABLE, EventRecorder
from minisched.scheduler.framework.cycle_state import BINDING_STATUS, CycleState
from minisched.scheduler.framework.decision import Decision
from minisched.scheduler.framework.interface import CountsVictims, WideningPreFilter
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo, PodSpecError
from minisched.scheduler.framework.waiting_pods_map import PodAtPermit, WaitingPodsMap, uid_of
from minisched.scheduler.handle import SchedulerHandle
from minisched.scheduler.queue import ASSIGNED_POD_DELETE, QueuedPodInfo, SchedulingQueue
from minisched.scheduler.stats import SchedulerStats
from minisched.scheduler.tracing import AttemptTrace, CycleTracer
from minisched.scheduler.workers import _DaemonWorkers, _Slots

Object = dict[str, Any]

log = logging.getLogger(__name__)

# A pod we could not even read waits for its own update (or the 5-minute flush), not for nodes.
INVALID_POD = "PodSpec"
# kube-apiserver's words when a Binding's metadata.resourceVersion is not the pod's any more
STALE_VERSION = "Precondition failed: ResourceVersion in precondition"


@dataclass
class _Assumed:
    """What the binding cycle needs from the scheduling cycle."""

    qpi: QueuedPodInfo
    info: PodInfo
    node: str
    state: CycleState
    framework: Framework
    waiting: PodAtPermit | None
    # only when annotating: a Decision holds node-length arrays (~0.3-0.6 MB at 5,000 nodes), and
    # up to max_bindings_in_flight bindings wait at once
    decision: Decision | None
    started: float  # perf_counter at the start of the scheduling cycle
    trace: AttemptTrace | None = None
    outcome: tuple[str, Status] = ("scheduled", Status.success())  # for the trace
    # the queue was told the attempt ended (kube's Done, past Permit): the binding cycle's last
    # Done is then a no-op, and skipping it spares a take of the queue's lock, which the loop waits on
    queue_done: bool = False


class _ScheduleOne:
    """The scheduling cycle and the binding cycle of the Scheduler (kube's schedule_one.go), a
    mixin of Scheduler: one class split over files as kube's Scheduler's methods are. What it
    reads of the Scheduler is declared here for the type checker and set in Scheduler.__init__."""

    frameworks: dict[str, Framework]
    queue: SchedulingQueue
    cache: SchedulerCache
    clock: Clock
    recorder: EventRecorder
    stats: SchedulerStats
    observer: Any
    tracer: CycleTracer | None
    pod_filter: Callable[[Object], bool] | None
    bind_guard: Callable[[], bool] | None
    fenced_binds: int
    annotate_decisions: bool
    keep_decisions: int
    keep_decisions_bytes: int
    decisions: collections.OrderedDict[str, Decision]
    _decision_sizes: dict[str, int]
    _decisions_bytes: int
    _tls: threading.local
    _swaps: dict[str, Framework]
    _wideners: weakref.WeakKeyDictionary[Framework, list[WideningPreFilter]]
    handle: SchedulerHandle
    _waiting: WaitingPodsMap
    _pool: _DaemonWorkers
    _binding_slots: _Slots
    _bindings_lock: threading.Lock
    _bindings_started: int
    _stop: threading.Event
    _cycle_pod: str | None
    _pod_informer: Any

    if TYPE_CHECKING:  # the Scheduler's and _EventHandlers' methods this half calls
        def _take_swaps(self) -> None: ...

        def pod_info(self, pod: Object) -> PodInfo: ...

        def _parsed(self, pod: Object) -> PodInfo | None: ...

        @staticmethod
        def _assigned(pod: Object) -> bool: ...

        def _owned(self, pod: Object) -> bool: ...

        def _binding_done(self) -> None: ...

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
        if result.node is None and result.status.is_rejected and (wideners := self._wideners.get(fwk)):
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
        status, waits = fwk.run_permit(state, info, node)
        waiting: PodAtPermit | None = None
        if status.is_wait:
            waiting = PodAtPermit(qpi.pod, waits, self.clock.monotonic())
            self._waiting.add(waiting)
        elif not status.is_success:
            fwk.run_unreserve(state, info, node)
            self.cache.forget_pod(qpi.pod)
            self._fail(qpi, fwk, info, status.message() or str(status), POD_REASON_UNSCHEDULABLE,
                       error=status.is_error, rejected_by=[status.plugin] if status.plugin else ())
            self._observe_attempt("error" if status.is_error else "unschedulable", started)
            return
        state.drop_scheduling_cycle_entries(fwk.binding_cycle_plugins)
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
        assumed = _Assumed(qpi, info, node, state, fwk, waiting, decision if self.annotate_decisions else None,
                           started, trace)
        try:
            self._pool.submit(self._binding_cycle, assumed)
        except RuntimeError:  # shut down meanwhile: nothing was sent
            self._binding_done()
            self._abandon_before_binding(qpi, fwk, info, state, node, waiting)

    def _abandon_before_binding(self, qpi: QueuedPodInfo, fwk: Framework, info: PodInfo, state: CycleState,
                                node: str, waiting: PodAtPermit | None) -> None:
        """Shutdown came between the decision and its binding: undo the assumption, send nothing."""
        self._waiting.remove(uid_of(qpi.pod))
        self.queue.binding_done(qpi)
        fwk.run_unreserve(state, info, node)
        self.cache.forget_pod(qpi.pod)
        log.info("shutting down: %s was not bound to %s and stays pending", qpi.key, node)

    # --- the binding cycle -------------------------------------------------------------------------------

    def allow_waiting_pod(self, uid: str, plugin: str) -> bool:
        """`plugin` allows the pod with this UID held at Permit (what a Permit plugin does through
        the handle); False when it is not waiting."""
        waiting = self.handle.get_waiting_pod(uid)
        if waiting is None:
            return False
        waiting.allow(plugin)
        return True

    def reject_waiting_pod(self, uid: str) -> bool:
        """Reject the pod with this UID held at Permit (kube's RejectWaitingPod); False when it is not waiting."""
        return self.handle.reject_waiting_pod(uid)

    def _binding_cycle(self, a: _Assumed) -> None:
        if a.trace is not None:
            self._tls.trace = a.trace
        try:
            self._bind(a)
        except Exception:
            log.exception("binding cycle for %s failed", a.qpi.key)
            self._binding_failed(a, Status.from_error(RuntimeError("binding cycle crashed")))
        finally:
            if not a.queue_done:
                self.queue.binding_done(a.qpi)  # kube's Done (if Permit did not end the attempt already)
            if a.trace is not None:
                self._tls.trace = None
                a.trace.binding_done(*a.outcome)
            self._binding_done()

    def _bind(self, a: _Assumed) -> None:
        if a.waiting is not None:
            # The wait holds one binding worker (kube holds a goroutine); the timeout is on the clock.
            while not a.waiting.done.wait(0.02):
                a.waiting.expire(self.clock.monotonic())  # each waiting plugin's timeout (kube's timers)
            self._waiting.remove(uid_of(a.qpi.pod))
            if not a.waiting.status.is_success:
                self._binding_failed(a, a.waiting.status)
                return
        # past Permit no failure makes the pod unschedulable: its attempt's events are not needed
        self.queue.binding_done(a.qpi)
        a.queue_done = True
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
        if a.decision is not None:
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


def _assumed_pod(a: _Assumed) -> Object:
    """The pod as it was assumed (on its node): what a forgotten assumption frees, for the hints
    (kube passes the assumed pod with EventAssignedPodDelete)."""
    pod = a.qpi.pod
    return {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": a.node}}


def _victims_total(fwk: Framework) -> int:
    """The pods the profile's PostFilter plugins preempted so far (those that count them)."""
    return sum(p.victims_total for p in fwk.points.post_filter if isinstance(p, CountsVictims))

