"""Chapter 1: a whole scheduler in about 200 lines, readable in one sitting.

    informers (pods, nodes) ──pending pods for us──> rate-limited work queue ──> schedule_one(key)
        schedule_one: filter (Ready, schedulable, no untolerated taint, CPU, memory and pod count fit)
                      → score (least allocated, ties by name) → bind (pods/binding)
                      → or, if nothing fits, preempt lower-priority pods, then retry

It is the book's design done right: the "enough CPU" check compares the pod's requests with the
node's allocatable minus what is already bound there (CPU *and* memory, not "usage < 80%"), the
choice scores every feasible node (the book's "round-robin" takes candidates[0], the same node
every time), and preemption removes only as many lower-priority pods as the pod needs, on the node
where that costs least, and binds only after they are gone. The full, pluggable scheduler lives in
minisched.scheduler; this file depends on nothing of it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from minisched.clock import Clock
from minisched.cluster.base import Cluster
from minisched.errors import ApiError, BadRequest, Conflict, NotFound
from minisched.informer import (
    DeletedFinalStateUnknown,
    ResourceEventHandlerFuncs,
    SharedInformerFactory,
    deletion_handling_key,
)
from minisched.meta import key_of, name_of, namespace_of, uid_of
from minisched.objects import DEFAULT_SCHEDULER_NAME
from minisched.policy.functions import tolerates_taint
from minisched.quantity import milli_value, value
from minisched.resources import NODES, PODS
from minisched.selectors import parse_label_selector
from minisched.workqueue import RateLimitingQueue

Object = dict[str, Any]
log = logging.getLogger("minisched.tiny")
RESOURCES = ("cpu", "memory", "pods")  # cpu in millicores, memory in bytes, pods in pods


def pod_requests(pod: Object) -> dict[str, int]:
    """What a pod asks for: the sum over containers, or the largest init container if larger."""
    spec = pod.get("spec") or {}

    def of(container: Object, name: str) -> int:
        raw = ((container.get("resources") or {}).get("requests") or {}).get(name)
        return 0 if raw is None else (milli_value(raw) if name == "cpu" else value(raw))

    total = {r: sum(of(c, r) for c in spec.get("containers") or []) for r in ("cpu", "memory")}
    for init in spec.get("initContainers") or []:
        total = {r: max(total[r], of(init, r)) for r in total}
    return {**total, "pods": 1}


def allocatable(node: Object) -> dict[str, int]:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {"cpu": milli_value(alloc.get("cpu", 0)), "memory": value(alloc.get("memory", 0)),
            "pods": value(alloc.get("pods", 0))}  # fmt: skip


def is_ready(node: Object) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def untolerated_taint(pod: Object, node: Object) -> Object | None:
    """The first NoSchedule or NoExecute taint of `node` that no toleration of `pod` matches: such a
    node is not ready for this pod (kube's TaintToleration filter; PreferNoSchedule only scores)."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                tolerates_taint(t, taint) for t in tolerations):
            return dict(taint)
    return None


def priority(pod: Object) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def is_active(pod: Object) -> bool:
    """Holds its node's resources: bound and not finished (terminating pods still hold them)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in (
        "Succeeded", "Failed",
    )  # fmt: skip


@dataclass
class Decision:
    pod: str
    node: str | None = None
    scores: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)  # node → why it was filtered out
    victims: list[str] = field(default_factory=list)
    error: str | None = None


class TinyScheduler:
    def __init__(self, cluster: Cluster, *, scheduler_name: str = DEFAULT_SCHEDULER_NAME,
                 clock: Clock | None = None, node_selector: str | None = None) -> None:  # fmt: skip
        """`node_selector` (a label selector) scopes it to those nodes: its node informer lists and
        watches only them, as a chapter on a shared cluster needs (see objects.CHAPTER_LABEL)."""
        self.cluster, self.scheduler_name = cluster, scheduler_name
        if node_selector:
            try:
                parse_label_selector(node_selector)
            except BadRequest as err:  # a typo must not leave a scheduler that sees no nodes
                raise ValueError(f"node_selector {node_selector!r} is not a label selector: {err}") from None
        self.factory = SharedInformerFactory(cluster, clock=clock)
        self.pods = self.factory.informer_for(PODS)
        self.nodes = self.factory.informer_for(NODES, label_selector=node_selector or None)
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(name="tiny", clock=clock)
        # Binds the cache has not seen yet (pod key → node): counted as used, or we would overcommit.
        self.assumed: dict[str, tuple[str, Object]] = {}
        self.nominated: dict[str, str] = {}  # preemptor key → node whose victims are going
        # preemptor key → its victims' UIDs (a StatefulSet's replacement keeps the name, not the UID).
        # It waits while any is still in the cache, terminating or not yet seen to be: the delete
        # returns before the watch shows it, and a preemptor that looked only for terminating pods
        # would, in that window, give up its node and preempt again.
        self.victims: dict[str, set[str]] = {}
        self.decisions: list[Decision] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.pods.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda pod, _initial: self._on_pod(pod), update=lambda _old, new: self._on_pod(new),
            delete=self._on_pod_deleted,
        ))  # fmt: skip
        # A node appearing or changing may make waiting pods fit: look at them again.
        self.nodes.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda _n, _i: self._requeue_pending(), update=lambda _o, _n: self._requeue_pending(),
        ))  # fmt: skip

    def _ours_and_pending(self, pod: Object) -> bool:
        spec = pod.get("spec") or {}
        return spec.get("schedulerName") == self.scheduler_name and not spec.get("nodeName") and not (
            pod.get("metadata") or {}).get("deletionTimestamp")  # fmt: skip

    def _on_pod(self, pod: Object) -> None:
        if self._ours_and_pending(pod):
            self.queue.add(key_of(pod))
        elif key_of(pod) in self.assumed and (pod.get("spec") or {}).get("nodeName"):
            with self._lock:
                self.assumed.pop(key_of(pod), None)  # the cache has caught up with our bind

    def _on_pod_deleted(self, pod: Object | DeletedFinalStateUnknown) -> None:
        with self._lock:  # a pod deleted before the cache saw our bind must not hold room for ever
            self.assumed.pop(deletion_handling_key(pod), None)
            self.nominated.pop(deletion_handling_key(pod), None)
            self.victims.pop(deletion_handling_key(pod), None)
        self._requeue_pending()  # freed room may let a waiting pod fit

    def _requeue_pending(self) -> None:
        for pod in self.pods.store.list():
            if self._ours_and_pending(pod):
                self.queue.add(key_of(pod))

    # -- one scheduling decision --------------------------------------------------------------

    def node_usage(self, pods: list[Object] | None = None) -> dict[str, dict[str, int]]:
        """Requests already placed on each node: bound pods in the cache (or in `pods`, a list of
        it) plus our assumed binds."""
        used: dict[str, dict[str, int]] = {}
        with self._lock:
            assumed = dict(self.assumed)
        pods = self.pods.store.list() if pods is None else pods
        bound = {key_of(p) for p in pods if p["spec"].get("nodeName")}
        placed = [(p["spec"]["nodeName"], p) for p in pods if is_active(p)]
        placed += [(node, pod) for key, (node, pod) in assumed.items() if key not in bound]
        for node, pod in placed:
            slot = used.setdefault(node, dict.fromkeys(RESOURCES, 0))
            for r, amount in pod_requests(pod).items():
                slot[r] += amount
        return used

    def filter(self, pod: Object, node: Object, used: dict[str, int]) -> str | None:
        """None if the pod fits on the node, else the reason it does not."""
        if not is_ready(node):
            return "not Ready"
        if (node.get("spec") or {}).get("unschedulable"):
            return "unschedulable"
        if taint := untolerated_taint(pod, node):
            return f"taint {taint['key']}:{taint['effect']} not tolerated"
        free = {r: a - used.get(r, 0) for r, a in allocatable(node).items()}
        short = [r for r, need in pod_requests(pod).items() if need > free[r]]
        return f"insufficient {', '.join(short)}" if short else None

    @staticmethod
    def score(pod: Object, node: Object, used: dict[str, int]) -> int:
        """Least allocated (kube-scheduler's default): mean free share of CPU and memory after
        placing the pod, 0–100. Spreads pods instead of piling them on the first node."""
        alloc, need = allocatable(node), pod_requests(pod)
        shares = [(alloc[r] - used.get(r, 0) - need[r]) * 100 // alloc[r] for r in ("cpu", "memory") if alloc[r]]
        return sum(shares) // len(shares) if shares else 0

    def schedule_one(self, key: str) -> Decision:
        pod = self.pods.store.get_by_key(key)
        decision = Decision(key)
        if pod is None or not self._ours_and_pending(pod) or key in self.assumed:
            return decision  # deleted or bound meanwhile (or bound by us, the cache not told yet)
        # One list of the cache for the whole decision: the informer changes it meanwhile, and room
        # counted from one moment with victims picked from another could evict pods for nothing.
        pods = self.pods.store.list()
        usage = self.node_usage(pods)
        nominated = self.nominated.get(key)
        for node in sorted(self.nodes.store.list(), key=name_of):
            used = dict(usage.get(name_of(node), {}))
            for other, target in self.nominated.items():  # space freed for a preemptor is its
                if other != key and target == name_of(node) and (p := self.pods.store.get_by_key(other)):
                    used = {r: used.get(r, 0) + n for r, n in pod_requests(p).items()}
            reason = self.filter(pod, node, used)
            if reason:
                decision.rejected[name_of(node)] = reason
            else:
                decision.scores[name_of(node)] = self.score(pod, node, used)
        if decision.scores:
            best = max(decision.scores.values())
            tied = sorted(n for n, s in decision.scores.items() if s == best)
            choice = nominated if nominated in tied else tied[0]  # ties: the nominated node, else by name
            self.cluster.bind(namespace_of(pod), name_of(pod), choice, uid=uid_of(pod))
            with self._lock:
                self.assumed[key] = (choice, pod)
                self.nominated.pop(key, None)
                self.victims.pop(key, None)
            decision.node = choice
        elif priority(pod) > 0 and not nominated:
            decision.victims = self.preempt(pod, usage, pods)
            decision.error = "preempting " + ", ".join(decision.victims) if decision.victims else "no node fits"
        elif nominated and self.victims.get(key, set()) & {uid_of(p) for p in pods}:
            decision.error = "waiting for victims to go"
        else:
            self.nominated.pop(key, None)  # victims gone and still no room: start over next time
            self.victims.pop(key, None)
            decision.error = "no node fits"
        return decision

    def preempt(self, pod: Object, usage: dict[str, dict[str, int]], pods: list[Object]) -> list[str]:
        """The book's synchronous preemption, done carefully: on each node, take lower-priority pods
        (lowest first) until the pod would fit; pick the node needing the fewest, lowest-priority
        victims; delete them and nominate the node. Binding waits for the next attempt, after the
        victims are gone (binding now would overcommit the node while they terminate). `usage` is
        `node_usage(pods)`: both from one list of the cache."""
        best: tuple[tuple[int, int, str], str, list[Object]] | None = None
        for node in self.nodes.store.list():
            if not is_ready(node) or untolerated_taint(pod, node):
                continue  # evicting pods would not make room on a node the pod cannot use
            used = dict(usage.get(name_of(node), dict.fromkeys(RESOURCES, 0)))
            lower = sorted((p for p in pods if is_active(p) and p["spec"]["nodeName"] ==
                            name_of(node) and priority(p) < priority(pod)), key=lambda p: (priority(p), name_of(p)))
            victims: list[Object] = []
            while self.filter(pod, node, used) and lower:
                victim = lower.pop(0)
                victims.append(victim)
                used = {r: used[r] - n for r, n in pod_requests(victim).items()}
            if victims and not self.filter(pod, node, used):
                cost = (len(victims), max(priority(v) for v in victims), name_of(node))
                if best is None or cost < best[0]:
                    best = (cost, name_of(node), victims)
        if best is None:
            return []
        _, node_name, victims = best
        for victim in victims:
            with contextlib.suppress(NotFound, Conflict):  # already gone
                self.cluster.delete(PODS, name_of(victim), namespace_of(victim), preconditions={"uid": uid_of(victim)})
        self.nominated[key_of(pod)] = node_name
        self.victims[key_of(pod)] = {uid_of(v) for v in victims}
        return [key_of(v) for v in victims]

    # -- the loop -----------------------------------------------------------------------------

    def process_next(self) -> bool:
        key, shutdown = self.queue.get()
        if shutdown or key is None:
            return False
        try:
            decision = self.schedule_one(key)
        except ApiError as error:  # e.g. 409: someone else bound it; the informer will tell us
            decision = Decision(key, error=f"{type(error).__name__}: {error}")
        try:
            if decision.node or (decision.error is None):
                self.queue.forget(key)
            else:
                self.queue.add_rate_limited(key)  # retry with back-off: nodes or victims may change
        finally:
            self.queue.done(key)
        self.decisions.append(decision)
        return True

    def start(self, sync_timeout: float = 30.0) -> None:
        self.factory.start()
        if not all(self.factory.wait_for_cache_sync(sync_timeout).values()):
            raise TimeoutError(f"tiny scheduler: caches did not sync within {sync_timeout} s")

    def run_in_thread(self) -> None:
        self._thread = threading.Thread(target=lambda: [None for _ in iter(self.process_next, False)], daemon=True)
        self._thread.start()

    def settle(self, timeout: float = 30.0, quiet: float = 0.1, until: Callable[[], bool] | None = None) -> int:
        """Single-threaded: schedule until `until()` holds (if given) and no work has arrived for
        `quiet` real seconds. Returns how many pods were processed. The timeout is generous: it
        returns as soon as that holds, and a loaded machine's API server (a CI run) once needed
        more than 10 s for chapter 1's nine bindings."""
        deadline, last, count = time.monotonic() + timeout, time.monotonic(), 0
        while time.monotonic() < deadline:
            if len(self.queue):
                self.process_next()
                count, last = count + 1, time.monotonic()
            elif time.monotonic() - last >= quiet and (until is None or until()):
                return count
            else:
                time.sleep(0.005)
        raise TimeoutError(f"tiny scheduler still busy after {timeout} s")

    def stop(self) -> None:
        self.queue.shut_down()
        if self._thread:
            self._thread.join(5)
        self.factory.shutdown()
