"""The post-run placement check finds each kind of broken hard constraint (and passes good ones)."""

from __future__ import annotations

from typing import Any

from minisched.perf.checks import placement_violations


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}}


def pod(name: str, node_name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels or {}},
            "spec": {"nodeName": node_name, **spec}}


NODES = [node("a", zone="z1"), node("b", zone="z1"), node("c", zone="z2")]
ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}]}}
AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"color": "blue"}}, "topologyKey": "zone"}]}}
NODE_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}]}}}
SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "s"}}}]


def test_anti_affinity() -> None:
    green = {"color": "green"}
    good = [pod("p1", "a", green, affinity=ANTI), pod("p2", "b", green, affinity=ANTI)]
    assert placement_violations(good, NODES) == []
    bad = [pod("p1", "a", green, affinity=ANTI), pod("p2", "a", green, affinity=ANTI)]
    assert len(placement_violations(bad, NODES)) == 2


def test_affinity() -> None:
    blue = {"color": "blue"}
    assert placement_violations([pod("p1", "a", blue, affinity=AFFINITY)], NODES) == []  # first of its group
    stray = pod("p2", "c", {}, affinity=AFFINITY)
    assert placement_violations([pod("p1", "a", blue), stray], NODES) == [
        "ns/p2: no pod its required affinity asks for in zone=z2"]


def test_node_affinity_and_selector() -> None:
    assert placement_violations([pod("p", "c", affinity=NODE_AFFINITY)], NODES) == []
    assert placement_violations([pod("p", "a", affinity=NODE_AFFINITY)], NODES) == [
        "ns/p: on a against its required node affinity"]
    assert placement_violations([pod("p", "a", nodeSelector={"zone": "z2"})], NODES) == [
        "ns/p: on a against its nodeSelector zone=z2"]


def test_topology_spread() -> None:
    s = {"app": "s"}
    even = [pod("p1", "a", s, topologySpreadConstraints=SPREAD), pod("p2", "c", s, topologySpreadConstraints=SPREAD)]
    assert placement_violations(even, NODES) == []
    skewed = [pod(f"p{i}", "a" if i % 2 else "b", s, topologySpreadConstraints=SPREAD) for i in range(2)]
    assert placement_violations(skewed, NODES)
    assert placement_violations(skewed, NODES, check_spread=False) == []
