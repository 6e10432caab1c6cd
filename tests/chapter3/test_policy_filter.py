"""§3.2: the PolicyFilter plugin, configured from SchedulingPolicy custom resources."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.objects import make_node, make_pod, taint, toleration
from minisched.policy import PolicySyntaxError
from minisched.resources import CRDS
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterPlugin
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import in_tree_registry, policy_filter
from minisched.scheduler.snapshot import NodeTable
from minisched.validation.scheduling_policy import (
    SCHEDULING_POLICIES,
    SCHEDULING_POLICY_CRD,
    make_scheduling_policy,
    validate_scheduling_policy,
)

GPU = 'and(hasLabel("accelerator", "nvidia"), matchesTaint("nvidia.com/gpu", "NoSchedule", "Exists"))'
NOT_STAGING = 'not(hasLabel("env", "staging"))'


def _nodes() -> NodeTable:
    table = NodeTable()
    table.add_node(make_node("gpu-prod", labels={"accelerator": "nvidia", "env": "prod"},
                             taints=[taint("nvidia.com/gpu", "", "NoSchedule")]))
    table.add_node(make_node("gpu-staging", labels={"accelerator": "nvidia", "env": "staging"},
                             taints=[taint("nvidia.com/gpu", "", "NoSchedule")]))
    table.add_node(make_node("cpu-prod", labels={"env": "prod"}))
    return table


TRAINING = make_pod("train", labels={"workload": "training"},
                    tolerations=[toleration("nvidia.com/gpu", operator="Exists")])
WEB = make_pod("web", labels={"workload": "web"})
POLICIES = [
    make_scheduling_policy("gpu-only", GPU, match_labels={"workload": "training"}),
    make_scheduling_policy("no-staging", NOT_STAGING),  # no selector: every pod
]


def _verdict(plugin: policy_filter.PolicyFilter, pod: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    nodes = _nodes()
    result = plugin.filter(CycleState(), PodInfo.from_pod(pod), nodes)
    return {name: result.reasons_at(row) for row, name in enumerate(nodes.names)}


def test_policies_apply_to_the_pods_their_selector_picks() -> None:
    plugin = policy_filter.PolicyFilter(POLICIES)
    assert isinstance(plugin, FilterPlugin)
    assert _verdict(plugin, TRAINING) == {
        "gpu-prod": (),
        "gpu-staging": ('node(s) rejected by SchedulingPolicy no-staging: not(hasLabel("env", "staging"))',),
        "cpu-prod": ('node(s) rejected by SchedulingPolicy gpu-only: hasLabel("accelerator", "nvidia")',),
    }
    assert _verdict(plugin, WEB) == {
        "gpu-prod": (),
        "gpu-staging": ('node(s) rejected by SchedulingPolicy no-staging: not(hasLabel("env", "staging"))',),
        "cpu-prod": (),
    }


def test_failures_are_unresolvable_and_match_the_pure_rule() -> None:
    plugin = policy_filter.PolicyFilter(POLICIES)
    nodes = _nodes()
    result = plugin.filter(CycleState(), PodInfo.from_pod(TRAINING), nodes)
    assert result.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    for row, name in enumerate(nodes.names):
        assert list(result.reasons_at(row)) == policy_filter.rejections(plugin.policies, TRAINING, nodes.node(name))
        assert bool(result.passed[row]) == (not result.reasons_at(row))


def test_no_applicable_policy_passes_every_node() -> None:
    plugin = policy_filter.PolicyFilter([POLICIES[0]])
    assert all(v == () for v in _verdict(plugin, WEB).values())


def test_a_bad_policy_is_rejected_with_its_position_not_applied() -> None:
    bad = make_scheduling_policy("typo", 'and(hasLabel("a", "b") hasLabel("c", "d"))')
    plugin = policy_filter.PolicyFilter([bad, POLICIES[1]])
    assert [p.name for p in plugin.policies] == ["no-staging"]
    err = plugin.rejected["typo"]
    assert isinstance(err, PolicySyntaxError)
    assert (err.position.line, err.position.column) == (1, 24)
    # the client-side check reports the same error at the field the server would name
    causes = validate_scheduling_policy(bad)
    assert [c.field for c in causes] == ["spec.expression"]
    assert "line 1, column 24" in causes[0].message


def test_loaded_from_the_cluster(embedded_cluster: Any) -> None:
    embedded_cluster.create(CRDS, SCHEDULING_POLICY_CRD)
    for obj in POLICIES:
        embedded_cluster.create(SCHEDULING_POLICIES, obj)
    registry = in_tree_registry()
    registry.register(policy_filter.NAME, policy_filter.new)

    class _Handle:
        cluster = embedded_cluster
        event_recorder = None

        def snapshot(self) -> NodeTable:
            return _nodes()

    plugin = registry.create(policy_filter.NAME, None, _Handle())  # type: ignore[arg-type]
    assert isinstance(plugin, policy_filter.PolicyFilter)
    assert [p.name for p in plugin.policies] == ["gpu-only", "no-staging"]
    embedded_cluster.delete(SCHEDULING_POLICIES, "no-staging")
    plugin.reload()
    assert [p.name for p in plugin.policies] == ["gpu-only"]


def test_without_the_crd_there_are_no_policies(embedded_cluster: Any) -> None:
    class _Handle:
        cluster = embedded_cluster
        event_recorder = None

    plugin = policy_filter.new(None, _Handle())  # type: ignore[arg-type]
    assert plugin.policies == [] and plugin.rejected == {}


def test_reload_needs_a_cluster() -> None:
    with pytest.raises(RuntimeError, match="not given a cluster"):
        policy_filter.PolicyFilter().reload()
