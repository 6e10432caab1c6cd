"""PreEnqueue on the way back into the queues, ported from kube-scheduler 1.35.4's
pkg/scheduler/backend/queue tests TestPriorityQueue_moveToBackoffQ and TestPriorityQueue_moveToActiveQ:
kube runs the PreEnqueue plugins whenever a pod moves into activeQ (moveToActiveQ) except out of
backoffQ with SchedulerPopFromBackoffQ, and, with that gate, whenever it moves into backoffQ
(moveToBackoffQ); a pod they hold waits with the gated pods.

kube's tests call moveToBackoffQ/moveToActiveQ on a fresh QueuedPodInfo; here a pod gets to that
move as in a scheduler (arrived while the plugins let it through, popped, failed), and the plugin's
allowlist shrinks on the way, as kube's test plugin's allowlist leaves the pod out."""

from __future__ import annotations

import pytest

from minisched.clock import VirtualClock
from minisched.objects import make_pod
from minisched.scheduler.framework.cluster_event import WILDCARD_EVENT
from minisched.scheduler.queue import QueuedPodInfo, SchedulingQueue
from tests.scheduler.runtime.helpers import Allowlist


def _queue(pop_from_backoff: bool, *plugins: Allowlist) -> tuple[SchedulingQueue, VirtualClock]:
    clock = VirtualClock()
    # kube's test queue: 30 s initial backoff, 60 s max
    return SchedulingQueue(clock=clock, pre_enqueue=plugins, initial_backoff=30, max_backoff=60,
                           pop_from_backoff=pop_from_backoff), clock


def _popped(q: SchedulingQueue) -> QueuedPodInfo:
    q.add(make_pod("bar", labels={"bar": ""}))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    return qpi


def _to_backoff(q: SchedulingQueue, qpi: QueuedPodInfo) -> None:
    """The attempt fails, rejected, after an event that may help it: on its way to backoffQ."""
    q.move_all_to_active_or_backoff(WILDCARD_EVENT)
    q.add_unschedulable(qpi, rejected_by=["NodeAffinity"])


@pytest.mark.parametrize(("pop_from_backoff", "allowed_later", "want"), [
    # "preEnqueue plugin registered, pod failed one preEnqueue plugin": held, with the gate only
    (True, ("foo",), "gated"),
    # "... preEnqueue plugin would reject the pod, but isn't run"
    (False, ("foo",), "backoff"),
    # "preEnqueue plugin registered, pod passed all preEnqueue plugins"
    (True, ("bar",), "backoff"),
    (False, ("bar",), "backoff"),
])
def test_move_to_backoff_q(pop_from_backoff: bool, allowed_later: tuple[str, ...], want: str) -> None:
    second = Allowlist("second", "foo", "bar")
    q, _ = _queue(pop_from_backoff, Allowlist("first", "foo", "bar"), second)
    qpi = _popped(q)
    second.allowed = set(allowed_later)
    _to_backoff(q, qpi)
    assert q.where(qpi.key) == want
    assert qpi.gated_by == ("second" if want == "gated" else None)
    assert q.pending_pods()["backoff"] == (want == "backoff")


def test_a_pod_held_on_its_way_to_backoff_q_is_not_popped_from_it() -> None:
    """What the check is for: with activeQ empty, pop() takes rejected pods from backoffQ without
    asking PreEnqueue (kube's popBackoff), so a pod PreEnqueue would hold must not be there."""
    second = Allowlist("second", "bar")
    q, _ = _queue(True, second)
    qpi = _popped(q)
    second.allowed = set()
    _to_backoff(q, qpi)
    assert q.pop(timeout=0) is None
    second.allowed = {"bar"}
    q.update(qpi.pod, make_pod("bar", labels={"bar": ""}, annotations={"foo": ""}))  # kube's test: an update
    # PreEnqueue, asked again, lets it through now; its 30 s backoff has not expired: backoffQ (kube's
    # requeuePodWithQueueingStrategy), from which pop() may take it now that PreEnqueue passed
    assert q.where(qpi.key) == "backoff"
    assert q.pop(timeout=0) is qpi


@pytest.mark.parametrize(("pop_from_backoff", "want"), [
    # "preEnqueue plugin registered, preEnqueue rejects the pod, even if it is after backoff" (gate off)
    (False, "gated"),
    # "... it is moved from backoffQ after completing backoff, so preEnqueue is not executed" (gate on)
    (True, "active"),
])
def test_move_to_active_q_after_backoff(pop_from_backoff: bool, want: str) -> None:
    second = Allowlist("second", "foo", "bar")
    q, clock = _queue(pop_from_backoff, Allowlist("first", "foo", "bar"), second)
    qpi = _popped(q)
    _to_backoff(q, qpi)
    assert q.where(qpi.key) == "backoff"
    second.allowed = {"foo"}
    clock.advance(32)  # past the 30 s backoff and its ordering window
    q.flush_backoff_completed()
    assert q.where(qpi.key) == want
    # kube's test then updates the pod (an annotation): a held pod stays held
    q.update(qpi.pod, make_pod("bar", labels={"bar": ""}, annotations={"foo": ""}))
    assert q.where(qpi.key) == want


@pytest.mark.parametrize(("from_backoff", "want"), [
    # "... pod failed one preEnqueue plugin when activated from unschedulablePods"
    (False, "gated"),
    # "... pod would fail one preEnqueue plugin, but was activated from backoffQ, so preEnqueue is not executed"
    (True, "active"),
])
def test_move_to_active_q_on_activate(from_backoff: bool, want: str) -> None:
    second = Allowlist("second", "foo", "bar")
    q, _ = _queue(True, Allowlist("first", "foo", "bar"), second)
    qpi = _popped(q)
    if from_backoff:
        _to_backoff(q, qpi)
    else:
        q.add_unschedulable(qpi, rejected_by=["NodeAffinity"])
    second.allowed = {"foo"}
    assert q.activate(qpi.key) is (want == "active")
    assert q.where(qpi.key) == want


@pytest.mark.parametrize("pop_from_backoff", [True, False])
def test_move_to_active_q_on_a_cluster_event(pop_from_backoff: bool) -> None:
    """An unschedulable pod that an event moves to activeQ (its backoff over) passes PreEnqueue
    first (kube's requeuePodWithQueueingStrategy -> moveToActiveQ), gate on or off."""
    second = Allowlist("second", "foo", "bar")
    q, clock = _queue(pop_from_backoff, Allowlist("first", "foo", "bar"), second)
    qpi = _popped(q)
    q.add_unschedulable(qpi, rejected_by=["NodeAffinity"])
    second.allowed = {"foo"}
    clock.advance(32)
    assert q.move_all_to_active_or_backoff(WILDCARD_EVENT) == 0, "held: moved to no queue"
    assert q.where(qpi.key) == "gated" and qpi.gated_by == "second"
