"""The Handle contract: both implementations (SimpleHandle, the Scheduler's SchedulerHandle) have
every member the Protocol declares, with its parameters, so a plugin calls what it needs and never
asks whether the handle has it. mypy checks the same through the `type[Handle]` lines next to each
class; this checks it at run time, member by member, with names in the failure."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from minisched.clock import RealClock
from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.scheduler.cache import SchedulerCache
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import Handle
from minisched.scheduler.framework.profile import load_profiles
from minisched.scheduler.framework.runtime import Framework, SimpleHandle
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.scheduler import Scheduler, SchedulerHandle
from minisched.scheduler.snapshot import NodeTable


def protocol_members(proto: type) -> dict[str, Any]:
    """Name -> what the Protocol (and the Protocols it extends) declares: a function, or a
    property / annotation for an attribute."""
    out: dict[str, Any] = {}
    for klass in reversed(proto.__mro__):
        if not getattr(klass, "_is_protocol", False) or klass.__module__ == "typing":
            continue
        for name in getattr(klass, "__annotations__", {}):
            out.setdefault(name, "attribute")
        for name, value in vars(klass).items():
            if not name.startswith("_"):
                out[name] = value
    return out


def parameters(fn: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]


def scheduler_handle() -> SchedulerHandle:
    return SchedulerHandle(EmbeddedCluster(), None, RealClock(), SchedulerCache())  # type: ignore[arg-type]


@pytest.mark.parametrize("make", [SimpleHandle, scheduler_handle], ids=["SimpleHandle", "SchedulerHandle"])
def test_each_handle_has_every_member_of_the_protocol_with_its_parameters(make: Any) -> None:
    handle = make()
    members = protocol_members(Handle)
    assert {"nominator", "activate", "iterate_over_waiting_pods", "get_waiting_pod", "reject_waiting_pod",
            "run_filter_plugins_with_nominated_pods", "pod_disruption_budgets", "informer_factory", "storage",
            "for_framework"} <= set(members)
    # on the class (methods, properties) or set on the instance (plain attributes, dataclass fields);
    # not hasattr: SchedulerHandle's nominator raises until the Scheduler wired its queue in
    missing = [name for name in members if not hasattr(type(handle), name) and name not in vars(handle)]
    assert not missing, f"{type(handle).__name__} lacks {missing}"
    for name, declared in members.items():
        if inspect.isfunction(declared):
            implemented = getattr(type(handle), name)
            assert inspect.isfunction(implemented), f"{type(handle).__name__}.{name} is not a method"
            assert parameters(implemented) == parameters(declared), f"{type(handle).__name__}.{name}"
    assert isinstance(handle, Handle)


def test_a_simple_handle_answers_empty_without_parts() -> None:
    handle = SimpleHandle()
    seen: list[Any] = []
    handle.iterate_over_waiting_pods(seen.append)
    assert seen == [] and handle.get_waiting_pod("uid-p") is None and not handle.reject_waiting_pod("uid-p")
    assert handle.pod_disruption_budgets() == [] and handle.pod_object("default", "p") is None
    assert handle.bound_node("default/p") is None and len(handle.snapshot()) == 0
    handle.activate(make_pod("p"))  # no queue: nothing to move
    handle.event_recorder.event(make_pod("p"), "Normal", "Scheduled", "dropped")
    handle.nominator.nominate(make_pod("p"), "n1")
    assert [p["metadata"]["name"] for p in handle.nominator.nominated_pods()["n1"]] == ["p"]
    handle.nominator.delete_nominated(make_pod("p"))
    assert handle.nominator.nominated_pods() == {}


def test_each_framework_runs_its_own_profiles_plugins_through_its_handle() -> None:
    """kube's handle is its framework: two profiles of one Scheduler get two handles, each running
    its own filters (no framework set on a shared handle per cycle)."""
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "a"},
                           {"schedulerName": "b", "plugins": {"filter": {"disabled": [{"name": "*"}]}}}]}
    sched = Scheduler(EmbeddedCluster(), config=config)
    a, b = sched.frameworks["a"], sched.frameworks["b"]
    assert a.handle is not b.handle
    assert [p.name for p in a.handle.filter_plugins()] == a.plugin_names("filter") != []
    assert list(b.handle.filter_plugins()) == []
    # the handles share what the scheduler wired in
    assert a.handle.nominator is b.handle.nominator is sched.queue
    # a node full of a pod: profile a's NodeResourcesFit rejects the second one there, b has no filter
    table = NodeTable()
    table.add_node(make_node("n1", cpu="1"))
    table.add_pod("n1", PodInfo.from_pod(make_pod("big", cpu="1", node_name="n1")))
    pod = PodInfo.from_pod(make_pod("p", cpu="500m"))
    assert a.handle.run_filter_plugins(CycleState(), pod, table.for_node("n1")).is_rejected
    assert b.handle.run_filter_plugins(CycleState(), pod, table.for_node("n1")).is_success


def test_the_cycle_keeps_its_own_snapshot() -> None:
    """The table a PostFilter or Permit plugin counts on is the cycle's (CycleState), not the
    handle's latest, which moves on between cycles."""
    fwk = Framework(load_profiles({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                   "kind": "KubeSchedulerConfiguration",
                                   "profiles": [{"schedulerName": "minisched"}]})[0])
    table = NodeTable()
    table.add_node(make_node("n1"))
    nodes = table.snapshot()
    state = CycleState()
    fwk.schedule(PodInfo.from_pod(make_pod("p")), nodes, state=state)
    assert state.snapshot is nodes and state.clone().snapshot is nodes
    assert not hasattr(fwk.handle, "current")


@pytest.mark.parametrize("make", [SimpleHandle, scheduler_handle], ids=["SimpleHandle", "SchedulerHandle"])
def test_the_listers_are_never_none_and_read_the_cluster_without_informers(make: Any) -> None:
    """A plugin asks the handle for its listers without checking for None: with no informer
    started they read through the cluster (SimpleHandle: if it has one), else see no objects."""
    from minisched.resources import NAMESPACES, SERVICES

    empty = make()
    assert empty.namespace_lister is not None and empty.workloads is not None
    cluster = EmbeddedCluster()
    cluster.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a",
                                                                                       "labels": {"team": "a"}}})
    cluster.create(SERVICES, {"apiVersion": "v1", "kind": "Service",
                              "metadata": {"name": "web", "namespace": "team-a"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    handle = (SimpleHandle(cluster=cluster) if make is SimpleHandle
              else SchedulerHandle(cluster, None, RealClock(), SchedulerCache()))  # type: ignore[arg-type]
    assert (handle.namespace_lister.labels_of("team-a") or {}).get("team") == "a"
    assert [s["metadata"]["name"] for s in handle.workloads.services("team-a")] == ["web"]
