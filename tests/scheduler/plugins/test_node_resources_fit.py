from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.node_resources_fit import FitArgs, NodeResourcesFit, new
from tests.scheduler.plugins.randomcluster import table_of

GPU = "example.com/gpu"


def reasons(pod: dict[str, Any], node: dict[str, Any], placed: list[dict[str, Any]] = (), args: dict | None = None):  # type: ignore[no-untyped-def]
    plugin = new(args, None)
    table = table_of([node], {node["metadata"]["name"]: list(placed)})
    return plugin.filter(CycleState(), PodInfo.from_pod(pod), table).reasons_at(0)


@pytest.mark.parametrize(
    ("pod", "node", "placed", "expected"),
    [
        (make_pod("p", cpu="1", memory="1Gi"), make_node("n", cpu="1", memory="1Gi"), [], ()),
        (make_pod("p", cpu="1001m", memory="1Gi"), make_node("n", cpu="1", memory="1Gi"), [], ("Insufficient cpu",)),
        (make_pod("p", cpu="2", memory="2Gi"), make_node("n", cpu="1", memory="1Gi"), [],
         ("Insufficient cpu", "Insufficient memory")),
        (make_pod("p", cpu="500m"), make_node("n", cpu="1"), [make_pod("q", cpu="600m")], ("Insufficient cpu",)),
        (make_pod("p", cpu=None, memory=None), make_node("n", pods="1"), [make_pod("q")], ("Too many pods",)),
        (make_pod("p", cpu="5"), make_node("n", cpu="1", pods="1"), [make_pod("q", cpu=None, memory=None)],
         ("Too many pods", "Insufficient cpu")),
        (make_pod("p", extra_requests={GPU: "1"}), make_node("n"), [], (f"Insufficient {GPU}",)),  # node has none
        (make_pod("p", extra_requests={GPU: "2"}), make_node("n", extra_resources={GPU: "2"}), [], ()),
        (make_pod("p", extra_requests={"ephemeral-storage": "2Gi"}), make_node("n", ephemeral_storage="1Gi"), [],
         ("Insufficient ephemeral-storage",)),
        (make_pod("p", limits={"cpu": "3"}, cpu=None), make_node("n", cpu="2"), [], ("Insufficient cpu",)),  # limit=req
    ],
)
def test_filter(pod: Any, node: Any, placed: Any, expected: tuple[str, ...]) -> None:
    assert reasons(pod, node, placed) == expected


def test_ignored_extended_resources() -> None:
    pod = make_pod("p", extra_requests={GPU: "1", "other.io/fpga": "1"})
    assert reasons(pod, make_node("n"), args={"ignoredResources": [GPU], "ignoredResourceGroups": ["other.io"]}) == ()


def test_init_sidecar_and_overhead_count_as_kube_counts_them() -> None:
    pod = make_pod("p", cpu="1", memory=None)
    pod["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
        {"name": "big-init", "resources": {"requests": {"cpu": "3"}}},  # runs beside the sidecar: 3.5
        {"name": "small-init", "resources": {"requests": {"cpu": "1"}}},
    ]
    pod["spec"]["overhead"] = {"cpu": "250m"}
    info = PodInfo.from_pod(pod)
    assert info.requests["cpu"] == 3750  # max(1 + 0.5, 3 + 0.5) + 0.25
    assert reasons(pod, make_node("n", cpu="3700m")) == ("Insufficient cpu",)
    assert reasons(pod, make_node("n", cpu="3750m")) == ()


def _scores(strategy: dict[str, Any], pod: dict[str, Any], nodes: list[dict[str, Any]]) -> list[int]:
    plugin = new({"scoringStrategy": strategy}, None)
    table = table_of(nodes)
    return plugin.score(CycleState(), PodInfo.from_pod(pod), table, np.arange(len(nodes), dtype=np.intp)).tolist()


# the cases of kube's least_allocated_test.go / most_allocated_test.go "differently sized nodes"
NODES = [make_node("n1", cpu="4", memory="10000"), make_node("n2", cpu="6", memory="10000")]
POD = make_pod("p", cpu="3", memory="5000")


def test_least_allocated() -> None:
    assert _scores({"type": "LeastAllocated"}, POD, NODES) == [37, 50]


def test_most_allocated() -> None:
    assert _scores({"type": "MostAllocated"}, POD, NODES) == [62, 50]


def test_requested_to_capacity_ratio() -> None:
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    # cpu 75% and 50%, memory 50%: scores 75, 50 -> round((75+50)/2) = 63 (half rounds up), 50
    assert _scores({"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": shape}}, POD, NODES) == [63, 50]
    falling = [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
    assert _scores({"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": falling}}, POD, NODES) == [38, 50]


def test_scoring_counts_missing_requests_as_kube_defaults() -> None:
    # no requests -> scored as 100m cpu and 200Mi memory
    nodes = [make_node("n", cpu="1", memory="1000Mi")]
    got = _scores({"type": "LeastAllocated"}, make_pod("p", cpu=None, memory=None), nodes)
    assert got == [((1000 - 100) * 100 // 1000 + (1000 - 200) * 100 // 1000) // 2]


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"scoringStrategy": {"type": "Fastest"}}, "'Fastest' is not one of"),
        ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}, "needs requestedToCapacityRatio.shape"),
        ({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}}, "weight in 1..100"),
        ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
            "shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]}}}, "must be increasing"),
        ({"bogus": 1}, "unknown field"),
    ],
)
def test_bad_args(args: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        FitArgs.parse(args)


def test_plugin_has_a_name() -> None:
    assert NodeResourcesFit().name == "NodeResourcesFit"


@pytest.mark.parametrize(
    ("pod", "placed", "code"),
    [
        # kube 1.35 fit_test: more than the node's whole allocatable -> UnschedulableAndUnresolvable
        (make_pod("p", cpu="5", memory=None), [], "UNSCHEDULABLE_AND_UNRESOLVABLE"),
        (make_pod("p", extra_requests={GPU: "1"}, cpu=None, memory=None), [], "UNSCHEDULABLE_AND_UNRESOLVABLE"),
        # fits the node, not what is left: preemption may help
        (make_pod("p", cpu="3", memory=None), [make_pod("q", cpu="2", memory=None)], "UNSCHEDULABLE"),
    ],
)
def test_request_beyond_allocatable_is_unresolvable(pod: Any, placed: Any, code: str) -> None:
    node = make_node("n", cpu="4")
    table = table_of([node], {"n": list(placed)})
    r = new(None, None).filter(CycleState(), PodInfo.from_pod(pod), table)
    assert not r.passed[0] and r.code_at(0).name == code
    from minisched.scheduler.plugins.node_resources_fit import beyond_allocatable

    assert beyond_allocatable(PodInfo.from_pod(pod), node) is (code == "UNSCHEDULABLE_AND_UNRESOLVABLE")


@pytest.mark.parametrize("seed", range(30))
def test_one_row_tables_get_the_verdict_of_their_row_in_the_whole_table(seed: int) -> None:
    """Preemption asks about one-row what-if tables, which the filter judges in Python integers:
    same pass/fail, reasons and code as that node's row judged with the others."""
    import random

    from tests.scheduler.plugins.randomcluster import random_cluster, random_pod

    rng = random.Random(seed)
    table, _, _ = random_cluster(rng, num_nodes=8, num_pods=20)
    plugin = NodeResourcesFit()
    for k in range(5):
        pod = PodInfo.from_pod(random_pod(rng, f"incoming-{k}"))
        whole = plugin.filter(CycleState(), pod, table)
        for row, name in enumerate(table.names):
            one = plugin.filter(CycleState(), pod, table.for_node(name))
            assert one.status_at(0, plugin.name) == whole.status_at(row, plugin.name), (name, pod.requests)


@pytest.mark.parametrize("seed", range(30))
def test_the_one_node_what_if_says_what_the_filter_says_as_pods_come_and_go(seed: int) -> None:
    """Preemption's dry run asks NodeResourcesFit's what-if instead of the filter once only pods
    change: after any sequence of pods taken off and put on (the node's own, and pods from
    elsewhere, some with resources no node has or the args ignore), the same status as `filter` on
    the one-row table with the same changes."""
    import random

    from tests.scheduler.plugins.randomcluster import random_cluster, random_pod

    rng = random.Random(seed)
    table, _, _ = random_cluster(rng, num_nodes=6, num_pods=24)
    args = rng.choice([None, {"ignoredResources": [GPU]}])
    plugin = new(args, None)
    strangers = [PodInfo.from_pod(random_pod(rng, f"elsewhere-{k}")) for k in range(4)]
    strangers.append(PodInfo.from_pod(make_pod("fpga", extra_requests={"other.io/fpga": "1"})))
    for name in table.names:
        pod = PodInfo.from_pod(random_pod(rng, "incoming"))
        if rng.random() < 0.2:
            pod = PodInfo.from_pod(make_pod("incoming", cpu="1", extra_requests={"other.io/fpga": "1"}))
        view = table.for_node(name)
        what_if = plugin.one_node_what_if(CycleState(), pod, view, 0)
        pool = [*table.pods_on(name), *strangers]
        for _ in range(12):
            p = rng.choice(pool)
            if view.has_pod(name, p.key):
                view.remove_pod(name, p)
                what_if.remove(p)
            else:
                view.add_pod(name, p)
                what_if.add(p)
            expected = plugin.filter(CycleState(), pod, view).status_at(0, plugin.name)
            assert what_if.status() == expected, (name, pod.requests, [q.name for q in view.pods_on(name)])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_filter_row_judges_a_row_as_filter_judges_that_node_alone(seed: int) -> None:
    import random

    from minisched.scheduler.framework.interface import RowFilter
    from tests.scheduler.plugins.randomcluster import random_node, random_pod, table_of

    rng = random.Random(seed)
    nodes = [random_node(rng, f"n{i}") for i in range(30)]
    pods = [random_pod(rng, f"p{i}") for i in range(30)]
    table = table_of(nodes, {n["metadata"]["name"]: pods[i:i + 2] for i, n in enumerate(nodes)}).snapshot()
    plugin = NodeResourcesFit()
    assert isinstance(plugin, RowFilter)
    for k in range(40):
        pod = PodInfo.from_pod(random_pod(rng, f"q{k}"))
        row = rng.randrange(len(table))
        alone = plugin.filter(CycleState(), pod, table.for_node(table.names[row]))
        got = plugin.filter_row(CycleState(), pod, table, row)
        assert (got.passed.tolist(), got.reasons.tolist(), got.code) == (alone.passed.tolist(),
                                                                         alone.reasons.tolist(), alone.code)
        assert got.messages == alone.messages or got.everyone_passed
