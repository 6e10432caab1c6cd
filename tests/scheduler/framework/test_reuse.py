"""Reusing the last cycle's verdicts for pods of the same shape changes nothing: a framework with
reuse and one without, fed the same pods and the same cluster changes, decide identically."""

from __future__ import annotations

import random

import numpy as np
import pytest

from minisched.objects import make_pod
from minisched.scheduler.framework.profile import load_profiles
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable
from tests.scheduler.plugins.randomcluster import random_node, random_pod


@pytest.mark.parametrize(("seed", "percentage"), [(1, 100), (2, 100), (3, 0), (4, 50)])
def test_reuse_decides_exactly_as_a_fresh_run(seed: int, percentage: int) -> None:
    rng = random.Random(seed)
    table = NodeTable()
    names = [f"n{i}" for i in range(120)]
    for name in names:
        node = random_node(rng, name)
        node["status"]["allocatable"].update(cpu="6", memory="16Gi", pods="12")
        table.add_node(node)
    shapes = [random_pod(rng, f"shape{i}") for i in range(6)]  # a few shapes, many pods each
    profile = load_profiles({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                             "percentageOfNodesToScore": percentage})[0]
    fresh = Framework(profile, seed=seed, reuse=False)
    reusing = Framework(profile, seed=seed, reuse_min_nodes=0)  # 120 nodes: below the default threshold
    assert reusing.reuse and not fresh.reuse
    placed: list[tuple[str, PodInfo]] = []
    for i in range(400):
        shape = rng.choice(shapes)
        pod = PodInfo.from_pod({**shape, "metadata": {"name": f"p{i}", "namespace": "default"}})
        snap = table.snapshot()
        a, b = fresh.schedule(pod, snap), reusing.schedule(pod, snap)
        assert (a.node, a.status) == (b.node, b.status), i
        assert np.array_equal(a.decision.feasible_rows, b.decision.feasible_rows)
        assert np.array_equal(a.decision.total, b.decision.total)
        assert a.decision.score_plugins.keys() == b.decision.score_plugins.keys()
        for name, scores in a.decision.score_plugins.items():
            assert np.array_equal(scores.normalized, b.decision.score_plugins[name].normalized), (i, name)
        assert a.decision.filter_verdicts() == b.decision.filter_verdicts()
        if a.node is not None:
            table.add_pod(a.node, pod)
            placed.append((a.node, pod))
        roll = rng.random()
        if roll < 0.15 and placed:  # pods finish
            node, gone = placed.pop(rng.randrange(len(placed)))
            table.remove_pod(node, gone)
        elif roll < 0.17:  # a node changes: everything kept must be dropped
            name = rng.choice(names)
            table.update_node(random_node(rng, name))
        elif roll < 0.18:
            table.add_pod(rng.choice(names), PodInfo.from_pod(make_pod(f"ext{i}", host_ports=[80])))
    assert reusing.algorithm.reuse is not None and reusing.algorithm.reuse.hits > 100


def test_plugins_that_do_not_declare_their_inputs_turn_reuse_off() -> None:
    from minisched.scheduler.plugins import in_tree_registry

    class Opaque:
        name = "Opaque"

        def filter(self, state, pod, nodes):  # type: ignore[no-untyped-def]
            from minisched.scheduler.framework.interface import FilterResult
            return FilterResult.all_pass(len(nodes))

    registry = in_tree_registry()
    registry.register("Opaque", lambda args, handle: Opaque())
    profile = load_profiles({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                             "profiles": [{"plugins": {"filter": {"enabled": [{"name": "Opaque"}]}}}]})[0]
    assert not Framework(profile, registry).reuse
