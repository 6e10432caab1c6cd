"""An independent judge of several schedulers sharing one cluster: does every pod get bound once,
onto a node with room for it, and is none left pending that fits?

`ClusterObserver` opens its own connection to the API server (it is nobody's informer) and keeps
three list+watch streams: pods (minisched.controlplane.observe.PodObserver's accounting, in the
server's resourceVersion order), nodes (their allocatable, unschedulable flag, taints and labels, as
they change) and, optionally, Events with reason Scheduled. From them it reports:

- pods bound twice: a pod seen bound to node A and later to B, or more than one successful binding
  reported for it (two Scheduled events, or one with count > 1: each scheduler writes one after a
  binding the API server accepted);
- over-committed nodes: after any pod or node event, a node whose live bound pods request more CPU,
  memory or pod slots than it allocates (the check PodObserver makes, here with allocatable read
  from the node watch, so nodes created after the observer started are checked too);
- pods left pending that fit: `pending_that_fit()`, meant for a quiet cluster (the schedulers had
  their chance), lists pending pods for which some node has the room, is schedulable, carries no
  NoSchedule/NoExecute taint the pod does not tolerate and matches its nodeSelector. Affinity,
  spread and ports are not judged: use it with pods that have none.

None of this reads scheduler code or scheduler state: only what the API server stored.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minisched.controlplane.observe import Overcommit, PodObserver, node_allocatable, pod_requests
from minisched.errors import Expired

Object = dict[str, Any]

__all__ = ["ClusterObserver", "InvariantReport", "NodeView", "tolerates"]


@dataclass
class NodeView:
    """What the observer knows of one node."""

    name: str
    allocatable: dict[str, int]
    unschedulable: bool = False
    taints: list[Object] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class InvariantReport:
    """The verdict; `ok` when every list is empty."""

    pods: int
    bound: int
    bound_twice: list[str]  # "<pod>: <how>"
    overcommits: list[Overcommit]
    pending_that_fit: list[str]  # "<pod> fits <node>"
    unbound: list[str]  # pods expected bound (see check) that are not

    @property
    def ok(self) -> bool:
        return not (self.bound_twice or self.overcommits or self.pending_that_fit or self.unbound)

    def problems(self, limit: int = 10) -> str:
        lines = []
        for what, items in (("bound twice", self.bound_twice), ("over-committed", self.overcommits),
                            ("pending although they fit", self.pending_that_fit), ("never bound", self.unbound)):
            if items:
                lines.append(f"{len(items)} {what}: {[str(i) for i in items[:limit]]}")
        return "; ".join(lines) or "none"

    def __str__(self) -> str:
        return f"{self.bound}/{self.pods} pods bound; problems: {self.problems()}"


def tolerates(pod: Object, taint: Mapping[str, Any]) -> bool:
    """Does one of the pod's tolerations tolerate `taint` (core/v1 Toleration.ToleratesTaint)?"""
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        key, op = t.get("key") or "", t.get("operator") or "Equal"
        if key and key != taint.get("key"):
            continue
        if op == "Exists" or (key and op == "Equal" and (t.get("value") or "") == (taint.get("value") or "")):
            return True
    return False


class ClusterObserver(PodObserver):
    """PodObserver plus a node watch (allocatable as it is now) and a watch of Scheduled events.

        with ClusterObserver.from_kubeconfig(kubeconfig, namespace=ns) as obs:
            ... run the schedulers, create pods ...
            obs.wait_for(lambda o: o.bound_count() >= n, timeout=120)
            report = obs.check(expect_bound=names)
        assert report.ok, report

    With `scheduler_name`, only pods for that scheduler count as pending-that-fit (others may wait
    for a scheduler that is not running)."""

    def __init__(
        self,
        cluster: Any,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        scheduler_name: str | None = None,
        watch_events: bool = True,
        owns_cluster: bool = False,
    ) -> None:
        super().__init__(cluster, namespace=namespace, label_selector=label_selector)
        self.scheduler_name = scheduler_name
        self.watch_events = watch_events
        self.owns_cluster = owns_cluster
        self.nodes: dict[str, NodeView] = {}
        self.pod_objects: dict[str, Object] = {}  # the latest of each live pod, for pending_that_fit
        # pod key -> {event name: count}: successful bindings as the schedulers reported them
        self.scheduled_events: dict[str, dict[str, int]] = {}
        self._streams: list[threading.Thread] = []
        self._stream_watches: dict[str, Any] = {}
        self._stream_synced: dict[str, threading.Event] = {}

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | Path, **options: Any) -> ClusterObserver:
        """An observer on a connection of its own, closed when it stops."""
        from minisched.cluster.real import RealCluster

        return cls(RealCluster.from_kubeconfig(path=str(kubeconfig)), owns_cluster=True, **options)

    # --- lifecycle

    def start(self, timeout: float = 30.0) -> ClusterObserver:
        # Nodes first, so that pods bound before the observer started are checked against them.
        self._stream("nodes", None, None, self._apply_node, timeout)
        if self.watch_events:
            self._stream("events", self.namespace, "reason=Scheduled", self._apply_event, timeout)
        super().start(timeout)
        return self

    def stop(self) -> None:
        super().stop()
        for w in list(self._stream_watches.values()):
            w.stop()
        for t in self._streams:
            t.join(10)
        if self.owns_cluster:
            self.cluster.close()

    def __enter__(self) -> ClusterObserver:
        return self.start()

    # --- the verdict

    def bound_twice(self) -> list[str]:
        with self._cond:
            out = [f"{r.key}: nodeName {r.node} then {r.node_changes}" for r in self.pods.values() if r.node_changes]
            out += [f"{r.key}: {r.bindings} bindings seen" for r in self.pods.values() if r.bindings > 1]
            for key, events in self.scheduled_events.items():
                total = sum(events.values())
                if total > 1:
                    out.append(f"{key}: {total} Scheduled events ({sorted(events)})")
        return out

    def pending_that_fit(self) -> list[str]:
        """Pending pods some node has room for now (one example node each)."""
        with self._cond:
            out = []
            for key, pod in self.pod_objects.items():
                spec = pod.get("spec") or {}
                if spec.get("nodeName") or spec.get("schedulingGates") or (pod.get("metadata") or {}).get(
                    "deletionTimestamp"
                ):
                    continue
                if self.scheduler_name and (spec.get("schedulerName") or "default-scheduler") != self.scheduler_name:
                    continue
                node = self._fits_somewhere(pod)
                if node is not None:
                    out.append(f"{key} fits {node}")
        return sorted(out)

    def check(self, expect_bound: Iterable[str] = ()) -> InvariantReport:
        """The report; `expect_bound` are pod keys ("ns/name", or names in the observer's namespace)
        that must be bound by now."""
        with self._cond:
            missing = []
            for name in expect_bound:
                key = name if "/" in name else f"{self.namespace}/{name}"
                rec = self.pods.get(key)
                if rec is None or rec.node is None:
                    missing.append(key)
            pods, bound, overcommits = len(self.pods), self.bound_count(), list(self.overcommits)
        return InvariantReport(pods, bound, self.bound_twice(), overcommits, self.pending_that_fit(), missing)

    def scheduled_count(self, key: str) -> int:
        with self._cond:
            return sum((self.scheduled_events.get(key) or {}).values())

    # --- pods (PodObserver does the accounting; we keep the objects for the fit check)

    def _apply(self, kind: str, pod: Object, now: float) -> None:
        super()._apply(kind, pod, now)
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        if kind == "DELETED":
            self.pod_objects.pop(key, None)
        else:
            self.pod_objects[key] = pod

    def _fits_somewhere(self, pod: Object) -> str | None:
        requests = pod_requests(pod)
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}
        for node in sorted(self.nodes.values(), key=lambda n: n.name):
            if node.unschedulable or any(node.labels.get(k) != v for k, v in selector.items()):
                continue
            if any(t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(pod, t) for t in node.taints):
                continue
            used = self._usage.get(node.name) or {}
            if all(used.get(r, 0) + q <= node.allocatable.get(r, 0) for r, q in requests.items()):
                return node.name
        return None

    # --- nodes and events

    def _apply_node(self, kind: str, node: Object) -> None:
        meta, spec = node.get("metadata") or {}, node.get("spec") or {}
        name = str(meta.get("name") or "")
        if kind == "DELETED":
            self.nodes.pop(name, None)
            self.allocatable.pop(name, None)
            return
        view = NodeView(name, node_allocatable(node), bool(spec.get("unschedulable")),
                        list(spec.get("taints") or []), dict(meta.get("labels") or {}))
        previous = self.nodes.get(name)
        self.nodes[name] = view
        self.allocatable[name] = view.allocatable
        if previous is None or previous.allocatable != view.allocatable:
            usage = self._usage.get(name) or {}
            for r, q in usage.items():
                if q > view.allocatable.get(r, 0):
                    self.overcommits.append(Overcommit(name, r, q, view.allocatable.get(r, 0), f"{kind} node {name}"))

    def _apply_event(self, kind: str, event: Object) -> None:
        if kind == "DELETED" or event.get("reason") != "Scheduled":
            return  # events expire (TTL); what they reported stays reported
        ref = event.get("involvedObject") or event.get("regarding") or {}
        if ref.get("kind") != "Pod":
            return
        key = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
        name = str((event.get("metadata") or {}).get("name") or "")
        count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
        seen = self.scheduled_events.setdefault(key, {})
        seen[name] = max(seen.get(name, 0), count)

    def _stream(self, resource: str, namespace: str | None, field_selector: str | None,
                apply: Callable[[str, Object], None], timeout: float) -> None:
        synced = threading.Event()
        self._stream_synced[resource] = synced
        thread = threading.Thread(target=self._stream_loop, args=(resource, namespace, field_selector, apply, synced),
                                  name=f"observer-{resource}", daemon=True)
        self._streams.append(thread)
        thread.start()
        if not synced.wait(timeout):
            raise TimeoutError(f"the observer's {resource} list did not finish in {timeout:.0f}s: {self._error}")

    def _stream_loop(self, resource: str, namespace: str | None, field_selector: str | None,
                     apply: Callable[[str, Object], None], synced: threading.Event) -> None:
        """List then watch `resource`, relisting after a 410; `apply` runs under the observer's lock."""
        rv: str | None = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    listed = self.cluster.list(resource, namespace, field_selector=field_selector)
                    with self._cond:
                        for obj in listed.get("items") or []:
                            apply("ADDED", obj)
                        self._cond.notify_all()
                    rv = listed["metadata"]["resourceVersion"]
                    synced.set()
                w = self.cluster.watch(resource, namespace, resource_version=rv, field_selector=field_selector,
                                       allow_bookmarks=True, timeout_seconds=300)
                self._stream_watches[resource] = w
                for event in w:
                    obj = event["object"]
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if event["type"] != "BOOKMARK":
                        with self._cond:
                            apply(event["type"], obj)
                            self._cond.notify_all()
            except Expired:
                rv = None
            except Exception as err:  # noqa: BLE001 - remembered (PodObserver.error), retried
                self._error = err
                if self._stop.wait(0.5):
                    return


def wait_quiet(observer: PodObserver, seconds: float, timeout: float) -> None:
    """Until the observer has seen no pod event for `seconds` (the schedulers are done or stuck)."""
    deadline = time.monotonic() + timeout
    last, since = observer.events_seen, time.monotonic()
    while time.monotonic() - since < seconds:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods still changing after {timeout:.0f}s")
        time.sleep(0.2)
        if observer.events_seen != last:
            last, since = observer.events_seen, time.monotonic()
