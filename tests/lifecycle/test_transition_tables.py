"""The explicit transition tables: exhaustive, used by the queue and the cache, and a hypothesis
state machine that passes on the real table and finds a bug planted in a copy of it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from minisched.exhibits.queue_machine import queue_machine
from minisched.objects import make_pod
from minisched.scheduler.cache import CacheError, SchedulerCache
from minisched.scheduler.lifecycle import (
    CACHE_TRANSITIONS,
    GROUP_TRANSITIONS,
    IGNORE,
    QUEUE_TRANSITIONS,
    REFUSE,
    CacheEvent,
    CacheState,
    GroupEvent,
    GroupState,
    IllegalTransition,
    QueueEvent,
    QueueState,
    check_exhaustive,
    step,
)
from minisched.scheduler.queue import SchedulingQueue

MACHINE_SETTINGS = settings(max_examples=150, stateful_step_count=10, deadline=None, derandomize=True,
                            database=None, suppress_health_check=list(HealthCheck))
# to find a planted bug: more runs, and no shrinking (the failing run is short already; shrinking
# it costs most of the time)
HUNT_SETTINGS = settings(MACHINE_SETTINGS, max_examples=1000, phases=[Phase.generate])


def test_every_table_is_exhaustive() -> None:
    check_exhaustive(QUEUE_TRANSITIONS, QueueState, QueueEvent)
    check_exhaustive(CACHE_TRANSITIONS, CacheState, CacheEvent)
    check_exhaustive(GROUP_TRANSITIONS, GroupState, GroupEvent)
    assert len(QUEUE_TRANSITIONS) == len(QueueState) * len(QueueEvent)


def test_a_missing_pair_is_named() -> None:
    table = dict(CACHE_TRANSITIONS)
    del table[CacheState.BOUND, CacheEvent.FORGET]
    with pytest.raises(ValueError, match=r"1 pairs missing: \(BOUND, FORGET\)"):
        check_exhaustive(table, CacheState, CacheEvent)


def test_refused_events_name_state_and_event() -> None:
    with pytest.raises(IllegalTransition, match="event POP is refused in state GATED for default/p"):
        step("SchedulingQueue", QUEUE_TRANSITIONS, QueueState.GATED, QueueEvent.POP, "default/p")
    assert step("PodGroup", GROUP_TRANSITIONS, GroupState.PENDING, GroupEvent.REJECTED) is GroupState.PENDING


def test_the_cache_refuses_what_the_table_refuses() -> None:
    cache = SchedulerCache()
    pod = make_pod("p")
    cache.assume_pod(pod, "n1")
    with pytest.raises(CacheError, match="cannot be assumed again") as info:
        cache.assume_pod(pod, "n2")
    assert isinstance(info.value.__cause__, IllegalTransition)


def test_the_queue_moves_pods_by_the_table() -> None:
    # the same queue with one entry changed behaves differently: the table is what it follows
    table = dict(QUEUE_TRANSITIONS)
    table[QueueState.IN_FLIGHT, QueueEvent.REJECT] = QueueState.BACKOFF
    for t, expected in ((None, "unschedulable"), (table, "backoff")):
        q = SchedulingQueue(transitions=t)
        q.add(make_pod("p"))
        qpi = q.pop(timeout=0)
        assert qpi is not None
        q.add_unschedulable(qpi, rejected_by=["NodeAffinity"])
        assert q.where("default/p") == expected


def test_the_state_machine_holds_on_the_real_table() -> None:
    run_state_machine_as_test(queue_machine(), settings=MACHINE_SETTINGS)


@pytest.mark.parametrize("pair, planted", [
    ((QueueState.BACKOFF, QueueEvent.DELETE), IGNORE),  # a deleted pod lingers in backoffQ
    ((QueueState.ABSENT, QueueEvent.REJECT), QueueState.UNSCHEDULABLE),  # a pod deleted mid-attempt comes back
])
def test_the_state_machine_finds_a_planted_bug(pair: tuple[QueueState, QueueEvent], planted: object) -> None:
    table = dict(QUEUE_TRANSITIONS)
    table[pair] = planted  # type: ignore[assignment]
    steps: list[str] = []
    with pytest.raises(AssertionError, match="should be"):
        run_state_machine_as_test(queue_machine(table, steps), settings=HUNT_SETTINGS)
    assert len(steps) <= 10, steps


def test_the_state_machine_with_a_quota_holds_on_the_real_table_and_finds_a_held_pod_backing_off() -> None:
    """With a quota PreEnqueue that fills up and frees, pods are held on their way back into the
    queues (GATE_CLOSED): the real table passes, and one that backs a held pod off is caught."""
    run_state_machine_as_test(queue_machine(quota=True), settings=MACHINE_SETTINGS)
    table = dict(QUEUE_TRANSITIONS)
    table[QueueState.IN_FLIGHT, QueueEvent.GATE_CLOSED] = QueueState.BACKOFF
    with pytest.raises(AssertionError, match="should be gated"):
        run_state_machine_as_test(queue_machine(table, quota=True), settings=settings(HUNT_SETTINGS, stateful_step_count=20))


def test_refuse_marks_are_real_refusals() -> None:
    # every REFUSE in the queue's table is a pair the queue's public methods never produce; the
    # state machine above would raise IllegalTransition if they did
    assert sum(1 for v in QUEUE_TRANSITIONS.values() if v is REFUSE) > 30
