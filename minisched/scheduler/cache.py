"""The scheduler's cache: every node and every pod placed on one, as the scheduler believes them.

kube-scheduler's internal/cache (cache.go) over minisched's numpy NodeTable. Two sources feed it:

- the informers: nodes, and pods that have spec.nodeName (assigned pods);
- the scheduler itself: when it decides, it *assumes* the pod onto the node at once, so the next
  scheduling cycle already counts that pod's requests, long before the binding lands and the
  informer reports it.

An assumed pod then ends one of three ways:

- confirmed: the informer shows the pod bound (`add_pod`), and the assumption becomes fact (on the
  node the server says, should that ever differ);
- forgotten: the binding failed (`forget_pod`), and the room is given back;
- expired: binding finished but the informer never showed the pod within `assumed_ttl` (a lost
  watch event, a pod deleted in the meantime): `cleanup_expired()` gives the room back. (Current
  kube-scheduler never expires them; minisched keeps the older 30 s default so a lost event cannot
  hold room forever.)

Pods can arrive before their node (informers run independently); the table keeps them and counts
them once the node appears. Thread-safe: the scheduling loop, binding threads and informer handlers all
call in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minisched.clock import Clock, RealClock
from minisched.meta import key_of
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.lifecycle import CACHE_TRANSITIONS, CacheEvent, CacheState, IllegalTransition, step
from minisched.scheduler.snapshot import NodeTable

Object = dict[str, Any]

DEFAULT_ASSUMED_TTL = 30.0

log = logging.getLogger(__name__)


class CacheError(RuntimeError):
    """The cache was asked to do something its state says is wrong (a bug in the caller)."""


@dataclass
class _PodState:
    pod: Object
    info: PodInfo
    node_name: str
    assumed: bool = False
    binding_finished: bool = False
    deadline: float | None = None


class SchedulerCache:
    """Nodes and assigned pods, with assume/forget/confirm for pods on their way to being bound."""

    def __init__(
        self,
        table: NodeTable | None = None,
        *,
        clock: Clock | None = None,
        assumed_ttl: float = DEFAULT_ASSUMED_TTL,
        pod_info: Callable[[Object], PodInfo] | None = None,
    ) -> None:
        self.table = table if table is not None else NodeTable()
        self.clock: Clock = clock or RealClock()
        self.assumed_ttl = assumed_ttl
        self._pod_info = pod_info or PodInfo.from_pod
        self._lock = threading.RLock()
        self._nodes: dict[str, Object] = {}
        self._pods: dict[str, _PodState] = {}
        self.expired_total = 0

    # --- nodes ----------------------------------------------------------------------------------

    def add_node(self, node: Object) -> None:
        """Add or update a node. A node the table cannot read (a malformed allocatable) is logged and
        left out rather than breaking the informer that delivered it."""
        name = node["metadata"]["name"]
        with self._lock:
            try:
                self.table.add_node(node)  # updates when present; replays pods that came first
            except ValueError as err:
                log.error("node %s left out of the scheduler cache: %s", name, err)
                return
            self._nodes[name] = node

    def update_node(self, old: Object | None, new: Object) -> None:
        self.add_node(new)

    def remove_node(self, node: Object | str) -> None:
        name = node if isinstance(node, str) else node["metadata"]["name"]
        with self._lock:
            if self._nodes.pop(name, None) is not None:
                # Its pods stay in the table as orphans: if the node comes back before they are
                # deleted, they count again (kube keeps them the same way).
                self.table.remove_node(name)

    def node(self, name: str) -> Object | None:
        with self._lock:
            return self._nodes.get(name)

    def node_names(self) -> list[str]:
        with self._lock:
            return list(self._nodes)

    # --- pods: assume / forget / confirm (each decided by CACHE_TRANSITIONS) ---------------------------

    @staticmethod
    def _state(state: _PodState | None) -> CacheState:
        if state is None:
            return CacheState.ABSENT
        return CacheState.ASSUMED if state.assumed else CacheState.BOUND

    def _step(self, key: str, state: _PodState | None, event: CacheEvent) -> CacheState:
        return step("SchedulerCache", CACHE_TRANSITIONS, self._state(state), event, key)

    def assume_pod(self, pod: Object, node_name: str, info: PodInfo | None = None) -> None:
        """Count `pod` on `node_name` now, before the binding is done."""
        key = key_of(pod)
        with self._lock:
            try:
                self._step(key, self._pods.get(key), CacheEvent.ASSUME)
            except IllegalTransition as err:
                raise CacheError(f"pod {key} is already in the cache (on {self._pods[key].node_name}); "
                                 "it cannot be assumed again") from err
            state = _PodState(pod, info or self._pod_info(pod), node_name, assumed=True)
            self._pods[key] = state
            self._add_to_node(state)

    def finish_binding(self, pod: Object) -> None:
        """The bind call returned: start the clock on the confirmation."""
        key = key_of(pod)
        with self._lock:
            state = self._pods.get(key)
            if state is not None and self._step(key, state, CacheEvent.FINISH_BINDING) is CacheState.ASSUMED \
                    and state.assumed:
                state.binding_finished = True
                state.deadline = self.clock.monotonic() + self.assumed_ttl

    def forget_pod(self, pod: Object) -> None:
        """The binding failed: give the room back."""
        key = key_of(pod)
        with self._lock:
            state = self._pods.get(key)
            if self._step(key, state, CacheEvent.FORGET) is not CacheState.ABSENT or state is None:
                return  # already confirmed by the informer (someone bound it) or never assumed
            del self._pods[key]
            self._remove_from_node(state)

    def is_assumed(self, pod: Object | str) -> bool:
        # One dict read and one attribute, each atomic under the GIL: no lock, so the scheduling
        # loop never waits here for an informer or binding thread that holds it.
        state = self._pods.get(pod if isinstance(pod, str) else key_of(pod))
        return state is not None and state.assumed

    def cleanup_expired(self) -> int:
        """Forget assumed pods whose binding finished more than `assumed_ttl` ago without the
        informer confirming it. Returns how many expired."""
        now = self.clock.monotonic()
        with self._lock:
            expired = [
                key for key, s in self._pods.items()
                if s.assumed and s.binding_finished and s.deadline is not None and now >= s.deadline
            ]
            for key in expired:
                self._step(key, self._pods[key], CacheEvent.EXPIRE)
                self._remove_from_node(self._pods.pop(key))
            self.expired_total += len(expired)
            return len(expired)

    # --- pods: from the informer ------------------------------------------------------------------------

    def add_pod(self, pod: Object) -> None:
        """An assigned pod appeared (or a pod we assumed is now seen bound: confirm it)."""
        key = key_of(pod)
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        with self._lock:
            state = self._pods.get(key)
            self._step(key, state, CacheEvent.INFORMER_ADD)  # always BOUND: the server's word
            if state is not None:
                if state.assumed and state.node_name == node_name:
                    state.assumed = False  # confirmed; the assumed PodInfo stays (same pod)
                    state.pod = pod
                    state.deadline = None
                    return
                self._remove_from_node(state)  # bound elsewhere, or a stale entry: take the server's word
                del self._pods[key]
            state = _PodState(pod, self._pod_info(pod), node_name)
            self._pods[key] = state
            self._add_to_node(state)

    def update_pod(self, old: Object | None, new: Object) -> None:
        key = key_of(new)
        with self._lock:
            state = self._pods.get(key)
            if state is not None and not state.assumed and state.node_name == new["spec"].get("nodeName") \
                    and _same_requests(state.pod, new):
                state.pod = new  # most updates are status changes: no need to re-parse
                return
        self.add_pod(new)

    def remove_pod(self, pod: Object) -> None:
        key = key_of(pod)
        with self._lock:
            state = self._pods.get(key)
            if self._step(key, state, CacheEvent.REMOVE) is CacheState.ABSENT and state is not None:
                del self._pods[key]
                self._remove_from_node(state)

    def pod_node(self, key: str) -> str | None:
        state = self._pods.get(key)  # atomic under the GIL, as in is_assumed
        return state.node_name if state else None

    def pods_on(self, node_name: str) -> list[Object]:
        with self._lock:
            return [s.pod for s in self._pods.values() if s.node_name == node_name]

    def pod_count(self) -> int:
        with self._lock:
            return len(self._pods)

    def assumed_count(self) -> int:
        with self._lock:
            return sum(1 for s in self._pods.values() if s.assumed)

    # --- the per-cycle snapshot ----------------------------------------------------------------------------

    def snapshot(self) -> NodeTable:
        """A copy of the table for one scheduling cycle: later cache changes do not show in it."""
        with self._lock:
            return self.table.snapshot()

    def _add_to_node(self, state: _PodState) -> None:
        self.table.add_pod(state.node_name, state.info)  # kept as an orphan until the node exists

    def _remove_from_node(self, state: _PodState) -> None:
        self.table.remove_pod(state.node_name, state.info.key)


def _same_requests(old: Object, new: Object) -> bool:
    """Does the update leave what the cache parsed alone: requests (containers, pod-level resources,
    overhead), host ports, and what pod-selecting plugins read (labels, namespace, terminating)?"""
    o, n = old.get("spec") or {}, new.get("spec") or {}
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    return (
        o.get("containers") == n.get("containers")
        and o.get("initContainers") == n.get("initContainers")
        and o.get("overhead") == n.get("overhead")
        and o.get("resources") == n.get("resources")
        and om.get("labels") == nm.get("labels")
        and bool(om.get("deletionTimestamp")) == bool(nm.get("deletionTimestamp"))
    )
