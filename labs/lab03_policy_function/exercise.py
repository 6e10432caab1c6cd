"""Lab 3 starter: define FUNCTION (see README.md)."""

from __future__ import annotations

from collections.abc import Sequence

from minisched.policy.functions import Function, Object, Param, PolicyContext, Type, Value


def label_at_least(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
    raise NotImplementedError("label_at_least")  # your code here


FUNCTION = Function(
    "labelAtLeast",
    (Param("key", frozenset({Type.STRING})), Param("minimum", frozenset({Type.STRING}))),  # check these
    "the label `key` is a number at least `minimum`",
    label_at_least,
)
