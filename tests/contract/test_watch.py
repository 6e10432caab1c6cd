"""Watch: order, filtering, selector edges, starting points, 410, timeouts and stop()."""

from __future__ import annotations

import threading
import time

import pytest

from minisched.cluster import Cluster
from minisched.errors import BadRequest
from minisched.objects import make_pod
from minisched.resources import CONFIG_MAPS, PODS

from .conftest import collect, unique


def cm(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}, "data": {}}


def test_watch_from_a_list_sees_every_change_in_order(cluster: Cluster, ns: str) -> None:
    rv = cluster.list(CONFIG_MAPS, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(CONFIG_MAPS, ns, resource_version=rv, timeout_seconds=30)
    cluster.create(CONFIG_MAPS, cm("a"), ns)
    cluster.patch(CONFIG_MAPS, "a", {"data": {"k": "v"}}, ns)
    cluster.create(CONFIG_MAPS, cm("b"), ns)
    cluster.delete(CONFIG_MAPS, "a", ns)
    events = collect(w, 4)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == 4
    assert events[1]["object"]["data"] == {"k": "v"}
    assert all(e["object"]["kind"] == "ConfigMap" and e["object"]["apiVersion"] == "v1" for e in events)


def test_watch_is_filtered_by_namespace(cluster: Cluster, ns: str) -> None:
    other = unique("ct")
    cluster.create("namespaces", {"metadata": {"name": other}})
    rv = cluster.list(CONFIG_MAPS, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(CONFIG_MAPS, ns, resource_version=rv, timeout_seconds=30)
    cluster.create(CONFIG_MAPS, cm("elsewhere"), other)
    cluster.create(CONFIG_MAPS, cm("here"), ns)
    events = collect(w, 1)
    assert [e["object"]["metadata"]["name"] for e in events] == ["here"]


def test_label_selector_edges_become_added_and_deleted(cluster: Cluster, ns: str) -> None:
    cluster.create(CONFIG_MAPS, cm("x", app="other"), ns)
    rv = cluster.list(CONFIG_MAPS, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(CONFIG_MAPS, ns, resource_version=rv, label_selector="app=web", timeout_seconds=30)
    cluster.patch(CONFIG_MAPS, "x", {"metadata": {"labels": {"app": "web"}}}, ns)  # starts matching
    cluster.patch(CONFIG_MAPS, "x", {"data": {"k": "v"}}, ns)  # still matching
    last = cluster.patch(CONFIG_MAPS, "x", {"metadata": {"labels": {"app": "gone"}}}, ns)  # stops matching
    cluster.patch(CONFIG_MAPS, "x", {"data": {"k": "w"}}, ns)  # not matching: unseen
    cluster.patch(CONFIG_MAPS, "x", {"metadata": {"labels": {"app": "web"}}}, ns)  # matching again
    events = collect(w, 4)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED", "ADDED"]
    assert events[2]["object"]["metadata"]["resourceVersion"] == last["metadata"]["resourceVersion"]
    assert events[2]["object"]["metadata"]["labels"] == {"app": "web"}  # the last state that matched
    assert events[3]["object"]["data"] == {"k": "w"}


def test_field_selector_watch(cluster: Cluster, ns: str) -> None:
    rv = cluster.list(PODS, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(PODS, ns, resource_version=rv, field_selector="spec.nodeName=", timeout_seconds=30)
    cluster.create(PODS, make_pod("p", namespace=ns))
    cluster.bind(ns, "p", "node-1")  # no longer unbound: leaves the selection
    events = collect(w, 2)
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]


@pytest.mark.parametrize("start", ["0", "", None])
def test_watch_without_a_version_starts_with_the_current_objects(cluster: Cluster, ns: str, start: str | None) -> None:
    cluster.create(CONFIG_MAPS, cm("old1"), ns)
    cluster.create(CONFIG_MAPS, cm("old2"), ns)
    w = cluster.watch(CONFIG_MAPS, ns, resource_version=start, timeout_seconds=30)
    events = collect(w, 2)
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in events) == [
        ("ADDED", "old1"), ("ADDED", "old2")]


def test_watch_from_a_version_replays_what_followed(cluster: Cluster, ns: str) -> None:
    first = cluster.create(CONFIG_MAPS, cm("a"), ns)
    cluster.create(CONFIG_MAPS, cm("b"), ns)
    cluster.delete(CONFIG_MAPS, "a", ns)
    w = cluster.watch(CONFIG_MAPS, ns, resource_version=first["metadata"]["resourceVersion"], timeout_seconds=30)
    events = collect(w, 2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b"), ("DELETED", "a")]


def test_watch_timeout_ends_iteration(cluster: Cluster, ns: str) -> None:
    rv = cluster.list(CONFIG_MAPS, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(CONFIG_MAPS, ns, resource_version=rv, timeout_seconds=1)
    started = time.monotonic()
    events = [e for e in w if e["type"] != "BOOKMARK"]
    assert events == []
    assert 0.5 <= time.monotonic() - started < 10


def test_stop_ends_iteration_from_another_thread(cluster: Cluster, ns: str) -> None:
    rv = cluster.list(CONFIG_MAPS, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(CONFIG_MAPS, ns, resource_version=rv, timeout_seconds=60)
    ended = threading.Event()

    def consume() -> None:
        for _ in w:
            pass
        ended.set()

    threading.Thread(target=consume, daemon=True).start()
    time.sleep(0.2)
    w.stop()
    assert ended.wait(5)


def test_deleted_event_carries_the_final_state(cluster: Cluster, ns: str) -> None:
    cluster.create(CONFIG_MAPS, {"metadata": {"name": "d"}, "data": {"k": "last"}}, ns)
    rv = cluster.list(CONFIG_MAPS, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(CONFIG_MAPS, ns, resource_version=rv, timeout_seconds=30)
    cluster.delete(CONFIG_MAPS, "d", ns)
    events = collect(w, 1)
    assert events[0]["type"] == "DELETED" and events[0]["object"]["data"] == {"k": "last"}
    assert int(events[0]["object"]["metadata"]["resourceVersion"]) > int(rv)


def test_pod_deletion_ends_with_deleted(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("p", namespace=ns))
    cluster.bind(ns, "p", "nowhere")
    rv = cluster.list(PODS, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(PODS, ns, resource_version=rv, timeout_seconds=30)
    cluster.delete(PODS, "p", ns)
    cluster.delete(PODS, "p", ns, grace_period_seconds=0)
    events = collect(w, 3, timeout=3)
    assert events[0]["type"] == "MODIFIED" and events[0]["object"]["metadata"]["deletionTimestamp"]
    assert events[-1]["type"] == "DELETED"


def test_bookmarks_only_when_asked(cluster: Cluster, ns: str) -> None:
    rv = cluster.list(CONFIG_MAPS, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(CONFIG_MAPS, ns, resource_version=rv, timeout_seconds=1)
    assert [e for e in w if e["type"] == "BOOKMARK"] == []


def test_watch_with_a_malformed_selector_is_a_bad_request(cluster: Cluster, ns: str) -> None:
    with pytest.raises(BadRequest):
        w = cluster.watch(CONFIG_MAPS, ns, label_selector="a in b", timeout_seconds=5)
        next(iter(w))


def test_deleting_an_unbound_pod_is_seen_as_deleted(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("u", namespace=ns))
    rv = cluster.list(PODS, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(PODS, ns, resource_version=rv, timeout_seconds=30)
    cluster.delete(PODS, "u", ns)
    cluster.create(PODS, make_pod("marker", namespace=ns))
    events = collect(w, 3)
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    # The API server first records the deletion (deletionTimestamp, grace 0), then deletes.
    assert seen == [("MODIFIED", "u"), ("DELETED", "u"), ("ADDED", "marker")]
    assert events[0]["object"]["metadata"]["deletionGracePeriodSeconds"] == 0


def test_a_bookmark_comes_before_a_watch_times_out(cluster: Cluster, ns: str) -> None:
    rv = cluster.list(CONFIG_MAPS, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(CONFIG_MAPS, ns, resource_version=rv, allow_bookmarks=True, timeout_seconds=3)
    made = cluster.create(CONFIG_MAPS, cm("a"), ns)
    events = list(w)
    assert events[0]["type"] == "ADDED"
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, [e["type"] for e in events]
    assert set(bookmarks[-1]["object"]) >= {"kind", "apiVersion", "metadata"}
    assert int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) >= int(made["metadata"]["resourceVersion"])
