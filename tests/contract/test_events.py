"""Events: one storage, two APIs (core/v1 and events.k8s.io/v1)."""

from __future__ import annotations

from minisched.cluster import Cluster
from minisched.resources import EVENTS, EVENTS_V1

from .conftest import names


def test_a_core_event_is_visible_through_events_k8s_io(cluster: Cluster, ns: str) -> None:
    cluster.create(EVENTS, {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": "p"},
        "reason": "Scheduled", "message": "Successfully assigned", "type": "Normal",
        "source": {"component": "minisched"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1,
    }, ns)
    seen = cluster.get(EVENTS_V1, "e1", ns)
    assert seen["apiVersion"] == "events.k8s.io/v1"
    assert seen["regarding"]["name"] == "p"
    assert seen["note"] == "Successfully assigned"
    assert seen["reason"] == "Scheduled"


def test_an_events_v1_event_is_visible_through_core(cluster: Cluster, ns: str) -> None:
    cluster.create(EVENTS_V1, {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "minisched",
        "reportingInstance": "minisched-1", "action": "Binding", "reason": "Scheduled",
        "regarding": {"kind": "Pod", "namespace": ns, "name": "p"}, "note": "bound", "type": "Normal",
    }, ns)
    core = cluster.get(EVENTS, "e2", ns)
    assert core["apiVersion"] == "v1"
    assert core["involvedObject"]["name"] == "p"
    assert core["message"] == "bound"
    assert core["reportingComponent"] == "minisched"
    assert names(cluster.list(EVENTS, ns, field_selector="involvedObject.name=p,reason=Scheduled")["items"]) == ["e2"]
