"""Lab 13 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

from typing import Any

from labs.harness import Check
from labs.lab13_wasm_scorer.checks import POD, expected, fixed_table, run, scorer, uniform
from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable


def check_no_room(module: Any) -> None:
    table = NodeTable()
    table.add_node(make_node("no-memory", cpu="4", memory="0"))
    table.add_node(make_node("no-cpu", cpu="0", memory="8Gi"))
    table.add_node(make_node("full", cpu="2", memory="8Gi"))
    table.add_pod("full", PodInfo.from_pod(make_pod("big", cpu="1800m", memory="1Gi")))
    table = table.snapshot()
    pod = PodInfo.from_pod(make_pod("asks-no-memory", cpu="500m", memory=None))
    got = run(scorer(module), table, pod)
    assert got == expected(table, pod), (
        f"nodes with no memory, no cpu, and one too full for the pod: expected {expected(table, pod)}, got {got}")


def check_empty_and_large(module: Any) -> None:
    plugin = scorer(module)
    assert run(plugin, uniform(0), POD) == [], "no nodes: expected no scores"
    table = uniform(2000)
    got = run(plugin, table, POD)  # within the default budget of 10**7 fuel
    assert got == expected(table, POD), "2,000 nodes: the scores differ from the rule"


def check_repeatable(module: Any) -> None:
    plugin = scorer(module)
    first = run(plugin, fixed_table(), POD)
    fuel = plugin.sandbox.last_fuel
    again = run(plugin, fixed_table(), POD)
    assert (first, fuel) == (again, plugin.sandbox.last_fuel), "the same call twice: different scores or fuel"


CHECKS = [
    Check("nodes without room: no trap, the rule's scores", check_no_room,
          "check allocatable <= 0 before dividing; used > allocatable scores 0."),
    Check("no nodes, and 2,000 nodes within the default fuel", check_empty_and_large,
          "test i < n before the first node."),
    Check("the same call gives the same scores and fuel", check_repeatable, "keep no state between calls."),
]
