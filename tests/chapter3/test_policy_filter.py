"""§3.2: the PolicyFilter plugin, configured from SchedulingPolicy custom resources."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minisched.objects import make_node, make_pod, taint, toleration
from minisched.policy import PolicySyntaxError, ast, to_text
from minisched.policy import compile_policy as _compile
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


# --- property: the vectorised evaluator agrees with the per-node one --------------------------


_KEYS = st.sampled_from(["zone", "gpu", "env"])
_VALUES = st.sampled_from(["a", "b", ""])
_EFFECTS = st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])
_QUANTITIES = st.sampled_from(["500m", "1", "2", "0.0005", "1Gi", "512Mi", "3G"])
_RESOURCES = st.sampled_from(["cpu", "memory", "example.com/gpu", "untracked"])


def _s(x: str) -> ast.StringLit:
    return ast.StringLit(x)


_subject = st.sampled_from([(), (ast.Variable("node"),), (ast.Variable("pod"),)])
_leaves = st.one_of(
    st.builds(lambda s, k, v: ast.Call("hasLabel", (*s, _s(k), _s(v))), _subject, _KEYS, _VALUES),
    st.builds(lambda s, k: ast.Call("hasLabelKey", (*s, _s(k))), _subject, _KEYS),
    st.builds(lambda k, vs: ast.Call("labelIn", (_s(k), ast.ListLit(tuple(_s(v) for v in vs)))), _KEYS,
              st.lists(_VALUES, max_size=3)),
    st.builds(lambda k, e: ast.Call("hasTaint", (_s(k), _s(e))), _KEYS, _EFFECTS),
    st.builds(lambda k, e, o: ast.Call("matchesTaint", (_s(k), _s(e), _s(o))), _KEYS, _EFFECTS,
              st.sampled_from(["Equal", "Exists"])),
    st.builds(lambda k, v, e: ast.Call("tolerates", (_s(k), _s(v), _s(e))), _KEYS, _VALUES, _EFFECTS),
    st.just(ast.Call("toleratesNodeTaints", ())),
    st.builds(lambda q: ast.Call("cpuAtLeast", (_s(q),)), _QUANTITIES),
    st.builds(lambda q: ast.Call("memoryAtLeast", (_s(q),)), _QUANTITIES),
    st.builds(lambda r, q: ast.Call("allocatableAtLeast", (_s(r), _s(q))), _RESOURCES, _QUANTITIES),
    st.builds(ast.BoolLit, st.booleans()),
)
_policies = st.recursive(_leaves, lambda kids: st.one_of(
    st.builds(lambda xs: ast.Call("and", tuple(xs)), st.lists(kids, min_size=1, max_size=3)),
    st.builds(lambda xs: ast.Call("or", tuple(xs)), st.lists(kids, min_size=1, max_size=3)),
    st.builds(lambda x: ast.Call("not", (x,)), kids),
), max_leaves=8)


@st.composite
def _node(draw: st.DrawFn, index: int) -> dict[str, Any]:
    labels = draw(st.dictionaries(_KEYS, _VALUES, max_size=3))
    taints = [taint(k, v, e) for k, v, e in draw(st.lists(st.tuples(_KEYS, _VALUES, _EFFECTS), max_size=3))]
    extra = {"example.com/gpu": draw(st.sampled_from(["1", "2"]))} if draw(st.booleans()) else {}
    if draw(st.booleans()):
        extra["untracked"] = draw(_QUANTITIES)
    return make_node(f"n{index}", cpu=draw(_QUANTITIES), memory=draw(_QUANTITIES), labels=labels, taints=taints,
                     extra_resources=extra)


@st.composite
def _world(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    nodes = [draw(_node(i)) for i in range(draw(st.integers(1, 5)))]
    tols = [toleration(k, v, e, o) for k, v, e, o in draw(st.lists(
        st.tuples(st.sampled_from(["", "zone", "gpu"]), _VALUES, st.sampled_from(["", "NoSchedule", "NoExecute"]),
                  st.sampled_from(["Equal", "Exists"])), max_size=3))]
    # the API refuses a value with Exists, and an empty key with anything but Exists
    tols = [t for t in tols if not (t["operator"] == "Exists" and "value" in t)
            and not ("key" not in t and t["operator"] != "Exists")]
    pod = make_pod("p", labels=draw(st.dictionaries(_KEYS, _VALUES, max_size=2)), tolerations=tols)
    return nodes, pod


@settings(max_examples=120, deadline=None)
@given(_policies, _world())
def test_vectorised_evaluation_agrees_with_per_node(expr: ast.Expr, world: Any) -> None:
    nodes, pod = world
    policy = _compile(to_text(expr))  # also checks that the generated policy is well typed
    table = NodeTable()
    for node in nodes:
        table.add_node(node)
    rows = policy_filter.evaluate_rows(policy.expr, pod, table)
    expected = np.array([policy.evaluate(table.node_at(i), pod) for i in range(len(table))])
    assert rows.tolist() == expected.tolist()
    # and the plugin's grouped explanations are the per-node ones
    plugin = policy_filter.PolicyFilter([make_scheduling_policy("p", to_text(expr))])
    result = plugin.filter(CycleState(), PodInfo.from_pod(pod), table)
    for i in range(len(table)):
        assert list(result.reasons_at(i)) == policy_filter.rejections(plugin.policies, pod, table.node_at(i))


@settings(max_examples=200, deadline=None)
@given(_leaves, _world())
def test_vectorised_evaluation_agrees_on_each_function(expr: ast.Expr, world: Any) -> None:
    test_vectorised_evaluation_agrees_with_per_node.hypothesis.inner_test(expr, world)  # type: ignore[attr-defined]


def test_follow_keeps_policies_current_from_an_informer(embedded_cluster: Any) -> None:
    from minisched.informer import SharedInformerFactory

    embedded_cluster.create(CRDS, SCHEDULING_POLICY_CRD)
    embedded_cluster.create(SCHEDULING_POLICIES, POLICIES[0])
    plugin = policy_filter.PolicyFilter()
    factory = SharedInformerFactory(embedded_cluster)
    plugin.follow(factory)
    factory.start()
    try:
        assert all(factory.wait_for_cache_sync(10).values())

        def names_become(expected: list[str]) -> None:
            deadline = time.monotonic() + 10
            while [p.name for p in plugin.policies] != expected and time.monotonic() < deadline:
                time.sleep(0.01)
            assert [p.name for p in plugin.policies] == expected

        names_become(["gpu-only"])
        embedded_cluster.create(SCHEDULING_POLICIES, POLICIES[1])
        names_become(["gpu-only", "no-staging"])
        embedded_cluster.patch(SCHEDULING_POLICIES, "no-staging", {"spec": {"expression": "not("}})
        names_become(["gpu-only"])
        assert isinstance(plugin.rejected["no-staging"], PolicySyntaxError)
        embedded_cluster.delete(SCHEDULING_POLICIES, "gpu-only")
        names_become([])
    finally:
        factory.shutdown()


def test_explanations_of_a_policy_with_many_parts() -> None:
    # more than 62 sub-expressions: the explanation grouping falls back from int codes to rows
    parts = ", ".join(f'not(hasLabel("k{i}", "v"))' for i in range(70))
    text = f'or(and({parts}), hasLabel("accelerator", "nvidia"))'
    nodes = _nodes()
    nodes.add_node(make_node("odd", labels={"k5": "v"}))
    plugin = policy_filter.PolicyFilter([make_scheduling_policy("many", text)])
    result = plugin.filter(CycleState(), PodInfo.from_pod(WEB), nodes)
    for row, name in enumerate(nodes.names):
        assert list(result.reasons_at(row)) == policy_filter.rejections(plugin.policies, WEB, nodes.node(name))
    assert result.reasons_at(nodes.row("odd")) == (
        'node(s) rejected by SchedulingPolicy many: not(hasLabel("k5", "v")) and hasLabel("accelerator", "nvidia")',
    )
