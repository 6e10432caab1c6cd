"""Chapters scoped to their own nodes on a shared cluster: make_node's chapter label and heartbeat,
the scheduler's and the tiny scheduler's node selector, the tiny scheduler's taint rule, the wait
for Ready nodes, `reset --all` with labelled nodes, and the embedded emulation of kind."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from minisched.cli import main
from minisched.cluster import connect
from minisched.cluster.base import Cluster
from minisched.cluster.embedded import EmbeddedCluster
from minisched.cluster.kindcluster import CONTROL_PLANE, KIND_NODES, WORKERS, system_pod_objects
from minisched.objects import CHAPTER_LABEL, chapter_selector, make_node, make_pod, taint, toleration
from minisched.resources import NODES, PODS, STORAGE_CLASSES
from minisched.scheduler.scheduler import Scheduler
from minisched.tiny import TinyScheduler, untolerated_taint
from minisched.workbook import KWOK_NODE_ANNOTATION, kind_baseline, reset, wait_for_nodes_ready, workbook_made


def _until(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.02)
    return check()


def _node_names(cluster: Cluster) -> set[str]:
    return {n["metadata"]["name"] for n in cluster.list(NODES)["items"]}


def test_make_node_labels_its_chapter_and_heartbeats_now() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    node = make_node("n1", chapter="ch03-3")
    assert node["metadata"]["labels"][CHAPTER_LABEL] == "ch03-3"
    ready = node["status"]["conditions"][0]
    for stamp in ("lastHeartbeatTime", "lastTransitionTime"):
        at = datetime.strptime(ready[stamp], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert before <= at <= datetime.now(UTC)
    assert CHAPTER_LABEL not in make_node("n2")["metadata"]["labels"]
    with pytest.raises(ValueError, match="chapter"):
        make_node("n3", chapter="")


def test_heartbeat_stamps_are_masked_in_checked_outputs() -> None:
    from minisched.notebooks.sanitize import sanitize

    stamp = make_node("n", chapter="x")["status"]["conditions"][0]["lastHeartbeatTime"]
    assert sanitize(f"heartbeat {stamp}") == "heartbeat <TIMESTAMP>"


def test_scheduler_sees_only_selected_nodes_and_drops_one_relabelled_away(embedded_cluster: Cluster) -> None:
    embedded_cluster.create(NODES, make_node("mine", chapter="ch-a"))
    embedded_cluster.create(NODES, make_node("theirs", chapter="ch-b", cpu="64"))
    embedded_cluster.create(NODES, make_node("unlabelled", cpu="64"))
    sched = Scheduler(embedded_cluster, node_selector=chapter_selector("ch-a"), seed=0)
    try:
        sched.start(loop=False)
        nodes = sched.factory.informer_for(NODES, label_selector=sched.node_selector).store
        assert {n["metadata"]["name"] for n in nodes.list()} == {"mine"}
        embedded_cluster.create(PODS, make_pod("p", cpu="1"))
        assert sched.schedule_one(timeout=5)
        assert _until(lambda: embedded_cluster.get(PODS, "p", "default")["spec"].get("nodeName") == "mine")
        embedded_cluster.patch(NODES, "mine", {"metadata": {"labels": {CHAPTER_LABEL: "ch-b"}}})
        assert _until(lambda: not nodes.list()), "a node relabelled out of scope stayed in the cache"
        embedded_cluster.create(PODS, make_pod("q", cpu="1"))
        assert sched.schedule_one(timeout=5)
        time.sleep(0.3)
        assert not embedded_cluster.get(PODS, "q", "default")["spec"].get("nodeName")
    finally:
        sched.stop()


def test_a_bad_node_selector_is_refused_by_name(embedded_cluster: Cluster) -> None:
    with pytest.raises(ValueError, match="not a label selector"):
        Scheduler(embedded_cluster, node_selector="a b c")
    with pytest.raises(ValueError, match="not a label selector"):
        TinyScheduler(embedded_cluster, node_selector="a b c")
    assert main(["run", "--embedded", "--node-selector", "a b c"]) == 2


def test_tiny_scheduler_is_scoped_and_respects_taints(embedded_cluster: Cluster) -> None:
    embedded_cluster.create(NODES, make_node("big-tainted", cpu="64", chapter="t",
                                             taints=[taint("nvidia.com/gpu", "present")]))
    embedded_cluster.create(NODES, make_node("big-evicting", cpu="64", chapter="t",
                                             taints=[taint("dedicated", "db", "NoExecute")]))
    embedded_cluster.create(NODES, make_node("big-elsewhere", cpu="64"))
    embedded_cluster.create(NODES, make_node("small", cpu="2", chapter="t"))
    embedded_cluster.create(PODS, make_pod("plain", cpu="100m"))
    embedded_cluster.create(PODS, make_pod("gpu", cpu="100m", tolerations=[toleration("nvidia.com/gpu", "present")]))
    tiny = TinyScheduler(embedded_cluster, node_selector="minisched.dev/chapter=t")
    try:
        tiny.start()
        tiny.settle(until=lambda: len(tiny.decisions) >= 2)
    finally:
        tiny.stop()
    decisions = {d.pod: d for d in tiny.decisions}
    plain = decisions["default/plain"]
    assert plain.node == "small"
    assert set(plain.rejected) == {"big-tainted", "big-evicting"}
    assert "nvidia.com/gpu:NoSchedule" in plain.rejected["big-tainted"]
    assert decisions["default/gpu"].node == "big-tainted"  # tolerated, and the least allocated


def test_prefer_no_schedule_does_not_filter() -> None:
    node = make_node("n", taints=[taint("maintenance", effect="PreferNoSchedule")])
    assert untolerated_taint(make_pod("p"), node) is None
    exists = make_pod("p", tolerations=[toleration("k", operator="Exists")])
    assert untolerated_taint(exists, make_node("m", taints=[taint("k", "any")])) is None


def test_wait_for_nodes_ready_returns_at_once_or_names_what_waits(embedded_cluster: Cluster) -> None:
    embedded_cluster.create(NODES, make_node("up", chapter="w"))
    wait_for_nodes_ready(embedded_cluster, ["up"], timeout=0)
    embedded_cluster.create(NODES, make_node("fresh", chapter="w",
                                             taints=[taint("node.kubernetes.io/not-ready")]))
    embedded_cluster.create(NODES, make_node("down", chapter="w", ready=False))
    with pytest.raises(TimeoutError, match=r"down: Ready=False; fresh: tainted node.kubernetes.io/not-ready; "
                                           r"missing: not found"):
        wait_for_nodes_ready(embedded_cluster, ["up", "fresh", "down", "missing"], timeout=0.3, poll=0.05)


def test_reset_all_removes_chapter_nodes_even_when_kwok_keeps_them(embedded_cluster: Cluster) -> None:
    kept = make_node("kept-by-kwok", chapter="ch01")
    kept["metadata"]["annotations"] = {KWOK_NODE_ANNOTATION: "fake"}
    kept["status"]["nodeInfo"] = {"kubeletVersion": "fake"}
    embedded_cluster.create(NODES, kept)
    other = make_node("someone-elses")
    other["metadata"]["annotations"] = {KWOK_NODE_ANNOTATION: "fake"}
    embedded_cluster.create(NODES, other)
    assert workbook_made(kept) and not workbook_made(other)
    report = reset(embedded_cluster, cluster_wide=True)
    assert _node_names(embedded_cluster) == {"someone-elses"}
    assert report.deleted.get("nodes") == 1


def test_embedded_kind_is_populated_as_make_cluster_up_leaves_kind() -> None:
    cluster = connect("embedded:kind")
    try:
        nodes = {n["metadata"]["name"]: n for n in cluster.list(NODES)["items"]}
        assert set(nodes) == {CONTROL_PLANE, *WORKERS}
        baseline = kind_baseline()  # the workers as deploy/kind.yaml declares them
        for name, want in baseline.items():
            labels = nodes[name]["metadata"]["labels"]
            assert {k: labels.get(k) for k in want["labels"]} == want["labels"]
            assert (nodes[name]["spec"].get("taints") or []) == want["taints"]
        assert nodes[CONTROL_PLANE]["spec"]["taints"] == [
            {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
        pods = cluster.list(PODS)["items"]
        assert len(pods) == 15 == len(system_pod_objects())
        assert {p["metadata"]["namespace"] for p in pods} == {"kube-system", "local-path-storage"}
        assert all(p["status"]["phase"] == "Running" and p["spec"]["nodeName"] for p in pods)
        per_node = {name: sum(p["spec"]["nodeName"] == name for p in pods) for name in KIND_NODES}
        assert per_node == {CONTROL_PLANE: 9, WORKERS[0]: 2, WORKERS[1]: 2, WORKERS[2]: 2}
        (standard,) = cluster.list(STORAGE_CLASSES)["items"]
        assert standard["metadata"]["name"] == "standard"
        assert standard["volumeBindingMode"] == "WaitForFirstConsumer"
        assert standard["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    finally:
        cluster.close()


def test_unknown_embedded_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="embedded:kind"):
        connect("embedded:kine")
    assert isinstance(connect("embedded"), EmbeddedCluster)


def test_a_joining_node_enters_the_scope_only_when_ready(embedded_cluster: Cluster) -> None:
    from minisched.workbook import join_node_when_ready

    sched = Scheduler(embedded_cluster, node_selector=chapter_selector("ch-j"), seed=0)
    try:
        sched.start(loop=False)
        nodes = sched.factory.informer_for(NODES, label_selector=sched.node_selector).store
        joined = join_node_when_ready(embedded_cluster, make_node("late", chapter="ignored"), "ch-j")
        assert joined["metadata"]["labels"][CHAPTER_LABEL] == "ch-j"
        assert _until(lambda: [n["metadata"]["name"] for n in nodes.list()] == ["late"])
    finally:
        sched.stop()


def test_minisched_run_passes_its_node_selector_to_the_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    import minisched.app

    seen: dict[str, object] = {}

    class Stop(Exception):
        pass

    def fake_app(cluster: Cluster, **options: object) -> None:
        seen.update(options["scheduler_options"])  # type: ignore[arg-type]
        raise Stop

    monkeypatch.setattr(minisched.app, "SchedulerApp", fake_app)
    with pytest.raises(Stop):
        main(["run", "--embedded", "--node-selector", "minisched.dev/chapter=ch03-3"])
    assert seen["node_selector"] == "minisched.dev/chapter=ch03-3"
