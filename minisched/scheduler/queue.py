"""The scheduling queue: which pending pod the scheduler tries next, and when a failed one comes back.

kube-scheduler's PriorityQueue (pkg/scheduler/internal/queue/scheduling_queue.go) in Python. A
pending pod is in exactly one of four places:

- activeQ: a heap ordered by the profile's QueueSort (PrioritySort: higher priority first, then
  earlier arrival). `pop()` takes its head.
- backoffQ: pods that failed and wait out their backoff (1 s, doubling per failure, 10 s cap;
  counted as kube counts it: the consecutive errors if the last attempt was an error, else the
  rejections). A flusher moves the expired ones to activeQ every second. With kube's
  SchedulerPopFromBackoffQ (on by default since 1.33; the Scheduler's feature gate, a queue's
  `pop_from_backoff`, on by default too), `pop()` takes the rejected pod whose backoff ends first when activeQ is
  empty (a scheduler with nothing else to do need not wait), and backoff ends are truncated to
  1-second windows ordered inside by QueueSort, which the flusher moves whole (KEP-5142). Pods
  that failed with an error wait their backoff out.
- unschedulable: pods that no node could take. They stay until a cluster event that could help
  them moves them back, or until they have waited 5 minutes (checked every 30 s). Which events
  help is the plugins' to say: each profile's queueing-hint map (event -> [(plugin, hint)], built
  by the framework from the plugins' `events_to_register()`) is asked for the plugins that
  rejected the pod, and the pod moves if one of them registered the event and its hint, given
  the changed object before and after, answers QUEUE (no hint: QUEUE), as kube's
  isPodWorthRequeuing. A queue built without hint maps moves a rejected pod on every event.
- gated: pods that a PreEnqueue check holds back (spec.schedulingGates, a plugin's PreEnqueue).
  An update, an event their gating plugin registered, `activate`, or the 5-minute flush when the
  gating plugin registered every event, lets them out as kube lets its gated pods out of
  unschedulablePods: to backoffQ while the backoff of a failed attempt lasts (a pod held on its
  way back after one), else to activeQ (a pod gated since it arrived never failed: no backoff);
  `activate` to activeQ either way. PreEnqueue is asked on arrival and, as kube's moveToActiveQ and
  moveToBackoffQ ask it, on every move into activeQ but out of backoffQ with
  SchedulerPopFromBackoffQ, and with that gate on every move into backoffQ (so that `pop()` never
  takes from backoffQ a pod PreEnqueue would hold): a pod it holds on the way goes to, or stays
  with, the gated pods (the table's GATE_CLOSED).

A pod being tried is "in flight" and in none of them. Each attempt has one record (`_Attempt`,
kube's inFlightPods entry), from `pop()` until the attempt ends: its place in the log of the
cluster events that arrive while any pod is in flight (kube's inFlightEvents), the pod's own
updates during the attempt (kube's addEventsIfPodInFlight), and whether it was activated meanwhile.
When a pod's attempt fails, it goes to backoffQ rather than to unschedulable if one of those
events would have moved it (kube's determineSchedulingHintForInFlightPod): that event may be what
it needed. The record outlives the IN_FLIGHT state: it ends after the pod's binding cycle passed
Permit, or when the pod comes back (`done`, `add_unschedulable`, `requeue_after_bind_failure`), so
events during its wait at Permit count for a pod that Permit rejects. Events that no running
attempt can still ask about are dropped.

Every wait and every timestamp uses a `Clock`, so tests drive it with `VirtualClock`.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from minisched.clock import Clock, RealClock
from minisched.meta import key_of
from minisched.scheduler.events import DECISION_ANNOTATION
from minisched.scheduler.framework.cluster_event import (
    ASSIGNED_POD_ADD as ASSIGNED_POD_ADD,
)
from minisched.scheduler.framework.cluster_event import (
    ASSIGNED_POD_DELETE as ASSIGNED_POD_DELETE,
)
from minisched.scheduler.framework.cluster_event import (
    ASSIGNED_POD_UPDATE as ASSIGNED_POD_UPDATE,
)
from minisched.scheduler.framework.cluster_event import (
    NODE_ADD as NODE_ADD,
)
from minisched.scheduler.framework.cluster_event import (
    NODE_ALLOCATABLE_CHANGE as NODE_ALLOCATABLE_CHANGE,
)
from minisched.scheduler.framework.cluster_event import (
    NODE_CONDITION_CHANGE as NODE_CONDITION_CHANGE,
)
from minisched.scheduler.framework.cluster_event import (
    NODE_DELETE as NODE_DELETE,
)
from minisched.scheduler.framework.cluster_event import (
    NODE_LABEL_CHANGE as NODE_LABEL_CHANGE,
)
from minisched.scheduler.framework.cluster_event import (
    NODE_TAINT_CHANGE as NODE_TAINT_CHANGE,
)
from minisched.scheduler.framework.cluster_event import (
    QUEUE,
    UNSCHEDULABLE_TIMEOUT,
    UNSCHEDULED_POD_UPDATE,
    WILDCARD_EVENT,
    ClusterEvent,
    QueueingHintMap,
    RegisteredHint,
    ask_hint,
)
from minisched.scheduler.framework.cluster_event import (
    node_update_events as node_update_events,
)
from minisched.scheduler.framework.features import DEFAULTS as FEATURE_DEFAULTS
from minisched.scheduler.framework.features import POP_FROM_BACKOFF_Q
from minisched.scheduler.lifecycle import QUEUE_TRANSITIONS, QueueEvent, QueueState, Verdict, step

Object = dict[str, Any]

DEFAULT_POD_INITIAL_BACKOFF = 1.0
DEFAULT_POD_MAX_BACKOFF = 10.0
DEFAULT_MAX_IN_UNSCHEDULABLE = 300.0  # kube's podMaxInUnschedulablePodsDuration: 5 minutes
BACKOFF_FLUSH_PERIOD = 1.0
# kube's backoffQOrderingWindowDuration (KEP-5142), with SchedulerPopFromBackoffQ: backoff expiries
# are truncated to whole windows, pods in one window are ordered as activeQ orders them, and the
# flusher ticks on window boundaries so that it moves a whole window at once
BACKOFF_ORDERING_WINDOW = 1.0
UNSCHEDULABLE_FLUSH_PERIOD = 30.0

QUEUE_ACTIVE = "active"
QUEUE_BACKOFF = "backoff"
QUEUE_UNSCHEDULABLE = "unschedulable"
QUEUE_GATED = "gated"


@dataclass(eq=False)
class QueuedPodInfo:
    """A pending pod and its history in the queue (kube's framework.QueuedPodInfo)."""

    pod: Object
    key: str
    timestamp: float  # when it last entered the queue; PrioritySort breaks ties on it
    attempts: int = 0
    # kube's UnschedulableCount and ConsecutiveErrorsCount: the backoff doubles with the errors in
    # a row when the last attempt was an error, else with the rejections
    unschedulable_count: int = 0
    consecutive_errors_count: int = 0
    initial_attempt_timestamp: float | None = None
    # Plugins that rejected it in its last attempt; empty after an error (then any event moves it).
    unschedulable_plugins: set[str] = field(default_factory=set)
    gated_by: str | None = None  # the PreEnqueue plugin holding it back, if any
    # Whatever the scheduler attaches once per pod (e.g. the parsed PodInfo), kept across attempts.
    pod_info: Any = None
    scheduling_cycle: int = 0
    priority: int = 0  # resolved when queued (spec.priority, or the PriorityClass by name)


Less = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
PreEnqueue = Callable[[Object], str | None]
PriorityOf = Callable[[Object], int]
ProfileOf = Callable[[Object], str]

DEFAULT_SCHEDULER_NAME = "default-scheduler"


def scheduler_name_of(pod: Object) -> str:
    """The profile a pod asks for (spec.schedulerName; the API server defaults it)."""
    return str((pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER_NAME)


def spec_priority(pod: Object) -> int:
    """spec.priority, which the API server's Priority admission fills in from priorityClassName."""
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def priority_sort_less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """PrioritySort: higher spec.priority first, then the one queued earlier."""
    pa, pb = a.priority, b.priority
    return pa > pb or (pa == pb and a.timestamp < b.timestamp)


def scheduling_gates_pre_enqueue(pod: Object) -> str | None:
    """SchedulingGates' PreEnqueue: a pod with spec.schedulingGates waits."""
    return "SchedulingGates" if (pod.get("spec") or {}).get("schedulingGates") else None


@dataclass(eq=False)
class _Attempt:
    """One attempt at a pod, from `pop()` until it ends (kube's inFlightPods entry): after its
    binding cycle passed Permit, or when the pod comes back to the queue. The queue's whole memory
    of a pod in flight and of what happened during its attempt."""

    qpi: QueuedPodInfo
    # its place in the queue's event log: the cluster events logged after it are its events
    sequence: int
    scheduling_cycle: int
    # in the queue's IN_FLIGHT state: its scheduling cycle runs, and it was neither assumed nor
    # deleted (the attempt outlives that: its binding cycle, or a deleted pod's cycle, ends it)
    in_flight: bool = True
    # activated while in flight (kube's EventForceActivate recorded for it): the attempt's failure
    # then retries it (backoffQ, as kube's queueAfterBackoff) instead of parking it
    activate_when_done: bool = False
    # the pod's own spec changes during the attempt (kube's addEventsIfPodInFlight), each with its
    # sequence, so that they interleave with the cluster events in the order they came
    own_updates: list[tuple[int, Object | None, Object]] = field(default_factory=list)


class _Entry:
    """A heap slot; `removed` marks lazily deleted slots."""

    __slots__ = ("qpi", "removed")

    def __init__(self, qpi: QueuedPodInfo) -> None:
        self.qpi = qpi
        self.removed = False


class _LessKey:
    """The sort key of a pod in a heap ordered by any `less`. Two keys are never equal (identity),
    so a heap's tuple comparison always asks `less`."""

    __slots__ = ("qpi", "less")

    def __init__(self, qpi: QueuedPodInfo, less: Less) -> None:
        self.qpi = qpi
        self.less = less

    def __lt__(self, other: _LessKey) -> bool:
        return self.less(self.qpi, other.qpi)


class _Heap:
    """A heap with removal by key (lazy: removed slots are skipped when they reach the top). Its
    items are (sort key, push count, slot). Under PrioritySort the sort key is the tuple
    (-priority, timestamp), compared in C: a pop makes ~2·log2(n) comparisons, each of them a
    Python call when `less` decides, and this heap is popped every scheduling cycle. Ties go to
    the pod pushed first."""

    def __init__(self, less: Less) -> None:
        self._less = less
        self._by_priority = less is priority_sort_less
        self._heap: list[tuple[Any, int, _Entry]] = []
        self._by_key: dict[str, _Entry] = {}
        self._pushes = itertools.count()

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def get(self, key: str) -> QueuedPodInfo | None:
        entry = self._by_key.get(key)
        return entry.qpi if entry else None

    def push(self, qpi: QueuedPodInfo) -> None:
        self.remove(qpi.key)
        entry = _Entry(qpi)
        self._by_key[qpi.key] = entry
        # captured now: a queued pod's priority and timestamp change only on its way back in (a push)
        key = (-qpi.priority, qpi.timestamp) if self._by_priority else _LessKey(qpi, self._less)
        heapq.heappush(self._heap, (key, next(self._pushes), entry))

    def remove(self, key: str) -> QueuedPodInfo | None:
        entry = self._by_key.pop(key, None)
        if entry is None:
            return None
        entry.removed = True
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._by_key):
            self._heap = [item for item in self._heap if not item[2].removed]
            heapq.heapify(self._heap)
        return entry.qpi

    def peek(self) -> QueuedPodInfo | None:
        heap = self._heap
        while heap and heap[0][2].removed:
            heapq.heappop(heap)
        return heap[0][2].qpi if heap else None

    def pop(self) -> QueuedPodInfo | None:
        while self._heap:
            entry = heapq.heappop(self._heap)[2]
            if not entry.removed:
                del self._by_key[entry.qpi.key]
                return entry.qpi
        return None

    def items(self) -> Iterator[QueuedPodInfo]:
        return (e.qpi for e in list(self._by_key.values()))


class _BackoffQueues:
    """kube's backoffQueue: two heaps by backoff expiry, one for pods rejected by plugins (which
    `pop()` may take early when activeQ is empty; `rejected_less` may break ties by priority) and
    one for pods that failed with an error (which always wait their backoff out), seen from
    outside as one queue."""

    def __init__(self, rejected_less: Less, errored_less: Less) -> None:
        self.rejected = _Heap(rejected_less)
        self.errored = _Heap(errored_less)

    def __len__(self) -> int:
        return len(self.rejected) + len(self.errored)

    def __contains__(self, key: str) -> bool:
        return key in self.rejected or key in self.errored

    def get(self, key: str) -> QueuedPodInfo | None:
        return self.rejected.get(key) or self.errored.get(key)

    def push(self, qpi: QueuedPodInfo) -> None:
        self.remove(qpi.key)
        # kube's backoffQueue.add: a pod no plugin rejected failed with an error
        (self.rejected if qpi.unschedulable_plugins else self.errored).push(qpi)

    def remove(self, key: str) -> QueuedPodInfo | None:
        return self.rejected.remove(key) or self.errored.remove(key)

    def peek(self) -> QueuedPodInfo | None:
        """The pod whose backoff ends first, of either heap."""
        a, b = self.rejected.peek(), self.errored.peek()
        if a is None or b is None:
            return a or b
        return b if self.errored._less(b, a) else a

    def items(self) -> Iterator[QueuedPodInfo]:
        yield from self.rejected.items()
        yield from self.errored.items()


class SchedulingQueue:
    """kube-scheduler's PriorityQueue. Thread-safe; `pop()` blocks until a pod is active."""

    def __init__(
        self,
        *,
        less: Less = priority_sort_less,
        pre_enqueue: Iterable[PreEnqueue] = (scheduling_gates_pre_enqueue,),
        clock: Clock | None = None,
        initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
        max_backoff: float = DEFAULT_POD_MAX_BACKOFF,
        max_in_unschedulable: float = DEFAULT_MAX_IN_UNSCHEDULABLE,
        queueing_hints: Mapping[str, QueueingHintMap] | None = None,
        profile_of: ProfileOf = scheduler_name_of,
        priority_of: PriorityOf = spec_priority,
        transitions: dict[tuple[QueueState, QueueEvent], QueueState | Verdict] | None = None,
        pop_from_backoff: bool = FEATURE_DEFAULTS[POP_FROM_BACKOFF_Q],
    ) -> None:
        """`queueing_hints`: profile name -> its hint map (Framework.queueing_hints); None: every
        event moves every rejected pod. `profile_of`: a pod's profile (its schedulerName).
        `pop_from_backoff`: kube's SchedulerPopFromBackoffQ gate, on by default as kube's is (and
        as a Scheduler's feature gates are)."""
        if initial_backoff <= 0 or max_backoff < initial_backoff:
            raise ValueError(
                f"backoff needs 0 < initial ({initial_backoff}) <= max ({max_backoff})"
            )
        self.clock: Clock = clock or RealClock()
        self._less = less
        self._priority_of = priority_of
        self._pre_enqueue = list(pre_enqueue)
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self._hints: dict[str, QueueingHintMap] | None = None if queueing_hints is None else dict(queueing_hints)
        self._profile_of = profile_of
        # (profile, event) -> the registrations that match it: asked per parked pod per event
        self._matching: dict[tuple[str, ClusterEvent], list[RegisteredHint]] = {}
        self.pop_from_backoff = pop_from_backoff
        # where a pod goes on each event (minisched.scheduler.lifecycle); a test may plant a bug here
        self._transitions = QUEUE_TRANSITIONS if transitions is None else transitions
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._active = _Heap(less)
        # kube's lessBackoffCompletedWithPriority for rejected pods when popping from backoffQ
        self._backoff = _BackoffQueues(
            self._backoff_less_with_priority if pop_from_backoff else self._backoff_less, self._backoff_less)
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._gated: dict[str, QueuedPodInfo] = {}
        # asked (under the queue's lock) before an unschedulable pod moves; True keeps it parked
        self.hold: Callable[[QueuedPodInfo], bool] | None = None
        self._scheduling_cycle = 0
        # kube's inFlightPods: pod key -> its running attempt (the newest, if it was popped again
        # while an older attempt's binding cycle ran), in the order they began, so the oldest is first
        self._attempts: dict[str, _Attempt] = {}
        # kube's inFlightEvents: (sequence, event, object before, after) for every cluster event
        # received while any attempt runs, kept until no attempt older than it is left
        self._sequence = 0
        self._event_log: deque[tuple[int, ClusterEvent, Object | None, Object | None]] = deque()
        self._closed = False
        # nominated node name -> {pod key: QueuedPodInfo}; see nominate().
        self._nominated: dict[str, dict[str, tuple[Object, Any]]] = {}
        self._nominated_node_of: dict[str, str] = {}
        self._flusher: threading.Thread | None = None
        self._flush_cond = threading.Condition()

    # --- ordering -----------------------------------------------------------------------------

    def backoff_duration(self, attempts: int) -> float:
        """initial × 2^(attempts-1), capped (kube's calculateBackoffDuration)."""
        duration = self.initial_backoff
        for _ in range(1, attempts):
            duration *= 2
            if duration >= self.max_backoff:
                return self.max_backoff
        return min(duration, self.max_backoff)

    @staticmethod
    def backoff_count(qpi: QueuedPodInfo) -> int:
        """kube's getBackoffTime count: the consecutive errors if the last attempt was one, else
        the rejections; 0 for a pod that never failed (no backoff)."""
        return qpi.consecutive_errors_count or qpi.unschedulable_count

    def _align_to_window(self, t: float) -> float:
        """kube's alignToWindow: the start of `t`'s ordering window (`t` itself without the gate)."""
        if not self.pop_from_backoff:
            return t
        return math.floor(t / BACKOFF_ORDERING_WINDOW) * BACKOFF_ORDERING_WINDOW

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        """kube's getBackoffTime: when the backoff ends, truncated to its ordering window with
        SchedulerPopFromBackoffQ (the pod then completes it once that window has passed)."""
        count = self.backoff_count(qpi)
        return self._align_to_window(qpi.timestamp + self.backoff_duration(count)) if count else qpi.timestamp

    def _backoff_less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self.backoff_expiry(a) < self.backoff_expiry(b)

    def _backoff_less_with_priority(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """kube's lessBackoffCompletedWithPriority: in one window, as activeQ would order them, so
        that pop() takes from backoffQ the pod activeQ would have given first."""
        ea, eb = self.backoff_expiry(a), self.backoff_expiry(b)
        return ea < eb if ea != eb else self._less(a, b)

    def _is_backing_off(self, qpi: QueuedPodInfo, now: float | None = None) -> bool:
        """kube's isPodBackingoff: until its backoff's end has passed, not merely been reached; with
        the gate, while that end is in the current window."""
        if self.backoff_count(qpi) == 0:
            return False
        now = self.clock.monotonic() if now is None else now
        return self.backoff_expiry(qpi) >= self._align_to_window(now)

    # --- the transition table at work -------------------------------------------------------------

    def _state_locked(self, key: str) -> QueueState:
        """Where the pod is: its state is the container that holds it, nothing kept beside."""
        if self._in_flight(key) is not None:
            return QueueState.IN_FLIGHT
        if key in self._active:
            return QueueState.ACTIVE
        if key in self._backoff:
            return QueueState.BACKOFF
        if key in self._unschedulable:
            return QueueState.UNSCHEDULABLE
        if key in self._gated:
            return QueueState.GATED
        return QueueState.ABSENT

    def _fire(self, qpi: QueuedPodInfo, event: QueueEvent, source: QueueState | None = None) -> QueueState:
        """Move the pod as QUEUE_TRANSITIONS says for `event` in its current state (IllegalTransition
        when the table refuses it: a bug in the caller). Returns the new state."""
        key = qpi.key
        state = self._state_locked(key) if source is None else source
        target = step("SchedulingQueue", self._transitions, state, event, key)
        if target is state:
            return state
        if ((target is QueueState.ACTIVE or target is QueueState.BACKOFF)
                and self._asks_pre_enqueue(state, event, target) and not self._run_pre_enqueue(qpi)):
            # held on the way: GATED instead (or, leaving GATED, it stays)
            target = step("SchedulingQueue", self._transitions, state, QueueEvent.GATE_CLOSED, key)
            if target is state:
                return state
        if state is QueueState.IN_FLIGHT:
            self._attempts[key].in_flight = False  # its attempt goes on until it ends (see _end_attempt_record)
        elif state is QueueState.ACTIVE:
            self._active.remove(key)
        elif state is QueueState.BACKOFF:
            self._backoff.remove(key)
        elif state is QueueState.UNSCHEDULABLE:
            del self._unschedulable[key]
        elif state is QueueState.GATED:
            del self._gated[key]
        if target is QueueState.IN_FLIGHT:
            self._begin_attempt(qpi)
        elif target is QueueState.ACTIVE:
            self._active.push(qpi)
            self._cond.notify()
        elif target is QueueState.BACKOFF:
            self._backoff.push(qpi)
            if self.pop_from_backoff:
                self._cond.notify()  # pop() may take it when activeQ is empty
        elif target is QueueState.UNSCHEDULABLE:
            self._unschedulable[key] = qpi
        elif target is QueueState.GATED:
            self._gated[key] = qpi
        return target

    def _asks_pre_enqueue(self, state: QueueState, event: QueueEvent, target: QueueState) -> bool:
        """Does a pod moving from `state` to `target` pass PreEnqueue first? As kube: every way into
        activeQ (moveToActiveQ) but out of backoffQ with SchedulerPopFromBackoffQ, which asked on
        the way in (moveToBackoffQ), a gated pod's way out included; an arriving pod was just asked."""
        if event is QueueEvent.ARRIVE_READY:
            return False
        if target is QueueState.ACTIVE:
            return not (state is QueueState.BACKOFF and self.pop_from_backoff)
        return target is QueueState.BACKOFF and self.pop_from_backoff

    def _run_pre_enqueue(self, qpi: QueuedPodInfo) -> bool:
        """kube's runPreEnqueuePlugins: does every PreEnqueue check let the pod through? The one that
        holds it is its gating plugin and, as kube's runPreEnqueuePlugin records it, one of the
        plugins that rejected it: let out into backoffQ later, it waits with the rejected pods
        (kube's podBackoffQ, which `pop()` may take from early), not with those that failed with
        an error."""
        qpi.gated_by = self._gate(qpi.pod)
        if qpi.gated_by is None:
            return True
        qpi.unschedulable_plugins.add(qpi.gated_by)
        return False

    def _let_out_locked(self, qpi: QueuedPodInfo, *, activate: bool = False) -> bool:
        """A gated pod may go (an update, an event its gating plugin registered, the flush): as
        kube's requeuePodWithQueueingStrategy sends it, to backoffQ while the backoff of a failed
        attempt lasts (isPodBackingoff; a pod gated since it arrived never failed and has none),
        else to activeQ; `activate` to activeQ either way (kube's Activate: moveToActiveQ). PreEnqueue
        is asked on the way as on any move (kube's moveToActiveQ, and moveToBackoffQ with
        SchedulerPopFromBackoffQ); held, the pod stays. Returns whether it left the gated pods."""
        backing_off = not activate and self._is_backing_off(qpi)
        event = QueueEvent.GATE_OPENED_BACKING_OFF if backing_off else QueueEvent.GATE_OPENED
        return self._fire(qpi, event, QueueState.GATED) is not QueueState.GATED

    # --- pods arriving and changing ------------------------------------------------------------

    def add(self, pod: Object, info: Any = None) -> None:
        """A new pending pod (the informer saw it created, or it became pending). `info`: whatever
        the scheduler parsed from it (kube parses a pod once, when it is queued)."""
        key = key_of(pod)
        with self._lock:
            self._nominate_from_status_locked(key, pod, info)
            if self._in_flight(key) is not None or self._where(key) is not None:
                self._update_locked(key, pod, None, info)
                return
            self._enqueue_new(self._new_info(pod, key, info))

    def _new_info(self, pod: Object, key: str, info: Any = None) -> QueuedPodInfo:
        return QueuedPodInfo(pod=pod, key=key, timestamp=self.clock.monotonic(), priority=self._priority_of(pod),
                             pod_info=info)

    def _enqueue_new(self, qpi: QueuedPodInfo) -> None:
        self._fire(qpi, QueueEvent.ARRIVE_READY if self._run_pre_enqueue(qpi) else QueueEvent.ARRIVE_GATED)

    def _gate(self, pod: Object) -> str | None:
        for check in self._pre_enqueue:
            gate = check(pod)
            if gate is not None:
                return gate
        return None

    def update(self, old: Object | None, new: Object, info: Any = None) -> None:
        """A pending pod changed. An unschedulable or gated pod whose spec or metadata changed gets
        another try (the change may be what it needed); a status-only change does not. `info`: the
        new object parsed (None: parse it again when it is popped)."""
        key = key_of(new)
        with self._lock:
            self._nominate_from_status_locked(key, new, info)
            if self._in_flight(key) is None and self._where(key) is None:
                self._enqueue_new(self._new_info(new, key, info))
                return
            self._update_locked(key, new, old, info)

    def _update_locked(self, key: str, new: Object, old: Object | None = None, info: Any = None) -> None:
        attempt = self._in_flight(key)
        if attempt is not None:
            attempt.qpi.pod = new  # a failure re-queues the newest object
            attempt.qpi.pod_info = info
            if old is not None and _pod_spec_changed(old, new):
                # kube's addEventsIfPodInFlight: the change may be what its attempt lacked (a
                # toleration added while no node took it): an event for this pod alone
                self._sequence += 1
                attempt.own_updates.append((self._sequence, old, new))
            return
        for heap in (self._active, self._backoff):
            qpi = heap.get(key)
            if qpi is not None:
                qpi.pod = new
                qpi.pod_info = info
                heap.push(qpi)
                return
        qpi = self._gated.get(key)
        if qpi is not None:
            qpi.pod = new
            qpi.pod_info = info
            self._let_out_locked(qpi)  # the update may have opened its gate
            return
        qpi = self._unschedulable.get(key)
        if qpi is not None:
            changed = old is None or _pod_spec_changed(old, new)
            qpi.pod = new
            qpi.pod_info = info
            if changed:
                self._requeue_moved(qpi)

    def _move_gated_locked(self, event: ClusterEvent, old: Object | None, new: Object | None,
                           exclude: str | None) -> int:
        """Let out the gated pods whose gating plugin registered for `event` (kube keeps gated pods
        with the unschedulable ones, and a cluster event requeues them through their gating
        plugin's hints), to activeQ or backoffQ as `_let_out_locked` says. Pods gated by a plugin
        that registered no events (SchedulingGates) wait for their own update. Returns how many
        left the gated pods."""
        return sum(1 for qpi in list(self._gated.values())
                   if qpi.key != exclude and self._gate_may_open(qpi, event, old, new) and self._let_out_locked(qpi))

    def _gate_may_open(self, qpi: QueuedPodInfo, event: ClusterEvent, old: Object | None,
                       new: Object | None) -> bool:
        """Did the gating plugin register `event` (kube's GatingPluginEvents), its hint saying QUEUE?
        A wildcard event asks no hint (kube's isPodWorthRequeuing). Without hint maps no plugin
        registered anything: gated pods wait for their own update."""
        if self._hints is None or not qpi.gated_by:
            return False
        regs = [reg for reg in self._registrations(qpi.pod, event) if reg.plugin == qpi.gated_by]
        if event in (WILDCARD_EVENT, UNSCHEDULABLE_TIMEOUT):
            return bool(regs)
        return any(ask_hint(reg.hint, qpi.pod, old, new) is QUEUE for reg in regs)

    def delete(self, pod: Object) -> None:
        """The pod is gone, or no longer ours to schedule (bound, or deleted)."""
        key = key_of(pod)
        with self._lock:
            state = self._state_locked(key)
            if state is not QueueState.ABSENT:
                held = self._queued_locked(key)
                assert held is not None
                self._fire(held, QueueEvent.DELETE, state)
            self._delete_nominated_locked(key)

    # --- the scheduling loop's side --------------------------------------------------------------

    def pop(self, timeout: float | None = None) -> QueuedPodInfo | None:
        """The next pod to try, waiting up to `timeout` (None: until one comes or the queue closes).
        Returns None on timeout or once closed."""
        with self._lock:
            deadline = None if timeout is None else self.clock.monotonic() + timeout
            while not len(self._active) and not (self.pop_from_backoff and len(self._backoff.rejected)):
                if self._closed:
                    return None
                remaining = None if deadline is None else deadline - self.clock.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self.clock.wait(self._cond, remaining)
            if self._closed and not len(self._active):
                return None
            qpi = self._active.peek()
            if qpi is None:
                # activeQ is empty: the rejected pod whose backoff ends first goes now (kube's
                # SchedulerPopFromBackoffQ; its backoff was only there to let others go first)
                qpi = self._backoff.rejected.peek()
                assert qpi is not None
                self._fire(qpi, QueueEvent.BACKOFF_EXPIRED, QueueState.BACKOFF)
            self._scheduling_cycle += 1
            qpi.scheduling_cycle = self._scheduling_cycle
            self._fire(qpi, QueueEvent.POP, QueueState.ACTIVE)
            qpi.attempts += 1
            if qpi.initial_attempt_timestamp is None:
                qpi.initial_attempt_timestamp = self.clock.monotonic()
            return qpi

    def _begin_attempt(self, qpi: QueuedPodInfo) -> None:
        """Its record, in flight from now. A pod re-added and popped while its last binding cycle
        still runs: the new attempt replaces the old one's record (the old one's end no longer
        matches it), re-inserted rather than overwritten, so that the records stay in the order
        of their sequence numbers and the oldest is the first (see _end_attempt_record)."""
        self._sequence += 1
        self._attempts.pop(qpi.key, None)
        self._attempts[qpi.key] = _Attempt(qpi, self._sequence, qpi.scheduling_cycle)

    def _in_flight(self, key: str) -> _Attempt | None:
        """The attempt of `key` if the pod is in the IN_FLIGHT state."""
        attempt = self._attempts.get(key)
        return attempt if attempt is not None and attempt.in_flight else None

    def _attempt_of(self, qpi: QueuedPodInfo) -> _Attempt | None:
        """The record of `qpi`'s attempt, unless it ended or a newer attempt replaced it."""
        attempt = self._attempts.get(qpi.key)
        return attempt if attempt is not None and attempt.scheduling_cycle == qpi.scheduling_cycle else None

    def done(self, key: str) -> None:
        """The attempt on `key` ended without sending the pod back (kube's Done): it leaves the
        queue if still in flight (not ours any more, being deleted, bound by someone else), and the
        events recorded for its attempt are forgotten."""
        with self._lock:
            attempt = self._in_flight(key)
            if attempt is not None:
                self._fire(attempt.qpi, QueueEvent.DONE, QueueState.IN_FLIGHT)
            self._end_attempt_record(key)

    def assumed(self, key: str) -> None:
        """The scheduling cycle assumed `key` on a node: it leaves the queue, but its attempt goes on
        in the binding cycle, which ends it with `binding_done` (or sends it back with
        `requeue_after_bind_failure`): until then the events received still count for it."""
        with self._lock:
            attempt = self._in_flight(key)
            if attempt is not None:
                self._fire(attempt.qpi, QueueEvent.DONE, QueueState.IN_FLIGHT)

    def binding_done(self, qpi: QueuedPodInfo) -> None:
        """The binding cycle of `qpi`'s attempt passed Permit or ended: kube's Done in bindingCycle.
        Idempotent; an attempt that a newer one replaced leaves the newer one's record alone."""
        with self._lock:
            self._end_attempt_record(qpi.key, qpi.scheduling_cycle)

    def _end_attempt_record(self, key: str, cycle: int | None = None) -> None:
        """The attempt on `key` (of scheduling cycle `cycle`, if given) ends: its record goes."""
        attempt = self._attempts.get(key)
        if attempt is None or (cycle is not None and attempt.scheduling_cycle != cycle):
            return
        del self._attempts[key]
        # the events older than every attempt still running can be asked about by no one any more
        # (kube prunes inFlightEvents up to its oldest in-flight pod the same way). The oldest is
        # the first record: _begin_attempt inserts in sequence order; no scan of every attempt,
        # of which there are up to max_bindings_in_flight (512) when binding lags the loop
        log = self._event_log
        if not log:
            return
        if not self._attempts:
            log.clear()
            return
        oldest = next(iter(self._attempts.values())).sequence
        while log and log[0][0] < oldest:
            log.popleft()

    def in_flight_events(self, key: str) -> list[ClusterEvent]:
        """The cluster events received since `key`'s attempt began (empty when it is not in flight)."""
        with self._lock:
            return self._events_since_locked(key)

    def _events_since_locked(self, key: str, cycle: int | None = None) -> list[ClusterEvent]:
        return [event for event, _, _ in self._flight_events_for_locked(key, cycle)]

    def _flight_events_for_locked(
        self, key: str, cycle: int | None = None
    ) -> list[tuple[ClusterEvent, Object | None, Object | None]]:
        """(event, before, after) received since `key`'s attempt began, in order: cluster events
        and the pod's own updates (another pod's are not its)."""
        attempt = self._attempts.get(key)
        if attempt is None or (cycle is not None and attempt.scheduling_cycle != cycle):
            return []
        since = attempt.sequence
        if not attempt.own_updates:  # the common case: no merge
            return [(event, old, new) for seq, event, old, new in self._event_log if seq > since]
        cluster = ((seq, event, old, new) for seq, event, old, new in self._event_log if seq > since)
        own = ((seq, UNSCHEDULED_POD_UPDATE, old, new) for seq, old, new in attempt.own_updates)
        return [(event, old, new) for _, event, old, new in heapq.merge(cluster, own, key=lambda e: e[0])]

    def in_flight_event_count(self) -> int:
        """How many events the queue keeps for the attempts in flight (kube's
        scheduler_in_flight_events without the pods): pruned as those attempts end."""
        with self._lock:
            return len(self._event_log) + sum(len(a.own_updates) for a in self._attempts.values())

    def _worth_retrying_locked(self, qpi: QueuedPodInfo) -> bool:
        """kube's determineSchedulingHintForInFlightPod: a pod no plugin rejected (an error) always
        is; one rejected by plugins is if an event received during its attempt interests one of them."""
        if not qpi.unschedulable_plugins:
            return True
        attempt = self._attempt_of(qpi)
        if attempt is not None and attempt.activate_when_done:
            return True  # kube's EventForceActivate, a wildcard event for this pod: queueAfterBackoff
        # (an attempt not on record, ended by `done` before, saw no events)
        for event, old, new in self._flight_events_for_locked(qpi.key, qpi.scheduling_cycle):
            if event == UNSCHEDULED_POD_UPDATE:
                return True  # its own spec changed during the attempt: as an update of a parked pod
            if self._interested(qpi, event, old, new):
                return True
        return False

    def _count_failure(self, qpi: QueuedPodInfo, error: bool) -> None:
        """kube's AddUnschedulableIfNotPresent: an error counts an error in a row; a rejection
        counts a rejection and ends the run of errors."""
        if error:
            qpi.consecutive_errors_count += 1
        else:
            qpi.unschedulable_count += 1
            qpi.consecutive_errors_count = 0

    def add_unschedulable(self, qpi: QueuedPodInfo, *, rejected_by: Iterable[str] = (), error: bool = False) -> None:
        """The attempt failed. Plugin rejections (`rejected_by`) park the pod as unschedulable unless
        an event that one of those plugins registered for came during its attempt; errors
        (`error=True`), or no plugin named, send it to backoff."""
        with self._lock:
            # Not in flight any more: deleted during its attempt -> dropped (the table's ABSENT row).
            if self._closed:
                self._end_attempt_record(qpi.key, qpi.scheduling_cycle)
                return
            qpi.timestamp = self.clock.monotonic()
            qpi.unschedulable_plugins = set(rejected_by)
            self._count_failure(qpi, error or not qpi.unschedulable_plugins)
            retry = error or self._worth_retrying_locked(qpi)
            attempt = self._in_flight(qpi.key)
            state = QueueState.IN_FLIGHT if attempt is not None and attempt.qpi is qpi else QueueState.ABSENT
            self._end_attempt_locked(qpi, QueueEvent.RETRY if retry else QueueEvent.REJECT, state)

    def requeue_after_bind_failure(self, qpi: QueuedPodInfo, *, rejected_by: Iterable[str] | None = None) -> None:
        """The binding cycle failed after the pod left the queue. An error (the default) backs it
        off to be tried again; `rejected_by` (a Permit rejection) parks it as unschedulable, unless
        an event one of those plugins registered for came during its attempt (its wait at Permit
        included): then it backs off too, as `add_unschedulable` decides."""
        with self._lock:
            if self._closed:
                self._end_attempt_record(qpi.key, qpi.scheduling_cycle)
                return
            state = self._state_locked(qpi.key)
            if state is not QueueState.ABSENT:
                self._end_attempt_record(qpi.key, qpi.scheduling_cycle)
                return  # already back (an update re-added it): the table's IGNORE
            qpi.timestamp = self.clock.monotonic()
            qpi.unschedulable_plugins = set(rejected_by or ())
            self._count_failure(qpi, not qpi.unschedulable_plugins)
            retry = rejected_by is None or self._worth_retrying_locked(qpi)
            self._end_attempt_locked(qpi, QueueEvent.BIND_FAILED if retry else QueueEvent.BIND_REJECTED, state)

    def _end_attempt_locked(self, qpi: QueuedPodInfo, event: QueueEvent, state: QueueState) -> None:
        """The failed attempt's end: the pod moves by `event`, and its attempt's record goes."""
        self._fire(qpi, event, state)
        self._end_attempt_record(qpi.key, qpi.scheduling_cycle)

    # --- cluster events ---------------------------------------------------------------------------

    def move_all_to_active_or_backoff(self, event: ClusterEvent, old: Object | None = None, new: Object | None = None,
                                      *, exclude: str | None = None) -> int:
        """Move the unschedulable pods that `event` could help, and the gated pods whose gating
        plugin registered it, but `exclude` (kube's MoveAllToActiveOrBackoffQueue, whose
        unschedulable pods include the gated ones), and record `event` for the attempts in flight.
        `old` and `new`: the changed object before and after (None for an add, a delete), which
        the plugins' queueing hints read. Returns how many moved."""
        with self._lock:
            moved = self._move_gated_locked(event, old, new, exclude) if self._gated else 0
            for qpi in list(self._unschedulable.values()):
                if qpi.key != exclude and self._interested(qpi, event, old, new) and self._requeue_moved(qpi):
                    moved += 1
            if self._attempts:  # kube's addEventIfAnyInFlight
                self._sequence += 1
                self._event_log.append((self._sequence, event, old, new))
            return moved

    def set_queueing_hints(self, profile: str, hints: QueueingHintMap) -> None:
        """Use `hints` for `profile`'s pods from now on (a framework swapped at run time)."""
        with self._lock:
            self._hints = {**(self._hints or {}), profile: hints}
            self._matching.clear()

    def _registrations(self, pod: Object, event: ClusterEvent) -> Sequence[RegisteredHint]:
        """The registrations of `pod`'s profile that match `event` (kube's MatchClusterEvents)."""
        profile = self._profile_of(pod)
        found = self._matching.get((profile, event))
        if found is None:
            hints = (self._hints or {}).get(profile, {})
            found = [reg for registered, regs in hints.items() if registered.matches(event) for reg in regs]
            self._matching[profile, event] = found
        return found

    def _interested(self, qpi: QueuedPodInfo, event: ClusterEvent, old: Object | None = None,
                    new: Object | None = None) -> bool:
        """kube's isPodWorthRequeuing: a wildcard event, or no rejector named (an error), moves the
        pod; otherwise one of the plugins that rejected it must have registered `event` and its
        hint answer QUEUE for (the pod, old, new)."""
        if event in (WILDCARD_EVENT, UNSCHEDULABLE_TIMEOUT) or not qpi.unschedulable_plugins:
            return True
        if self._hints is None or self._profile_of(qpi.pod) not in self._hints:
            return True  # no map for this pod's profile: nothing says the event cannot help
        rejectors = qpi.unschedulable_plugins
        return any(reg.plugin in rejectors and ask_hint(reg.hint, qpi.pod, old, new) is QUEUE
                   for reg in self._registrations(qpi.pod, event))

    def _requeue_moved(self, qpi: QueuedPodInfo) -> bool:
        """An unschedulable pod moves: to backoffQ while its backoff lasts, else to activeQ; unless
        `hold` holds it back (a preemptor whose victims are still being deleted): then it stays."""
        if self.hold is not None and self.hold(qpi):
            return False
        event = QueueEvent.MOVE_BACKING_OFF if self._is_backing_off(qpi) else QueueEvent.MOVE_READY
        # (PreEnqueue may hold it on the way: then it moved to the gated pods, not to a queue)
        return self._fire(qpi, event, QueueState.UNSCHEDULABLE) in (QueueState.ACTIVE, QueueState.BACKOFF)

    def activate(self, key: str) -> bool:
        """Move an unschedulable, gated or backing-off pod to activeQ now (kube's Activate). False
        when it is in none of them, or PreEnqueue holds it on the way."""
        with self._lock:
            backing_off = self._backoff.get(key)
            if backing_off is not None and not self._closed:
                # (the table's BACKOFF_EXPIRED: its backoff ends now)
                return self._fire(backing_off, QueueEvent.BACKOFF_EXPIRED, QueueState.BACKOFF) is QueueState.ACTIVE
            gated = self._gated.get(key)
            if gated is not None and not self._closed:
                # kube's activate finds gated pods among the unschedulable ones and runs moveToActiveQ:
                # PreEnqueue asked again, and to activeQ if it lets the pod through, backoff or not
                return self._let_out_locked(gated, activate=True)
            qpi = self._unschedulable.get(key)
            attempt = self._attempts.get(key)
            if qpi is None and attempt is not None and self._where(key) is None and not self._closed:
                # its attempt has not ended yet (a preemption worker can fail before the cycle
                # parks the preemptor; a pod may wait at Permit): activate it when it does, as kube
                # does for in-flight pods
                attempt.activate_when_done = True
                return False
            if qpi is None or self._closed:
                return False
            return self._fire(qpi, QueueEvent.MOVE_READY, QueueState.UNSCHEDULABLE) is QueueState.ACTIVE

    def flush_backoff_completed(self) -> int:
        """Move every pod whose backoff has expired to activeQ (run every second)."""
        with self._lock:
            now = self.clock.monotonic()
            moved = 0
            while True:
                qpi = self._backoff.peek()
                if qpi is None or self._is_backing_off(qpi, now):
                    break
                # (without SchedulerPopFromBackoffQ, PreEnqueue may hold it on the way)
                if self._fire(qpi, QueueEvent.BACKOFF_EXPIRED, QueueState.BACKOFF) is QueueState.ACTIVE:
                    moved += 1
            if moved:
                self._cond.notify_all()
            return moved

    def flush_unschedulable_leftover(self) -> int:
        """Move pods unschedulable for longer than max_in_unschedulable (run every 30 s), and let out
        the gated ones held as long whose gating plugin registered every event (kube's
        flushUnschedulablePodsLeftover sends UnschedulableTimeout, a wildcard, through the gated
        pods' GatingPluginEvents too: a plugin without EnqueueExtensions registers it)."""
        with self._lock:
            now = self.clock.monotonic()
            moved = 0
            for qpi in list(self._unschedulable.values()):
                if now - qpi.timestamp >= self.max_in_unschedulable and self._requeue_moved(qpi):
                    moved += 1
            for qpi in list(self._gated.values()):
                if (now - qpi.timestamp >= self.max_in_unschedulable
                        and self._gate_may_open(qpi, UNSCHEDULABLE_TIMEOUT, None, None) and self._let_out_locked(qpi)):
                    moved += 1
            return moved

    # --- nominated pods (set by preemption) --------------------------------------------------------

    def nominate(self, pod: Object, node_name: str, info: Any = None) -> None:
        """Remember that `pod` waits for room on `node_name` (status.nominatedNodeName), with its
        parsed `info` if given. Filters count nominated pods of equal or higher priority on their
        node so that others do not take the room; "" forgets the nomination."""
        key = key_of(pod)
        with self._lock:
            self._delete_nominated_locked(key)
            if node_name:
                self._nominated.setdefault(node_name, {})[key] = (pod, info)
                self._nominated_node_of[key] = node_name

    def _nominate_from_status_locked(self, key: str, pod: Object, info: Any) -> None:
        """kube's add/updateNominatedPodUnlocked: a queued pod's status.nominatedNodeName is a
        nomination (one written by an earlier scheduler or leader counts too). An update without one
        keeps the nomination held in memory: it may just have raced preemption's own status write."""
        node = (pod.get("status") or {}).get("nominatedNodeName")
        if node:
            if self._nominated_node_of.get(key) != node:
                self._delete_nominated_locked(key)
                self._nominated_node_of[key] = node
            self._nominated.setdefault(node, {})[key] = (pod, info)
        else:
            held = self._nominated_node_of.get(key)
            if held is not None:
                self._nominated[held][key] = (pod, info)  # the newest object, same room

    def delete_nominated(self, pod: Object) -> None:
        with self._lock:
            self._delete_nominated_locked(key_of(pod))

    def _delete_nominated_locked(self, key: str) -> None:
        node = self._nominated_node_of.pop(key, None)
        if node is not None:
            pods = self._nominated.get(node)
            if pods is not None:
                pods.pop(key, None)
                if not pods:
                    del self._nominated[node]

    def nominated_pods(self) -> dict[str, list[Object]]:
        """node name -> the pods nominated to it."""
        with self._lock:
            return {node: [pod for pod, _ in pods.values()] for node, pods in self._nominated.items()}

    def nominated_infos(self) -> list[tuple[str, Any]]:
        """(node name, info) for every nomination made with its info (what Framework.schedule takes)."""
        if not self._nominated_node_of:  # the common case, without taking the lock
            return []
        with self._lock:
            return [(node, info) for node, pods in self._nominated.items()
                    for _, info in pods.values() if info is not None]

    def nominated_node_of(self, key: str) -> str | None:
        return self._nominated_node_of.get(key)  # one dict read, atomic under the GIL: no lock

    # --- inspection and lifecycle --------------------------------------------------------------------

    def _where(self, key: str) -> str | None:
        if key in self._active:
            return QUEUE_ACTIVE
        if key in self._backoff:
            return QUEUE_BACKOFF
        if key in self._unschedulable:
            return QUEUE_UNSCHEDULABLE
        if key in self._gated:
            return QUEUE_GATED
        return None

    def where(self, key: str) -> str | None:
        """Which queue holds `key` ("active", "backoff", "unschedulable", "gated"), "in-flight", or None."""
        with self._lock:
            if self._in_flight(key) is not None:
                return "in-flight"
            return self._where(key)

    def get(self, key: str) -> QueuedPodInfo | None:
        with self._lock:
            return self._queued_locked(key)

    def _queued_locked(self, key: str) -> QueuedPodInfo | None:
        """The pod's record wherever the queue holds it, in flight included."""
        attempt = self._in_flight(key)
        return (
            self._active.get(key)
            or self._backoff.get(key)
            or self._unschedulable.get(key)
            or self._gated.get(key)
            or (attempt.qpi if attempt is not None else None)
        )

    def pending_pods(self) -> dict[str, int]:
        """How many pods wait in each queue (kube's scheduler_pending_pods{queue})."""
        with self._lock:
            return {
                QUEUE_ACTIVE: len(self._active),
                QUEUE_BACKOFF: len(self._backoff),
                QUEUE_UNSCHEDULABLE: len(self._unschedulable),
                QUEUE_GATED: len(self._gated),
            }

    def __len__(self) -> int:
        with self._lock:
            return len(self._active) + len(self._backoff) + len(self._unschedulable) + len(self._gated)

    def pods(self) -> list[QueuedPodInfo]:
        """Every queued pod (not the in-flight ones), in no particular order."""
        with self._lock:
            return [
                *self._active.items(), *self._backoff.items(),
                *self._unschedulable.values(), *self._gated.values(),
            ]

    def run(self, stop: threading.Event) -> None:
        """Flush backoffQ every second and the unschedulable leftovers every 30 s until `stop` is set
        or the queue closes."""
        last_unschedulable_flush = self.clock.monotonic()
        while not stop.is_set() and not self._closed:
            if self.pop_from_backoff:
                # kube's waitUntilAlignedWithOrderingWindow: flush at each window's start, so that
                # a whole window moves at once
                now = self.clock.monotonic()
                self._pause(self._align_to_window(now + BACKOFF_ORDERING_WINDOW) - now, stop)
            else:
                self._pause(BACKOFF_FLUSH_PERIOD, stop)
            self.flush_backoff_completed()
            if self.clock.monotonic() - last_unschedulable_flush >= UNSCHEDULABLE_FLUSH_PERIOD:
                last_unschedulable_flush = self.clock.monotonic()
                self.flush_unschedulable_leftover()

    def _pause(self, seconds: float, stop: threading.Event) -> None:
        """Sleep `seconds` on the clock, but wake at once when the queue closes."""
        deadline = self.clock.monotonic() + seconds
        with self._flush_cond:
            while not stop.is_set() and not self._closed:
                left = deadline - self.clock.monotonic()
                if left <= 0:
                    return
                self.clock.wait(self._flush_cond, left)

    def start(self, stop: threading.Event) -> None:
        """Run the flushers on a daemon thread."""
        if self._flusher is None:
            self._flusher = threading.Thread(target=self.run, args=(stop,), name="queue-flusher", daemon=True)
            self._flusher.start()

    def close(self) -> None:
        """Wake every pop(); after this pop() returns None."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()
        with self._flush_cond:
            self._flush_cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


# kube's isPodUpdated strips these too: a finalizer added or removed cannot make a pod fit
_IGNORED_METADATA = ("resourceVersion", "generation", "managedFields", "finalizers")


def _pod_spec_changed(old: Object, new: Object) -> bool:
    """kube's isPodUpdated: did anything but status and bookkeeping metadata change?"""
    if old.get("spec") != new.get("spec"):
        return True
    return _meta_for_compare(old) != _meta_for_compare(new)


def _meta_for_compare(pod: Object) -> Object:
    meta = {k: v for k, v in (pod.get("metadata") or {}).items() if k not in _IGNORED_METADATA}
    annotations = meta.get("annotations")
    if annotations and DECISION_ANNOTATION in annotations:
        # Our own decision record must not count as a change, or writing it would requeue the pod.
        meta["annotations"] = {k: v for k, v in annotations.items() if k != DECISION_ANNOTATION}
    return meta
