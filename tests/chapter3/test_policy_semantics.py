"""§3.2: checking and evaluating policies against nodes and pods."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from minisched.objects import make_node, make_pod, taint, toleration
from minisched.policy import (
    Function,
    Param,
    PolicyContext,
    PolicyTypeError,
    Type,
    compile_policy,
    register,
)
from minisched.policy.functions import FUNCTIONS, Object, Value, tolerates_taint

GPU_NODE = make_node(
    "gpu-1",
    cpu="8",
    memory="32Gi",
    labels={"node.kubernetes.io/instance-type": "g4dn.xlarge", "environment": "prod", "zone": "a"},
    taints=[taint("nvidia.com/gpu", "present", "NoSchedule")],
)
STAGING_NODE = make_node(
    "gpu-2",
    cpu="2",
    labels={"node.kubernetes.io/instance-type": "g4dn.xlarge", "environment": "staging"},
    taints=[taint("nvidia.com/gpu", "present", "NoSchedule")],
)
PLAIN_NODE = make_node("cpu-1", cpu="4", labels={"zone": "b"})
TOLERANT = make_pod("train", labels={"team": "ml"},
                    tolerations=[toleration("nvidia.com/gpu", "present", "NoSchedule")])
EXISTS_TOLERANT = make_pod("train2", tolerations=[toleration("nvidia.com/gpu", operator="Exists")])
PLAIN_POD = make_pod("web", labels={"team": "web"})

BOOK = """and(
    hasLabel("node.kubernetes.io/instance-type", "g4dn.xlarge"),
    matchesTaint("nvidia.com/gpu", "NoSchedule", "Equal"),
    not(hasLabel("environment", "staging"))
  )"""


@pytest.mark.parametrize(
    ("node", "pod", "expected"),
    [
        (GPU_NODE, TOLERANT, True),
        (STAGING_NODE, TOLERANT, False),  # staging
        (GPU_NODE, PLAIN_POD, False),  # no toleration
        (GPU_NODE, EXISTS_TOLERANT, False),  # tolerates, but with Exists, and the book asks for Equal
        (PLAIN_NODE, TOLERANT, False),  # no such taint, no such label
    ],
)
def test_the_books_policy(node: Object, pod: Object, expected: bool) -> None:
    assert compile_policy(BOOK).evaluate(node, pod) is expected


@pytest.mark.parametrize(
    ("text", "node", "pod", "expected"),
    [
        ("true", PLAIN_NODE, PLAIN_POD, True),
        ("false", PLAIN_NODE, PLAIN_POD, False),
        ('hasLabelKey("zone")', PLAIN_NODE, PLAIN_POD, True),
        ('hasLabelKey("gpu")', PLAIN_NODE, PLAIN_POD, False),
        ('labelIn("zone", ["a", "c"])', GPU_NODE, PLAIN_POD, True),
        ('labelIn("zone", ["a", "c"])', PLAIN_NODE, PLAIN_POD, False),
        ('labelIn("missing", [""])', PLAIN_NODE, PLAIN_POD, False),
        ('hasLabel(.pod, "team", "ml")', PLAIN_NODE, TOLERANT, True),
        ('hasLabel(.pod, "team", "ml")', PLAIN_NODE, PLAIN_POD, False),
        ('hasLabel(.node, "zone", "b")', PLAIN_NODE, PLAIN_POD, True),
        ('hasTaint("nvidia.com/gpu", "NoSchedule")', GPU_NODE, PLAIN_POD, True),
        ('hasTaint("nvidia.com/gpu", "NoExecute")', GPU_NODE, PLAIN_POD, False),
        ('matchesTaint("nvidia.com/gpu", "NoSchedule", "Exists")', GPU_NODE, EXISTS_TOLERANT, True),
        ('tolerates("nvidia.com/gpu", "other", "NoSchedule")', PLAIN_NODE, EXISTS_TOLERANT, True),
        ('tolerates("nvidia.com/gpu", "other", "NoSchedule")', PLAIN_NODE, TOLERANT, False),
        ("toleratesNodeTaints()", GPU_NODE, TOLERANT, True),
        ("toleratesNodeTaints()", GPU_NODE, PLAIN_POD, False),
        ("toleratesNodeTaints()", PLAIN_NODE, PLAIN_POD, True),
        ('cpuAtLeast("8")', GPU_NODE, PLAIN_POD, True),
        ("cpuAtLeast(8.5)", GPU_NODE, PLAIN_POD, False),
        ('cpuAtLeast("2500m")', STAGING_NODE, PLAIN_POD, False),
        ('memoryAtLeast("32Gi")', GPU_NODE, PLAIN_POD, True),
        ('memoryAtLeast("33Gi")', GPU_NODE, PLAIN_POD, False),
        ('allocatableAtLeast("nvidia.com/gpu", 1)', GPU_NODE, PLAIN_POD, False),  # absent means 0
        ('allocatableAtLeast("pods", "110")', GPU_NODE, PLAIN_POD, True),
        ('or(hasLabelKey("gpu"), hasLabel("zone", "b"))', PLAIN_NODE, PLAIN_POD, True),
        ('or(hasLabelKey("gpu"), hasLabel("zone", "a"))', PLAIN_NODE, PLAIN_POD, False),
        ("and(true)", PLAIN_NODE, PLAIN_POD, True),
    ],
)
def test_functions(text: str, node: Object, pod: Object, expected: bool) -> None:
    assert compile_policy(text).evaluate(node, pod) is expected


def test_preferNoSchedule_taints_do_not_need_tolerating() -> None:
    soft = make_node("soft", taints=[taint("maintenance", "", "PreferNoSchedule")])
    assert compile_policy("toleratesNodeTaints()").evaluate(soft, PLAIN_POD)


@pytest.mark.parametrize(
    ("tol", "tnt", "expected"),
    [
        (toleration("k", "v", "NoSchedule"), taint("k", "v", "NoSchedule"), True),
        (toleration("k", "w", "NoSchedule"), taint("k", "v", "NoSchedule"), False),
        (toleration("k", operator="Exists"), taint("k", "v", "NoExecute"), True),
        (toleration(operator="Exists"), taint("any", "v", "NoSchedule"), True),  # empty key + Exists: all
        (toleration("k", "v", "NoExecute"), taint("k", "v", "NoSchedule"), False),
        ({"key": "k", "value": "v"}, taint("k", "v", "NoSchedule"), True),  # operator defaults to Equal
        (toleration("k", "v", operator="Lt"), taint("k", "v"), False),
    ],
)
def test_toleration_matching_follows_core_v1(tol: Object, tnt: Object, expected: bool) -> None:
    assert tolerates_taint(tol, tnt) is expected


def test_and_or_short_circuit() -> None:
    calls: list[str] = []

    def boom(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
        calls.append("boom")
        raise AssertionError("should not be evaluated")

    registry = dict(FUNCTIONS)
    register(Function("boom", (), "raises", boom), registry)
    assert compile_policy("and(false, boom())", registry).evaluate(PLAIN_NODE, PLAIN_POD) is False
    assert compile_policy("or(true, boom())", registry).evaluate(PLAIN_NODE, PLAIN_POD) is True
    assert calls == []


def test_registering_a_function_makes_it_callable_and_checked() -> None:
    registry = dict(FUNCTIONS)

    def has_annotation(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
        return str(args[0]) in ((obj.get("metadata") or {}).get("annotations") or {})

    register(Function("hasAnnotation", (Param("key", frozenset({Type.STRING})),), "annotation set",
                      has_annotation, subject="pod"), registry)
    pod = make_pod("a", annotations={"x": "1"})
    assert compile_policy('hasAnnotation("x")', registry).evaluate(PLAIN_NODE, pod)
    assert not compile_policy('hasAnnotation(.node, "x")', registry).evaluate(PLAIN_NODE, pod)
    with pytest.raises(PolicyTypeError, match="unknown function"):
        compile_policy('hasAnnotation("x")')  # not in the global registry
    with pytest.raises(ValueError, match="already registered"):
        register(Function("hasLabel", (), "dup", has_annotation), registry)
    with pytest.raises(ValueError, match="cannot be a policy function name"):
        register(Function("true", (), "kw", has_annotation), registry)


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ('hasLable("a", "b")', 1, "did you mean hasLabel?"),
        ('hasLabel("a")', 1, "takes 2 arguments, got 1"),
        ('hasLabel("a", "b", "c")', 20, "takes 2 arguments, got 3"),
        ("not(true, false)", 11, "takes 1 argument, got 2"),
        ("and()", 1, "takes at least 1 argument"),
        ('hasLabel("a", 1)', 15, "must be a string, not a number"),
        ('and(true, "yes")', 11, "must be a boolean, not a string"),
        ('hasTaint("a", "NoSchedul")', 15, "'NoSchedul' is not one of NoSchedule"),
        ('matchesTaint("a", "NoSchedule", "Equals")', 33, "'Equals' is not one of Equal, Exists"),
        ('cpuAtLeast("lots")', 12, "not a Kubernetes quantity"),
        ('labelIn("zone", ["a", 1])', 23, "list items must be strings"),
        ('labelIn("zone", "a")', 17, "must be a list of strings"),
        ('hasLabel(.clusterState, "a", "b")', 10, ".clusterState is not modelled"),
        ('hasTaint(.node, "a", "NoSchedule")', 10, "does not take .node or .pod"),
        ('hasLabel("", "b")', 10, "must not be empty"),
        ('"gpu"', 1, "must be a boolean expression"),
        (".node", 1, "must be a boolean expression"),
        ('hasLabel("a", .pod)', 15, "not a object"),
    ],
)
def test_type_errors_point_at_the_offending_argument(text: str, column: int, fragment: str) -> None:
    with pytest.raises(PolicyTypeError) as info:
        compile_policy(text)
    assert info.value.position.column == column, str(info.value)
    assert fragment in str(info.value)
    assert str(info.value).splitlines()[-1] == "  " + " " * (column - 1) + "^"


def test_explain_names_the_parts_that_failed() -> None:
    policy = compile_policy(BOOK)
    assert policy.explain(GPU_NODE, TOLERANT) == []
    assert policy.explain(STAGING_NODE, TOLERANT) == ['not(hasLabel("environment", "staging"))']
    assert policy.explain(PLAIN_NODE, TOLERANT) == ['hasLabel("node.kubernetes.io/instance-type", "g4dn.xlarge")']
    either = compile_policy('or(hasLabelKey("gpu"), cpuAtLeast(16))')
    assert either.explain(PLAIN_NODE, PLAIN_POD) == ['hasLabelKey("gpu")', "cpuAtLeast(16)"]


def test_canonical_text_round_trips_through_compile() -> None:
    policy = compile_policy(BOOK)
    assert compile_policy(policy.text()).expr == policy.expr
    assert compile_policy(policy.text(width=40)).expr == policy.expr
