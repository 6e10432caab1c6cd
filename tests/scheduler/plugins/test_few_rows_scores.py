"""NodeResourcesFit and NodeResourcesBalancedAllocation score a handful of rows node by node in
Python (FEW_ROWS: what a cycle reusing the last verdicts re-scores) and more rows with numpy: both
ways must give the same integers, for every strategy and resource list."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import node_resources_balanced_allocation, node_resources_fit
from minisched.scheduler.snapshot import NodeTable
from tests.scheduler.plugins.randomcluster import random_cluster, random_pod

SEEDS = range(40)
STRATEGIES: dict[str, dict[str, Any]] = {
    "LeastAllocated": {"type": "LeastAllocated"},
    "MostAllocated": {"type": "MostAllocated"},
    "RequestedToCapacityRatio": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 10}, {"utilization": 50, "score": 3}, {"utilization": 100, "score": 7}]}},
}
RESOURCES = [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}, {"name": "example.com/gpu", "weight": 3}]


def _one_by_one(plugin: Any, pod: PodInfo, table: NodeTable, rows: npt.NDArray[np.intp]) -> list[int]:
    return [int(plugin.score(CycleState(), pod, table, np.array([r], np.intp))[0]) for r in rows]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_fit_scores_few_rows_as_many(seed: int, strategy: str) -> None:
    rng = random.Random(seed)
    table, _, _ = random_cluster(rng, num_nodes=30, num_pods=40)
    pod = PodInfo.from_pod(random_pod(rng, "incoming"))
    resources = RESOURCES if seed % 2 else [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    plugin = node_resources_fit.NodeResourcesFit(
        node_resources_fit.FitArgs.parse({"scoringStrategy": {**STRATEGIES[strategy], "resources": resources}}))
    rows = np.arange(len(table), dtype=np.intp)
    assert len(rows) > node_resources_fit.FEW_ROWS  # the whole table goes through numpy
    assert plugin.score(CycleState(), pod, table, rows).tolist() == _one_by_one(plugin, pod, table, rows)


@pytest.mark.parametrize("seed", SEEDS)
def test_balanced_scores_few_rows_as_many(seed: int) -> None:
    rng = random.Random(seed)
    table, _, _ = random_cluster(rng, num_nodes=30, num_pods=40)
    pod = PodInfo.from_pod(random_pod(rng, "incoming"))
    rows = np.arange(len(table), dtype=np.intp)
    assert len(rows) > node_resources_fit.FEW_ROWS
    for resources in (node_resources_fit.DEFAULT_RESOURCES,
                      [node_resources_fit.ResourceSpec(r) for r in ("cpu", "memory", "example.com/gpu")]):
        plugin = node_resources_balanced_allocation.NodeResourcesBalancedAllocation(resources)
        assert plugin.score(CycleState(), pod, table, rows).tolist() == _one_by_one(plugin, pod, table, rows)
