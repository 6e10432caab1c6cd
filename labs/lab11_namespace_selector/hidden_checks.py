"""Lab 11 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

from typing import Any

from labs.harness import Check
from labs.lab11_namespace_selector.checks import (
    FakeHandle,
    autospec_cluster,
    namespace,
    nodes,
    passing,
    verdict,
)
from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable


def check_malformed(module: Any) -> None:
    for text in ("env", "=prod", "env=prod,tier"):
        got, result = verdict(module, namespace("team-a", text))
        assert not any(got.values()), f"selector {text!r} does not parse: expected every node to fail, got {got}"
        assert result.reasons_at(0) == (f"namespace team-a has a malformed node selector: {text}",), (
            f"selector {text!r}: reason {result.reasons_at(0)}")
        assert result.code_at(0) == Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"selector {text!r}: code {result.code_at(0)}"


def check_needs_a_handle(module: Any) -> None:
    for handle, what in ((None, "no handle"), (FakeHandle(None), "a handle without a cluster")):
        try:
            module.new(None, handle)
        except ValueError as err:
            assert "NamespaceNodeSelector" in str(err), f"the ValueError should name NamespaceNodeSelector: {err}"
        else:
            raise AssertionError(f"new(None, {what}) should raise ValueError")


def check_injected_not_global(module: Any) -> None:
    a, b = autospec_cluster(namespace("team-a", "env=dev")), autospec_cluster(namespace("team-a", "tier=db"))
    pa, pb = module.new(None, FakeHandle(a)), module.new(None, FakeHandle(b))
    table, pod = nodes(), PodInfo.from_pod(make_pod("p", namespace="team-a"))
    ra, rb = pa.filter(CycleState(), pod, table), pb.filter(CycleState(), pod, table)
    got = ([n for i, n in enumerate(table.names) if ra.passed[i]], [n for i, n in enumerate(table.names) if rb.passed[i]])
    assert got == (["dev-web"], ["prod-db"]), f"two plugins given two clusters must each read their own: got {got}"
    assert a.get.call_count == 1 and b.get.call_count == 1, "each plugin should ask its own cluster once"


def check_values_no_node_has(module: Any) -> None:
    cases = (("env=staging", "a value of a label every node but one has, which no node carries"),
             ("zone=eu-1", "a label no node has"), ("env=prod,zone=eu-1", "a label no node has beside one many have"),
             ("tier=web,env=qa", "a value no node carries after one several have"))
    for text, what in cases:
        got, result = verdict(module, namespace("team-a", text))
        assert not any(got.values()), f"selector {text!r} ({what}): no node has it, so every node fails; " \
            f"passing {passing(got)}"
        assert result.reasons_at(0) == ("node(s) didn't match the node selector of namespace team-a",), (
            f"selector {text!r}: reason {result.reasons_at(0)}")
        assert result.code_at(0) == Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"selector {text!r}: code {result.code_at(0)}"
    got, result = verdict(module, namespace("team-a", " tier = db , env = prod "))
    assert passing(got) == ["prod-db"], f"selector ' tier = db , env = prod ' (spaces around parts): got {passing(got)}"
    assert result.reasons_at(list(got).index("prod-web")) == (
        "node(s) didn't match the node selector of namespace team-a",), "a failing node's reason"
    plugin = module.new(None, FakeHandle(autospec_cluster(namespace("team-a", "env=prod"))))
    table = NodeTable()
    for name in ("prod-1", "prod-2"):
        table.add_node(make_node(name, labels={"env": "prod"}))
    result = plugin.filter(CycleState(), PodInfo.from_pod(make_pod("p", namespace="team-a")), table.snapshot())
    assert result is not None and list(result.passed) == [True, True], (
        f"selector 'env=prod' on two nodes that both carry it: every node passes; got {result}")
    got, _ = verdict(module, namespace("team-a", "env=prod,"))
    assert passing(got) == ["prod-db", "prod-web"], f"selector 'env=prod,' (an empty part is skipped): got {passing(got)}"


CHECKS = [
    Check("a malformed selector fails every node, saying so", check_malformed,
          "a part without '=' or with an empty key: FilterResult with every row failing and one message."),
    Check("a label or value that no node carries: every node fails", check_values_no_node_has,
          "when nodes.label_column(key) or nodes.label_value_id(key, value) is None, no node has that key=value: "
          "every node fails (not every node passes)."),
    Check("new() refuses to run without a cluster", check_needs_a_handle, "raise ValueError naming the plugin."),
    Check("each plugin reads the cluster it was given", check_injected_not_global,
          "keep handle.cluster on the instance; no module-level client."),
]
