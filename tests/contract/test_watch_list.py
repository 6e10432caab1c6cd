"""Watch-list (sendInitialEvents, kube-apiserver's WatchList, on by default since 1.34): the state
streamed as ADDED events, a BOOKMARK annotated k8s.io/initial-events-end at the state's version, then
the changes on the same stream; and the options the server refuses, worded as it words them."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from minisched.cluster import Cluster, Watch, WatchEvent
from minisched.errors import Invalid
from minisched.resources import CONFIG_MAPS

END = "k8s.io/initial-events-end"


def cm(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}, "data": {}}


def watch_list(cluster: Cluster, ns: str, **options: object) -> Watch:
    return cluster.watch(CONFIG_MAPS, ns, allow_bookmarks=True, send_initial_events=True,
                         resource_version_match="NotOlderThan", timeout_seconds=30, **options)  # type: ignore[arg-type]


def read_until(watch: Iterator[WatchEvent], done: object, timeout: float = 10.0) -> list[WatchEvent]:
    """Events (bookmarks included) until `done(event)` holds for one, or `timeout` passes. Reading
    on means reading on from the same iterator: a new one over a real watch loses what the first
    had buffered."""
    events: list[WatchEvent] = []
    finished = threading.Event()

    def read() -> None:
        try:
            for event in watch:
                events.append(event)
                if done(event):  # type: ignore[operator]
                    return
        finally:
            finished.set()

    threading.Thread(target=read, daemon=True).start()
    finished.wait(timeout)
    return events


def is_end(event: WatchEvent) -> bool:
    annotations = event["object"].get("metadata", {}).get("annotations") or {}
    return event["type"] == "BOOKMARK" and annotations.get(END) == "true"


@pytest.mark.parametrize("start", ["", "0", "list"])
def test_the_state_then_the_end_bookmark_then_changes_on_the_same_stream(
    cluster: Cluster, ns: str, start: str
) -> None:
    made = [cluster.create(CONFIG_MAPS, cm(f"old{i}", app="web"), ns) for i in range(3)]
    cluster.create(CONFIG_MAPS, cm("other", app="db"), ns)
    rv = cluster.list(CONFIG_MAPS, ns)["metadata"]["resourceVersion"] if start == "list" else start
    w = watch_list(cluster, ns, resource_version=rv, label_selector="app=web")
    stream = iter(w)
    try:
        initial = read_until(stream, is_end)
        assert initial and is_end(initial[-1]), f"no {END} bookmark: {initial}"
        state = [e for e in initial if e["type"] != "BOOKMARK"]
        assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in state) == [
            ("ADDED", "old0"), ("ADDED", "old1"), ("ADDED", "old2")]
        marker = initial[-1]["object"]
        assert marker["kind"] == "ConfigMap" and marker["apiVersion"] == "v1"
        end_rv = int(marker["metadata"]["resourceVersion"])
        assert end_rv >= max(int(o["metadata"]["resourceVersion"]) for o in made)
        cluster.create(CONFIG_MAPS, cm("new", app="web"), ns)
        cluster.create(CONFIG_MAPS, cm("new-other", app="db"), ns)
        cluster.delete(CONFIG_MAPS, "old0", ns)
        later = [e for e in read_until(stream, lambda e: e["type"] == "DELETED") if e["type"] != "BOOKMARK"]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in later] == [("ADDED", "new"), ("DELETED", "old0")]
        assert all(int(e["object"]["metadata"]["resourceVersion"]) > end_rv for e in later)
    finally:
        w.stop()


def test_without_bookmarks_the_state_comes_unmarked(cluster: Cluster, ns: str) -> None:
    cluster.create(CONFIG_MAPS, cm("a"), ns)
    w = cluster.watch(CONFIG_MAPS, ns, send_initial_events=True, resource_version_match="NotOlderThan",
                      resource_version="", timeout_seconds=30)
    try:
        cluster.create(CONFIG_MAPS, cm("b"), ns)
        events = read_until(iter(w), lambda e: e["object"]["metadata"].get("name") == "b")
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("ADDED", "b")]
    finally:
        w.stop()


def test_send_initial_events_false_starts_from_now_without_the_state(cluster: Cluster, ns: str) -> None:
    cluster.create(CONFIG_MAPS, cm("old"), ns)
    w = cluster.watch(CONFIG_MAPS, ns, send_initial_events=False, resource_version_match="NotOlderThan",
                      resource_version="", allow_bookmarks=True, timeout_seconds=30)
    try:
        cluster.create(CONFIG_MAPS, cm("new"), ns)
        events = [e for e in read_until(iter(w), lambda e: e["type"] == "ADDED") if e["type"] != "BOOKMARK"]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "new")]
    finally:
        w.stop()


FORBIDDEN_WITHOUT_MATCH = ('ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                           "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")


@pytest.mark.parametrize(("options", "message"), [
    ({"send_initial_events": True}, FORBIDDEN_WITHOUT_MATCH),
    ({"resource_version_match": "NotOlderThan"},
     'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
     "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"),
    ({"send_initial_events": True, "resource_version_match": "Exact"},
     'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires '
     'setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: "Exact": '
     'supported values: "NotOlderThan"]'),
], ids=["initial-events-without-match", "match-without-initial-events", "exact"])
def test_refused_options_are_422_worded_as_the_server_words_them(
    cluster: Cluster, ns: str, options: dict, message: str
) -> None:
    with pytest.raises(Invalid) as refused:
        w = cluster.watch(CONFIG_MAPS, ns, allow_bookmarks=True, timeout_seconds=5, **options)
        w.stop()  # not reached on either backend
    assert refused.value.message == message
