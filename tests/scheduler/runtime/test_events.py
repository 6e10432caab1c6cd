"""EventRecorder on the embedded cluster: kube-scheduler's events, correlation, status writes."""

from __future__ import annotations

import pytest

from minisched.cluster.embedded import EmbeddedCluster
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
