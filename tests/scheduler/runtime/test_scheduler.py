"""The Scheduler end to end on the embedded cluster: binding, failures, events, queue moves, 409s."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import BadRequest, Conflict, InternalError, Invalid
from minisched.objects import make_node, make_pod, taint, toleration
from minisched.resources import NODES, PODS
from minisched.scheduler.events import events_for
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import bound_pods, node_of, wait_for_nodes, wait_until


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster()
    yield c
    c.close()


@pytest.fixture
def sched(cluster: EmbeddedCluster) -> Iterator[Scheduler]:
    s = Scheduler(cluster, bind_workers=2)
    s.start()
    yield s
    s.stop()


def test_pods_are_bound_and_get_a_scheduled_event(cluster: EmbeddedCluster, sched: Scheduler) -> None:
    cluster.create(NODES, make_node("n1"))
    cluster.create(NODES, make_node("n2"))
    wait_for_nodes(sched, 2)
    for i in range(6):
        cluster.create(PODS, make_pod(f"p{i}"))
    wait_until(lambda: len(bound_pods(cluster)) == 6, what="6 pods bound")
    sched.wait_for_bindings()
    sched.recorder.flush()
    pod = cluster.get(PODS, "p0", "default")
    (event,) = events_for(cluster, pod, "Scheduled")
    assert event["message"] == f"Successfully assigned default/p0 to {pod['spec']['nodeName']}"
    assert sched.stats.bound == 6 and sched.stats.bind_conflicts == 0
    wait_until(lambda: sched.cache.assumed_count() == 0, what="assumptions confirmed by the informer")


def test_unschedulable_pod_gets_failed_scheduling_and_waits_for_a_node(
    cluster: EmbeddedCluster, sched: Scheduler
) -> None:
    cluster.create(NODES, make_node("small", cpu="1"))
    cluster.create(NODES, make_node("tainted", cpu="8", taints=[taint("dedicated", "gpu")]))
    wait_for_nodes(sched, 2)
    pod = cluster.create(PODS, make_pod("big", cpu="2"))
    wait_until(lambda: sched.pending_pods()["unschedulable"] == 1, what="pod parked as unschedulable")
    sched.recorder.flush()
    (event,) = events_for(cluster, pod, "FailedScheduling")
    assert event["type"] == "Warning"
    expected = (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). "
        # kube 1.35's DynamicResources PostFilter speaks before DefaultPreemption
        "no new claims to deallocate, "
        # kube 1.35: 2 cpus are beyond the small node's allocatable, so preemption cannot help there either
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert event["message"] == expected
    cond = [c for c in cluster.get(PODS, "big", "default")["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond[0]["status"] == "False" and cond[0]["reason"] == "Unschedulable"
    # the same words in the condition and in the decision record, preemption part included
    assert cond[0]["message"] == expected
    assert sched.decisions["default/big"].message == expected
    cluster.create(NODES, make_node("roomy", cpu="4"))  # NodeAdd moves it back
    wait_until(lambda: node_of(cluster, "big") == "roomy", what="pod bound to the new node")


def test_only_our_pending_pods_are_scheduled(cluster: EmbeddedCluster, sched: Scheduler) -> None:
    cluster.create(NODES, make_node("n1"))
    wait_for_nodes(sched, 1)
    cluster.create(PODS, make_pod("other", scheduler_name="default-scheduler"))
    cluster.create(PODS, make_pod("gated", scheduling_gates=["example.com/hold"]))
    cluster.create(PODS, make_pod("mine"))
    wait_until(lambda: node_of(cluster, "mine") == "n1", what="our pod bound")
    wait_until(lambda: sched.pending_pods()["gated"] == 1, what="gated pod held")
    assert node_of(cluster, "other") is None and node_of(cluster, "gated") is None
    gated = cluster.get(PODS, "gated", "default")
    gated["spec"]["schedulingGates"] = []
    cluster.update(PODS, gated)
    wait_until(lambda: node_of(cluster, "gated") == "n1", what="ungated pod bound")


def test_taints_and_tolerations_steer_pods(cluster: EmbeddedCluster, sched: Scheduler) -> None:
    cluster.create(NODES, make_node("gpu", taints=[taint("gpu", "true")]))
    cluster.create(NODES, make_node("plain"))
    wait_for_nodes(sched, 2)
    cluster.create(PODS, make_pod("tolerant", tolerations=[toleration("gpu", "true", "NoSchedule")],
                                  node_selector={"kubernetes.io/hostname": "gpu"}))
    cluster.create(PODS, make_pod("intolerant"))
    wait_until(lambda: len(bound_pods(cluster)) == 2, what="both bound")
    assert bound_pods(cluster) == {"tolerant": "gpu", "intolerant": "plain"}


def test_malformed_pods_get_an_event_naming_the_problem_and_the_loop_goes_on(
    cluster: EmbeddedCluster, sched: Scheduler
) -> None:
    cluster.create(NODES, make_node("n1"))
    wait_for_nodes(sched, 1)
    bad_quantity = make_pod("bad-quantity")
    bad_quantity["spec"]["overhead"] = {"cpu": "12x"}
    bad_operator = make_pod("bad-operator", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}}})
    # what the API server lets through: Gt with a value that is a label value but not an integer
    bad_number = make_pod("bad-number", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["abc"]}]}]}}})
    with pytest.raises(BadRequest):  # a malformed quantity never gets past the API server
        cluster.create(PODS, bad_quantity)
    with pytest.raises(Invalid):  # nor an unknown operator
        cluster.create(PODS, bad_operator)
    cluster.create(PODS, bad_number)
    cluster.create(PODS, make_pod("good"))
    wait_until(lambda: node_of(cluster, "good") == "n1", what="the good pod bound")
    wait_until(lambda: sched.pending_pods()["unschedulable"] == 1, what="bad pod parked")
    sched.recorder.flush()
    (event,) = events_for(cluster, bad_number, "FailedScheduling")
    assert "'abc'" in event["message"] and "matchExpressions[0]" in event["message"]


def test_409_on_bind_means_someone_else_bound_it(cluster: EmbeddedCluster) -> None:
    cluster.create(NODES, make_node("n1"))
    cluster.create(NODES, make_node("n2"))
    real_bind = cluster.bind

    def racing_bind(namespace: str, name: str, node_name: str, *, uid: str | None = None) -> None:
        real_bind(namespace, name, "n2" if node_name == "n1" else "n1")  # another scheduler wins
        real_bind(namespace, name, node_name, uid=uid)  # ours now answers 409

    cluster.bind = racing_bind  # type: ignore[method-assign]
    with Scheduler(cluster) as sched:
        wait_for_nodes(sched, 2)
        cluster.create(PODS, make_pod("p"))
        wait_until(lambda: sched.stats.bind_conflicts == 1, what="a 409")
        sched.wait_for_bindings()
        winner = node_of(cluster, "p")
        wait_until(lambda: sched.cache.pod_node("default/p") == winner, what="cache follows the informer")
        assert sched.stats.bound == 0 and sched.queue.where("default/p") is None, "not retried"
        table = sched.cache.snapshot()
        assert sum(int(table.requested("pods")[table.row(n)]) for n in ("n1", "n2")) == 1  # type: ignore[index]


def test_409_with_nothing_bound_is_retried(cluster: EmbeddedCluster) -> None:
    """kube-apiserver answers 409 when etcd fails under the binding write ("rpc error: code =
    Unavailable ... EOF"), though nothing was bound: the pod must not be dropped."""
    clock = VirtualClock()
    cluster.create(NODES, make_node("n1"))
    cluster.faults.fail_next(1, Conflict('Operation cannot be fulfilled on pods/binding "p": rpc error: '
                                         "code = Unavailable desc = error reading from server: EOF"),
                             verbs={"bind"})
    with Scheduler(cluster, clock=clock) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("p"))
        wait_until(lambda: sched.stats.bind_conflicts == 1, what="the injected 409")
        wait_until(lambda: sched.queue.where("default/p") == "backoff", what="pod backing off, not dropped")
        clock.advance(2)
        wait_until(lambda: node_of(cluster, "p") == "n1", what="bound on retry")


def test_other_bind_errors_back_off_and_retry(cluster: EmbeddedCluster) -> None:
    clock = VirtualClock()
    cluster.create(NODES, make_node("n1"))
    cluster.faults.fail_next(1, InternalError("etcd hiccup"), verbs={"bind"})
    with Scheduler(cluster, clock=clock) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("p"))
        wait_until(lambda: sched.stats.bind_errors == 1, what="the injected bind error")
        wait_until(lambda: sched.queue.where("default/p") == "backoff", what="pod backing off")
        assert sched.cache.assumed_count() == 0, "the room was given back"
        clock.advance(2)  # backoff 1 s; the flusher runs every (virtual) second
        wait_until(lambda: node_of(cluster, "p") == "n1", what="bound on retry")
        sched.recorder.flush()
        messages = [e["message"] for e in events_for(cluster, cluster.get(PODS, "p", "default"))]
        # kube's wrapping names the plugin: `running Bind plugin "DefaultBinder": ...`
        assert any(m.startswith('Binding rejected: running Bind plugin "DefaultBinder": 500 InternalError: etcd hiccup')
                   for m in messages), messages
        assert "Successfully assigned default/p to n1" in messages


def test_a_failed_bind_gives_the_pods_its_room_kept_out_another_chance(cluster: EmbeddedCluster) -> None:
    """kube's handleBindingCycleError: the assumed pod is forgotten and, as its room is free again
    (like a deleted pod's), the queue moves pods parked for lack of it (AssignedPodDelete). Before,
    they waited for an unrelated event or the 5-minute unschedulable flush."""
    clock = VirtualClock()  # no backoff or unschedulable flush expires unless the test says so
    cluster.create(NODES, make_node("n1", cpu="1"))
    real_bind = cluster.bind
    release, started = threading.Event(), threading.Event()

    def failing_bind(namespace: str, name: str, node_name: str, *, uid: str | None = None) -> None:
        if name == "a":  # a's binds never land; the first one hangs until the test lets it fail
            started.set()
            release.wait(30)
            raise InternalError("etcd hiccup")
        real_bind(namespace, name, node_name, uid=uid)

    cluster.bind = failing_bind  # type: ignore[method-assign]
    with Scheduler(cluster, clock=clock) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("a", cpu="1", memory=None))
        wait_until(started.is_set, what="a's bind to start")
        cluster.create(PODS, make_pod("b", cpu="1", memory=None))  # no room while a is assumed
        wait_until(lambda: sched.queue.where("default/b") == "unschedulable", what="b parked")
        release.set()
        wait_until(lambda: sched.stats.bind_errors == 1, what="a's bind to fail")
        wait_until(lambda: sched.queue.where("default/b") in ("backoff", "active", "in-flight")
                   or node_of(cluster, "b") is not None, what="b moved out of the unschedulable pods")
        for _ in range(20):  # backoffs expire; a's retries keep failing, b fits once a is forgotten
            if node_of(cluster, "b") == "n1":
                break
            clock.advance(1)
            sched.wait_for_bindings()
        wait_until(lambda: node_of(cluster, "b") == "n1", what="b bound in the room a's failed bind gave back")
        assert node_of(cluster, "a") is None


def test_graceful_stop_finishes_bindings(cluster: EmbeddedCluster) -> None:
    for i in range(3):
        cluster.create(NODES, make_node(f"n{i}"))
    for i in range(50):
        cluster.create(PODS, make_pod(f"p{i}"))
    sched = Scheduler(cluster)
    sched.start()
    wait_until(lambda: sched.stats.scheduled >= 10, what="some decisions")
    sched.stop()
    assert sched.stats.bound == sched.stats.scheduled, "every decided pod was bound before stop returned"
    assert len(bound_pods(cluster)) == sched.stats.bound


def test_watch_drops_and_410s_mid_run_lose_nothing_and_bind_nothing_twice(cluster: EmbeddedCluster) -> None:
    import collections
    import threading

    binds: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    real_bind = cluster.bind

    def counting_bind(namespace: str, name: str, node_name: str, *, uid: str | None = None) -> None:
        real_bind(namespace, name, node_name, uid=uid)
        with lock:
            binds[name] += 1

    cluster.bind = counting_bind  # type: ignore[method-assign]
    for i in range(4):
        cluster.create(NODES, make_node(f"n{i}"))
    with Scheduler(cluster, bind_workers=2) as sched:
        wait_for_nodes(sched, 4)
        for i in range(300):
            cluster.create(PODS, make_pod(f"p{i}", cpu="10m", memory="16Mi"))
            if i % 60 == 30:
                cluster.faults.drop_watches()
            if i % 100 == 50:
                cluster.faults.force_expiry()  # the informers must relist
        wait_until(lambda: len(bound_pods(cluster)) == 300, timeout=30, what="all 300 bound")
        sched.wait_for_bindings()
        assert set(binds.values()) == {1} and len(binds) == 300
        wait_until(lambda: sched.cache.pod_count() == 300 and sched.cache.assumed_count() == 0,
                   timeout=30, what="cache agrees with the server")
        assert len(sched.queue) == 0


def test_the_scheduler_caches_objects_without_managed_fields(cluster: EmbeddedCluster) -> None:
    """kube-scheduler's pod informer drops metadata.managedFields (memory: the API server adds them to
    every object); ours drops them from what it caches. The embedded server keeps none, so the list
    here adds them as kube-apiserver would."""
    cluster.create(NODES, make_node("n1", cpu="4", memory="8Gi"))
    cluster.create(PODS, make_pod("p", cpu="100m"))
    listed = cluster.list

    def list_with_managed_fields(*args, **kwargs):  # type: ignore[no-untyped-def]
        out = listed(*args, **kwargs)
        for item in out.get("items", []):
            item["metadata"]["managedFields"] = [{"manager": "kubectl-create", "operation": "Update"}]
        return out

    cluster.list = list_with_managed_fields  # type: ignore[method-assign]
    s = Scheduler(cluster, bind_workers=1)
    try:
        s.start(loop=False)
        for resource in (PODS, NODES):
            cached = s.factory.informer_for(resource).store.list()
            assert cached and all("managedFields" not in o["metadata"] for o in cached), resource
    finally:
        s.stop()


def test_kept_decisions_stay_within_their_byte_budget(cluster: EmbeddedCluster) -> None:
    """A decision record grows with the nodes (its arrays have a row per node), so the records kept
    for explaining are bounded in bytes as well as in number: the oldest go first."""
    for i in range(40):
        cluster.create(NODES, make_node(f"n{i}", cpu="4", memory="8Gi"))
    s = Scheduler(cluster, bind_workers=1, keep_decisions=100, keep_decisions_bytes=1)
    try:
        s.start()
        wait_for_nodes(s, 40)
        cluster.create(PODS, make_pod("first", cpu="100m"))
        wait_until(lambda: "default/first" in s.decisions)
        one = s.decisions["default/first"].nbytes
        assert one > 0
        s.keep_decisions_bytes = 3 * one
        for i in range(10):
            cluster.create(PODS, make_pod(f"p{i}", cpu="100m"))
        wait_until(lambda: "default/p9" in s.decisions)
        assert len(s.decisions) == 3 and list(s.decisions)[-1] == "default/p9"
        assert s._decisions_bytes == sum(d.nbytes for d in s.decisions.values())
    finally:
        s.stop()


def test_idle_binding_workers_keep_no_finished_binding_alive(cluster: EmbeddedCluster) -> None:
    """A bound pod's binding (its pod, cycle state and decision record) is garbage once its binding
    cycle ends: an idle worker waiting for the next job must not keep its last one (a long-running
    scheduler's memory would hold up to bind_workers of them, and a soak reads that as growth)."""
    import gc

    from minisched.scheduler.schedule_one import _Assumed

    cluster.create(NODES, make_node("n1"))
    s = Scheduler(cluster, bind_workers=4, keep_decisions=0)
    try:
        s.start()
        wait_for_nodes(s, 1)
        for i in range(12):
            cluster.create(PODS, make_pod(f"p{i}"))
        wait_until(lambda: s.stats.bound == 12, what="12 pods bound")
        s.wait_for_bindings()
        gc.collect()
        alive = [o for o in gc.get_objects() if isinstance(o, _Assumed)]
        assert alive == [], [a.qpi.pod["metadata"]["name"] for a in alive]
    finally:
        s.stop()
