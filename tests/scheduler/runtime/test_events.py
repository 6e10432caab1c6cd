"""EventRecorder on the embedded cluster: kube-scheduler's events, correlation, status writes."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import ApiError
from minisched.objects import make_pod
from minisched.resources import EVENTS, EVENTS_V1, PODS
from minisched.scheduler.events import (
    DECISION_ANNOTATION,
    POD_REASON_UNSCHEDULABLE,
    EventRecorder,
    events_for,
)


@pytest.fixture
def cluster() -> EmbeddedCluster:
    c = EmbeddedCluster()
    yield c  # type: ignore[misc]
    c.close()


def test_scheduled_and_failed_events_read_as_kube_scheduler_writes_them(cluster: EmbeddedCluster) -> None:
    pod = cluster.create(PODS, make_pod("web"))
    rec = EventRecorder(cluster)
    rec.scheduled(pod, "node-1")
    rec.failed_scheduling(pod, "0/3 nodes are available: 3 Insufficient cpu.")
    assert rec.flush()
    scheduled = events_for(cluster, pod, "Scheduled")
    failed = events_for(cluster, pod, "FailedScheduling")
    assert [e["message"] for e in scheduled] == ["Successfully assigned default/web to node-1"]
    assert scheduled[0]["type"] == "Normal" and scheduled[0]["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert failed[0]["type"] == "Warning" and failed[0]["source"] == {"component": "minisched"}
    rec.stop()


def test_repeats_fold_into_one_event_with_a_count(cluster: EmbeddedCluster) -> None:
    pod = cluster.create(PODS, make_pod("web"))
    rec = EventRecorder(cluster, asynchronous=False)
    for _ in range(3):
        rec.failed_scheduling(pod, "0/1 nodes are available: 1 Insufficient cpu.")
    rec.failed_scheduling(pod, "0/1 nodes are available: 1 Insufficient memory.")
    counts = sorted(e["count"] for e in events_for(cluster, pod, "FailedScheduling"))
    assert counts == [1, 3]


def test_events_k8s_io_api(cluster: EmbeddedCluster) -> None:
    pod = cluster.create(PODS, make_pod("web"))
    rec = EventRecorder(cluster, asynchronous=False, api="events.k8s.io/v1")
    rec.scheduled(pod, "n")
    (event,) = cluster.list(EVENTS_V1, "default")["items"]
    assert event["note"] == "Successfully assigned default/web to n" and event["regarding"]["name"] == "web"
    assert event["reportingController"] == "minisched"


def test_pod_scheduled_false_keeps_other_conditions_and_sets_nomination(cluster: EmbeddedCluster) -> None:
    pod = cluster.create(PODS, make_pod("web"))
    rec = EventRecorder(cluster, asynchronous=False)
    rec.pod_scheduled_false(pod, POD_REASON_UNSCHEDULABLE, "0/1 nodes are available", nominated_node_name="n1")
    got = cluster.get(PODS, "web", "default")
    (cond,) = [c for c in got["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", "0/1 nodes are available")
    assert got["status"]["nominatedNodeName"] == "n1"
    # the same again is not written at all
    rv = got["metadata"]["resourceVersion"]
    rec.pod_scheduled_false(got, POD_REASON_UNSCHEDULABLE, "0/1 nodes are available", nominated_node_name="n1")
    assert cluster.get(PODS, "web", "default")["metadata"]["resourceVersion"] == rv


def test_decision_annotation_and_vanished_pods(cluster: EmbeddedCluster) -> None:
    pod = cluster.create(PODS, make_pod("web"))
    rec = EventRecorder(cluster, asynchronous=False)
    rec.annotate_decision(pod, {"node": "n1", "feasible": 3})
    assert cluster.get(PODS, "web", "default")["metadata"]["annotations"][DECISION_ANNOTATION] == \
        '{"node":"n1","feasible":3}'
    cluster.delete(PODS, "web", "default")
    rec.pod_scheduled_false(pod, POD_REASON_UNSCHEDULABLE, "gone")  # NotFound is not a failure
    assert rec.failed == 0


def test_full_backlog_drops_events_but_counts_them(cluster: EmbeddedCluster) -> None:
    pod = cluster.create(PODS, make_pod("web"))
    rec = EventRecorder(cluster, max_pending=0)
    rec.scheduled(pod, "n")
    assert rec.dropped == 1 and cluster.list(EVENTS, "default")["items"] == []


def test_bad_event_type_is_refused(cluster: EmbeddedCluster) -> None:
    with pytest.raises(ValueError, match="Normal or Warning"):
        EventRecorder(cluster).event(make_pod("x"), "Info", "R", "m")


class _BatchingCluster(EmbeddedCluster):
    """An embedded cluster that, like RealCluster, can create many objects in one call, and logs
    every write the recorder makes, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, list[str]]] = []

    def create_many(self, resource: Any, objs: list[dict[str, Any]]) -> list[Any]:
        self.writes.append(("create_many", [o["metadata"]["name"].split(".")[0] for o in objs]))
        results: list[Any] = []
        for obj in objs:
            try:
                self.create(resource, obj)
                results.append(None)
            except ApiError as err:
                results.append(err)
        return results

    def patch(self, resource: Any, name: str, patch: dict[str, Any], namespace: str | None = None,
              **kw: Any) -> dict[str, Any]:
        self.writes.append(("patch", [name.split(".")[0]]))
        return super().patch(resource, name, patch, namespace, **kw)


def test_queued_events_go_out_together_in_order_around_other_writes() -> None:
    cluster = _BatchingCluster()
    pods = [cluster.create(PODS, make_pod(f"p{i}")) for i in range(6)]
    rec = EventRecorder(cluster)
    gate = threading.Event()
    rec.call(lambda: gate.wait(10))  # hold the writer while the writes queue up
    for pod in pods[:4]:
        rec.scheduled(pod, "n1")
    rec.set_nominated_node(pods[5], "n2")  # a status write: the Events before it go first
    rec.failed_scheduling(pods[4], "0/1 nodes are available.")
    rec.failed_scheduling(pods[4], "0/1 nodes are available.")  # a repeat: a PATCH of the first's count
    rec.scheduled(pods[5], "n2")
    gate.set()
    assert rec.flush()
    rec.stop()
    assert cluster.writes == [
        ("create_many", ["p0", "p1", "p2", "p3"]),
        ("patch", ["p5"]),
        ("create_many", ["p4"]),
        ("patch", ["p4"]),
        ("create_many", ["p5"]),
    ]
    assert rec.written == 8 and rec.failed == 0
    assert [e["count"] for e in events_for(cluster, pods[4], "FailedScheduling")] == [2]
    assert all(events_for(cluster, pod, "Scheduled") for pod in pods[:4] + pods[5:])


def test_a_refused_event_in_a_batch_is_counted_and_the_others_land() -> None:
    cluster = _BatchingCluster()
    pods = [cluster.create(PODS, make_pod(f"p{i}")) for i in range(3)]
    gone = make_pod("q", namespace="gone")  # its namespace does not exist: NotFound, nothing to tell
    gone["metadata"]["uid"] = "u-q"
    rec = EventRecorder(cluster)
    gate = threading.Event()
    rec.call(lambda: gate.wait(10))
    rec.scheduled(pods[0], "n")
    rec.scheduled(gone, "n")
    rec.event(pods[1], "Normal", "Scheduled", "x" * 2)
    gate.set()
    assert rec.flush()
    rec.stop()
    assert cluster.writes == [("create_many", ["p0", "q", "p1"])]
    assert rec.written == 2 and rec.failed == 0
