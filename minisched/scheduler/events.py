"""What the scheduler tells the cluster about its decisions: Events, the PodScheduled condition,
status.nominatedNodeName and (optionally) the decision record as an annotation.

kube-scheduler writes these through client-go's event broadcaster, which queues them and writes
them from its own goroutine so a slow API server never slows the scheduling loop. `EventRecorder`
does the same with one writer thread (one, so writes about one pod land in the order they were
made). Events are best effort, as in client-go: past `max_pending` queued writes, new events are
dropped and counted. Status writes are never dropped.

Repeated identical events for one object (the same FailedScheduling message on every retry) are
folded into one Event whose `count` and `lastTimestamp` grow, as client-go's EventCorrelator does.

When several new Events are queued at once (a backlog drain writes a Scheduled Event per pod) and
the cluster can create many objects in one round trip (`RealCluster.create_many`: HTTP/1.1
pipelining, where client-go multiplexes HTTP/2 streams), the writer sends them together, in order.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from minisched.clock import Clock, RealClock, rfc3339, rfc3339_micro
from minisched.cluster.base import Cluster
from minisched.errors import ApiError, NotFound
from minisched.ratelimitlog import install as install_rate_limit
from minisched.resources import EVENTS, EVENTS_V1, PODS

Object = dict[str, Any]

log = logging.getLogger(__name__)
# During an API outage every write fails alike: one warning per 10 s, with a count of the rest.
install_rate_limit(log, 10.0, match="write failed")

NORMAL = "Normal"
WARNING = "Warning"

REASON_SCHEDULED = "Scheduled"
REASON_FAILED_SCHEDULING = "FailedScheduling"
REASON_PREEMPTED = "Preempted"

# PodScheduled=False reasons (v1.PodReasonUnschedulable, v1.PodReasonSchedulerError).
POD_REASON_UNSCHEDULABLE = "Unschedulable"
POD_REASON_SCHEDULER_ERROR = "SchedulerError"
POD_REASON_SCHEDULING_GATED = "SchedulingGated"  # held at PreEnqueue (kube: spec.schedulingGates)

DECISION_ANNOTATION = "minisched.io/decision"

_MAX_CORRELATED = 4096
# New Events sent in one round trip at most: their answers (about 1 KB each) fit the socket's
# receive buffer, so the server never waits for us to read while we are still sending.
MAX_EVENT_BATCH = 32


def scheduled_message(pod: Object, node_name: str) -> str:
    meta = pod.get("metadata") or {}
    return f"Successfully assigned {meta.get('namespace', '')}/{meta.get('name', '')} to {node_name}"


def preempted_message(preemptor: Object, node_name: str) -> str:
    return f"Preempted by pod {(preemptor.get('metadata') or {}).get('uid', '')} on node {node_name}"


class EventRecorder:
    """Writes Events (core/v1 by default, or events.k8s.io/v1) and pod status changes.

    With `asynchronous=False` every write happens in the caller's thread (handy in a notebook cell).
    Otherwise call `start()` (or let the first write start it), and `flush()` to wait for the
    backlog, e.g. before a test looks at the events.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        component: str = "minisched",
        instance: str = "",
        clock: Clock | None = None,
        api: str = "v1",
        asynchronous: bool = True,
        max_pending: int = 10_000,
        max_correlated: int = _MAX_CORRELATED,
    ) -> None:
        if max_correlated < 1:
            raise ValueError(f"max_correlated must be at least 1, got {max_correlated}")
        if api not in ("v1", "events.k8s.io/v1"):
            raise ValueError(f"unknown events API {api!r}: use 'v1' or 'events.k8s.io/v1'")
        self.cluster = cluster
        self.component = component
        self.instance = instance or component
        self.clock: Clock = clock or RealClock()
        self.api = api
        self.asynchronous = asynchronous
        self.max_pending = max_pending
        # how many recent events to remember for counting repeats (client-go's LRU keeps 4,096)
        self.max_correlated = max_correlated
        self.written = 0
        self.dropped = 0
        self.failed = 0
        # a C queue: no Python-level Condition for the binding threads that submit to contend on
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._closed = False  # abandon()ed at a shutdown deadline: later writes are dropped
        self._lock = threading.Lock()
        self._names = itertools.count()
        # Where status writes read the pod's current conditions: an informer's cache saves a GET per
        # write (the Scheduler sets it); None reads from the API.
        self.pod_lookup: Callable[[str, str], Object | None] | None = None
        # (object uid or key, type, reason, message) -> [event name, namespace, count]
        self._correlated: OrderedDict[tuple[str, str, str, str], list[Any]] = OrderedDict()

    # --- the events kube-scheduler writes -----------------------------------------------------------

    def scheduled(self, pod: Object, node_name: str) -> None:
        self.event(pod, NORMAL, REASON_SCHEDULED, scheduled_message(pod, node_name), action="Binding")

    def failed_scheduling(self, pod: Object, message: str) -> None:
        self.event(pod, WARNING, REASON_FAILED_SCHEDULING, message, action="Scheduling")

    def preempted(self, victim: Object, preemptor: Object, node_name: str) -> None:
        self.event(victim, NORMAL, REASON_PREEMPTED, preempted_message(preemptor, node_name), action="Preempting")

    def event(self, obj: Object, event_type: str, reason: str, message: str, *, action: str = "") -> None:
        """Record one event about `obj` (best effort: dropped when the backlog is full)."""
        if event_type not in (NORMAL, WARNING):
            raise ValueError(f"event type must be Normal or Warning, not {event_type!r}")
        self._submit(_EventWrite(self, _object_reference(obj), event_type, reason, message, action, self.clock.now()),
                     droppable=True)

    # --- pod status ----------------------------------------------------------------------------------

    def pod_scheduled_false(
        self, pod: Object, reason: str, message: str, *, nominated_node_name: str | None = None
    ) -> None:
        """Set PodScheduled=False (reason Unschedulable or SchedulerError) and, if given,
        status.nominatedNodeName ("" clears it). Skipped when nothing would change."""
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        status = pod.get("status") or {}
        current = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        same_condition = current is not None and all(current.get(k) == v for k, v in condition.items())
        same_nomination = nominated_node_name is None or (status.get("nominatedNodeName") or "") == nominated_node_name
        if same_condition and same_nomination:
            return
        self._submit(lambda: self._patch_status(pod, condition, nominated_node_name), droppable=False)

    def set_nominated_node(self, pod: Object, node_name: str) -> None:
        meta = pod.get("metadata") or {}
        patch: Object = {"status": {"nominatedNodeName": node_name or None}}
        self._submit(
            lambda: self._patch(meta.get("namespace", ""), meta.get("name", ""), patch, "status"), droppable=False
        )

    def annotate_decision(self, pod: Object, record: Object | str) -> None:
        """Write the decision record as the pod's `minisched.io/decision` annotation."""
        meta = pod.get("metadata") or {}
        text = record if isinstance(record, str) else json.dumps(record, separators=(",", ":"))
        patch: Object = {"metadata": {"annotations": {DECISION_ANNOTATION: text}}}
        self._submit(lambda: self._patch(meta.get("namespace", ""), meta.get("name", ""), patch, None), droppable=True)

    def call(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the writer thread, after the writes already queued (never dropped)."""
        self._submit(fn, droppable=False)

    # --- the writer --------------------------------------------------------------------------------------

    def _submit(self, fn: Callable[[], None], *, droppable: bool) -> None:
        if self._closed:
            with self._lock:
                self.dropped += 1
            return
        if not self.asynchronous:
            self._run(fn)
            return
        if droppable and self._queue.qsize() >= self.max_pending:
            with self._lock:
                self.dropped += 1
            return
        worker = self._worker
        if worker is None or not worker.is_alive():
            self.start()
        self._queue.put(fn)

    def _run(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except NotFound:
            pass  # the pod went away; nothing to tell
        except ApiError as err:
            with self._lock:
                self.failed += 1
            log.warning("event/status write failed: %s", err)
        except Exception:  # the writer must outlive a bad write
            with self._lock:
                self.failed += 1
            log.exception("event/status write failed")

    def _loop(self) -> None:
        create_many = getattr(self.cluster, "create_many", None)  # a backend that can batch creations
        fn: Callable[[], None] | None = self._queue.get()
        while fn is not None:
            if not isinstance(fn, _EventWrite) or create_many is None:
                self._run(fn)
                fn = self._queue.get()
                continue
            batch = [fn]
            following: Callable[[], None] | None | _Nothing = _NOTHING
            with contextlib.suppress(queue.Empty):  # the Events queued right behind it join the batch
                while len(batch) < MAX_EVENT_BATCH:
                    following = self._queue.get_nowait()
                    if not isinstance(following, _EventWrite):
                        break
                    batch.append(following)
                    following = _NOTHING
            self._write_events(batch, create_many)
            fn = self._queue.get() if isinstance(following, _Nothing) else following

    def start(self) -> None:
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._loop, name="event-recorder", daemon=True)
                self._worker.start()

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until every queued write is done. False if `timeout` (real seconds) passed first."""
        if not self.asynchronous or self._worker is None:
            return True
        done = threading.Event()
        self._queue.put(_FlushMarker(done))
        return done.wait(timeout)

    def abandon(self) -> int:
        """Give up on the backlog (a shutdown deadline passed): drop every queued write, refuse new
        ones, and let the writer end after the write (or batch of Events) it is in. Returns how many writes
        were dropped."""
        with self._lock:
            self._closed = True
        dropped = 0
        while True:
            try:
                fn = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(fn, _FlushMarker):
                fn()  # whoever waits on that flush need not wait for writes that will never happen
            elif fn is not None:
                dropped += 1
        self._queue.put(None)
        with self._lock:
            self.dropped += dropped
        if dropped:
            log.warning("dropped %d unsent event/status writes at shutdown", dropped)
        return dropped

    def stop(self, timeout: float | None = 10.0) -> None:
        """Finish the backlog, then stop the writer thread."""
        worker = self._worker
        if worker is not None and worker.is_alive():
            self._queue.put(None)
            worker.join(timeout)
        self._worker = None

    # --- API writes ----------------------------------------------------------------------------------------

    def _write_event(
        self, ref: Object, event_type: str, reason: str, message: str, action: str, when: float
    ) -> None:
        namespace = ref.get("namespace") or "default"
        corr_key = _correlation_key(ref, event_type, reason, message)
        seen = self._correlated.get(corr_key)
        if seen is not None:
            seen[2] += 1
            self._correlated.move_to_end(corr_key)
            try:
                self.cluster.patch(self._resource(), seen[0], self._repeat_patch(seen[2], when), seen[1])
                self.written += 1
                return
            except NotFound:
                del self._correlated[corr_key]  # expired or deleted: write a fresh one
        name = self._event_name(ref, when)
        self.cluster.create(self._resource(), self._new_event(name, namespace, ref, event_type, reason, message,
                                                             action, when), namespace)
        self.written += 1
        self._remember(corr_key, name, namespace)

    def _write_events(self, batch: list[_EventWrite], create_many: Callable[..., list[ApiError | None]]) -> None:
        """Queued Events in order: the new ones together through `create_many`; a repeat (its Event
        exists: a PATCH of its count) after the new ones before it, on its own as _write_event does."""
        new: list[tuple[tuple[str, str, str, str], str, Object]] = []
        keys: set[tuple[str, str, str, str]] = set()
        for write in batch:
            key = _correlation_key(write.ref, write.event_type, write.reason, write.message)
            if key in self._correlated or key in keys:
                self._create_events(new, create_many)
                new, keys = [], set()
                self._run(write)
                continue
            keys.add(key)
            name = self._event_name(write.ref, write.when)
            new.append((key, name, self._new_event(
                name, write.ref.get("namespace") or "default", write.ref, write.event_type, write.reason,
                write.message, write.action, write.when)))
        self._create_events(new, create_many)

    def _create_events(self, new: list[tuple[tuple[str, str, str, str], str, Object]],
                       create_many: Callable[..., list[ApiError | None]]) -> None:
        if not new:
            return
        results: list[Exception | None]
        try:
            results = list(create_many(self._resource(), [body for _, _, body in new]))
        except Exception as err:  # the writer must outlive a bad write
            results = [err] * len(new)
        for (key, name, body), error in zip(new, results, strict=True):
            if error is None:
                self.written += 1
                self._remember(key, name, body["metadata"]["namespace"])
            elif not isinstance(error, NotFound):  # NotFound: the namespace went away; nothing to tell
                with self._lock:
                    self.failed += 1
                log.warning("event/status write failed: %s", error)

    def _event_name(self, ref: Object, when: float) -> str:
        return f"{ref.get('name')}.{int(when * 1e9):x}{next(self._names):04x}"

    def _remember(self, key: tuple[str, str, str, str], name: str, namespace: str) -> None:
        self._correlated[key] = [name, namespace, 1]
        if len(self._correlated) > self.max_correlated:
            self._correlated.popitem(last=False)

    def _resource(self) -> Any:
        return EVENTS if self.api == "v1" else EVENTS_V1

    def _new_event(
        self, name: str, namespace: str, ref: Object, event_type: str, reason: str, message: str,
        action: str, when: float,
    ) -> Object:
        if self.api == "v1":
            return {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": ref,
                "reason": reason, "message": message, "type": event_type,
                "source": {"component": self.component},
                "firstTimestamp": rfc3339(when), "lastTimestamp": rfc3339(when), "count": 1,
                "action": action,
                "reportingComponent": self.component, "reportingInstance": self.instance,
            }
        return {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "regarding": ref, "reason": reason, "note": message, "type": event_type,
            "action": action or reason, "eventTime": rfc3339_micro(when),
            "reportingController": self.component, "reportingInstance": self.instance,
        }

    def _repeat_patch(self, count: int, when: float) -> Object:
        if self.api == "v1":
            return {"count": count, "lastTimestamp": rfc3339(when)}
        return {"series": {"count": count, "lastObservedTime": rfc3339_micro(when)}}

    def _patch(self, namespace: str, name: str, patch: Object, subresource: str | None) -> None:
        self.cluster.patch(PODS, name, patch, namespace, subresource=subresource)
        self.written += 1

    def _patch_status(self, pod: Object, condition: Object, nominated_node_name: str | None) -> None:
        meta = pod.get("metadata") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        # A JSON merge patch replaces lists whole, so send every condition with ours changed.
        current = self.pod_lookup(namespace, name) if self.pod_lookup is not None else None
        if current is None:
            current = self.cluster.get(PODS, name, namespace)
        if (current.get("spec") or {}).get("nodeName"):
            return  # bound meanwhile: PodScheduled=False would be a lie
        conditions = [c for c in (current.get("status") or {}).get("conditions") or []
                      if c.get("type") != "PodScheduled"]
        previous = next((c for c in (current.get("status") or {}).get("conditions") or []
                         if c.get("type") == "PodScheduled"), None)
        stamped = dict(condition)
        stamped["lastProbeTime"] = None
        if previous is not None and previous.get("status") == condition["status"] and previous.get(
            "lastTransitionTime"
        ):
            stamped["lastTransitionTime"] = previous["lastTransitionTime"]
        else:
            stamped["lastTransitionTime"] = rfc3339(self.clock.now())
        status: Object = {"conditions": [*conditions, stamped]}
        if nominated_node_name is not None:
            status["nominatedNodeName"] = nominated_node_name or None
        self._patch(namespace, name, {"status": status}, "status")


class _Nothing:
    """Nothing taken from the queue yet (None there means: stop)."""


_NOTHING = _Nothing()


class _EventWrite:
    """One queued Event: the writer calls it, or sends it with the Events queued behind it."""

    __slots__ = ("recorder", "ref", "event_type", "reason", "message", "action", "when")

    def __init__(self, recorder: EventRecorder, ref: Object, event_type: str, reason: str, message: str,
                 action: str, when: float) -> None:
        self.recorder = recorder
        self.ref, self.event_type, self.reason, self.message = ref, event_type, reason, message
        self.action, self.when = action, when

    def __call__(self) -> None:
        self.recorder._write_event(self.ref, self.event_type, self.reason, self.message, self.action, self.when)


def _correlation_key(ref: Object, event_type: str, reason: str, message: str) -> tuple[str, str, str, str]:
    """What makes two Events the same (one Event whose count grows): the object, type, reason, message."""
    return (ref.get("uid") or f"{ref.get('namespace') or 'default'}/{ref.get('name')}", event_type, reason, message)


class _FlushMarker:
    """Queued by flush(): sets its event when the writer reaches it."""

    def __init__(self, done: threading.Event) -> None:
        self.done = done

    def __call__(self) -> None:
        self.done.set()


def _object_reference(obj: Object) -> Object:
    meta = obj.get("metadata") or {}
    ref: Object = {
        "kind": obj.get("kind") or "Pod",
        "apiVersion": obj.get("apiVersion") or "v1",
        "name": meta.get("name", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


def events_for(cluster: Cluster, pod: Object, reason: str | None = None) -> list[Object]:
    """The core/v1 Events about `pod` (optionally only those with `reason`), oldest first."""
    meta = pod.get("metadata") or {}
    items = cluster.list(EVENTS, meta.get("namespace") or "default")["items"]
    found = [
        e for e in items
        if (e.get("involvedObject") or {}).get("name") == meta.get("name")
        and (reason is None or e.get("reason") == reason)
    ]
    return sorted(found, key=lambda e: (e.get("firstTimestamp") or "", e["metadata"]["name"]))
