"""Scheduling many random pods onto random nodes with the full default profile: every placement
obeys the pure per-node rules (no over-commit, taints tolerated, affinity met, ports free), and a pod
left unplaced really fits nowhere."""

from __future__ import annotations

import random

import pytest

from minisched.scheduler.framework.profile import load_profiles
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import (
    node_affinity,
    node_name,
    node_ports,
    node_unschedulable,
    taint_toleration,
)
from minisched.scheduler.plugins.node_resources_fit import insufficient_resources
from minisched.scheduler.snapshot import NodeTable
from tests.scheduler.plugins.randomcluster import random_node, random_pod


def fits_purely(pod: PodInfo, node: dict, pods: list[PodInfo]) -> bool:
    return (
        node_unschedulable.fits(pod, node)
        and node_name.fits(pod, node)
        and taint_toleration.untolerated_taint(pod, node) is None
        and node_affinity.fits(pod, node)
        and node_ports.fits(pod, pods)
        and not insufficient_resources(pod, node, pods)
    )


@pytest.mark.parametrize(("seed", "percentage"), [(1, 100), (2, 0), (3, 30)])
def test_every_placement_obeys_the_rules(seed: int, percentage: int) -> None:
    rng = random.Random(seed)
    nodes = {f"n{i}": random_node(rng, f"n{i}") for i in range(150)}
    for n in nodes.values():  # roomier than the agreement tests' nodes, so most pods land
        n["status"]["allocatable"].update(cpu="8", memory="32Gi", pods="30")
    table = NodeTable()
    for n in nodes.values():
        table.add_node(n)
    profile = load_profiles({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                             "percentageOfNodesToScore": percentage})[0]
    fw = Framework(profile, seed=seed)
    placed: dict[str, list[PodInfo]] = {name: [] for name in nodes}
    unplaced = 0
    for i in range(500):
        pod = PodInfo.from_pod(random_pod(rng, f"p{i}"))
        result = fw.schedule(pod, table.snapshot())
        if result.node is None:
            assert result.status.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
            assert result.status.message().startswith("0/150 nodes are available: ")
            assert not any(fits_purely(pod, nodes[n], placed[n]) for n in nodes), "a feasible node was missed"
            unplaced += 1
            continue
        assert fits_purely(pod, nodes[result.node], placed[result.node])
        placed[result.node].append(pod)
        table.add_pod(result.node, pod)
    assert 0 < unplaced < 500
    for pods in placed.values():  # nothing over-committed at the end either
        assert len(pods) <= 30
        assert sum(p.requests.get("cpu", 0) for p in pods) <= 8000
        assert sum(p.requests.get("memory", 0) for p in pods) <= 32 * 2**30
