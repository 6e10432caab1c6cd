"""The Scheduler's informer handlers (kube's pkg/scheduler/eventhandlers.go): which pods are
ours (the profiles' schedulerNames and the pod filter), pods and nodes in and out of the cache,
and the cluster events that move pods in the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minisched.informer import ResourceEventHandlerFuncs, SharedInformerFactory, unwrap_tombstone
from minisched.meta import key_of
from minisched.resources import CSI_NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES
from minisched.scheduler.cache import SchedulerCache
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.types import PodInfo, PodSpecError
from minisched.scheduler.framework.waiting_pods_map import uid_of
from minisched.scheduler.handle import SchedulerHandle
from minisched.scheduler.queue import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    NODE_ADD,
    NODE_DELETE,
    ClusterEvent,
    SchedulingQueue,
    node_update_events,
)

Object = dict[str, Any]

log = logging.getLogger(__name__)

API_DEFAULT_SCHEDULER = "default-scheduler"


class _EventHandlers:
    """Which pods are the Scheduler's and what the informers' events do to its cache and queue
    (kube's eventhandlers.go), a mixin of Scheduler: one class split over files as kube's
    Scheduler's methods are. What it reads of the Scheduler is declared here for the type checker
    and set in Scheduler.__init__ and start()."""

    frameworks: dict[str, Framework]
    queue: SchedulingQueue
    cache: SchedulerCache
    factory: SharedInformerFactory
    pod_filter: Callable[[Object], bool] | None
    handle: SchedulerHandle
    _pod_informer: Any

    if TYPE_CHECKING:  # the Scheduler's
        def pod_info(self, pod: Object) -> PodInfo: ...

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
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_ADD, None, new)  # (gated pods too)
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
        for plugin in fwk.pod_forgetters if fwk is not None else ():  # PreEnqueue plugins that remember pods they hold
            plugin.forget(key_of(pod))
        self.handle.reject_waiting_pod(uid_of(pod))  # its binding worker lets it go (kube's RejectWaitingPod)

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

    def move(self, event: ClusterEvent) -> int:
        """Tell the queue about a cluster event: what the handlers do, what a plugin that watches
        more kinds calls (its `register_informers` requeue), and what a caller may do by hand."""
        return self.queue.move_all_to_active_or_backoff(event)


def _scheduler_name(pod: Object) -> str:
    """spec.schedulerName; the API server fills in "default-scheduler" when a pod names none."""
    return str((pod.get("spec") or {}).get("schedulerName") or API_DEFAULT_SCHEDULER)
