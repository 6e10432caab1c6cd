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


def check_exactly_full(module: Any) -> None:
    table = NodeTable()
    table.add_node(make_node("exact", cpu="2", memory="4Gi"))  # the pod fills both resources exactly
    table.add_node(make_node("cpu-exact", cpu="3", memory="8Gi"))  # cpu exactly full, memory half
    table.add_node(make_node("one-over", cpu="2", memory="4Gi"))  # a millicore too little
    table.add_node(make_node("roomy", cpu="10", memory="20Gi"))
    table.add_pod("exact", PodInfo.from_pod(make_pod("half", cpu="1", memory="2Gi")))
    table.add_pod("cpu-exact", PodInfo.from_pod(make_pod("two", cpu="2", memory="2Gi")))
    table.add_pod("one-over", PodInfo.from_pod(make_pod("half-and-a-bit", cpu="1001m", memory="2Gi")))
    table = table.snapshot()
    pod = PodInfo.from_pod(make_pod("fills", cpu="1", memory="2Gi"))
    got, want = run(scorer(module), table, pod), expected(table, pod)
    assert got == want, (
        f"nodes the pod fills exactly (used == allocatable: it fits, part 100), exactly in cpu only, one millicore "
        f"over, and roomy: expected {want}, got {got}")
    tiny = NodeTable()
    tiny.add_node(make_node("one-byte", cpu="2", memory="1"))  # allocatable 1: still divides, 1 * 100 / 1
    tiny.add_node(make_node("no-memory-odd", cpu="3", memory="0"))  # cpu part 33: memory's 0 must be 0, not 1
    tiny = tiny.snapshot()
    speck = PodInfo.from_pod(make_pod("speck", cpu="1", memory="1"))
    got, want = run(scorer(module), tiny, speck), expected(tiny, speck)
    assert got == want, (f"a node with 1 byte of memory that a 1-byte pod fills (part 100), and one with no memory "
                         f"(its part 0, and (33 + 0) / 2 rounds down): expected {want}, got {got}")


def check_empty_and_large(module: Any) -> None:
    plugin = scorer(module)
    assert run(plugin, uniform(0), POD) == [], "no nodes: expected no scores"
    table = uniform(2000)
    got, want = run(plugin, table, POD), expected(table, POD)  # within the default budget of 10**7 fuel
    wrong = [i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w]
    assert len(got) == len(want) and not wrong, (
        f"2,000 nodes: {len(got)} scores, {len(wrong)} differ from the rule"
        + (f" (node u{wrong[0]}: expected {want[wrong[0]]}, got {got[wrong[0]]})" if wrong else ""))


def check_repeatable(module: Any) -> None:
    plugin = scorer(module)
    first = run(plugin, fixed_table(), POD)
    fuel = plugin.sandbox.last_fuel
    again = run(plugin, fixed_table(), POD)
    assert (first, fuel) == (again, plugin.sandbox.last_fuel), "the same call twice: different scores or fuel"


CHECKS = [
    Check("nodes without room: no trap, the rule's scores", check_no_room,
          "check allocatable <= 0 before dividing (i64.div_s by 0 traps); a pod that does not fit "
          "(used > allocatable) scores 0 for that resource."),
    Check("a node the pod fills exactly scores 100", check_exactly_full,
          "used == allocatable fits (a full node is what packing aims for): only used > allocatable scores 0, "
          "so compare with i64.gt_s, not i64.ge_s."),
    Check("no nodes, and 2,000 nodes within the default fuel", check_empty_and_large,
          "test i < n before the first node; write exactly n scores, each by the rule: "
          "(cpu part + memory part) / 2, both integer divisions."),
    Check("the same call gives the same scores and fuel", check_repeatable, "keep no state between calls."),
]
