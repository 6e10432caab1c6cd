"""Lab 8 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import random
import re
from typing import Any

from labs.harness import Check
from labs.lab08_plugin_set.checks import (
    FreeCpu,
    FreeCpuShare,
    Node,
    NoSpot,
    ZoneA,
    random_nodes,
    rank_diagnosis,
)


def check_ties_and_empty(module: Any) -> None:
    nodes = [Node(f"n{i}", 4, "a") for i in range(6)]
    got = [r.item.name for r in module.new([FreeCpu()]).rank(nodes)]
    assert got == [n.name for n in nodes], f"six nodes with equal scores: expected the input order, got {got}"
    assert module.new([FreeCpu(), ZoneA()]).rank([]) == [], "no candidates: expected []"
    none_admitted = module.new([FreeCpu(), ZoneA()]).rank([Node("b1", 3, "b")])
    assert none_admitted == [], f"nothing admitted: expected [], got {none_admitted}"


class CountingShare(FreeCpuShare):
    name = "CountingShare"

    def __init__(self) -> None:
        self.calls: list[int] = []

    def normalize(self, scores: list[float]) -> list[float]:
        self.calls.append(len(scores))
        return super().normalize(scores)


def check_normalize_once(module: Any) -> None:
    share = CountingShare()
    nodes = [Node(f"n{i}", i, "ab"[i % 2]) for i in range(10)]
    ranked = module.new([share, ZoneA()]).rank(nodes)
    assert share.calls == [5], (f"10 nodes, 5 admitted: normalize should be called once with the 5 admitted "
                                f"nodes' scores, it was called with lists of lengths {share.calls}")
    assert [r.item.name for r in ranked] == ["n8", "n6", "n4", "n2", "n0"], "ranked by normalized free CPU"


def check_unnamed_and_weights(module: Any) -> None:
    class Anonymous:
        def score(self, node: Node) -> float:  # no `name`: not a Scorer
            return 1.0

    try:
        module.new([FreeCpu(), Anonymous()])
    except TypeError as e:
        assert re.search(r"\bAnonymous\b", str(e)), (
            f"a plugin without a name: the TypeError should name its class, Anonymous, as a word of its own, got {e!r}")
    else:
        raise AssertionError("a plugin without a `name` is no Scorer: it should be refused with a TypeError")
    ranked = module.new([FreeCpu()], {"FreeCpu": 0.25}).rank([Node("n", 8, "a")])
    assert ranked[0].score == 2.0, f"weight 0.25 on a free CPU of 8: expected 2.0, got {ranked[0].score}"


def check_every_admitter(module: Any) -> None:
    """Two admitters: a candidate is ranked only when both admit it."""
    rng = random.Random(31)
    for trial in range(20):
        nodes = random_nodes(rng, rng.randint(1, 20))
        got = [r.item.name for r in module.new([ZoneA(), FreeCpu(), NoSpot()]).rank(nodes)]
        admitted = [n for n in nodes if n.zone == "a" and (not n.spot or n.free_cpu >= 12)]
        totals = {n.name: n.free_cpu + (0.0 if n.spot else 5.0) for n in admitted}
        want = sorted(totals, key=lambda name: -totals[name])
        if got != want:
            raise AssertionError(
                f"trial {trial}: admitters ZoneA (zone a only) and NoSpot (no spot unless 12 free CPUs): expected "
                f"{want}, got {got}: " + rank_diagnosis([(n, 0.0) for n in got], [(n, 0.0) for n in want]).replace(
                    "check the admitters", "a candidate must pass every admitter, not any one of them"))


class Renamed:
    """A plugin whose `name` is not its class's name (the checks' other plugins are named like their classes)."""

    def __init__(self, inner: Any, name: str) -> None:
        self.inner, self.name = inner, name

    def score(self, node: Node) -> float:
        return float(self.inner.score(node))


class RenamedShare(Renamed):
    def normalize(self, scores: list[float]) -> list[float]:
        return list(self.inner.normalize(scores))


class RenamedZone:
    name = "zone-a-only"

    def admit(self, node: Node) -> bool:
        return node.zone == "a"


def check_names_from_plugins(module: Any) -> None:
    plugins = [Renamed(FreeCpu(), "cpu"), RenamedZone(), RenamedShare(FreeCpuShare(), "cpu-share")]
    got = module.new(plugins).points()
    want = {"admit": ["zone-a-only"], "score": ["cpu", "cpu-share"], "normalize": ["cpu-share"]}
    assert got == want, f"plugins named cpu, zone-a-only and cpu-share (not like their classes): expected " \
        f"points() {want}, got {got}"
    nodes = [Node("small", 2, "a"), Node("big", 8, "a")]
    ranked = module.new(plugins, {"cpu": 10.0, "cpu-share": 0.0}).rank(nodes)
    scores = {r.item.name: r.score for r in ranked}
    assert scores == {"big": 80.0, "small": 20.0}, (
        f"weights {{'cpu': 10, 'cpu-share': 0}} keyed by the plugins' names: expected big 80 and small 20, got "
        f"{scores}")


CHECKS = [
    Check("equal totals keep the input order; empty inputs", check_ties_and_empty,
          "sorted() is stable: sort the indices by -total and nothing else."),
    Check("normalize is called once per rank, with every admitted score", check_normalize_once,
          "first all raw scores of one scorer, then one normalize() over them."),
    Check("plugins without a name, and weights", check_unnamed_and_weights,
          "name the plugin in the TypeError with getattr(p, 'name', type(p).__name__), set apart by a space or "
          "quotes (f'plugin {name} implements no extension point'), not glued to other text."),
    Check("a candidate passes every admitter, not any", check_every_admitter,
          "admit a candidate only when all(admit(c) for admit in self._admit): one admitter refusing is enough."),
    Check("plugins are named by their `name`, not their class", check_names_from_plugins,
          "read p.name for points() and the weights; type(p).__name__ only names a plugin in the TypeError when it "
          "has no name."),
]
