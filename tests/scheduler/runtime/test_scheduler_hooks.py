"""The scheduler's hooks for the layers above: the metrics observer, the decision record, deletions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.events import DECISION_ANNOTATION
from minisched.scheduler.queue import ASSIGNED_POD_ADD
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import node_of, wait_for_nodes, wait_until


class RecordingObserver:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def observe_attempt(self, result: str, seconds: float) -> None:
        self.calls.append(("attempt", (result,)))

    def observe_algorithm(self, seconds: float) -> None:
        self.calls.append(("algorithm", ()))

    def observe_scheduled(self, attempts: int, seconds_since_first_enqueue: float) -> None:
        self.calls.append(("scheduled", (attempts,)))

    def observe_extension_point(self, extension_point: str, status: str, seconds: float) -> None:
        self.calls.append(("point", (extension_point, status)))

    def set_pending(self, queue: str, count: int) -> None:
        self.calls.append(("pending", (queue, count)))


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster()
    yield c
    c.close()


def test_observer_sees_attempts_points_and_bindings(cluster: EmbeddedCluster) -> None:
    observer = RecordingObserver()
    cluster.create(NODES, make_node("n1", cpu="1"))
    with Scheduler(cluster, observer=observer) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("fits", cpu="500m"))
        cluster.create(PODS, make_pod("too-big", cpu="2"))
        wait_until(lambda: ("scheduled", (1,)) in observer.calls, what="a bound pod observed")
        wait_until(lambda: ("attempt", ("unschedulable",)) in observer.calls, what="a failed attempt observed")
        wait_until(lambda: any(c[0] == "pending" for c in observer.calls), timeout=5, what="pending gauge")
    assert ("attempt", ("scheduled",)) in observer.calls
    assert any(c == ("point", ("Filter", "Success")) for c in observer.calls)
    assert any(c[0] == "algorithm" for c in observer.calls)


def test_decision_record_is_kept_and_written_as_an_annotation(cluster: EmbeddedCluster) -> None:
    cluster.create(NODES, make_node("n1"))
    cluster.create(NODES, make_node("n2", cpu="1"))
    with Scheduler(cluster, annotate_decisions=True) as sched:
        wait_for_nodes(sched, 2)
        cluster.create(PODS, make_pod("p", cpu="2"))
        wait_until(lambda: node_of(cluster, "p") == "n1", what="bound")
        sched.recorder.flush()
        decision = sched.decisions["default/p"]
        assert decision.chosen == "n1" and decision.feasible == 1
        annotations = wait_until(
            lambda: cluster.get(PODS, "p", "default")["metadata"].get("annotations"), what="annotation")
        record = json.loads(annotations[DECISION_ANNOTATION])
        assert "n1" in json.dumps(record) and "Insufficient cpu" in json.dumps(record)


def test_a_binding_in_flight_holds_no_decision_record_unless_annotating(cluster: EmbeddedCluster) -> None:
    """A Decision holds node-length arrays (~0.5 MB at 5,000 nodes) and up to 512 bindings wait at
    once: carried into every binding cycle they were most of the peak memory of a 5,000-node drain."""
    cluster.create(NODES, make_node("n1"))
    for annotate in (False, True):
        with Scheduler(cluster, annotate_decisions=annotate) as sched:
            submitted: list[Any] = []
            submit = sched._pool.submit

            def recording_submit(fn: Any, arg: Any, submit: Any = submit, submitted: list[Any] = submitted) -> None:
                submitted.append(arg)
                submit(fn, arg)

            sched._pool.submit = recording_submit  # type: ignore[method-assign]
            wait_for_nodes(sched, 1)
            name = f"p-{str(annotate).lower()}"
            cluster.create(PODS, make_pod(name, cpu="100m"))
            wait_until(lambda: node_of(cluster, name) == "n1", what="bound")  # noqa: B023 - waited for here
        assert [a.decision is not None for a in submitted] == [annotate]


def test_a_binding_in_flight_keeps_only_the_state_of_binding_cycle_plugins(cluster: EmbeddedCluster) -> None:
    """PodTopologySpread's and InterPodAffinity's PreFilter entries hold node-length arrays; up to
    512 bindings wait at once, so carried past Permit they were most of the rest of a 5,000-node
    drain's peak (what stays: tests/scheduler/framework/test_runtime.py)."""
    cluster.create(NODES, make_node("n1", labels={"zone": "a"}))
    with Scheduler(cluster) as sched:
        submitted: list[Any] = []
        submit = sched._pool.submit

        def recording_submit(fn: Any, arg: Any) -> None:
            submitted.append(arg)
            submit(fn, arg)

        sched._pool.submit = recording_submit  # type: ignore[method-assign]
        wait_for_nodes(sched, 1)
        pod = make_pod("spread", labels={"app": "x"})
        pod["spec"]["topologySpreadConstraints"] = [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "x"}}}]
        pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "y"}}, "topologyKey": "zone"}]}}
        cluster.create(PODS, pod)
        wait_until(lambda: node_of(cluster, "spread") == "n1", what="bound")
    [assumed] = submitted
    kept = set(assumed.state._data)
    assert not {"PreFilterPodTopologySpread", "PreFilterInterPodAffinity"} & kept, kept
    assert assumed.state.snapshot is None, "the scheduling cycle's node table is not carried either"


def test_deleted_pending_pod_leaves_the_queue(cluster: EmbeddedCluster) -> None:
    cluster.create(NODES, make_node("n1", cpu="1"))
    with Scheduler(cluster) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("stuck", cpu="4"))
        wait_until(lambda: sched.pending_pods()["unschedulable"] == 1, what="parked")
        cluster.delete(PODS, "stuck", "default")
        wait_until(lambda: len(sched.queue) == 0, what="gone from the queue")


def test_removed_node_takes_no_more_pods(cluster: EmbeddedCluster) -> None:
    cluster.create(NODES, make_node("n1"))
    cluster.create(NODES, make_node("n2"))
    with Scheduler(cluster) as sched:
        wait_for_nodes(sched, 2)
        cluster.delete(NODES, "n2")
        wait_for_nodes(sched, 1)
        for i in range(5):
            cluster.create(PODS, make_pod(f"p{i}"))
        wait_until(lambda: sched.stats.bound == 5, what="bound")
        assert {node_of(cluster, f"p{i}") for i in range(5)} == {"n1"}


def test_bad_settings_are_refused(cluster: EmbeddedCluster) -> None:
    with pytest.raises(ValueError, match="bind_workers"):
        Scheduler(cluster, bind_workers=0)
    with pytest.raises(ValueError, match="either profiles or config"):
        Scheduler(cluster, profiles=[], config={})


def test_prometheus_scheduler_metrics_plug_into_the_observer_hooks(cluster: EmbeddedCluster) -> None:
    from minisched.observability.metrics import SchedulerMetrics

    metrics = SchedulerMetrics()
    cluster.create(NODES, make_node("n1"))
    with Scheduler(cluster, observer=metrics) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("p"))
        wait_until(lambda: sched.stats.bound == 1, what="bound")
    text = metrics.exposition()
    assert 'scheduler_schedule_attempts_total{profile="minisched",result="scheduled"} 1.0' in text
    assert "scheduler_pod_scheduling_sli_duration_seconds_count" in text


class _Boom:
    """A Filter plugin with a bug."""

    name = "Boom"

    def filter(self, state: Any, pod: Any, nodes: Any) -> Any:
        raise RuntimeError("boom: plugin bug")


def test_plugin_error_backs_the_pod_off_with_scheduler_error(cluster: EmbeddedCluster) -> None:
    from minisched.scheduler.plugins import in_tree_registry

    registry = in_tree_registry()
    registry.register("Boom", lambda args, handle: _Boom())
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "minisched", "plugins": {"filter": {"enabled": [{"name": "Boom"}]}}}]}
    cluster.create(NODES, make_node("n1"))
    with Scheduler(cluster, config=config, registry=registry) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("p"))
        wait_until(lambda: sched.queue.where("default/p") == "backoff", what="pod backing off")
        sched.recorder.flush()
        pod = cluster.get(PODS, "p", "default")
        (cond,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert cond["reason"] == "SchedulerError" and "boom: plugin bug" in cond["message"]
        assert sched.stats.errors == 1


class _Gate:
    """A Permit plugin that holds every pod for up to 30 s."""

    name = "Gate"

    def permit(self, state: Any, pod: Any, node_name: str) -> Any:
        from minisched.scheduler.framework.status import Status

        return Status.wait(self.name), 30.0


def uid_of_pod(cluster: EmbeddedCluster, name: str) -> str:
    return str(cluster.get(PODS, name, "default")["metadata"]["uid"])


def _permit_scheduler(cluster: EmbeddedCluster, clock: Any) -> Scheduler:
    from minisched.scheduler.plugins import in_tree_registry

    registry = in_tree_registry()
    registry.register("Gate", lambda args, handle: _Gate())
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "minisched", "plugins": {"permit": {"enabled": [{"name": "Gate"}]}}}]}
    return Scheduler(cluster, config=config, registry=registry, clock=clock)


def test_permit_wait_binds_once_allowed_and_rejects_on_timeout(cluster: EmbeddedCluster) -> None:
    from minisched.clock import VirtualClock

    clock = VirtualClock()
    cluster.create(NODES, make_node("n1"))
    with _permit_scheduler(cluster, clock) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("allowed"))
        cluster.create(PODS, make_pod("timed-out"))
        wait_until(lambda: len(sched._waiting) == 2, what="both pods waiting at permit")
        assert node_of(cluster, "allowed") is None
        assert sched.allow_waiting_pod(uid_of_pod(cluster, "allowed"), "Gate")
        wait_until(lambda: node_of(cluster, "allowed") == "n1", what="allowed pod bound")
        # the informer shows allowed bound while timed-out still waits: an event of its attempt
        wait_until(lambda: ASSIGNED_POD_ADD in sched.queue.in_flight_events("default/timed-out"),
                   what="allowed's binding seen during timed-out's wait")
        timed_out = uid_of_pod(cluster, "timed-out")
        first_wait = sched._waiting.get(timed_out)
        clock.advance(31)
        # Gate registers no events, so every event may help it (kube registers a wildcard for it):
        # the binding seen during the wait sends the rejected pod to backoff, not to the parked ones;
        # activeQ being empty, it is popped from there at once (SchedulerPopFromBackoffQ) and waits
        # at Permit again
        wait_until(lambda: sched._waiting.get(timed_out) not in (None, first_wait),
                   what="rejected on timeout and tried again")
        wait_until(lambda: sched.cache.assumed_count() == 1, what="allowed confirmed, timed-out assumed again")
        sched.recorder.flush()
        cond = [c for c in cluster.get(PODS, "timed-out", "default")["status"]["conditions"]
                if c["type"] == "PodScheduled"]
        assert cond[0]["reason"] == "Unschedulable"
        assert cond[0]["message"] == "rejected due to timeout after waiting 30s at plugin Gate"  # kube's words


class _HoldA:
    """A Permit plugin that holds pod "a" (only) for up to 30 s, and says the room an assigned pod
    frees may help the pods it rejected."""

    name = "HoldA"

    def permit(self, state: Any, pod: Any, node_name: str) -> Any:
        from minisched.scheduler.framework.status import Status

        return (Status.wait(self.name), 30.0) if pod.name == "a" else (Status.success(), 0.0)

    def events_to_register(self) -> list[Any]:
        from minisched.scheduler.framework.cluster_event import ASSIGNED_POD_DELETE, ClusterEventWithHint

        return [ClusterEventWithHint(ASSIGNED_POD_DELETE)]


def test_a_permit_rejection_moves_the_pods_it_kept_out_but_not_itself(cluster: EmbeddedCluster) -> None:
    """kube's handleBindingCycleError after a Permit rejection: once the rejected pod is back in the
    queue, an AssignedPodDelete move (its room is free) for every parked pod but that one. Before,
    no move came at all: b waited for an unrelated event or the 5-minute flush."""
    from minisched.clock import VirtualClock
    from minisched.scheduler.plugins import in_tree_registry

    registry = in_tree_registry()
    registry.register("HoldA", lambda args, handle: _HoldA())
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "minisched", "plugins": {"permit": {"enabled": [{"name": "HoldA"}]}}}]}
    clock = VirtualClock()  # no backoff, Permit timeout or unschedulable flush expires unless the test says so
    cluster.create(NODES, make_node("n1", cpu="1"))
    with Scheduler(cluster, config=config, registry=registry, clock=clock) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("a", cpu="1", memory=None))
        wait_until(lambda: len(sched._waiting) == 1, what="a waiting at Permit, holding the cpu")
        cluster.create(PODS, make_pod("b", cpu="1", memory=None))
        wait_until(lambda: sched.queue.where("default/b") == "unschedulable", what="b parked for lack of cpu")
        assert sched.queue.get("default/b").unschedulable_plugins == {"NodeResourcesFit"}  # type: ignore[union-attr]
        clock.advance(31)  # a's wait times out: rejected by HoldA, which registered AssignedPodDelete
        wait_until(lambda: sched.queue.where("default/a") == "unschedulable", what="a parked")
        wait_until(lambda: sched.queue.where("default/b") != "unschedulable", what="b moved by a's freed room")
        for _ in range(20):  # b's backoff expires; it fits in the room a gave back
            if node_of(cluster, "b") == "n1":
                break
            clock.advance(1)
            sched.wait_for_bindings()
        wait_until(lambda: node_of(cluster, "b") == "n1", what="b bound")
        assert sched.queue.where("default/a") == "unschedulable", "the move left the rejected pod out"
        assert sched.queue.get("default/a").unschedulable_plugins == {"HoldA"}  # type: ignore[union-attr]


class _Holder:
    """A Filter plugin that holds a resource: the Closer capability."""

    name = "Holder"
    reads_pods = False

    def __init__(self) -> None:
        self.closed = 0

    def filter(self, state: Any, pod: Any, nodes: Any) -> Any:
        from minisched.scheduler.framework.interface import FilterResult

        return FilterResult.all_pass(len(nodes))

    def close(self) -> None:
        self.closed += 1


def test_plugins_that_hold_resources_are_closed_once_on_stop(cluster: EmbeddedCluster) -> None:
    from minisched.scheduler.plugins import in_tree_registry

    holder = _Holder()
    registry = in_tree_registry()
    registry.register("Holder", lambda args, handle: holder)
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "minisched", "plugins": {"filter": {"enabled": [{"name": "Holder"}]}}}]}
    sched = Scheduler(cluster, config=config, registry=registry)
    sched.start()
    assert holder.closed == 0
    sched.stop()
    assert holder.closed == 1


def test_a_bound_pods_binding_cycle_ends_its_queue_attempt_once(cluster: EmbeddedCluster) -> None:
    """Past Permit the binding cycle tells the queue the attempt ended (kube's Done); the cycle's
    final Done would find nothing left to end and still take the queue's lock, which the scheduling
    loop waits on, once per pod: it is skipped then."""
    cluster.create(NODES, make_node("n1"))
    with Scheduler(cluster) as sched:
        wait_for_nodes(sched, 1)
        calls: list[str] = []
        binding_done = sched.queue.binding_done

        def counted(qpi: Any) -> None:
            calls.append(qpi.key)
            binding_done(qpi)

        sched.queue.binding_done = counted  # type: ignore[method-assign]
        for name in ("a", "b"):
            cluster.create(PODS, make_pod(name, cpu="100m"))
        wait_until(lambda: node_of(cluster, "a") and node_of(cluster, "b") and sched.stats.bound == 2, what="bound")
        wait_until(lambda: sched._bindings_in_flight == 0, what="binding cycles over")
        assert sorted(calls) == ["default/a", "default/b"]
        assert not sched.queue._attempts  # every attempt's record went
