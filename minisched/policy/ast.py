"""The policy AST: what the parser builds, the checker types, the evaluator runs and the printer prints.

Every node carries the span of source text it came from, for error messages. Spans take no part in
equality, so two ASTs are equal when they mean the same thing however they were laid out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from minisched.policy.tokens import START, Position


@dataclass(frozen=True)
class Span:
    start: Position
    end: Position


NO_SPAN = Span(START, START)


@dataclass(frozen=True)
class StringLit:
    value: str
    span: Span = field(default=NO_SPAN, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class NumberLit:
    value: Decimal  # never negative: the language has no minus sign
    span: Span = field(default=NO_SPAN, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class BoolLit:
    value: bool
    span: Span = field(default=NO_SPAN, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class ListLit:
    items: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Variable:
    """`.node` or `.pod` (the parser accepts any name; the checker knows which exist)."""

    name: str
    span: Span = field(default=NO_SPAN, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Expr, ...]
    span: Span = field(default=NO_SPAN, compare=False, repr=False, kw_only=True)


Expr = StringLit | NumberLit | BoolLit | ListLit | Variable | Call
Literal = StringLit | NumberLit | BoolLit | ListLit

KEYWORDS = frozenset({"true", "false"})
