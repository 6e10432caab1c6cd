"""Lab 8 checks (public).

    python -m labs.lab08_plugin_set.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from typing import Any

from labs.harness import Check, main
from minisched.scheduler.framework.strategies import Pipeline, protocol_checks

LAB = "lab08_plugin_set"


@dataclass(frozen=True)
class Node:
    name: str
    free_cpu: int
    zone: str
    spot: bool = False


class FreeCpu:  # a Scorer
    name = "FreeCpu"

    def score(self, node: Node) -> float:
        return float(node.free_cpu)


class ZoneA:  # an Admitter
    name = "ZoneA"

    def admit(self, node: Node) -> bool:
        return node.zone == "a"


class NoSpot:  # both
    name = "NoSpot"

    def admit(self, node: Node) -> bool:
        return not node.spot or node.free_cpu >= 12

    def score(self, node: Node) -> float:
        return 0.0 if node.spot else 5.0


class FreeCpuShare:  # a Scorer and a Normalizer: scales its scores to 0..100 of the best
    name = "FreeCpuShare"

    def score(self, node: Node) -> float:
        return float(node.free_cpu)

    def normalize(self, scores: list[float]) -> list[float]:
        top = max(scores, default=0.0)
        return [s * 100 / top if top else 0.0 for s in scores]


class Helper:  # no extension point at all
    name = "Helper"

    def describe(self) -> str:
        return "helps"


def random_nodes(rng: random.Random, n: int) -> list[Node]:
    return [Node(f"n{i}", rng.randint(0, 16), rng.choice("ab"), rng.random() < 0.3) for i in range(n)]


def expected_ranking(nodes: list[Node], weights: dict[str, float]) -> list[tuple[str, float]]:
    admitted = [n for n in nodes if not n.spot or n.free_cpu >= 12]  # NoSpot admits; no ZoneA here
    top = max((n.free_cpu for n in admitted), default=0)
    totals = [weights.get("FreeCpu", 1.0) * n.free_cpu + weights.get("NoSpot", 1.0) * (0.0 if n.spot else 5.0)
              + weights.get("FreeCpuShare", 1.0) * (n.free_cpu * 100 / top if top else 0.0) for n in admitted]
    order = sorted(range(len(admitted)), key=lambda i: -totals[i])
    return [(admitted[i].name, totals[i]) for i in order]


def check_points(module: Any) -> None:
    plugins = module.new([FreeCpu(), ZoneA(), NoSpot(), FreeCpuShare()])
    want = {"admit": ["ZoneA", "NoSpot"], "score": ["FreeCpu", "NoSpot", "FreeCpuShare"], "normalize": ["FreeCpuShare"]}
    got = plugins.points()
    assert got == want, f"plugins FreeCpu (score), ZoneA (admit), NoSpot (both), FreeCpuShare (score, normalize): " \
        f"expected points() {want}, got {got}"
    try:
        module.new([FreeCpu(), Helper()])
    except TypeError as e:
        assert "Helper" in str(e), f"the TypeError should name the plugin Helper: got {e!r}"
    else:
        raise AssertionError("a plugin with no extension point (Helper) should be refused with a TypeError")
    try:
        module.new([ZoneA()])
    except ValueError:
        pass
    else:
        raise AssertionError("a plugin set with no scorer should be refused with a ValueError")


def check_rank(module: Any) -> None:
    rng = random.Random(8)
    for trial in range(30):
        nodes = random_nodes(rng, rng.randint(0, 25))
        weights = {"FreeCpu": float(rng.randint(0, 3)), "FreeCpuShare": 0.5} if trial % 2 else {}
        got = [(r.item.name, r.score) for r in module.new([FreeCpu(), NoSpot(), FreeCpuShare()], weights).rank(nodes)]
        want = expected_ranking(nodes, weights)
        if [n for n, _ in got] == [n for n, _ in want] and all(
                abs(g - w) < 1e-9 for (_, g), (_, w) in zip(got, want, strict=True)):
            continue
        raise AssertionError(f"trial {trial} ({len(nodes)} nodes, weights {weights}): expected {want[:4]}..., "
                             f"got {got[:4]}...: {rank_diagnosis(got, want)}")


def rank_diagnosis(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> str:
    """What a wrong ranking most likely got wrong, said in the message (the hint is the same for all)."""
    if {n for n, _ in got} != {n for n, _ in want}:
        extra, missing = sorted({n for n, _ in got} - {n for n, _ in want}), sorted({n for n, _ in want} - {n for n, _ in got})
        return f"other candidates were admitted (extra {extra}, missing {missing}): check the admitters"
    totals_got, totals_want = dict(got), dict(want)
    if all(abs(totals_got[n] - totals_want[n]) < 1e-9 for n in totals_want):
        return "the totals are right and the order is not: best first, and equal totals keep the input order"
    return "the totals differ: weight x score summed over the scorers, a Normalizer's scores normalized first"


def check_resolved_once(module: Any) -> None:
    nodes = random_nodes(random.Random(2), 40)
    with protocol_checks() as at_build:
        plugins = module.new([FreeCpu(), ZoneA()])
    with protocol_checks() as in_rank:
        ranked = plugins.rank(nodes)
    assert not in_rank, (f"rank() over 40 nodes made {len(in_rank)} Protocol checks "
                         f"({sorted({c.__name__ for c in in_rank})}): resolve the plugins in __init__, once")
    assert at_build, "building the set made no Protocol check: use isinstance(plugin, Admitter) and the others there"
    best = Pipeline([FreeCpu(), ZoneA()]).choose(nodes).item
    assert ranked and ranked[0].item == best, (
        f"the same plugins in minisched's Pipeline choose {best}; your rank() puts {ranked[0].item if ranked else None} first")


CHECKS = [
    Check("resolves each plugin's extension points", check_points,
          "isinstance(p, Admitter), isinstance(p, Scorer), isinstance(p, Normalizer); normalize only on scorers."),
    Check("ranks with weights and normalized scores", check_rank,
          "a total is the sum over scorers of weight x score, where a Normalizer's scores are its normalize() of "
          "every admitted candidate's raw score at once; sort best first, equal totals in input order.", points=2),
    Check("resolved once: no Protocol check while ranking", check_resolved_once,
          "keep the bound methods (p.admit, p.score, p.normalize) in lists built in __init__.", points=2),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
