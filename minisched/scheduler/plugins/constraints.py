"""Constraints (Filter): small constraint functions, named in the profile, run as one filter.

The book (Part II §5) passes a `ConstraintFunc(node, path, ctx) error` into an algorithm instead of
hard-coding its rules, with a GPU-memory check as the example. Here a constraint is anything with a
`name`, a `reason` and `__call__(pod, nodes) -> mask`: the pass mask over every node of the snapshot
at once (one numpy expression, not one call per node). The `Constraints` filter runs the ones a
profile lists and reports each failing node with the reason of every constraint it broke:

    pluginConfig:
    - name: Constraints
      args:
        constraints:
        - {name: minFree, args: {resource: memory, quantity: 8Gi}}
        - {name: hasLabel, args: {key: gpu}}

New constraint kinds register in CONSTRAINTS (name -> factory(args)).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo, resource_amount
from minisched.scheduler.snapshot import NodeTable

NAME = "Constraints"
BoolArray = npt.NDArray[np.bool_]


class Constraint(Protocol):
    name: str
    reason: str  # what a failing node is told, e.g. "node(s) had less than 8Gi memory free"

    def __call__(self, pod: PodInfo, nodes: NodeTable) -> BoolArray: ...


class MinFree:
    """allocatable - requested >= quantity of `resource` (the book's GPU-memory check)."""

    name = "minFree"

    def __init__(self, resource: str, quantity: str) -> None:
        self.resource, self.amount = resource, resource_amount(resource, quantity)
        self.reason = f"node(s) had less than {quantity} {resource} free"

    def __call__(self, pod: PodInfo, nodes: NodeTable) -> BoolArray:
        free = nodes.allocatable(self.resource) - nodes.requested(self.resource)
        return np.asarray(free >= self.amount)


class HasLabel:
    """The node carries label `key` (with `value`, if given)."""

    name = "hasLabel"

    def __init__(self, key: str, value: str | None = None) -> None:
        self.key, self.value = key, value
        self.reason = f"node(s) had no label {key}" + (f"={value}" if value is not None else "")

    def __call__(self, pod: PodInfo, nodes: NodeTable) -> BoolArray:
        column = nodes.label_column(self.key)
        if column is None:
            return np.zeros(len(nodes), np.bool_)
        if self.value is None:
            return np.asarray(column >= 0)
        wanted = nodes.label_value_id(self.key, self.value)
        return np.asarray(column == wanted) if wanted is not None else np.zeros(len(nodes), np.bool_)


def _min_free(args: Mapping[str, Any]) -> Constraint:
    return MinFree(str(args["resource"]), str(args["quantity"]))


def _has_label(args: Mapping[str, Any]) -> Constraint:
    value = args.get("value")
    return HasLabel(str(args["key"]), None if value is None else str(value))


CONSTRAINTS: dict[str, Callable[[Mapping[str, Any]], Constraint]] = {"minFree": _min_free, "hasLabel": _has_label}


class Constraints:
    name = NAME
    reads_pods = True  # minFree reads what the pods on a node request

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        """Nothing: minFree and hasLabel read the node, not the pod."""
        return (), Status.success()

    def __init__(self, constraints: Sequence[Constraint]) -> None:
        if len(constraints) > 63:
            raise ValueError(f"{NAME}: at most 63 constraints (one reason bit each), got {len(constraints)}")
        self.constraints = list(constraints)

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        if not self.constraints or n == 0:
            return FilterResult.all_pass(n)
        reasons = np.zeros(n, np.int64)
        for bit, constraint in enumerate(self.constraints):
            reasons |= (~constraint(pod, nodes)).astype(np.int64) << bit
        if not reasons.any():
            return FilterResult.all_pass(n)
        return FilterResult(reasons == 0, reasons, tuple(c.reason for c in self.constraints),
                            Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> Constraints:
    made: list[Constraint] = []
    for i, entry in enumerate((args or {}).get("constraints") or []):
        kind = entry.get("name") if isinstance(entry, Mapping) else None
        factory = CONSTRAINTS.get(str(kind))
        if factory is None:
            raise ValueError(f"{NAME}: constraints[{i}] names {kind!r}; known: {', '.join(sorted(CONSTRAINTS))}")
        try:
            made.append(factory(entry.get("args") or {}))
        except (KeyError, ValueError) as err:
            raise ValueError(f"{NAME}: constraints[{i}] ({kind}) has bad args {entry.get('args')!r}: {err}") from err
    return Constraints(made)
