"""Lab 8 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

from typing import Any

from labs.harness import Check
from labs.lab08_plugin_set.checks import FreeCpu, FreeCpuShare, Node, ZoneA


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
        assert "Anonymous" in str(e), f"a plugin without a name: the TypeError should name its class, got {e!r}"
    else:
        raise AssertionError("a plugin without a `name` is no Scorer: it should be refused with a TypeError")
    ranked = module.new([FreeCpu()], {"FreeCpu": 0.25}).rank([Node("n", 8, "a")])
    assert ranked[0].score == 2.0, f"weight 0.25 on a free CPU of 8: expected 2.0, got {ranked[0].score}"


CHECKS = [
    Check("equal totals keep the input order; empty inputs", check_ties_and_empty,
          "sorted() is stable: sort the indices by -total and nothing else."),
    Check("normalize is called once per rank, with every admitted score", check_normalize_once,
          "first all raw scores of one scorer, then one normalize() over them."),
    Check("plugins without a name, and weights", check_unnamed_and_weights,
          "name the plugin in the TypeError with getattr(p, 'name', type(p).__name__)."),
]
