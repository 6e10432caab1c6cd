"""A compiled policy: text parsed and checked once, then evaluated against many nodes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from minisched.policy import ast
from minisched.policy.checker import check
from minisched.policy.evaluator import evaluate, why_false
from minisched.policy.functions import Function, PolicyContext
from minisched.policy.parser import parse
from minisched.policy.printer import to_text

Object = dict[str, Any]


@dataclass(frozen=True)
class Policy:
    source: str
    expr: ast.Expr
    functions: Mapping[str, Function] | None = field(default=None, compare=False, repr=False)

    def evaluate(self, node: Object, pod: Object) -> bool:
        """True when `node` passes the policy for `pod`."""
        return bool(evaluate(self.expr, PolicyContext(node, pod), self.functions))

    def explain(self, node: Object, pod: Object) -> list[str]:
        """Why the policy is false for this node and pod, as canonical text of the failing parts."""
        return [to_text(e) for e in why_false(self.expr, PolicyContext(node, pod), self.functions)]

    def text(self, width: int | None = None) -> str:
        """Canonical text: what `compile_policy` of it would parse to the same AST."""
        return to_text(self.expr, width=width)


def compile_policy(source: str, functions: Mapping[str, Function] | None = None) -> Policy:
    """Parse and check policy text. Raises PolicySyntaxError or PolicyTypeError, each pointing at
    the offending line and column."""
    expr = parse(source)
    check(expr, source, functions)
    return Policy(source, expr, functions)
