"""Every chapter and lab notebook runs on the kind-like control plane (kube-controller-manager, default
admission, kind's four nodes and 15 system pods, KWOK heartbeating: what `make cluster-up` gives a
student) and reproduces its stored checked outputs, compared as `python -m minisched.notebooks check`
compares them (nbval, lax mode, the same sanitizers). A notebook whose lesson does not hold there
shows kind's nodes in its results, or a different count, and fails with the cell's diff.

Then what a student does that a single run does not: run a chapter twice in a row on the same cluster
("Restart and Run All"), come back to a chapter's nodes after kube-controller-manager's 50 s
node-monitor grace period, and `minisched reset` (`--all`) between chapters.

One plane for the module: after each test, whatever it created is deleted again (the `real_cluster`
fixture), so each notebook starts from kind's fresh state, as after an instructor's reset.
The kind-like plane's own behaviour (admission, controllers, KWOK keeping a chapter node alive for
kube-scheduler) is tests/realcluster/test_kind_like_plane.py's."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import nbformat
import pytest

from minisched.cli import main
from minisched.controlplane import ControlPlane, wait_for
from minisched.controlplane.kindlike import node_is_settled, pod_is_running, system_pods
from minisched.notebooks import check_notebook, execute_notebook, find_notebooks
from minisched.objects import chapter_selector, make_node, make_pod
from minisched.resources import EVENTS, LEASES, NAMESPACES, NODES, PODS
from minisched.scheduler.scheduler import Scheduler
from minisched.workbook import ensure_namespace, wait_for_nodes_ready
from tests.plugins.controlplane import control_plane_fixtures

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = find_notebooks([ROOT / "chapters", ROOT / "labs"])
# On a loaded machine a real-server run takes longer than the embedded check's 60 s.
TIME_LIMIT_SECONDS = 180.0
NODE_MONITOR_GRACE_SECONDS = 50  # kube-controller-manager 1.35's default --node-monitor-grace-period
UNREACHABLE = "node.kubernetes.io/unreachable"
# Re-run twice on the same cluster: it creates nodes under fixed names, which kind's node lifecycle
# controller took for stale ones on the second run before make_node set heartbeat times.
RERUN_CHAPTER = ROOT / "chapters" / "ch03_3_scoring.ipynb"
# Stopped before its clean-up cell, it leaves chapter nodes and bound pods for `minisched reset`.
RESET_CHAPTER = ROOT / "chapters" / "ch01_tiny_scheduler.ipynb"

pytestmark = pytest.mark.realcluster

control_plane, _real_cluster_shared, _baseline, real_cluster = control_plane_fixtures("module", kind_like=True)


def _backend(plane: ControlPlane) -> str:
    return f"kubeconfig:{plane.kubeconfig}"


def _checked(notebook: Path, plane: ControlPlane, what: str) -> None:
    result = check_notebook(notebook, backend=_backend(plane), time_limit=TIME_LIMIT_SECONDS)
    assert result.ok, f"{notebook.relative_to(ROOT)} {what}: {'; '.join(result.problems)}\n{result.details}"


def test_every_notebook_is_collected() -> None:
    # A glob that finds nothing would make the parametrized test below vacuous.
    assert len(NOTEBOOKS) >= 40, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[str(p.relative_to(ROOT)) for p in NOTEBOOKS])
def test_notebook_checked_outputs_hold_on_the_kind_like_plane(
    notebook: Path, control_plane: ControlPlane, real_cluster: Any
) -> None:
    _checked(notebook, control_plane, "on the kind-like plane")


def test_a_chapter_run_twice_in_a_row_gives_the_same_checked_outputs(
    control_plane: ControlPlane, real_cluster: Any
) -> None:
    _checked(RERUN_CHAPTER, control_plane, "first run")
    _checked(RERUN_CHAPTER, control_plane, "second run on the same cluster (Restart and Run All)")


def test_chapter_nodes_still_take_pods_after_the_node_monitor_grace_period(real_cluster: Any) -> None:
    chapter = "pace-test"
    names = [f"pace-{i}" for i in range(3)]
    namespace = ensure_namespace(real_cluster, f"pace-{uuid.uuid4().hex[:6]}")
    for name in names:
        real_cluster.create(NODES, make_node(name, cpu="2", memory="4Gi", chapter=chapter))
    created = time.monotonic()
    # as the chapters do: a node is tainted not-ready until the controller sees KWOK's first heartbeat,
    # and early pods placed meanwhile all went to the one node already settled, so the later six
    # filled the other two by least-allocated scoring (a fresh-clone run under load did that)
    wait_for_nodes_ready(real_cluster, names)

    def schedule(pods: list[str]) -> dict[str, str]:
        with Scheduler(real_cluster, seed=0, node_selector=chapter_selector(chapter)):
            for pod in pods:
                real_cluster.create(PODS, make_pod(pod, namespace=namespace, cpu="500m", memory="256Mi"))
            return dict(wait_for(lambda: _bound(real_cluster, namespace, pods), 60, f"{pods} to be bound"))

    first = schedule(["early-0", "early-1", "early-2"])
    assert set(first.values()) <= set(names), first
    # A student reads, thinks, comes back: past the grace period a node nobody heartbeats is
    # Ready=Unknown and tainted unreachable; KWOK keeps the chapter's alive.
    time.sleep(max(0.0, NODE_MONITOR_GRACE_SECONDS + 8 - (time.monotonic() - created)))
    for name in names:
        node = real_cluster.get(NODES, name)
        assert node_is_settled(node), (name, node["status"].get("conditions"), node["spec"].get("taints"))
    later = schedule([f"later-{i}" for i in range(6)])
    assert set(later.values()) == set(names), later  # 6 pods spread over all three chapter nodes
    for name in names:
        taints = {t["key"] for t in real_cluster.get(NODES, name)["spec"].get("taints") or []}
        assert UNREACHABLE not in taints, (name, taints)
    for pod in first | later:
        assert pod_is_running(real_cluster.get(PODS, pod, namespace)), pod  # KWOK runs them: not evicted


def _bound(cluster: Any, namespace: str, pods: list[str]) -> dict[str, str] | None:
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in cluster.list(PODS, namespace)["items"]}
    return {p: placed[p] for p in pods} if all(placed.get(p) for p in pods) else None


def _without_clean_up(notebook: Path, tmp_path: Path) -> Path:
    """A copy of `notebook` (in its own folder, for its relative paths) without its last code cell, the
    clean-up: what a student leaves behind who stops at the end of the lesson."""
    nb = nbformat.read(notebook, as_version=4)
    last = max(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    del nb.cells[last]
    copy = notebook.with_name(f".reset-test-{tmp_path.name}-{notebook.name}")
    nbformat.write(nb, copy)
    return copy


def test_minisched_reset_and_reset_all_after_a_chapter(
    control_plane: ControlPlane, real_cluster: Any, tmp_path: Path
) -> None:
    kind_nodes = {n["metadata"]["name"]: n for n in real_cluster.list(NODES)["items"]
                  if n["metadata"]["name"] in control_plane.kind_node_names}
    kind_pods = {p["metadata"]["uid"] for p in system_pods(real_cluster, list(kind_nodes))}
    namespace = f"student-{uuid.uuid4().hex[:6]}"
    copy = _without_clean_up(RESET_CHAPTER, tmp_path)
    try:
        execute_notebook(copy, backend=_backend(control_plane), cell_timeout=TIME_LIMIT_SECONDS,
                         env={"MINISCHED_NAMESPACE": namespace})
    finally:
        copy.unlink(missing_ok=True)
    chapter_nodes = {n["metadata"]["name"] for n in real_cluster.list(NODES)["items"]} - set(kind_nodes)
    assert chapter_nodes, "the chapter left no nodes: the reset below would have nothing to remove"
    assert real_cluster.list(PODS, namespace)["items"], "the chapter left no pods in its namespace"
    real_cluster.create(LEASES, {"metadata": {"name": "minisched", "namespace": namespace},
                                 "spec": {"holderIdentity": "a-scheduler"}})
    kubeconfig = str(control_plane.kubeconfig)

    # A student's reset: the namespace emptied, nothing else touched (nodes are the instructor's).
    assert main(["reset", "--kubeconfig", kubeconfig, "--namespace", namespace]) == 0
    assert _names(real_cluster, PODS, namespace) == set()
    assert _names(real_cluster, LEASES, namespace) == set()
    assert _names(real_cluster, EVENTS, namespace) == set()
    assert namespace in _names(real_cluster, NAMESPACES)  # emptied, not deleted: the next run reuses it
    assert chapter_nodes <= _names(real_cluster, NODES)

    # An instructor's: the chapter's nodes go; kind's nodes and system pods stay as they were.
    assert main(["reset", "--all", "--kubeconfig", kubeconfig]) == 0
    wait_for(lambda: not (chapter_nodes & _names(real_cluster, NODES)), 30, "the chapter's nodes to be deleted")
    assert _names(real_cluster, PODS, namespace) == set()
    nodes_now = {n["metadata"]["name"]: n for n in real_cluster.list(NODES)["items"]}
    assert set(nodes_now) == set(kind_nodes)
    for name, before in kind_nodes.items():
        after = nodes_now[name]
        assert after["metadata"]["uid"] == before["metadata"]["uid"], name
        assert after["metadata"]["labels"] == before["metadata"]["labels"], name
        assert after["spec"].get("taints") == before["spec"].get("taints"), name
        assert node_is_settled(after), name
    pods_now = system_pods(real_cluster, list(kind_nodes))
    assert {p["metadata"]["uid"] for p in pods_now} == kind_pods
    assert all(pod_is_running(p) for p in pods_now)


def _names(cluster: Any, resource: Any, namespace: str | None = None) -> set[str]:
    return {o["metadata"]["name"] for o in cluster.list(resource, namespace)["items"]}
