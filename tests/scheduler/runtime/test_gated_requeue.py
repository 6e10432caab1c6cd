"""A gated pod leaving the gated pods, as kube-scheduler 1.35.4's PriorityQueue lets it out
(pkg/scheduler/backend/queue): kube keeps gated pods with the unschedulable ones, and whatever lets
one out (an event its gating plugin registered, an update, the 5-minute flush) sends it through
requeuePodWithQueueingStrategy (scheduling_queue.go:1193): to backoffQ while isPodBackingoff
(:1201), else to activeQ. A pod gated since it arrived never failed, so it has no backoff
(backoff_queue.go:234, getBackoffTime's `count == 0`); one held by PreEnqueue on its way back after
a failed attempt still has the backoff of that attempt. Activate (:746) sends it to activeQ either
way. PreEnqueue is asked on the way as on any move: moveToActiveQ (:638), and moveToBackoffQ (:684)
only with SchedulerPopFromBackoffQ.

Ported from scheduling_queue_test.go: TestPriorityQueue_MoveAllToActiveOrBackoffQueueWithQueueingHint's
gated cases (:1953, :1964), TestPriorityQueue_Update's backing-off cases (:1195, :1209) and
TestPriorityQueue_moveToBackoffQ's "would reject the pod, but isn't run" (:1716) for a gated pod,
Test_queuedPodInfo_gatedSetUponCreationAndUnsetUponUpdate (:4309) and TestPerPodSchedulingMetrics'
gated case (:3659). kube's tests set a QueuedPodInfo's GatingPlugin by hand; here a pod gets gated as
in a scheduler: on arrival, or held by PreEnqueue on its way back after a failed attempt."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.objects import make_pod
from minisched.scheduler.framework.cluster_event import (
    NODE_ADD,
    QUEUE,
    QUEUE_SKIP,
    UNSCHEDULED_POD_UPDATE,
    WILDCARD_EVENT,
    QueueingHint,
    RegisteredHint,
)
from minisched.scheduler.queue import QueuedPodInfo, SchedulingQueue, scheduling_gates_pre_enqueue
from tests.scheduler.runtime.helpers import Allowlist

PROFILE = "minisched"  # make_pod's pods ask for it


def queue_hint(pod: Any, old: Any, new: Any) -> QueueingHint:
    return QUEUE


def _queue(foo: Allowlist, *, registrations: dict[Any, list[RegisteredHint]] | None = None,
           pop_from_backoff: bool = True) -> tuple[SchedulingQueue, VirtualClock]:
    """kube's test queue of TestPriorityQueue_MoveAllToActiveOrBackoffQueueWithQueueingHint: the
    SchedulingGates plugin and `foo` at PreEnqueue; foo registered Node/Add, SchedulingGates the
    pod's own update, both hinting Queue (1 s initial backoff, 10 s max: kube's defaults)."""
    clock = VirtualClock()
    hints = registrations if registrations is not None else {
        NODE_ADD: [RegisteredHint(foo.name, queue_hint)],
        UNSCHEDULED_POD_UPDATE: [RegisteredHint("SchedulingGates", queue_hint)],
    }
    return SchedulingQueue(clock=clock, pre_enqueue=(scheduling_gates_pre_enqueue, foo), queueing_hints={PROFILE: hints},
                           pop_from_backoff=pop_from_backoff), clock


def _held_on_its_way_back(q: SchedulingQueue, foo: Allowlist, *, error: bool = False,
                          activated: bool = False) -> QueuedPodInfo:
    """pod1 arrives (foo lets it through), is tried and fails; on its way back foo holds it. kube's
    test gates the failed pod by hand (setQueuedPodInfoGated); here an event foo registered comes
    during the attempt (so the rejection backs it off: determineSchedulingHintForInFlightPod), or
    the attempt ends in an error, and PreEnqueue, asked on the way to backoffQ (with
    SchedulerPopFromBackoffQ), holds it; or, `activated`, it is rejected and parked, and Activate's
    move to activeQ asks PreEnqueue (with the gate or without)."""
    q.add(make_pod("pod1", labels={"foo": "bar"}))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    allowed, foo.allowed = foo.allowed, set()
    if error:
        q.add_unschedulable(qpi, error=True)
    elif activated:
        q.add_unschedulable(qpi, rejected_by=[foo.name])
        assert q.activate(qpi.key) is False
    else:
        q.move_all_to_active_or_backoff(NODE_ADD)
        q.add_unschedulable(qpi, rejected_by=[foo.name])
    assert q.where(qpi.key) == "gated" and qpi.gated_by == foo.name
    foo.allowed = allowed
    return qpi


def _node_add(q: SchedulingQueue) -> int:
    """A Node/Add, as the scheduler's handlers tell the queue of an event a plugin registered."""
    return q.move_all_to_active_or_backoff(NODE_ADD)


# --- TestPriorityQueue_MoveAllToActiveOrBackoffQueueWithQueueingHint, the gated cases ------------------


@pytest.mark.parametrize(("waited", "want"), [
    # kube :1964 "QueueHintFunction is called when Pod is gated by the plugin that is interested in
    # the event ... and, as a result, this pod should be queued to backoffQ"
    (0.0, "backoff"),
    # the same once its 1 s backoff is over (kube's :1936 for a pod not gated: initial backoff + 1 s)
    (2.0, "active"),
])
def test_a_gated_pod_let_out_by_an_event_backs_off_what_is_left_of_its_backoff(waited: float, want: str) -> None:
    foo = Allowlist("foo", "foo")
    q, clock = _queue(foo)
    qpi = _held_on_its_way_back(q, foo)
    clock.advance(waited)
    assert _node_add(q) == 1
    assert q.where(qpi.key) == want
    assert qpi.gated_by is None


def test_a_gated_pods_gating_plugin_must_have_registered_the_event() -> None:
    """kube :1953 "QueueHintFunction is not called when Pod is gated by the plugin that isn't
    interested in the event": gated by SchedulingGates (registered the pod's update only), a
    Node/Add asks no hint and leaves it gated."""
    asked: list[str] = []

    def foo_hint(pod: Any, old: Any, new: Any) -> QueueingHint:
        asked.append((pod.get("metadata") or {}).get("name"))
        return QUEUE

    foo = Allowlist("foo", "foo")
    q, _ = _queue(foo, registrations={NODE_ADD: [RegisteredHint("foo", foo_hint)],
                                      UNSCHEDULED_POD_UPDATE: [RegisteredHint("SchedulingGates", queue_hint)]})
    q.add(make_pod("pod1", labels={"foo": "bar"}, scheduling_gates=["example.com/wait"]))
    assert q.where("default/pod1") == "gated"
    assert _node_add(q) == 0
    assert q.where("default/pod1") == "gated" and asked == []


def test_a_pod_gated_since_it_arrived_has_no_backoff_to_wait_out() -> None:
    """kube's getBackoffTime (backoff_queue.go:234): no failed attempt, no backoff; an event that
    opens its gate sends it to activeQ at once (the clock does not move here)."""
    foo = Allowlist("foo")
    q, _ = _queue(foo)
    q.add(make_pod("pod1", labels={"foo": "bar"}))
    assert q.where("default/pod1") == "gated"
    foo.allowed = {"foo"}
    assert _node_add(q) == 1
    assert q.where("default/pod1") == "active"


# --- an update that lets it out: TestPriorityQueue_Update's cases, for a gated pod -------------------------


@pytest.mark.parametrize(("waited", "want"), [
    # kube :1195 "when updating a pod which is in unschedulable queue and is backing off, it will be
    # moved to backoff queue" (kube's Update sends a gated pod the same way: :1071, :1201)
    (0.0, "backoff"),
    # kube :1209 "... is not backing off, it will be moved to active queue" (the clock moved by the max backoff)
    (10.0, "active"),
])
def test_an_update_that_lets_a_gated_pod_out_respects_its_backoff(waited: float, want: str) -> None:
    foo = Allowlist("foo", "foo")
    q, clock = _queue(foo)
    qpi = _held_on_its_way_back(q, foo)
    foo.allowed = {"queueable"}  # what the update adds: kube's updatePodQueueable label
    clock.advance(waited)
    q.update(qpi.pod, make_pod("pod1", labels={"foo": "bar", "queueable": ""}))
    assert q.where(qpi.key) == want


def test_ungated_by_an_update_since_it_arrived() -> None:
    """kube :4309 Test_queuedPodInfo_gatedSetUponCreationAndUnsetUponUpdate: a pod created gated, its
    gates removed, is popped next, no longer gated."""
    q = SchedulingQueue(clock=VirtualClock())
    gated = make_pod("p", scheduling_gates=["hello world"])
    q.add(gated)
    assert q.where("default/p") == "gated"
    q.update(gated, make_pod("p"))
    popped = q.pop(timeout=0)
    assert popped is not None and popped.key == "default/p" and popped.gated_by is None


def test_a_gated_pods_first_attempt_is_timed_from_its_gate_lifting() -> None:
    """kube :3659 "A gated pod is created and scheduled after lifting gate": one attempt, the initial
    attempt's time the minute the gate was lifted, not when the pod was created."""
    foo = Allowlist("foo", "foo")
    clock = VirtualClock()
    q = SchedulingQueue(clock=clock, pre_enqueue=[foo])
    pod = make_pod("test-pod")
    created = clock.monotonic()
    q.add(pod)
    assert q.where("default/test-pod") == "gated"
    clock.advance(60)
    q.update(pod, make_pod("test-pod", labels={"foo": ""}))
    popped = q.pop(timeout=0)
    assert popped is not None
    assert popped.attempts == 1 and popped.initial_attempt_timestamp == created + 60


# --- PreEnqueue on the way out: moveToActiveQ, and moveToBackoffQ only with SchedulerPopFromBackoffQ --------


@pytest.mark.parametrize(("pop_from_backoff", "want"), [
    # with the gate, moveToBackoffQ asks PreEnqueue (:689), which holds it: it stays gated
    (True, "gated"),
    # kube :1716 "preEnqueue plugin registered, preEnqueue plugin would reject the pod, but isn't run":
    # without the gate moveToBackoffQ asks nothing, and the backing-off pod goes to backoffQ ...
    (False, "backoff"),
])
def test_a_backing_off_gated_pod_let_out_is_asked_as_moveToBackoffQ_asks(pop_from_backoff: bool, want: str) -> None:
    foo = Allowlist("foo", "foo")
    q, clock = _queue(foo, pop_from_backoff=pop_from_backoff)
    qpi = _held_on_its_way_back(q, foo, activated=True)
    foo.allowed = set()  # foo would hold it still; its hint says Queue all the same
    _node_add(q)
    assert q.where(qpi.key) == want
    clock.advance(2)
    q.flush_backoff_completed()
    # ... where moveToActiveQ, out of backoffQ without the gate, asks PreEnqueue: held, gated again
    assert q.where(qpi.key) == "gated"


def test_a_pod_that_failed_with_an_error_let_out_to_backoff_q_waits_with_the_rejected_pods() -> None:
    """kube's runPreEnqueuePlugin records the gating plugin among the pod's rejectors
    (scheduling_queue.go:613), and backoffQueue.add puts a pod with rejectors in podBackoffQ, not in
    podErrorBackoffQ (backoff_queue.go:301): let out of the gated pods into backoffQ, a pod whose
    attempt ended in an error is one `pop()` may take early when activeQ is empty."""
    foo = Allowlist("foo", "foo")
    q, _ = _queue(foo)
    qpi = _held_on_its_way_back(q, foo, error=True)
    assert _node_add(q) == 1
    assert q.where(qpi.key) == "backoff"
    assert q.pop(timeout=0) is qpi


# --- Activate: moveToActiveQ, backoff or not ----------------------------------------------------------------


@pytest.mark.parametrize(("gate_open", "want"), [(True, "active"), (False, "gated")])
def test_activate_lets_a_gated_pod_out_to_active_q(gate_open: bool, want: str) -> None:
    """kube's activate (:746) looks the pod up among the unschedulable pods, the gated ones with them
    (:750), and runs moveToActiveQ: PreEnqueue asked, and to activeQ if it passes, its backoff not
    over; held, it stays (kube's moveToActiveQ case "pod failed one preEnqueue plugin when activated
    from unschedulablePods", :1612)."""
    foo = Allowlist("foo", "foo")
    q, _ = _queue(foo)
    qpi = _held_on_its_way_back(q, foo)
    if not gate_open:
        foo.allowed = set()
    assert q.activate(qpi.key) is gate_open
    assert q.where(qpi.key) == want


# --- the 5-minute flush ---------------------------------------------------------------------------------


def skip_hint(pod: Any, old: Any, new: Any) -> QueueingHint:
    return QUEUE_SKIP


@pytest.mark.parametrize(("registered", "hint", "want"), [
    # a gating plugin without EnqueueExtensions registers every event (kube's fillEventToPluginMap):
    # flushUnschedulablePodsLeftover (:942) sends UnschedulableTimeout, a wildcard, which matches it
    (WILDCARD_EVENT, None, "active"),
    # a wildcard event is answered before any hint is asked (isPodWorthRequeuing, :463)
    (WILDCARD_EVENT, skip_hint, "active"),
    # one that registered Node/Add only is not asked on the flush (:1225: GatingPluginEvents)
    (NODE_ADD, None, "gated"),
])
def test_the_flush_lets_out_a_gated_pod_whose_gating_plugin_registered_every_event(registered: Any, hint: Any,
                                                                                   want: str) -> None:
    foo = Allowlist("foo")
    q, clock = _queue(foo, registrations={registered: [RegisteredHint(foo.name, hint)]})
    q.add(make_pod("pod1", labels={"foo": "bar"}))
    foo.allowed = {"foo"}
    clock.advance(q.max_in_unschedulable - 1)
    assert q.flush_unschedulable_leftover() == 0 and q.where("default/pod1") == "gated", "not 5 minutes yet"
    clock.advance(2)
    q.flush_unschedulable_leftover()
    assert q.where("default/pod1") == want


# --- the scheduler's own handlers -------------------------------------------------------------------------


class _WaitForNodes:
    """A PreEnqueue plugin that holds every pod until the cluster has a node labelled `ready`; it
    registered Node/Add, so a node's arrival is what lets its pods out."""

    name = "WaitForNodes"

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def pre_enqueue(self, pod: dict[str, Any]) -> Any:
        from minisched.scheduler.framework.status import Status

        nodes = self.handle.cluster.list("nodes")["items"]
        if any("ready" in ((n.get("metadata") or {}).get("labels") or {}) for n in nodes):
            return Status.success()
        return Status.unschedulable_and_unresolvable("no ready node yet", plugin=self.name)

    def events_to_register(self) -> list[Any]:
        from minisched.scheduler.framework.cluster_event import ClusterEventWithHint

        return [ClusterEventWithHint(NODE_ADD)]


def test_a_node_event_lets_out_the_pods_its_gating_plugin_holds() -> None:
    """kube's MoveAllToActiveOrBackoffQueue walks the unschedulable pods, gated ones among them: a
    node's arrival reaches a pod gated by a plugin that registered Node/Add, not only parked ones."""
    from minisched.cluster.embedded import EmbeddedCluster
    from minisched.objects import make_node
    from minisched.resources import NODES, PODS
    from minisched.scheduler.plugins import in_tree_registry
    from minisched.scheduler.scheduler import Scheduler
    from tests.scheduler.runtime.helpers import node_of, wait_until

    cluster = EmbeddedCluster()
    registry = in_tree_registry()
    registry.register(_WaitForNodes.name, lambda args, handle: _WaitForNodes(handle))
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": PROFILE,
                            "plugins": {"preEnqueue": {"enabled": [{"name": _WaitForNodes.name}]}}}]}
    try:
        with Scheduler(cluster, config=config, registry=registry) as sched:
            cluster.create(PODS, make_pod("p"))
            wait_until(lambda: sched.queue.where("default/p") == "gated", what="p gated")
            cluster.create(NODES, make_node("n1", labels={"ready": "yes"}))
            wait_until(lambda: node_of(cluster, "p") == "n1", what="p let out by the node's arrival and bound")
    finally:
        cluster.close()
