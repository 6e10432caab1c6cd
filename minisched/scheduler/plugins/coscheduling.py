"""Coscheduling: gang scheduling of a PodGroup, all of its minMember pods or none.

kubernetes-sigs/scheduler-plugins' Coscheduling (pkg/coscheduling), at four extension points:

- PreEnqueue: a pod of a group waits out of the queue until its PodGroup exists and at least
  minMember pods of the group exist (there is no point in placing some of them before that).
- Permit: each member, once a node is found and the room reserved (assumed in the cache), waits
  until minMember members of the group are assumed or bound; the one that completes the count
  allows all the waiting ones at once, and they bind together. A member waits at most the group's
  scheduleTimeoutSeconds (default: the plugin's permitWaitingTimeSeconds, 60).
- PostFilter: a member that fits nowhere dooms the attempt: the members waiting at Permit are
  rejected at once (they give their room back) instead of holding it until the timeout.
- Unreserve: a member whose wait timed out (or whose binding failed) rejects the others too, so
  the group frees everything it held. Then all of them go back to the queue as unschedulable.

A pod joins a group with the label scheduling.x-k8s.io/pod-group: <name>. The PodGroup CRD must
be installed before the scheduler starts (minisched.validation.podgroup.install_pod_group_crd):
the plugin watches PodGroups and group members through the scheduler's informers.

Not modelled from scheduler-plugins: the PodGroup status controller (phase, scheduled counts: a
member's arrival, which changes them there, is the GROUP_MEMBER_ADD event here), the group-aware
QueueSort (minisched keeps PrioritySort; members of different groups may interleave, which the
Permit timeout resolves), the activation of a waiting member's siblings at Permit, the PodGroup
backoff, and minResources pre-checks. So members rejected by Coscheduling come back on the events
it registers (as scheduler-plugins': a pod added, a PodGroup added or updated), or after the
queue's 5 minutes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from minisched.resources import PODS
from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework.cluster_event import ASSIGNED_POD_ADD, ClusterEvent
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import Handle, WaitingPod
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.lifecycle import GROUP_TRANSITIONS, GroupEvent, GroupState, step
from minisched.validation.podgroup import PODGROUPS, pod_group_of

NAME = "Coscheduling"
DEFAULT_PERMIT_WAITING_SECONDS = 60
GROUP_INDEX = "podgroup"  # pod informer index: "namespace/group" -> the group's pods

POD_GROUP_ADD = ClusterEvent("PodGroup", "Add")
POD_GROUP_UPDATE = ClusterEvent("PodGroup", "Update")
GROUP_MEMBER_ADD = ClusterEvent("Pod", "AddToPodGroup")

Object = dict[str, Any]
Requeue = Callable[[ClusterEvent], int]


def group_key(pod: Object) -> str | None:
    """"namespace/group" for a member of a group, else None."""
    group = pod_group_of(pod)
    if group is None:
        return None
    return f"{(pod.get('metadata') or {}).get('namespace') or 'default'}/{group}"


def _group_index(pod: Object) -> list[str]:
    key = group_key(pod)
    phase = (pod.get("status") or {}).get("phase")
    return [key] if key is not None and phase not in ("Succeeded", "Failed") else []


class Coscheduling:
    name = NAME

    def __init__(self, handle: Handle, permit_waiting_seconds: int = DEFAULT_PERMIT_WAITING_SECONDS) -> None:
        self.handle = handle
        self.permit_waiting_seconds = permit_waiting_seconds
        self._groups: Any = None  # the PodGroup informer's store
        self._pods: Any = None  # the pod informer's store, indexed by group
        self._phases: dict[str, GroupState] = {}  # by GROUP_TRANSITIONS; absent = PENDING
        self._phase_lock = threading.Lock()

    def phase(self, key: str) -> GroupState:
        """Where the group "namespace/name" stands in this scheduler."""
        with self._phase_lock:
            return self._phases.get(key, GroupState.PENDING)

    def _group_event(self, key: str, event: GroupEvent) -> GroupState:
        with self._phase_lock:
            state = step("PodGroup", GROUP_TRANSITIONS, self._phases.get(key, GroupState.PENDING), event, key)
            if state is GroupState.PENDING:
                self._phases.pop(key, None)
            else:
                self._phases[key] = state
            return state

    # --- wiring (the scheduler calls this before it starts its informers) ---------------------------

    def register_informers(self, factory: Any, requeue: Requeue) -> None:
        from minisched.informer import ResourceEventHandlerFuncs

        pods = factory.informer_for(PODS, indexers={GROUP_INDEX: _group_index})
        groups = factory.informer_for(PODGROUPS)
        self._pods, self._groups = pods.store, groups.store

        def member_added(pod: Object, _initial: bool = False) -> None:
            if group_key(pod) is not None:
                requeue(GROUP_MEMBER_ADD)

        def group_added(_group: Object, _initial: bool = False) -> None:
            requeue(POD_GROUP_ADD)

        def group_updated(_old: Object, _new: Object) -> None:
            requeue(POD_GROUP_UPDATE)

        pods.add_event_handler(ResourceEventHandlerFuncs(member_added, None, None))
        groups.add_event_handler(ResourceEventHandlerFuncs(group_added, group_updated, None))

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        # scheduler-plugins registers Pod Add (in kube-scheduler that matches an assigned pod's add)
        # and PodGroup Add/Update. GROUP_MEMBER_ADD stands in for the PodGroup status controller,
        # which minisched lacks: a member's arrival changes its group's status there, an Update.
        # Not AssignedPodDelete: each member rejected at Permit frees its room with that event,
        # while the other members rejected with it are still in flight and record it, so they
        # would be sent round and round (wait, time out, retry) instead of settling.
        return ce.events(None, GROUP_MEMBER_ADD, POD_GROUP_ADD, POD_GROUP_UPDATE, ASSIGNED_POD_ADD)

    # --- lookups ---------------------------------------------------------------------------------------

    def _group(self, key: str) -> Object | None:
        if self._groups is None:
            raise RuntimeError(f"{NAME} was not wired to informers (the scheduler calls register_informers)")
        group: Object | None = self._groups.get_by_key(key)
        return group

    @staticmethod
    def min_member(group: Object) -> int:
        return int((group.get("spec") or {}).get("minMember") or 0)

    def timeout_of(self, group: Object) -> int:
        seconds = (group.get("spec") or {}).get("scheduleTimeoutSeconds")
        return int(seconds) if seconds else self.permit_waiting_seconds

    def members(self, key: str) -> list[Object]:
        """The group's live pods (pending or bound), from the informer's index."""
        members: list[Object] = self._pods.by_index(GROUP_INDEX, key)
        return members

    def assigned(self, state: CycleState, key: str) -> int:
        """Members assumed or bound in this cycle's snapshot (waiting ones are assumed)."""
        namespace, _, name = key.partition("/")
        table = state.snapshot if state.snapshot is not None else self.handle.snapshot()
        counts = table.count_pods(lambda p: p.namespace == namespace and pod_group_of(p.pod) == name)
        return int(counts.sum())

    def _waiting_members(self, key: str) -> list[WaitingPod]:
        members: list[WaitingPod] = []

        def collect(waiting: WaitingPod) -> None:
            if group_key(waiting.pod) == key:
                members.append(waiting)

        self.handle.iterate_over_waiting_pods(collect)
        return members

    def _reject_waiting(self, key: str, message: str) -> None:
        for waiting in self._waiting_members(key):
            waiting.reject(NAME, message)

    # --- extension points ---------------------------------------------------------------------------------

    def pre_enqueue(self, pod: Object) -> Status:
        key = group_key(pod)
        if key is None:
            return Status.success()
        group = self._group(key)
        if group is None:
            return Status.unschedulable(f"PodGroup {key} not found", plugin=NAME, unresolvable=True)
        total, need = len(self.members(key)), self.min_member(group)
        if total < need:
            return Status.unschedulable(
                f"PodGroup {key} has {total} pods, fewer than its minMember {need}", plugin=NAME, unresolvable=True)
        return Status.success()

    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]) -> tuple[str | None, Status]:
        key = group_key(pod.pod)
        if key is None:
            return None, Status.unschedulable(plugin=NAME)  # nothing to say about pods outside groups
        group = self._group(key)
        if group is None or self.assigned(state, key) >= self.min_member(group):
            # enough members are placed already: this one just waits for room, the group stands
            return None, Status.unschedulable(plugin=NAME)
        message = f"PodGroup {key} gets rejected: pod {pod.key} is unschedulable even after PostFilter"
        self._group_event(key, GroupEvent.REJECTED)
        self._reject_waiting(key, message)
        return None, Status.unschedulable(message, plugin=NAME)

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        key = group_key(pod.pod)
        if key is not None:
            self._group_event(key, GroupEvent.REJECTED)
            self._reject_waiting(key, f"PodGroup {key} gets rejected: member {pod.key} was unreserved")

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        key = group_key(pod.pod)
        if key is None:
            return Status.success(), 0.0
        group = self._group(key)
        if group is None:
            return Status.unschedulable(f"PodGroup {key} not found", plugin=NAME, unresolvable=True), 0.0
        if self.assigned(state, key) + 1 >= self.min_member(group):  # + 1: this pod, assumed after the snapshot
            self._group_event(key, GroupEvent.QUORUM)
            for waiting in self._waiting_members(key):
                waiting.allow(NAME)
            return Status.success(), 0.0
        self._group_event(key, GroupEvent.MEMBER_WAITS)
        return Status.wait(NAME), float(self.timeout_of(group))


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> Coscheduling:
    if handle is None:
        raise ValueError(f"{NAME} needs a handle (it holds and releases pods waiting at Permit)")
    args = dict(args or {})
    seconds = args.pop("permitWaitingTimeSeconds", DEFAULT_PERMIT_WAITING_SECONDS)
    if args:
        raise ValueError(f"{NAME}: unknown args {sorted(args)} (known: permitWaitingTimeSeconds)")
    if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds <= 0:
        raise ValueError(f"{NAME}: permitWaitingTimeSeconds must be a positive integer, got {seconds!r}")
    return Coscheduling(handle, seconds)
