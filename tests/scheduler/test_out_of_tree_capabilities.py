"""An out-of-tree plugin that needs more than Filter: MaxPodsPerNode (examples/minisched-plugin-example)
registers events with queueing hints, counts the pods nominated to a node through the Handle's
nominator, and holds a file the scheduler closes when it stops; all through minisched's typed
contract, found through the package's own entry points."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from minisched_plugin_example.max_pods_per_node import AT_CAP, CAP_LABEL, MaxPodsPerNode

from minisched.clock import VirtualClock
from minisched.cluster import Cluster
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.framework import registry as registry_module
from minisched.scheduler.framework.cluster_event import (
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_LABEL_CHANGE,
)
from minisched.scheduler.framework.profile import load_profiles
from minisched.scheduler.framework.runtime import Framework, SimpleHandle
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.queue import SchedulingQueue
from minisched.scheduler.scheduler import Scheduler
from minisched.scheduler.snapshot import NodeTable
from tests.scheduler.runtime.helpers import bound_pods, park_unschedulable, wait_for_nodes, wait_until

PACKAGE = Path(__file__).resolve().parents[2] / "examples" / "minisched-plugin-example"
PLUGIN = "MaxPodsPerNode"


def declared_entry_points() -> tuple[EntryPoint, ...]:
    """The entry points the example package declares (what `make venv` installs)."""
    declared = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]["entry-points"]["minisched.plugins"]
    return tuple(EntryPoint(name, value, "minisched.plugins") for name, value in declared.items())


@pytest.fixture(autouse=True)
def _package_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    # The registry reads this checkout's declarations, not what the venv installed from another copy.
    eps = declared_entry_points()
    monkeypatch.setattr(registry_module, "installed_entry_points", lambda group: eps)


def config(max_pods: int, **more_args: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{
            "schedulerName": "minisched",
            "plugins": {"filter": {"enabled": [{"name": PLUGIN}]}},
            "pluginConfig": [{"name": PLUGIN, "args": {"maxPods": max_pods, **more_args}}],
        }],
    }


def framework(max_pods: int, handle: SimpleHandle | None = None) -> Framework:
    return Framework(load_profiles(config(max_pods))[0], handle=handle, seed=1)


def test_the_package_declares_it_and_a_profile_loads_it() -> None:
    assert PLUGIN in {ep.name for ep in declared_entry_points()}
    fwk = framework(3)
    assert isinstance(fwk.plugins[PLUGIN], MaxPodsPerNode)
    assert fwk.plugin_names("filter")[-1] == PLUGIN


# --- queueing hints: the framework's map carries them, the queue asks them -------------------------------



def capped(name: str, cap: int) -> dict[str, Any]:
    return make_node(name, labels={CAP_LABEL: str(cap)})


def test_its_hints_move_a_rejected_pod_only_when_a_slot_may_have_opened(virtual_clock: VirtualClock) -> None:
    hints = framework(2).queueing_hints
    assert {ASSIGNED_POD_DELETE, NODE_ADD, NODE_LABEL_CHANGE} <= set(hints)
    q = SchedulingQueue(clock=virtual_clock, queueing_hints={"minisched": hints})
    key = park_unschedulable(q, make_pod("p"), PLUGIN)
    # QueueSkip: a pod that never held a slot left; a node's cap went down; a node with no room came
    assert q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, make_pod("never-bound"), None) == 0
    assert q.move_all_to_active_or_backoff(NODE_LABEL_CHANGE, capped("n", 2), capped("n", 1)) == 0
    assert q.move_all_to_active_or_backoff(NODE_ADD, None, capped("n2", 0)) == 0
    assert q.where(key) == "unschedulable"
    # Queue: the cap rose
    assert q.move_all_to_active_or_backoff(NODE_LABEL_CHANGE, capped("n", 1), capped("n", 3)) == 1
    virtual_clock.advance(60)  # past its backoff: to the active queue
    q.flush_backoff_completed()
    popped = q.pop(timeout=0)
    assert popped is not None and popped.key == key
    # Queue: a bound pod left its node
    key = park_unschedulable(q, make_pod("p2"), PLUGIN)
    assert q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, make_pod("was-bound", node_name="n"), None) == 1
    assert q.where(key) in ("backoff", "active")


# --- the nominator, through the Handle ----------------------------------------------------------------------


def table(node: dict[str, Any], *bound: dict[str, Any]) -> NodeTable:
    t = NodeTable()
    t.add_node(node)
    for pod in bound:
        pod["spec"]["nodeName"] = node["metadata"]["name"]
        t.add_pod(node["metadata"]["name"], PodInfo.from_pod(pod))
    return t.snapshot()


def test_a_pod_nominated_to_the_node_counts_toward_the_cap(virtual_clock: VirtualClock) -> None:
    nominator = SchedulingQueue(clock=virtual_clock)
    fwk = framework(2, SimpleHandle(nominator=nominator))
    nodes = table(make_node("n1"), make_pod("running"))
    new = PodInfo.from_pod(make_pod("new", priority=10))
    assert fwk.schedule(new, nodes).node == "n1", "one of two slots is free"

    nominator.nominate(make_pod("waiting", priority=10), "n1")
    r = fwk.schedule(new, nodes)
    assert r.node is None and r.diagnosis is not None
    assert r.diagnosis.unschedulable_plugins == {PLUGIN}
    assert AT_CAP in r.diagnosis.message()
    # the nominated pod itself, and a pod of higher priority (as kube: it may take the room), still fit
    assert fwk.schedule(PodInfo.from_pod(make_pod("waiting", priority=10)), nodes).node == "n1"
    assert fwk.schedule(PodInfo.from_pod(make_pod("urgent", priority=20)), nodes).node == "n1"


def test_a_nomination_the_framework_also_adds_is_counted_once(virtual_clock: VirtualClock) -> None:
    # kube's second filter pass puts the nominated pod on the node's table: the plugin must not count
    # it again from the nominator (1 running + 1 nominated + the new pod = 3 = the cap: it fits)
    nominator = SchedulingQueue(clock=virtual_clock)
    fwk = framework(3, SimpleHandle(nominator=nominator))
    waiting = make_pod("waiting", priority=10)
    nominator.nominate(waiting, "n1")
    nodes = table(make_node("n1"), make_pod("running"))
    r = fwk.schedule(PodInfo.from_pod(make_pod("new", priority=10)), nodes,
                     nominated=[("n1", PodInfo.from_pod(waiting))])
    assert r.node == "n1"


# --- on a running scheduler: the handle's nominator is the queue; stop closes the plugin once ---------------


def test_the_scheduler_gives_it_the_queue_and_closes_it_once(embedded_cluster: Cluster, tmp_path: Path) -> None:
    log = tmp_path / "rejections.jsonl"
    for name in ("mini-a", "mini-b"):
        embedded_cluster.create(NODES, make_node(name, cpu="8"))
    with Scheduler(embedded_cluster, config=config(1, rejectionLog=str(log))) as sched:
        plugin = sched.frameworks["minisched"].plugins[PLUGIN]
        assert isinstance(plugin, MaxPodsPerNode)
        assert plugin.handle is not None and plugin.handle.nominator is sched.queue
        closes: list[None] = []
        close: Callable[[], None] = plugin.close
        plugin.close = lambda: (closes.append(None), close())[1]  # type: ignore[method-assign]
        wait_for_nodes(sched, 2, timeout=30)
        for i in range(3):
            embedded_cluster.create(PODS, make_pod(f"web-{i}", cpu="100m"))
        wait_until(lambda: len(bound_pods(embedded_cluster)) == 2 and '["mini-a", "mini-b"]' in log.read_text(),
                   timeout=30, what="two pods bound, the third rejected on both nodes")
        sched.stop()
        assert closes == [None]
    assert closes == [None], "the context manager's exit stops an already stopped scheduler: no second close"
    assert sorted(bound_pods(embedded_cluster).values()) == ["mini-a", "mini-b"]
    (pending,) = {f"web-{i}" for i in range(3)} - set(bound_pods(embedded_cluster))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert {"pod": f"default/{pending}", "nodesAtCap": ["mini-a", "mini-b"]} in lines
