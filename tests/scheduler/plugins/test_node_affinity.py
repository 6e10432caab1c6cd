from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo, PodSpecError
from minisched.scheduler.plugins.node_affinity import REASON, NodeAffinity, fits
from tests.scheduler.plugins.randomcluster import table_of

A = NodeAffinity()
NODES = [
    make_node("n1", labels={"zone": "a", "gen": "3"}),
    make_node("n2", labels={"zone": "b", "gen": "10"}),
    make_node("n3", labels={"gen": "1_0"}),  # a valid label value, but not an integer to Go
]


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


@pytest.mark.parametrize(
    ("selector", "affinity", "expected"),
    [
        (None, None, [True, True, True]),
        ({"zone": "a"}, None, [True, False, False]),
        ({"zone": "c"}, None, [False, False, False]),
        (None, required({"matchExpressions": [expr("zone", "In", "a", "b")]}), [True, True, False]),
        (None, required({"matchExpressions": [expr("zone", "NotIn", "a")]}), [False, True, True]),  # absent key
        (None, required({"matchExpressions": [expr("zone", "Exists")]}), [True, True, False]),
        (None, required({"matchExpressions": [expr("zone", "DoesNotExist")]}), [False, False, True]),
        (None, required({"matchExpressions": [expr("gen", "Gt", "5")]}), [False, True, False]),  # "1_0" is not a number to Go
        (None, required({"matchExpressions": [expr("gen", "Lt", "5")]}), [True, False, False]),
        (None, required({"matchExpressions": [expr("zone", "In", "a"), expr("gen", "Gt", "5")]}), [False] * 3),
        (None, required({"matchExpressions": [expr("zone", "In", "a")]}, {"matchExpressions": [expr("gen", "In", "1_0")]}),
         [True, False, True]),  # terms are ORed
        (None, required(), [False] * 3),  # no terms: nothing matches
        (None, required({}), [False] * 3),  # an empty term matches nothing
        (None, required({"matchFields": [expr("metadata.name", "In", "n2")]}), [False, True, False]),
        (None, required({"matchFields": [expr("metadata.name", "NotIn", "n2")]}), [True, False, True]),
        ({"zone": "a"}, required({"matchExpressions": [expr("zone", "In", "b")]}), [False] * 3),  # both apply
    ],
)
def test_filter(selector: dict[str, str] | None, affinity: dict[str, Any] | None, expected: list[bool]) -> None:
    pod = PodInfo.from_pod(make_pod("p", node_selector=selector, affinity=affinity))
    r = A.filter(CycleState(), pod, table_of(NODES))
    assert r.passed.tolist() == expected
    assert [fits(pod, n) for n in NODES] == expected
    for row, ok in enumerate(expected):
        assert r.reasons_at(row) == (() if ok else (REASON,))


@pytest.mark.parametrize(
    ("term", "problem"),
    [
        ({"matchExpressions": [expr("zone", "Like", "a")]}, "'Like' is not a valid node selector operator"),
        ({"matchExpressions": [expr("gen", "Gt", "five")]}, "needs an integer value, got 'five'"),
        ({"matchExpressions": [expr("gen", "Gt", "1_0")]}, "needs an integer value, got '1_0'"),  # Go's ParseInt
        ({"matchExpressions": [expr("gen", "Gt", "1", "2")]}, "needs exactly one value"),
        ({"matchExpressions": [expr("zone", "In")]}, "needs at least one value"),
        ({"matchExpressions": [expr("zone", "Exists", "a")]}, "takes no values"),
        ({"matchFields": [expr("metadata.labels", "In", "a")]}, "not a supported node field"),
    ],
)
def test_invalid_affinity_is_a_clear_error(term: dict[str, Any], problem: str) -> None:
    with pytest.raises(PodSpecError) as err:
        PodInfo.from_pod(make_pod("bad", affinity=required(term)))
    assert problem in str(err.value)
    assert "pod default/bad" in str(err.value)
    assert "nodeSelectorTerms[0]" in str(err.value)


def test_score_sums_matching_preferred_weights_then_normalizes() -> None:
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [expr("zone", "In", "a")]}},
        {"weight": 30, "preference": {"matchExpressions": [expr("gen", "Exists")]}},
        {"weight": 0, "preference": {"matchExpressions": [expr("gen", "Exists")]}},  # weight 0: ignored
    ]}}
    pod = PodInfo.from_pod(make_pod("p", affinity=affinity))
    rows = np.arange(3, dtype=np.intp)
    raw = A.score(CycleState(), pod, table_of(NODES), rows)
    assert raw.tolist() == [40, 30, 30]
    assert A.normalize_score(CycleState(), pod, raw).tolist() == [100, 75, 75]
    assert A.pre_score(CycleState(), PodInfo.from_pod(make_pod("plain")), table_of(NODES), rows).is_skip
