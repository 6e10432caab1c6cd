"""SchedulerPopFromBackoffQ (on by default since kube 1.33), ported from kube-scheduler 1.35.4's
pkg/scheduler/backend/queue tests: TestPriorityQueue_Pop, TestBackOffFlow,
TestBackoffQueue_getBackoffTime, TestBackoffQueue_popAllBackoffCompleted and
TestBackoffQueueOrdering, each with the gate on and off where kube runs both.

kube's tests put QueuedPodInfos straight into the backoff queue with a timestamp in the past; here a
pod gets there as in a scheduler, at that time on the virtual clock: popped, and failed while a
cluster event was recorded for its attempt (so it backs off instead of parking)."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.objects import make_pod
from minisched.scheduler.framework.cluster_event import UNSCHEDULABLE_TIMEOUT, WILDCARD_EVENT
from minisched.scheduler.framework.features import DEFAULTS, POP_FROM_BACKOFF_Q
from minisched.scheduler.queue import QueuedPodInfo, SchedulingQueue

T0 = VirtualClock.DEFAULT_START  # a whole second: the start of a backoff ordering window
HIGH, MEDIUM = 1000, 100  # kube's highPriority, midPriority


def test_the_gate_is_on_by_default_as_in_kube_1_33_and_later() -> None:
    assert DEFAULTS[POP_FROM_BACKOFF_Q] is True


def test_a_bare_queue_follows_the_gate_default_as_a_scheduler_does() -> None:
    """SchedulingQueue() without `pop_from_backoff` pops a rejected pod from backoffQ when activeQ
    is empty, as Scheduler's queue does with the default feature gates."""
    q = SchedulingQueue(clock=VirtualClock())
    assert q.pop_from_backoff is DEFAULTS[POP_FROM_BACKOFF_Q]
    qpi = _fail(q, make_pod("p"), rejected_by="plugin")
    assert q.where(qpi.key) == "backoff"
    assert q.pop(timeout=0) is qpi


def _queue(clock: VirtualClock, pop_from_backoff: bool) -> SchedulingQueue:
    return SchedulingQueue(clock=clock, pop_from_backoff=pop_from_backoff)


def _fail(q: SchedulingQueue, pod: dict[str, Any], *, rejected_by: str | None, backoff: bool = True) -> QueuedPodInfo:
    """`pod` added, popped and failed now: rejected by `rejected_by` (None: an error). `backoff`: a
    cluster event came during its attempt, so a rejected pod backs off rather than parking."""
    q.add(pod)
    qpi = q.pop(timeout=0)
    assert qpi is not None and qpi.pod is pod
    if backoff:
        q.move_all_to_active_or_backoff(WILDCARD_EVENT)
    if rejected_by is None:
        q.add_unschedulable(qpi, error=True)
    else:
        q.add_unschedulable(qpi, rejected_by=[rejected_by])
    return qpi


def _pop_all(q: SchedulingQueue, limit: int) -> list[str]:
    """kube's tryPop in a loop: names popped until pop() comes back empty-handed."""
    names = []
    for _ in range(limit):
        qpi = q.pop(timeout=0)
        if qpi is None:
            break
        names.append(qpi.pod["metadata"]["name"])
    return names


@pytest.mark.parametrize(("pop_from_backoff", "want"), [
    (True, ["mpp", "hpp"]),  # "Pop pods from both activeQ and backoffQ when PopFromBackoffQ is enabled"
    (False, ["mpp"]),  # "Pop pod only from activeQ when PopFromBackoffQ is disabled"
])
def test_priority_queue_pop(pop_from_backoff: bool, want: list[str]) -> None:
    """TestPriorityQueue_Pop: a rejected pod in backoffQ is popped once activeQ is empty; one that
    failed with an error (podErrorBackoffQ) and an unschedulable one are not."""
    q = _queue(VirtualClock(), pop_from_backoff)
    assert q.where(_fail(q, make_pod("hpp", priority=HIGH), rejected_by="plugin").key) == "backoff"
    assert q.where(_fail(q, make_pod("hpp2", priority=HIGH), rejected_by=None).key) == "backoff"
    assert q.where(_fail(q, make_pod("up", priority=HIGH), rejected_by="plugin", backoff=False).key) \
        == "unschedulable"
    q.add(make_pod("mpp", priority=MEDIUM))
    assert _pop_all(q, len(want) + 1) == want


@pytest.mark.parametrize("pop_from_backoff", [True, False])
def test_backoff_flow(pop_from_backoff: bool) -> None:
    """TestBackOffFlow: the backoff doubles from 1 s to the 10 s cap; a flush one window early
    leaves the pod in backoffQ, one after its backoff moves it. With the gate, the backoff's end is
    truncated to its window and the pod leaves after that window: kube's test rounds the measured
    backoff up to the window, which needs a clock off the window's edge, as kube's time.Now() is."""
    clock = VirtualClock(T0 + 0.25)
    q = _queue(clock, pop_from_backoff)
    q.add(make_pod("test-pod", namespace="test-ns"))
    for i, want_backoff in enumerate([1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]):
        timestamp = clock.monotonic()
        qpi = q.pop(timeout=0)
        assert qpi is not None and qpi.attempts == i + 1
        q.add_unschedulable(qpi, rejected_by=["unsched-plugin"])
        q.move_all_to_active_or_backoff(UNSCHEDULABLE_TIMEOUT)  # an event happens
        assert q.where(qpi.key) == "backoff"
        backoff = q.backoff_expiry(qpi) - timestamp
        if pop_from_backoff:
            backoff = backoff // 1.0 * 1.0 + 1.0  # rounded up to the ordering window
        assert backoff == want_backoff, f"step {i}"
        clock.advance(1.0)
        q.flush_backoff_completed()
        assert q.where(qpi.key) == "backoff", f"step {i}: still in the backoff queue after an early flush"
        clock.advance(backoff)
        q.flush_backoff_completed()
        assert q.where(qpi.key) == "active", f"step {i}: moved out of the backoff queue after timeout"


@pytest.mark.parametrize(("unschedulable", "errors", "want"), [
    (0, 0, 0.0),  # "no backoff": the pod has no backoff to wait (kube: the zero time)
    (16, 0, 32.0),  # "backoff by UnschedulableCount"
    (5, 16, 32.0),  # "backoff is calculated with ConsecutiveErrorsCount"
])
def test_backoff_queue_get_backoff_time(unschedulable: int, errors: int, want: float) -> None:
    """TestBackoffQueue_getBackoffTime (gate on; 1 s initial, 32 s max; the timestamp on a window's
    edge). Not ported: the cached expiry (minisched computes it) and a zero max backoff (refused)."""
    q = SchedulingQueue(clock=VirtualClock(), initial_backoff=1, max_backoff=32, pop_from_backoff=True)
    qpi = QueuedPodInfo(pod=make_pod("p"), key="default/p", timestamp=T0, unschedulable_count=unschedulable,
                        consecutive_errors_count=errors)
    assert q.backoff_expiry(qpi) - T0 == want
    assert q._is_backing_off(qpi) is (want > 0)


@pytest.mark.parametrize("pop_from_backoff", [True, False])
@pytest.mark.parametrize(("in_backoff", "want"), [
    ([], set()),  # "Both queues empty, no pods moved to activeQ"
    (["pod0", "pod1"], {"pod0"}),  # "Pods only in backoffQ, some pods moved to activeQ"
    (["pod2", "pod3"], {"pod2"}),  # "Pods only in errorBackoffQ, some pods moved to activeQ"
    (["pod0", "pod1", "pod2", "pod3"], {"pod0", "pod2"}),  # "Pods in both queues, some pods moved"
    (["pod0", "pod2"], {"pod0", "pod2"}),  # "Pods in both queues, all pods moved to activeQ"
    (["pod1", "pod3"], set()),  # "Pods in both queues, no pods moved to activeQ"
])
def test_backoff_queue_pop_all_backoff_completed(pop_from_backoff: bool, in_backoff: list[str],
                                                  want: set[str]) -> None:
    """TestBackoffQueue_popAllBackoffCompleted: pod0 and pod1 were rejected (backoffQ), pod2 and
    pod3 failed with an error (errorBackoffQ); pod0 and pod2 failed 2 s before the flush, so their
    1 s backoffs are over; pod1 and pod3 failed at its instant (kube's: 1 s after it), so theirs
    are not."""
    clock = VirtualClock(T0 - 2)
    q = _queue(clock, pop_from_backoff)
    for name in sorted(in_backoff, key=lambda n: n in ("pod1", "pod3")):
        if name in ("pod1", "pod3"):
            clock.set(T0)
        _fail(q, make_pod(name), rejected_by=None if name in ("pod2", "pod3") else "plugin")
    clock.set(T0)
    assert q.flush_backoff_completed() == len(want)
    assert {name for name in in_backoff if q.where(f"default/{name}") == "active"} == want
    assert q.pending_pods()["backoff"] == len(in_backoff) - len(want), "the others stay in backoffQ"


def _backoff_order(q: SchedulingQueue) -> list[str]:
    """The rejected pods in the order they leave backoffQ (kube's test reads popAllBackoffCompleted's
    order; the flush here pushes into activeQ, which sorts them again, so the heap is read)."""
    order = []
    heap = q._backoff.rejected
    while (qpi := heap.peek()) is not None:
        heap.remove(qpi.key)
        order.append(qpi.pod["metadata"]["name"])
    return order


def _ordering_queue(pop_from_backoff: bool) -> SchedulingQueue:
    """kube's six pods of TestBackoffQueueOrdering, rejected once each (1 s backoff), now T0: the
    backoffs of pod5 (priority 1) end in window T0-2, of pod3 (1), pod4 (2) and pod2 (2, 1 ms later)
    in window T0-1, of pod1 in the current one and of pod0 in the next."""
    clock = VirtualClock(T0 - 3)
    q = _queue(clock, pop_from_backoff)
    for name, priority, at in [("pod5", 1, T0 - 3), ("pod3", 1, T0 - 2), ("pod4", 2, T0 - 2),
                               ("pod2", 2, T0 - 2 + 0.001), ("pod1", 1, T0 - 1), ("pod0", 1, T0)]:
        clock.set(at)
        _fail(q, make_pod(name, priority=priority), rejected_by="plugin")
    return q


@pytest.mark.parametrize("pop_from_backoff", [True, False])
def test_backoff_queue_ordering(pop_from_backoff: bool) -> None:
    """TestBackoffQueueOrdering: with the gate, pods whose backoff ends in one window leave it in
    activeQ's order (priority, then the earlier), so that pop() takes what activeQ would have given;
    without it, by the end of the backoff alone."""
    order = _backoff_order(_ordering_queue(pop_from_backoff))
    if pop_from_backoff:
        # kube's wantPods, then the two still backing off in the same order
        assert order == ["pod5", "pod4", "pod2", "pod3", "pod1", "pod0"]
    else:
        # kube's: pod5, pod3, pod4, pod2 (pod3 and pod4 end at the same instant: heap order)
        assert order[0] == "pod5" and set(order[1:3]) == {"pod3", "pod4"} and order[3:] == ["pod2", "pod1", "pod0"]
    q = _ordering_queue(pop_from_backoff)
    assert q.flush_backoff_completed() == 4, "pod1's backoff ends in the current window, pod0's after"
    assert {qpi.pod["metadata"]["name"] for qpi in q.pods() if q.where(qpi.key) == "active"} \
        == {"pod5", "pod4", "pod3", "pod2"}


def test_pop_takes_backoff_in_activeq_order() -> None:
    """What the ordering is for: with activeQ empty, pop() takes the backoffQ pods in the order
    activeQ would have given them had they been flushed (pod4 before pod2 before pod3, one window)."""
    q = _ordering_queue(True)
    assert _pop_all(q, 7) == ["pod5", "pod4", "pod2", "pod3", "pod1", "pod0"]
