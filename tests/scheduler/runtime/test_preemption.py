"""DefaultPreemption on the embedded cluster: victims, node choice, nomination, the preemptor landing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster, Kubelet
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, POD_DISRUPTION_BUDGETS, PODS, PRIORITY_CLASSES
from minisched.scheduler.events import events_for
from minisched.scheduler.queue import SchedulingQueue
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import (
    advance_until,
    node_of,
    priority_classes,
    wait_for_nodes,
    wait_until,
)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def cluster(clock: VirtualClock) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(clock=clock)
    priority_classes(c, low=10, medium=20, mid=50, high=1000)
    yield c
    c.close()


def _running(cluster: EmbeddedCluster, name: str, node: str, cls: str, cpu: str = "1",
             labels: dict[str, str] | None = None) -> None:
    cluster.create(PODS, make_pod(name, cpu=cpu, memory=None, priority_class_name=cls, node_name=node,
                                  labels=labels))


def _start(cluster: EmbeddedCluster, clock: VirtualClock, nodes: int, *, pop_from_backoff: bool = True) -> Scheduler:
    sched = Scheduler(cluster, clock=clock, seed=1, feature_gates={"SchedulerPopFromBackoffQ": pop_from_backoff})
    sched.start()
    wait_for_nodes(sched, nodes)
    wait_until(lambda: sched.cache.pod_count() == len(cluster.list(PODS)["items"]), what="pods in cache")
    return sched


def _terminating(cluster: EmbeddedCluster) -> set[str]:
    return {p["metadata"]["name"] for p in cluster.list(PODS)["items"] if p["metadata"].get("deletionTimestamp")}


def test_fewest_and_least_important_victims_then_the_preemptor_lands(
    cluster: EmbeddedCluster, clock: VirtualClock
) -> None:
    cluster.create(NODES, make_node("n1", cpu="3"))
    _running(cluster, "low", "n1", "low")
    _running(cluster, "medium", "n1", "medium")
    _running(cluster, "mid", "n1", "mid")
    sched = _start(cluster, clock, 1)
    try:
        cluster.create(PODS, make_pod("vip", cpu="1", memory=None, priority_class_name="high"))
        wait_until(lambda: _terminating(cluster), what="a victim")
        assert _terminating(cluster) == {"low"}, "one victim is enough, and it is the least important"
        victim = cluster.get(PODS, "low", "default")
        (cond,) = [c for c in victim["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
        wait_until(lambda: cluster.get(PODS, "vip", "default")["status"].get("nominatedNodeName") == "n1",
                   what="preemptor nominated")
        assert node_of(cluster, "vip") is None, "still waiting for the victim to go"
        Kubelet(cluster).sync()  # the victim's graceful deletion completes
        advance_until(clock, lambda: node_of(cluster, "vip") == "n1", what="preemptor bound on the freed node")
        sched.recorder.flush()
        assert [e["message"] for e in events_for(cluster, victim, "Preempted")] == [
            f"Preempted by pod {cluster.get(PODS, 'vip', 'default')['metadata']['uid']} on node n1"]
        assert sched.stats.preemptions == 1 and sched.stats.victims == 1
    finally:
        sched.stop()


def test_node_with_the_least_important_victims_is_chosen(cluster: EmbeddedCluster, clock: VirtualClock) -> None:
    cluster.create(NODES, make_node("n1", cpu="1"))
    cluster.create(NODES, make_node("n2", cpu="1"))
    _running(cluster, "on-n1", "n1", "mid")
    _running(cluster, "on-n2", "n2", "low")
    sched = _start(cluster, clock, 2)
    try:
        cluster.create(PODS, make_pod("vip", cpu="1", memory=None, priority_class_name="high"))
        wait_until(lambda: _terminating(cluster), what="a victim")
        assert _terminating(cluster) == {"on-n2"}
        Kubelet(cluster).sync()
        advance_until(clock, lambda: node_of(cluster, "vip") == "n2", what="preemptor on n2")
    finally:
        sched.stop()


def test_pdb_protected_pods_are_spared_when_possible(cluster: EmbeddedCluster, clock: VirtualClock) -> None:
    cluster.create(NODES, make_node("n1", cpu="1"))
    cluster.create(NODES, make_node("n2", cpu="1"))
    _running(cluster, "guarded", "n1", "low", labels={"app": "db"})
    _running(cluster, "free", "n2", "low", labels={"app": "web"})
    cluster.create(POD_DISRUPTION_BUDGETS, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
    })
    sched = _start(cluster, clock, 2)
    try:
        cluster.create(PODS, make_pod("vip", cpu="1", memory=None, priority_class_name="high"))
        wait_until(lambda: _terminating(cluster), what="a victim")
        assert _terminating(cluster) == {"free"}
    finally:
        sched.stop()


def test_equal_priority_and_preemption_policy_never_do_not_preempt(
    cluster: EmbeddedCluster, clock: VirtualClock
) -> None:
    cluster.create(PRIORITY_CLASSES, {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "polite"},
        "value": 1000, "preemptionPolicy": "Never",
    })
    cluster.create(NODES, make_node("n1", cpu="1"))
    _running(cluster, "peer", "n1", "high")
    _running(cluster, "other", "n1", "low", cpu="0")
    sched = _start(cluster, clock, 1)
    try:
        polite = cluster.create(PODS, make_pod("polite", cpu="1", memory=None, priority_class_name="polite"))
        peer = cluster.create(PODS, make_pod("equal", cpu="1", memory=None, priority_class_name="high"))
        wait_until(lambda: sched.pending_pods()["unschedulable"] == 2, what="both parked")
        sched.recorder.flush()
        assert not _terminating(cluster)
        (polite_event,) = events_for(cluster, polite, "FailedScheduling")
        # kube v1.35 appends PostFilter's message after a space only: one period (1.31 and older wrote "..")
        assert polite_event["message"].endswith(
            ". no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never.")
        # Evicting the only lower-priority pod ("other", no cpu) would not make room: the dry run
        # reports what still fails, as kube's does.
        (equal_event,) = events_for(cluster, peer, "FailedScheduling")
        assert equal_event["message"] == (
            "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: "
            "0/1 nodes are available: 1 Insufficient cpu."
        )
    finally:
        sched.stop()


def test_victims_can_go_through_the_eviction_api(cluster: EmbeddedCluster, clock: VirtualClock) -> None:
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "minisched", "pluginConfig": [
                  {"name": "DefaultPreemption", "args": {"useEviction": True, "victimGracePeriodSeconds": 0}}]}]}
    cluster.create(NODES, make_node("n1", cpu="1"))
    _running(cluster, "low", "n1", "low")
    sched = Scheduler(cluster, clock=clock, config=config)
    sched.start()
    try:
        wait_for_nodes(sched, 1)
        wait_until(lambda: sched.cache.pod_count() == 1, what="pod in cache")
        cluster.create(PODS, make_pod("vip", cpu="1", memory=None, priority_class_name="high"))
        wait_until(lambda: "low" not in {p["metadata"]["name"] for p in cluster.list(PODS)["items"]},
                   what="victim evicted at once (grace 0)")
        advance_until(clock, lambda: node_of(cluster, "vip") == "n1", what="preemptor bound")
    finally:
        sched.stop()


def _nominated(cluster: EmbeddedCluster, name: str) -> str | None:
    return cluster.get(PODS, name, "default")["status"].get("nominatedNodeName")


def _preempt_and_free(cluster: EmbeddedCluster, clock: VirtualClock) -> Scheduler:
    """n1 (1 cpu) runs a low pod; vip (high) preempts it and is nominated to n1; the victim goes.
    vip is then backing off (virtual clock stopped; SchedulerPopFromBackoffQ off, or an idle
    scheduler would pop it at once), so the freed room is up for grabs."""
    cluster.create(NODES, make_node("n1", cpu="1"))
    _running(cluster, "low", "n1", "low")
    sched = _start(cluster, clock, 1, pop_from_backoff=False)
    cluster.create(PODS, make_pod("vip", cpu="1", memory=None, priority_class_name="high"))
    wait_until(lambda: _nominated(cluster, "vip") == "n1", what="preemptor nominated")
    assert sched.queue.nominated_node_of("default/vip") == "n1"
    Kubelet(cluster).sync()  # the victim's graceful deletion completes
    wait_until(lambda: sched.cache.pod_count() == 0, what="victim gone from the cache")
    return sched


def test_room_freed_by_preemption_is_held_for_the_preemptor(cluster: EmbeddedCluster, clock: VirtualClock) -> None:
    sched = _preempt_and_free(cluster, clock)
    try:
        # Lower (medium) and equal (high) priority pods arrive while vip backs off: the room is vip's.
        sneaky = cluster.create(PODS, make_pod("sneaky", cpu="1", memory=None, priority_class_name="medium"))
        peer = cluster.create(PODS, make_pod("peer", cpu="1", memory=None, priority_class_name="high"))
        wait_until(lambda: sched.pending_pods()["unschedulable"] == 2, what="both parked")
        assert node_of(cluster, "sneaky") is None and node_of(cluster, "peer") is None
        sched.recorder.flush()
        for pod in (sneaky, peer):
            (event,) = events_for(cluster, pod, "FailedScheduling")
            assert event["message"].startswith("0/1 nodes are available: 1 Insufficient cpu."), event["message"]
        assert not _terminating(cluster), "nobody to preempt: the nominated vip is not a victim"
        advance_until(clock, lambda: node_of(cluster, "vip") == "n1", what="preemptor bound on the freed node")
        assert sched.queue.nominated_node_of("default/vip") is None, "nomination cleared once bound"
        assert node_of(cluster, "sneaky") is None and node_of(cluster, "peer") is None
    finally:
        sched.stop()


def test_a_higher_priority_pod_may_take_the_room_and_the_nomination_is_cleared(
    cluster: EmbeddedCluster, clock: VirtualClock
) -> None:
    priority_classes(cluster, top=5000)
    sched = _preempt_and_free(cluster, clock)
    try:
        cluster.create(PODS, make_pod("boss", cpu="1", memory=None, priority_class_name="top"))
        wait_until(lambda: node_of(cluster, "boss") == "n1", what="the higher-priority pod takes the room")
        # vip's next try fails on n1; preemption finds no victim below it, so the nomination goes.
        advance_until(clock, lambda: sched.queue.nominated_node_of("default/vip") is None,
                      what="vip's nomination cleared")
        sched.recorder.flush()
        wait_until(lambda: _nominated(cluster, "vip") is None, what="status.nominatedNodeName cleared")
        assert node_of(cluster, "vip") is None and not _terminating(cluster)
    finally:
        sched.stop()


def test_nominations_written_by_an_earlier_scheduler_are_respected(
    cluster: EmbeddedCluster, clock: VirtualClock
) -> None:
    """A new scheduler (a restart, a new leader) learns nominations from status.nominatedNodeName
    when it queues the pod, as kube's nominator does."""
    cluster.create(NODES, make_node("n1", cpu="1"))
    cluster.create(PODS, make_pod("vip", cpu="1", memory=None, priority_class_name="high"))
    cluster.patch(PODS, "vip", {"status": {"nominatedNodeName": "n1"}}, "default", subresource="status")
    cluster.create(PODS, make_pod("sneaky", cpu="1", memory=None, priority_class_name="medium"))
    sched = Scheduler(cluster, clock=clock, seed=1)
    sched.start(loop=False)
    try:
        wait_until(lambda: sched.pending_pods()["active"] == 2, what="both queued")
        assert sched.queue.nominated_node_of("default/vip") == "n1"
        vip = sched.queue.pop(0)  # vip's attempt is elsewhere (in flight) while sneaky is tried
        assert vip is not None and vip.key == "default/vip"
        assert sched.schedule_one(0) and sched.wait_for_bindings()
        assert node_of(cluster, "sneaky") is None, "the room on n1 is vip's"
        sched.queue.add_unschedulable(vip, error=True)
        clock.advance(2)
        sched.queue.flush_backoff_completed()
        assert sched.schedule_one(0) and sched.wait_for_bindings()
        assert node_of(cluster, "vip") == "n1"
    finally:
        sched.stop()


def test_a_status_update_without_nomination_keeps_the_one_in_memory(virtual_clock: VirtualClock) -> None:
    """kube's updateNominatedPodUnlocked: an update that lost status.nominatedNodeName (it raced the
    preemption's own write) keeps the nomination; one naming another node moves it."""
    q = SchedulingQueue(clock=virtual_clock)
    pod = make_pod("p")
    q.add(pod)
    assert q.nominated_node_of("default/p") is None
    q.nominate(pod, "n1")
    q.update(pod, {**pod, "metadata": {**pod["metadata"], "labels": {"a": "b"}}})
    assert q.nominated_node_of("default/p") == "n1"
    moved = {**pod, "status": {"nominatedNodeName": "n2"}}
    q.update(pod, moved)
    assert q.nominated_node_of("default/p") == "n2" and q.nominated_pods() == {"n2": [moved]}
    q.delete(moved)
    assert q.nominated_pods() == {}


def test_with_no_nodes_no_post_filter_runs(
    cluster: EmbeddedCluster, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """kube's schedulePod returns ErrNoNodesAvailable before PreFilter, which is no FitError: no
    PostFilter runs. minisched ran them, and DynamicResources' PostFilter, reading a cycle state
    its PreFilter never wrote, failed: "preemption for default/p failed: Error from
    DynamicResources: not found", and the FailedScheduling text read "0/0 nodes are available:
    not found". The pod waits for a node, and lands on the first one."""
    sched = _start(cluster, clock, 0)
    try:
        with caplog.at_level("WARNING", logger="minisched.scheduler"):
            pod = cluster.create(PODS, make_pod("p", cpu="1", memory=None, priority_class_name="high"))
            wait_until(lambda: sched.stats.unschedulable + sched.stats.errors, what="the first attempt")
        sched.recorder.flush()
        assert [e["message"] for e in events_for(cluster, pod, "FailedScheduling")] == [
            "no nodes available to schedule pods"]
        assert not [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
        (scheduled,) = [c for c in cluster.get(PODS, "p", "default")["status"]["conditions"]
                        if c["type"] == "PodScheduled"]
        assert (scheduled["reason"], scheduled["message"]) == ("Unschedulable", "no nodes available to schedule pods")
        cluster.create(NODES, make_node("n1", cpu="1"))
        advance_until(clock, lambda: node_of(cluster, "p") == "n1", what="the pod on the first node")
    finally:
        sched.stop()
