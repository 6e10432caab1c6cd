"""Each plugin's vectorised method agrees with its pure per-node rule on random clusters."""

from __future__ import annotations

import random

import numpy as np
import pytest

from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import (
    image_locality,
    node_affinity,
    node_name,
    node_ports,
    node_resources_balanced_allocation,
    node_resources_fit,
    node_unschedulable,
    taint_toleration,
)
from tests.scheduler.plugins.randomcluster import random_cluster, random_pod

SEEDS = range(60)


def _case(seed: int):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    table, nodes, placed = random_cluster(rng)
    pod = PodInfo.from_pod(random_pod(rng, "incoming"))
    if rng.random() < 0.2:
        pod = PodInfo.from_pod({**pod.pod, "spec": {**pod.pod["spec"], "nodeName": rng.choice(nodes)["metadata"]["name"]}})
    by_name = {n["metadata"]["name"]: n for n in nodes}
    return table, by_name, placed, pod


@pytest.mark.parametrize("seed", SEEDS)
def test_filters_agree_with_pure_rules(seed: int) -> None:
    table, by_name, placed, pod = _case(seed)
    state = CycleState()
    fit = node_resources_fit.NodeResourcesFit()
    verdicts = {
        "unschedulable": node_unschedulable.NodeUnschedulable().filter(state, pod, table),
        "name": node_name.NodeName().filter(state, pod, table),
        "taints": taint_toleration.TaintToleration().filter(state, pod, table),
        "affinity": node_affinity.NodeAffinity().filter(state, pod, table),
        "ports": node_ports.NodePorts().filter(state, pod, table),
        "fit": fit.filter(state, pod, table),
    }
    for row, name in enumerate(table.names):
        node, pods = by_name[name], placed[name]
        assert verdicts["unschedulable"].passed[row] == node_unschedulable.fits(pod, node)
        assert verdicts["name"].passed[row] == node_name.fits(pod, node)
        bad = taint_toleration.untolerated_taint(pod, node)
        assert verdicts["taints"].passed[row] == (bad is None)
        if bad is not None:
            assert verdicts["taints"].reasons_at(row) == (taint_toleration.REASON,)
        assert verdicts["affinity"].passed[row] == node_affinity.fits(pod, node), (name, pod.required_terms)
        assert verdicts["ports"].passed[row] == node_ports.fits(pod, pods)
        assert list(verdicts["fit"].reasons_at(row)) == node_resources_fit.insufficient_resources(pod, node, pods)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"])
def test_fit_scores_agree(seed: int, strategy: str) -> None:
    table, by_name, placed, pod = _case(seed)
    args = node_resources_fit.FitArgs.parse({
        "scoringStrategy": {
            "type": strategy,
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1},
                          {"name": "example.com/gpu", "weight": 3}],
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}, {"utilization": 50, "score": 3},
                                                   {"utilization": 100, "score": 7}]},
        }
    } if strategy != "RequestedToCapacityRatio" or seed % 2 else {
        "scoringStrategy": {"type": strategy, "requestedToCapacityRatio": {
            "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}})
    rows = np.arange(len(table), dtype=np.intp)
    got = node_resources_fit.NodeResourcesFit(args).score(CycleState(), pod, table, rows)
    want = [node_resources_fit.node_score(pod, by_name[n], placed[n], args) for n in table.names]
    assert got.tolist() == want


@pytest.mark.parametrize("seed", SEEDS)
def test_other_scores_agree(seed: int) -> None:
    table, by_name, placed, pod = _case(seed)
    state = CycleState()
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(table), size=max(1, len(table) // 2), replace=False)).astype(np.intp)
    names = [table.names[int(r)] for r in rows]

    balanced = node_resources_balanced_allocation.NodeResourcesBalancedAllocation(
        [node_resources_fit.ResourceSpec(r) for r in ("cpu", "memory", "example.com/gpu")]
    )
    got = balanced.score(state, pod, table, rows).tolist()
    want = [node_resources_balanced_allocation.node_score(pod, by_name[n], placed[n], balanced.resources) for n in names]
    if not any(node_resources_fit.pod_score_requests(pod, balanced.resources, use_requested=True)):
        assert balanced.pre_score(state, pod, table, rows).is_skip
    else:
        assert got == want

    default = node_resources_balanced_allocation.NodeResourcesBalancedAllocation()  # cpu+memory shortcut
    if not default.pre_score(state, pod, table, rows).is_skip:
        assert default.score(state, pod, table, rows).tolist() == [
            node_resources_balanced_allocation.node_score(pod, by_name[n], placed[n]) for n in names]

    all_nodes = [by_name[n] for n in table.names]
    got = image_locality.ImageLocality().score(state, pod, table, rows).tolist()
    assert got == [image_locality.node_score(pod, by_name[n], all_nodes) for n in names]

    got = taint_toleration.TaintToleration().score(state, pod, table, rows).tolist()
    assert got == [taint_toleration.intolerable_prefer_no_schedule(pod, by_name[n]) for n in names]

    got = node_affinity.NodeAffinity().score(state, pod, table, rows).tolist()
    assert got == [node_affinity.preferred_score(pod, by_name[n]) for n in names]


def test_random_cases_exercise_both_outcomes() -> None:
    """Guard against a generator so tame that the agreement tests check nothing."""
    seen: dict[str, set[bool]] = {}
    state = CycleState()
    plugins = {
        "taints": taint_toleration.TaintToleration(), "affinity": node_affinity.NodeAffinity(),
        "ports": node_ports.NodePorts(), "fit": node_resources_fit.NodeResourcesFit(),
        "unschedulable": node_unschedulable.NodeUnschedulable(),
    }
    for seed in SEEDS:
        table, _, _, pod = _case(seed)
        for name, plugin in plugins.items():
            seen.setdefault(name, set()).update(bool(x) for x in plugin.filter(state, pod, table).passed)
    assert all(outcomes == {True, False} for outcomes in seen.values()), seen
