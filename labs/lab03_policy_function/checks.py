"""Lab 3 checks (public).

    python -m labs.lab03_policy_function.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import sys
from typing import Any

from labs.harness import Check, main
from minisched.objects import make_node, make_pod
from minisched.policy import FUNCTIONS, Policy, PolicyTypeError, compile_policy, register

LAB = "lab03_policy_function"


def compiled(module: Any, source: str) -> Policy:
    registry = dict(FUNCTIONS)
    register(module.FUNCTION, registry)
    return compile_policy(source, registry)


def gpu_node(count: str | None) -> dict[str, Any]:
    return make_node(f"gpu-{count}", labels={} if count is None else {"gpu.count": count})


def check_on_nodes(module: Any) -> None:
    policy = compiled(module, 'labelAtLeast("gpu.count", 2)')
    pod = make_pod("p")
    for count, want in (("4", True), ("2", True), ("1", False), ("2.5", True), ("1.99", False)):
        got = policy.evaluate(gpu_node(count), pod)
        assert got is want, f"labelAtLeast(\"gpu.count\", 2) on a node labelled gpu.count={count}: expected {want}, got {got}"


def check_missing_or_not_a_number(module: Any) -> None:
    policy = compiled(module, 'labelAtLeast("gpu.count", 1)')
    pod = make_pod("p")
    for count in (None, "many", ""):
        what = "no gpu.count label" if count is None else f"gpu.count={count!r}"
        got = policy.evaluate(gpu_node(count), pod)
        assert got is False, f"a node with {what}: expected false, got {got!r}"


def check_types(module: Any) -> None:
    for source, bad in (('labelAtLeast("gpu.count", true)', "true"), ("labelAtLeast(2, 2)", "2")):
        try:
            compiled(module, source)
        except PolicyTypeError as e:
            assert e.position.column == source.index(bad, len("labelAtLeast(")) + 1, (
                f"{source}: the type error should point at {bad!r}, it points at column {e.position.column}")
        else:
            raise AssertionError(f"{source} should be refused by the checker (a PolicyTypeError), it compiled")
    for source in ('labelAtLeast("gpu.count", 3)', 'labelAtLeast("gpu.count", "3")'):
        try:
            compiled(module, source)
        except PolicyTypeError as e:
            raise AssertionError(f"{source} is well typed (a number, or a number in a string), yet refused: {e}") from None


CHECKS = [
    Check("compares a node's label as a number", check_on_nodes,
          "parse both with decimal.Decimal(str(value)); labels(obj) gives the labels of .node or .pod.", points=2),
    Check("missing or non-numeric labels are false", check_missing_or_not_a_number,
          "catch decimal.InvalidOperation and return False."),
    Check("the checker refuses wrong argument types", check_types,
          "minimum takes Type.NUMBER or Type.STRING; key takes Type.STRING only."),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
