"""Reusing the last cycle's verdicts for pods of the same shape changes nothing: a framework with
reuse and one without, fed the same pods and the same cluster changes, decide identically."""

from __future__ import annotations

import random

import numpy as np
import pytest

from minisched.objects import make_node, make_pod
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


def test_scores_kept_stay_true_after_cycles_that_did_not_score() -> None:
    """A cycle with one feasible node (or none) scores nothing. The nodes that changed before it
    must still be scored again by the next cycle that scores, or their kept scores are stale."""
    table = NodeTable()
    names = [f"n{i}" for i in range(8)]
    for name in names:
        table.add_node(make_node(name, cpu="2", memory="8Gi", pods="20"))
    fresh = Framework(seed=1, reuse=False)
    reusing = Framework(seed=1, reuse_min_nodes=0)

    def pod(i: int) -> PodInfo:
        return PodInfo.from_pod(make_pod(f"p{i}", cpu="600m", memory="100Mi"))

    def both_decide(i: int) -> None:
        snap = table.snapshot()
        a, b = fresh.schedule(pod(i), snap), reusing.schedule(pod(i), snap)
        assert np.array_equal(a.decision.feasible_rows, b.decision.feasible_rows), i
        assert np.array_equal(a.decision.total, b.decision.total), i

    both_decide(0)  # every node scored and kept
    fillers = [PodInfo.from_pod(make_pod(f"f{k}", cpu="1800m", memory="100Mi")) for k in range(1, 8)]
    for name, filler in zip(names[1:], fillers, strict=True):
        table.add_pod(name, filler)  # full: only n0 is left
    table.add_pod("n0", PodInfo.from_pod(make_pod("half", cpu="1", memory="100Mi")))
    both_decide(1)  # one feasible node: no scoring
    for name, filler in zip(names[1:], fillers, strict=True):
        table.remove_pod(name, filler)
    both_decide(2)  # n0 did not change since cycle 1, but its kept score is from cycle 0
    assert reusing.algorithm.reuse is not None and reusing.algorithm.reuse.hits == 2


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


def test_same_compares_values_whatever_the_arrays_layout_and_dtype() -> None:
    from minisched.scheduler.framework.reuse import same

    a = np.array([3, 1, 2], np.int64)
    assert same(a, np.array([3, 1, 2], np.int64))
    assert not same(a, np.array([3, 1, 4], np.int64))
    assert not same(a, a[:2])  # shapes differ
    assert same(a[::2], np.array([3, 2], np.int64))  # a strided view against a contiguous copy
    assert same(a, np.array([3, 1, 2], np.int8))  # dtypes differ: by value
    assert not same(a, np.array([3, 1, 1], np.uint8))
    big = np.arange(100, dtype=np.int64)
    assert same(big, big.astype(np.int32)) and not same(big, (big + 1).astype(np.int32))
    assert not same(np.array([True, False]), np.array([True, True]))
    assert same(np.array([0.0]), np.array([-0.0]))  # equal floats with different bytes
    assert not same(np.array([np.nan]), np.array([np.nan]))  # as np.array_equal
