"""Lab 3 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

from typing import Any

from labs.harness import Check
from labs.lab03_policy_function.checks import compiled, gpu_node
from minisched.objects import make_pod
from minisched.policy import PolicyTypeError


def check_pod_subject(module: Any) -> None:
    policy = compiled(module, 'labelAtLeast(.pod, "replicas", 3)')
    node = gpu_node("0")
    for replicas, want in (("3", True), ("2", False)):
        got = policy.evaluate(node, make_pod("p", labels={"replicas": replicas}))
        assert got is want, f"labelAtLeast(.pod, \"replicas\", 3) with replicas={replicas}: expected {want}, got {got}"


def check_exact(module: Any) -> None:
    policy = compiled(module, 'labelAtLeast("ratio", "0.3")')
    node = gpu_node(None) | {"metadata": {"name": "r", "labels": {"ratio": "0.29999999999999999"}}}
    got = policy.evaluate(node, make_pod("p"))
    assert got is False, ("ratio=0.29999999999999999 is less than 0.3: expected false "
                          "(as floats both are 0.3, so a float comparison says true)")


def check_literal_checked(module: Any) -> None:
    for source in ('labelAtLeast("gpu.count", "lots")', 'labelAtLeast("", 1)'):
        try:
            compiled(module, source)
        except PolicyTypeError:
            continue
        raise AssertionError(f"{source} should be refused when compiled, not at evaluation")


def check_errors_name_the_parameter(module: Any) -> None:
    """The checker's errors point at the bad argument by the parameter's name, which the README gives."""
    for source, name in (('labelAtLeast("gpu", true)', "minimum"), ('labelAtLeast("gpu", "lots")', "minimum"),
                         ('labelAtLeast("", 1)', "key")):
        try:
            compiled(module, source)
        except PolicyTypeError as e:
            assert repr(name) in str(e), f"{source}: the type error should name the parameter {name!r}, got {e}"
            continue
        raise AssertionError(f"{source} should be refused when compiled")


def check_numbers_not_text(module: Any) -> None:
    """Multi-digit, leading zeros and negative values: compared as numbers, never as text."""
    pod = make_pod("p")
    cases = [("gpu.count", "2", "10", True), ("gpu.count", "10", "9", False), ("gpu.count", "10", "100", True),
             ("gpu.count", "9", "010", True), ("gpu.count", "10", "007", False),
             ("temp", "-5", "-1", True), ("temp", "-1", "-5", False), ("temp", "-2", "-10", False),
             ("temp", "0", "-0.5", False), ("temp", "-3", "-3", True), ("gpu.count", "2", "-7", False)]
    for key, minimum, value, want in cases:
        source = f'labelAtLeast("{key}", "{minimum}")'
        node = gpu_node(None) | {"metadata": {"name": "n", "labels": {key: value}}}
        got = compiled(module, source).evaluate(node, pod)
        assert got is want, (f"{source} on a node labelled {key}={value}: expected {want}, got {got} "
                             f"({value} {'>=' if want else '<'} {minimum} as numbers)")


CHECKS = [
    Check("works on the pod's labels with .pod", check_pod_subject, "Function(..., subject=\"node\")."),
    Check("exact decimal comparison", check_exact, "use decimal.Decimal, never float()."),
    Check("literal arguments checked at compile time", check_literal_checked,
          "give each Param a check function returning what is wrong, or None."),
    Check("type errors name the parameter key or minimum", check_errors_name_the_parameter,
          "name the parameters as the README does: Param(\"key\", ...) and Param(\"minimum\", ...)."),
    Check("numbers compared as numbers: several digits, leading zeros, negatives", check_numbers_not_text,
          "compare Decimal(label) with Decimal(minimum): as text \"10\" < \"2\" and \"-1\" < \"-5\"; a label is a "
          "number when Decimal() parses it (a sign and a dot included), not when str.isdigit() says so."),
]
