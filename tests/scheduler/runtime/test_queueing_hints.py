"""Issue 26's parity with kube-scheduler 1.35's queue: queueing hints per plugin, a pending pod's own
update during its attempt, activate from backoffQ, popping from backoffQ, kube's backoff counts, a
finalizer-only update, and the framework's error wrapping at Unreserve and PreScore."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.objects import make_node, make_pod, taint
from minisched.scheduler.framework.cluster_event import (
    ASSIGNED_POD_ADD,
    NODE_ADD,
    NODE_ALLOCATABLE_CHANGE,
    QUEUE,
    QUEUE_SKIP,
)
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.profile import load_profiles
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import in_tree_registry
from minisched.scheduler.plugins.node_resources_fit import NodeResourcesFit
from minisched.scheduler.queue import SchedulingQueue
from minisched.scheduler.snapshot import NodeTable
from tests.scheduler.runtime.helpers import park_unschedulable

HEADER = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def _queue(clock: VirtualClock, **kw: Any) -> SchedulingQueue:
    # make_pod's pods ask for "minisched", the default profile
    return SchedulingQueue(clock=clock, queueing_hints={"minisched": Framework().queueing_hints}, **kw)


# --- the default plugins' hints, as kube 1.35 registers them ----------------------------------------------


def test_a_node_too_small_for_the_pod_does_not_move_it(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    key = park_unschedulable(q, make_pod("big", cpu="8"), "NodeResourcesFit")
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("small", cpu="1")) == 0
    grown = make_node("small", cpu="2")
    assert q.move_all_to_active_or_backoff(NODE_ALLOCATABLE_CHANGE, make_node("small", cpu="1"), grown) == 0, \
        "grown, but still too small"
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("large", cpu="16")) == 1
    assert q.where(key) in ("backoff", "active")


def test_fit_hint_on_an_update_that_grows_nothing_the_pod_asks_for() -> None:
    fit = NodeResourcesFit()
    pod = make_pod("p", cpu="1", memory=None)
    before = make_node("n", cpu="4", memory="1Gi")
    assert fit.is_schedulable_after_node_change(pod, before, make_node("n", cpu="4", memory="8Gi")) is QUEUE_SKIP
    assert fit.is_schedulable_after_node_change(pod, before, make_node("n", cpu="8", memory="1Gi")) is QUEUE
    unscheduled = make_pod("gone")
    assert fit.is_schedulable_after_pod_delete(pod, unscheduled, None) is QUEUE_SKIP, "held no room"
    assert fit.is_schedulable_after_pod_delete(pod, make_pod("gone", node_name="n"), None) is QUEUE


def test_an_assigned_pods_add_moves_only_pods_whose_rejector_cares(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    wants_db = make_pod("wants-db")
    wants_db["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    affinity = park_unschedulable(q, wants_db, "InterPodAffinity")
    affinity_miss = park_unschedulable(q, make_pod("picky", node_selector={"disk": "ssd"}), "NodeAffinity")
    web = make_pod("web", labels={"app": "web"}, node_name="n1")
    assert q.move_all_to_active_or_backoff(ASSIGNED_POD_ADD, None, web) == 0, "web matches no term"
    db = make_pod("db", labels={"app": "db"}, node_name="n1")
    assert q.move_all_to_active_or_backoff(ASSIGNED_POD_ADD, None, db) == 1
    assert q.where(affinity) != "unschedulable" and q.where(affinity_miss) == "unschedulable"


def test_taint_hint_moves_only_when_the_node_stops_repelling_the_pod(virtual_clock: VirtualClock) -> None:
    from minisched.scheduler.framework.cluster_event import NODE_TAINT_CHANGE

    q = _queue(virtual_clock)
    key = park_unschedulable(q, make_pod("p"), "TaintToleration")
    tainted = make_node("n", taints=[taint("a"), taint("b")])
    still = make_node("n", taints=[taint("b")])
    assert q.move_all_to_active_or_backoff(NODE_TAINT_CHANGE, tainted, still) == 0
    assert q.move_all_to_active_or_backoff(NODE_TAINT_CHANGE, still, make_node("n")) == 1
    assert q.where(key) != "unschedulable"


# --- the queue ----------------------------------------------------------------------------------------------


def test_a_pending_pods_own_update_during_its_attempt_retries_it(virtual_clock: VirtualClock) -> None:
    """kube's addEventsIfPodInFlight: the toleration added while no node took the pod is what it
    lacked; it must not wait for the 5-minute flush."""
    q = _queue(virtual_clock)
    old = make_pod("p")
    q.add(old)
    qpi = q.pop(timeout=0)
    assert qpi is not None
    new = copy.deepcopy(old)
    new["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    q.update(old, new)
    q.add_unschedulable(qpi, rejected_by=["TaintToleration"])
    assert q.where(qpi.key) == "backoff"
    q.add(make_pod("other"))
    other = q.pop(timeout=0)
    assert other is not None
    q.update(make_pod("p"), new)  # p's update is not other's event
    q.add_unschedulable(other, rejected_by=["TaintToleration"])
    assert q.where(other.key) == "unschedulable"


def test_a_finalizer_only_change_does_not_requeue_an_unschedulable_pod(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    old = make_pod("p")
    key = park_unschedulable(q, old, "NodeAffinity")
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = ["example.com/keep"]
    q.update(old, new)
    assert q.where(key) == "unschedulable"


def test_activate_takes_a_pod_out_of_backoff(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.add(make_pod("p"))
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.add_unschedulable(qpi, error=True)
    assert q.where(qpi.key) == "backoff"
    assert q.activate(qpi.key)
    assert q.where(qpi.key) == "active"


def test_pop_takes_a_rejected_pod_from_backoff_when_active_is_empty(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock, pop_from_backoff=True)
    q.add(make_pod("rejected"))
    q.add(make_pod("errored"))
    rejected, errored = q.pop(timeout=0), q.pop(timeout=0)
    assert rejected is not None and errored is not None
    q.add_unschedulable(rejected)  # no rejector named counts as an error...
    q.add_unschedulable(errored, error=True)
    assert q.pop(timeout=0) is None, "errors wait their backoff out"
    q.add(make_pod("fresh"))
    again = q.pop(timeout=0)
    assert again is not None and again.key == "default/fresh"
    q.add_unschedulable(again, rejected_by=["NodeAffinity"])
    q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n"))  # NodeAffinity: the new node may match
    assert q.where("default/fresh") == "backoff"
    popped = q.pop(timeout=0)
    assert popped is not None and popped.key == "default/fresh", "activeQ empty: taken from backoffQ"


def test_backoff_counts_errors_apart_from_rejections(virtual_clock: VirtualClock) -> None:
    q = _queue(virtual_clock)
    q.add(make_pod("p"))
    for _ in range(3):  # three rejections: the next backoff would be 4 s
        qpi = q.pop(timeout=0)
        assert qpi is not None
        q.add_unschedulable(qpi, rejected_by=["NodeAffinity"])
        virtual_clock.advance(60)
        q.activate(qpi.key)
    qpi = q.pop(timeout=0)
    assert qpi is not None and (qpi.unschedulable_count, qpi.consecutive_errors_count) == (3, 0)
    q.add_unschedulable(qpi, error=True)  # the first error in a row: kube backs off 1 s, not 8 s
    assert (qpi.unschedulable_count, qpi.consecutive_errors_count) == (3, 1)
    # past the 1 s backoff's ordering window (SchedulerPopFromBackoffQ), not a 2 s backoff's
    virtual_clock.advance(2.01)
    assert q.flush_backoff_completed() == 1


# --- the framework's error wrapping ------------------------------------------------------------------------


class _Reserver:
    def __init__(self, name: str, log: list[str], raises: bool = False) -> None:
        self.name, self.log, self.raises = name, log, raises

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.log.append(self.name)
        if self.raises:
            raise RuntimeError("cannot let go")


class _BadPreScore:
    name = "BadPreScore"

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: Any) -> Status:
        raise RuntimeError("pre-score bug")


def _framework(extra: dict[str, Any], points: dict[str, list[str]]) -> Framework:
    registry = in_tree_registry()
    for name, plugin in extra.items():
        registry.register(name, lambda args, handle, plugin=plugin: plugin)
    plugins = {point: {"enabled": [{"name": n} for n in names]} for point, names in points.items()}
    return Framework(load_profiles({**HEADER, "profiles": [{"plugins": plugins}]})[0], registry, seed=1)


def test_unreserve_runs_every_plugin_in_reverse_even_if_one_raises() -> None:
    log: list[str] = []
    plugins = {"R1": _Reserver("R1", log), "R2": _Reserver("R2", log, raises=True), "R3": _Reserver("R3", log)}
    fwk = _framework(plugins, {"reserve": ["R1", "R2", "R3"]})
    errors = fwk.run_unreserve(CycleState(), PodInfo.from_pod(make_pod("p")), "n")
    assert log == ["R3", "R2", "R1"]
    assert [e.message() for e in errors] == ['running Unreserve plugin "R2": cannot let go']


def test_a_pre_score_exception_names_its_plugin() -> None:
    fwk = _framework({"BadPreScore": _BadPreScore()}, {"preScore": ["BadPreScore"]})
    nodes = NodeTable()
    for node in (make_node("a"), make_node("b")):
        nodes.add_node(node)
    result = fwk.schedule(PodInfo.from_pod(make_pod("p")), nodes.snapshot())
    assert result.status.is_error and result.status.plugin == "BadPreScore"
    assert result.status.message() == 'running PreScore plugin "BadPreScore": pre-score bug'


@pytest.mark.parametrize("event", [NODE_ADD])
def test_a_plugin_registering_bare_events_is_told_what_to_return(event: Any) -> None:
    class Old:
        name = "Old"

        def filter(self, state: Any, pod: Any, nodes: Any) -> Any: ...

        def events_to_register(self) -> list[Any]:
            return [event]

    with pytest.raises(TypeError, match="must return ClusterEventWithHint"):
        _framework({"Old": Old()}, {"filter": ["Old"]})
