"""Lab 3, the instructor's solution."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

from minisched.policy.functions import Function, Object, Param, PolicyContext, Type, Value, labels


def _decimal(value: Value) -> Decimal | None:
    try:
        number = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _is_number(value: Value) -> str | None:
    return None if _decimal(value) is not None else f"{value!r} is not a number"


def _non_empty(value: Value) -> str | None:
    return "must not be empty" if value == "" else None


def label_at_least(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
    text = labels(obj).get(str(args[0]))
    have, want = (None if text is None else _decimal(text)), _decimal(args[1])
    return have is not None and want is not None and have >= want


FUNCTION = Function(
    "labelAtLeast",
    (Param("key", frozenset({Type.STRING}), _non_empty),
     Param("minimum", frozenset({Type.STRING, Type.NUMBER}), _is_number)),
    "the label `key` is a number at least `minimum`",
    label_at_least,
    subject="node",
)
