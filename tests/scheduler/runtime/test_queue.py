"""SchedulingQueue: ordering, backoff timing on the virtual clock, moves on cluster events, gates."""

from __future__ import annotations

import threading
import time

import pytest

from minisched.clock import VirtualClock
from minisched.objects import make_pod
from minisched.scheduler.framework.cluster_event import RegisteredHint
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.queue import (
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_LABEL_CHANGE,
    NODE_TAINT_CHANGE,
    ClusterEvent,
    SchedulingQueue,
    node_update_events,
)

POD_GROUP_UPDATE = ClusterEvent("PodGroup", "Update")


def _default_hints() -> dict[ClusterEvent, list[RegisteredHint]]:
    """The default profile's queueing-hint map, plus a "Gang" plugin that registered PodGroup updates."""
    hints = {event: list(regs) for event, regs in Framework().queueing_hints.items()}
    hints.setdefault(POD_GROUP_UPDATE, []).append(RegisteredHint("Gang", None))
    return hints


def _queue(clock: VirtualClock, **options: bool) -> SchedulingQueue:
    # make_pod's pods ask for the "minisched" profile, the default profile's name
    return SchedulingQueue(clock=clock, queueing_hints={"minisched": _default_hints()}, **options)


def test_active_q_orders_by_priority_then_arrival(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.add(make_pod("low-1", priority=1))
    virtual_clock.advance(0.1)
    q.add(make_pod("high", priority=100))
    virtual_clock.advance(0.1)
    q.add(make_pod("low-0", priority=1))
    q.add(make_pod("none"))
    order = [q.pop(timeout=0).pod["metadata"]["name"] for _ in range(4)]  # type: ignore[union-attr]
    assert order == ["high", "low-1", "low-0", "none"]
    assert q.pop(timeout=0) is None


def test_pods_alike_in_priority_and_arrival_leave_in_the_order_they_came(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)  # the virtual clock stands still: one timestamp for all
    names = [f"pod-{i}" for i in (3, 1, 4, 0, 2)]
    for name in names:
        q.add(make_pod(name, priority=5))
    assert [q.pop(timeout=0).pod["metadata"]["name"] for _ in names] == names  # type: ignore[union-attr]


def test_an_active_q_ordered_by_another_rule_asks_that_rule(virtual_clock: VirtualClock) -> None:
    def by_name(a, b):  # type: ignore[no-untyped-def]
        return a.key < b.key

    q = SchedulingQueue(clock=virtual_clock, less=by_name)
    for name in ("c", "a", "d", "b"):
        q.add(make_pod(name, priority=100 if name == "d" else 0))
    assert [q.pop(timeout=0).pod["metadata"]["name"] for _ in range(4)] == ["a", "b", "c", "d"]  # type: ignore[union-attr]


@pytest.mark.parametrize(("attempts", "expected"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0)])
def test_backoff_doubles_from_one_second_to_a_ten_second_cap(attempts: int, expected: float) -> None:
    assert SchedulingQueue().backoff_duration(attempts) == expected


def test_error_backs_off_and_returns_after_flush(virtual_clock: VirtualClock) -> None:
    """The backoff's exact end, as kube has it without SchedulerPopFromBackoffQ (with the gate the
    end is truncated to its ordering window: tests/scheduler/runtime/test_pop_from_backoff.py)."""
    q = _queue(virtual_clock, pop_from_backoff=False)
    q.add(make_pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None and qpi.attempts == 1
    q.add_unschedulable(qpi, error=True)
    assert q.pending_pods()["backoff"] == 1
    virtual_clock.advance(0.9)
    assert q.flush_backoff_completed() == 0
    virtual_clock.advance(0.1)
    assert q.flush_backoff_completed() == 0, "kube's isPodBackingoff: until the end has passed"
    virtual_clock.advance(0.01)
    assert q.flush_backoff_completed() == 1
    again = q.pop(timeout=0)
    assert again is qpi and again.attempts == 2
    q.add_unschedulable(again, error=True)
    virtual_clock.advance(1.5)
    assert q.flush_backoff_completed() == 0, "second failure waits 2 s"
    virtual_clock.advance(0.51)
    assert q.flush_backoff_completed() == 1


def test_unschedulable_pod_waits_for_an_event_that_could_help_it(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.add(make_pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.add_unschedulable(qpi, rejected_by=["NodeAffinity"])
    assert q.where(qpi.key) == "unschedulable"
    assert q.move_all_to_active_or_backoff(NODE_TAINT_CHANGE) == 0, "taints do not help an affinity miss"
    assert q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE) == 0
    virtual_clock.advance(5)  # backoff (1 s) long over
    assert q.move_all_to_active_or_backoff(NODE_LABEL_CHANGE) == 1
    assert q.where(qpi.key) == "active"


def test_moved_pod_still_backing_off_goes_to_backoff(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.add(make_pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.add_unschedulable(qpi, rejected_by=["NodeResourcesFit"])
    virtual_clock.advance(0.5)
    assert q.move_all_to_active_or_backoff(NODE_ADD) == 1
    assert q.where(qpi.key) == "backoff"
    virtual_clock.advance(1.51)  # past the 1 s backoff's end and the ordering window it ends in
    q.flush_backoff_completed()
    assert q.where(qpi.key) == "active"


def test_move_request_during_attempt_sends_failure_to_backoff(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.add(make_pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.move_all_to_active_or_backoff(NODE_ADD)  # a node appeared while we were deciding
    q.add_unschedulable(qpi, rejected_by=["NodeResourcesFit"])
    assert q.where(qpi.key) == "backoff"


def test_unschedulable_pods_are_flushed_after_five_minutes(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.add(make_pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.add_unschedulable(qpi, rejected_by=["NodeAffinity"])
    virtual_clock.advance(299)
    assert q.flush_unschedulable_leftover() == 0
    virtual_clock.advance(1)
    assert q.flush_unschedulable_leftover() == 1
    assert q.where(qpi.key) == "active"


def test_flusher_thread_runs_on_the_virtual_clock(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    stop = threading.Event()
    q.start(stop)
    try:
        q.add(make_pod("p"))
        qpi = q.pop(timeout=0)
        assert qpi is not None
        q.add_unschedulable(qpi, rejected_by=["NodeAffinity"])
        # Ten virtual seconds at a time, as a driver would, until the flusher thread has moved the pod
        # (past 5 min). How far the clock must go depends on when that thread started and how often it
        # ran in between (it counts its 30 s from its own start), which a busy machine decides: so no
        # fixed count of steps, and no pop(timeout) that virtual time, never advancing, cannot end.
        deadline = time.monotonic() + 60
        while q.where("default/p") != "active":
            assert time.monotonic() < deadline, f"after {virtual_clock.monotonic():g} virtual s, p is {q.where('default/p')}"
            virtual_clock.advance(10)
            threading.Event().wait(0.005)
        assert virtual_clock.monotonic() - qpi.timestamp >= 300, "flushed before its 5 minutes were up"
        got = q.pop(timeout=0)
        assert got is not None and got.key == "default/p"
    finally:
        stop.set()
        q.close()


def test_gated_pod_waits_until_gates_are_removed(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    gated = make_pod("g", scheduling_gates=["example.com/wait"])
    q.add(gated)
    assert q.pending_pods() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1}
    assert q.pop(timeout=0) is None
    ungated = make_pod("g")
    q.update(gated, ungated)
    assert q.where("default/g") == "active"


def test_status_only_update_does_not_move_an_unschedulable_pod(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    pod = make_pod("p")
    q.add(pod)
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.add_unschedulable(qpi, rejected_by=["NodeAffinity"])
    status_changed = {**pod, "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}
    q.update(pod, status_changed)
    assert q.where(qpi.key) == "unschedulable"
    relabelled = {**pod, "metadata": {**pod["metadata"], "labels": {"a": "b"}}}
    virtual_clock.advance(2)
    q.update(status_changed, relabelled)
    assert q.where(qpi.key) == "active"


def test_pod_deleted_during_its_attempt_is_not_requeued(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    pod = make_pod("p")
    q.add(pod)
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.delete(pod)
    q.add_unschedulable(qpi, error=True)
    assert len(q) == 0 and q.where(qpi.key) is None


def test_update_during_attempt_is_kept_for_the_retry(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.add(make_pod("p"), info="parsed v1")
    qpi = q.pop(timeout=0)
    assert qpi is not None and qpi.pod_info == "parsed v1"
    q.update(None, make_pod("p", labels={"v": "2"}), info="parsed v2")
    assert q.where(qpi.key) == "in-flight"
    q.add_unschedulable(qpi, error=True)
    assert qpi.pod["metadata"]["labels"] == {"v": "2"} and qpi.pod_info == "parsed v2"


def test_pop_blocks_until_a_pod_arrives_and_close_wakes_it() -> None:
    q = SchedulingQueue()
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(q.pop()))
    t.start()
    q.add(make_pod("p"))
    t.join(2)
    assert got and got[0] is not None
    t2 = threading.Thread(target=lambda: got.append(q.pop()))
    t2.start()
    q.close()
    t2.join(2)
    assert not t2.is_alive() and got[1] is None


def test_nominated_pods_are_tracked_per_node(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    pod = make_pod("p")
    q.nominate(pod, "n1")
    assert q.nominated_pods() == {"n1": [pod]}
    q.nominate(pod, "n2")
    assert q.nominated_pods() == {"n2": [pod]}
    q.delete(pod)
    assert q.nominated_pods() == {}


def test_node_update_events_ignore_heartbeats() -> None:
    old = {"metadata": {"labels": {"a": "1"}}, "spec": {}, "status": {
        "allocatable": {"cpu": "4"},
        "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "t1"}]}}
    heartbeat = {**old, "status": {**old["status"], "conditions": [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "t2"}]}}
    assert node_update_events(old, heartbeat) == []
    tainted = {**old, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}
    assert node_update_events(old, tainted) == [NODE_TAINT_CHANGE]
    cordoned = {**old, "spec": {"unschedulable": True}}
    assert node_update_events(old, cordoned) == [NODE_TAINT_CHANGE]


def test_bad_backoff_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="backoff"):
        SchedulingQueue(initial_backoff=5, max_backoff=1)


def test_a_pod_activated_during_its_attempt_is_retried_after_its_backoff_when_the_attempt_ends(
        virtual_clock: VirtualClock) -> None:
    # A preemption worker's API call can fail (and activate the preemptor) before the cycle that
    # started it has parked the pod: kube records EventForceActivate for the in-flight pod, a
    # wildcard event for it, so the rejection is retried (queueAfterBackoff): backoffQ while the
    # backoff of this failure lasts, then activeQ; popped from backoffQ when activeQ is empty.
    q = _queue(virtual_clock)
    q.add(make_pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    assert q.activate(qpi.key) is False  # not parked yet
    q.add_unschedulable(qpi, rejected_by=["NodeResourcesFit"])
    assert q.where(qpi.key) == "backoff"
    again = q.pop(timeout=0)
    assert again is qpi
    q.add_unschedulable(again, rejected_by=["NodeResourcesFit"])
    assert q.where(qpi.key) == "unschedulable", "the activation is used once"


# --- events received while pods are in flight (kube's inFlightEvents) -------------------------------------

def test_an_event_the_rejector_did_not_register_leaves_the_pod_unschedulable(virtual_clock: VirtualClock) -> None:
    # kube asks the rejecting plugins about each event received during the attempt; before, any move
    # request during the attempt sent the pod to backoff, whatever its rejector listened for
    q = _queue(virtual_clock)
    q.add(make_pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.move_all_to_active_or_backoff(NODE_TAINT_CHANGE)  # a taint changed: no help for an affinity miss
    assert q.in_flight_events(qpi.key) == [NODE_TAINT_CHANGE]
    q.add_unschedulable(qpi, rejected_by=["NodeAffinity"])
    assert q.where(qpi.key) == "unschedulable"


def test_a_registered_event_during_the_attempt_sends_the_pod_to_backoff(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.add(make_pod("early"))
    virtual_clock.advance(0.1)
    q.add(make_pod("late"))
    early = q.pop(timeout=0)
    assert early is not None
    q.move_all_to_active_or_backoff(NODE_LABEL_CHANGE)  # before late's attempt began
    late = q.pop(timeout=0)
    assert late is not None
    q.move_all_to_active_or_backoff(NODE_TAINT_CHANGE)
    q.add_unschedulable(early, rejected_by=["NodeAffinity"])
    q.add_unschedulable(late, rejected_by=["NodeAffinity"])
    assert q.where(early.key) == "backoff", "a label change came during its attempt"
    assert q.where(late.key) == "unschedulable", "the label change came before its attempt"


def test_a_failure_no_plugin_rejected_always_retries(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.add(make_pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.add_unschedulable(qpi)  # no rejector named: kube retries (it may not come back otherwise)
    assert q.where(qpi.key) == "backoff"


def test_in_flight_events_are_pruned_once_no_attempt_can_ask_for_them(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert q.in_flight_event_count() == 0, "nothing in flight: nothing kept"
    for name in ("a", "b"):
        q.add(make_pod(name))
        virtual_clock.advance(0.1)
    a = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(NODE_ADD)
    b = q.pop(timeout=0)
    assert a is not None and b is not None
    q.move_all_to_active_or_backoff(NODE_TAINT_CHANGE)
    assert q.in_flight_event_count() == 2
    assert q.in_flight_events(a.key) == [NODE_ADD, NODE_TAINT_CHANGE]
    assert q.in_flight_events(b.key) == [NODE_TAINT_CHANGE]
    q.add_unschedulable(a, rejected_by=["NodeAffinity"])
    assert q.in_flight_event_count() == 1, "the NodeAdd only a could ask about is gone"
    q.done(b.key)
    assert q.in_flight_event_count() == 0 and q.in_flight_events(b.key) == []


def test_pruning_keeps_the_events_of_the_oldest_attempt_when_a_pod_is_popped_again(virtual_clock: VirtualClock) -> None:
    # a pod re-added and popped while its last binding cycle still runs gets the newest sequence
    # number: the attempts older than it (b here) still decide what is pruned
    q = _queue(virtual_clock)
    for name in ("c", "a", "b"):
        q.add(make_pod(name))
        virtual_clock.advance(0.1)
    c, a, b = q.pop(timeout=0), q.pop(timeout=0), q.pop(timeout=0)
    assert c is not None and a is not None and b is not None
    assert [c.key, a.key, b.key] == ["default/c", "default/a", "default/b"]
    q.assumed(a.key)  # a's binding cycle runs on
    q.move_all_to_active_or_backoff(NODE_ADD)
    q.add(make_pod("a"))
    again = q.pop(timeout=0)
    assert again is not None and again.key == a.key
    q.done(c.key)
    assert q.in_flight_events(b.key) == [NODE_ADD], "b's attempt began before the NodeAdd"
    q.done(b.key)
    assert q.in_flight_event_count() == 0, "a's new attempt began after it"


def test_a_pod_rejected_at_permit_counts_the_events_of_its_binding_cycle(virtual_clock: VirtualClock) -> None:
    # kube keeps the pod in flight until its binding cycle passes Permit
    q = _queue(virtual_clock)
    for name in ("moved", "parked"):
        q.add(make_pod(name))
        virtual_clock.advance(0.1)
    moved, parked = q.pop(timeout=0), q.pop(timeout=0)
    assert moved is not None and parked is not None
    q.assumed(moved.key)
    q.assumed(parked.key)
    assert q.where(moved.key) is None, "assumed: out of the queue"
    q.move_all_to_active_or_backoff(POD_GROUP_UPDATE)  # while both wait at Permit
    q.requeue_after_bind_failure(moved, rejected_by=["Gang"])
    q.requeue_after_bind_failure(parked, rejected_by=["NodeAffinity"])
    assert q.where(moved.key) == "backoff"
    assert q.where(parked.key) == "unschedulable"
    assert q.in_flight_event_count() == 0


def test_past_permit_the_binding_cycle_no_longer_records_events(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.add(make_pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.assumed(qpi.key)
    q.binding_done(qpi)
    q.move_all_to_active_or_backoff(POD_GROUP_UPDATE)
    assert q.in_flight_event_count() == 0
    q.requeue_after_bind_failure(qpi)  # a bind error: backs off whatever came
    assert q.where(qpi.key) == "backoff"


def test_an_excluded_pod_is_not_moved(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    for name in ("rejected", "other"):
        q.add(make_pod(name))
        qpi = q.pop(timeout=0)
        assert qpi is not None
        q.add_unschedulable(qpi, rejected_by=["NodeResourcesFit"])
    assert q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, exclude="default/rejected") == 1
    assert q.where("default/rejected") == "unschedulable" and q.where("default/other") == "backoff"
