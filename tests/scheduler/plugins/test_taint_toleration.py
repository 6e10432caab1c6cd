from __future__ import annotations

import numpy as np
import pytest

from minisched.objects import make_node, make_pod, taint, toleration
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.taint_toleration import TaintToleration
from tests.scheduler.plugins.randomcluster import table_of

T = TaintToleration()


@pytest.mark.parametrize(
    ("taints", "tolerations", "fits"),
    [
        ([], [], True),
        ([taint("gpu", "true")], [], False),
        ([taint("gpu", "true", "PreferNoSchedule")], [], True),  # only a preference
        ([taint("gpu", "true", "NoExecute")], [], False),
        ([taint("gpu", "true")], [toleration("gpu", "true")], True),
        ([taint("gpu", "true")], [toleration("gpu", "false")], False),  # Equal compares values
        ([taint("gpu", "true")], [toleration("gpu", operator="Exists")], True),
        ([taint("gpu", "true")], [toleration("gpu", "true", effect="NoExecute")], False),  # wrong effect
        ([taint("gpu", "true")], [toleration("gpu", "true", effect="NoSchedule")], True),
        ([taint("gpu", "true"), taint("ssd", "", "NoExecute")], [toleration(operator="Exists")], True),  # empty key
        ([taint("gpu", "true")], [toleration(operator="Exists", effect="NoExecute")], False),
        ([taint("gpu", "")], [toleration("gpu", "")], True),  # Equal with empty values
    ],
)
def test_filter(taints: list, tolerations: list, fits: bool) -> None:
    table = table_of([make_node("n", taints=taints)])
    r = T.filter(CycleState(), PodInfo.from_pod(make_pod("p", tolerations=tolerations)), table)
    assert bool(r.passed[0]) is fits
    if not fits:
        assert r.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_reason_names_no_taint_as_kube_1_35() -> None:
    """kube 1.35.4 tainttoleration/taint_toleration.go:131 (Filter): one reason for every node,
    whatever taints it has and in whatever order (1.34 named the first: "{z-key: 1}")."""
    table = table_of([
        make_node("a", taints=[taint("z-key", "1"), taint("a-key", "2")]),
        make_node("b", taints=[taint("a-key", "2"), taint("z-key", "1")]),
        make_node("c", taints=[taint("z-key", "1", "NoExecute")]),
        make_node("clean"),
    ])
    r = T.filter(CycleState(), PodInfo.from_pod(make_pod("p")), table)
    assert [r.reasons_at(i) for i in range(3)] == [("node(s) had untolerated taint(s)",)] * 3
    assert r.passed.tolist() == [False, False, False, True]
    assert r.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_score_prefers_fewer_intolerable_prefer_no_schedule_taints() -> None:
    table = table_of([
        make_node("none"),
        make_node("one", taints=[taint("a", "1", "PreferNoSchedule")]),
        make_node("two", taints=[taint("a", "1", "PreferNoSchedule"), taint("b", "1", "PreferNoSchedule")]),
        make_node("tolerated", taints=[taint("c", "1", "PreferNoSchedule")]),
    ])
    pod = PodInfo.from_pod(make_pod("p", tolerations=[toleration("c", "1", effect="PreferNoSchedule"),
                                                    toleration("b", "1", effect="NoSchedule")]))  # NoSchedule: ignored
    rows = np.arange(4, dtype=np.intp)
    raw = T.score(CycleState(), pod, table, rows)
    assert raw.tolist() == [0, 1, 2, 0]
    assert T.normalize_score(CycleState(), pod, raw).tolist() == [100, 50, 0, 100]
    assert T.normalize_score(CycleState(), pod, np.zeros(3, np.int64)).tolist() == [100, 100, 100]
