"""Constraints: constraint functions named in the profile, run as one Filter, each failing node
told every constraint it broke."""

from __future__ import annotations

import pytest

from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.profile import load_profiles
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import constraints
from minisched.scheduler.snapshot import NodeTable

ARGS = {"constraints": [{"name": "minFree", "args": {"resource": "memory", "quantity": "8Gi"}},
                        {"name": "hasLabel", "args": {"key": "gpu"}}]}


def table() -> NodeTable:
    t = NodeTable()
    t.add_node(make_node("big-gpu", memory="16Gi", labels={"gpu": "a100"}))
    t.add_node(make_node("small-gpu", memory="6Gi", labels={"gpu": "t4"}))
    t.add_node(make_node("big-cpu", memory="32Gi"))
    t.add_node(make_node("busy-gpu", memory="16Gi", labels={"gpu": "a100"}))
    t.add_pod("busy-gpu", PodInfo.from_pod(make_pod("hog", memory="10Gi")))
    return t


def test_each_failing_node_gets_the_reasons_it_broke() -> None:
    nodes = table().snapshot()
    result = constraints.new(ARGS, None).filter(CycleState(), PodInfo.from_pod(make_pod("p")), nodes)
    got = {nodes.names[i]: result.reasons_at(i) for i in range(len(nodes))}
    assert got == {
        "big-gpu": (),
        "small-gpu": ("node(s) had less than 8Gi memory free",),
        "big-cpu": ("node(s) had no label gpu",),
        "busy-gpu": ("node(s) had less than 8Gi memory free",),
    }
    assert result.passed.tolist() == [True, False, False, False]


def test_the_profile_names_them_and_the_scheduler_explains() -> None:
    (profile,) = load_profiles({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "minisched",
                      "plugins": {"filter": {"enabled": [{"name": "Constraints"}]}},
                      "pluginConfig": [{"name": "Constraints", "args": ARGS}]}]})
    r = Framework(profile, seed=1).schedule(PodInfo.from_pod(make_pod("p", memory="1Gi")), table().snapshot())
    assert r.node == "big-gpu"
    r = Framework(profile, seed=1).schedule(PodInfo.from_pod(make_pod("p", memory="20Gi")), table().snapshot())
    assert r.node is None
    assert "1 node(s) had no label gpu" in r.diagnosis.message()


def test_bad_configuration_is_refused_naming_the_entry() -> None:
    with pytest.raises(ValueError, match=r"constraints\[0\] names 'maxPods'; known: hasLabel, minFree"):
        constraints.new({"constraints": [{"name": "maxPods"}]}, None)
    with pytest.raises(ValueError, match=r"constraints\[0\] \(minFree\) has bad args \{'resource': 'memory'\}"):
        constraints.new({"constraints": [{"name": "minFree", "args": {"resource": "memory"}}]}, None)
