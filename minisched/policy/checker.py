"""The checker: gives every expression a type and rejects what cannot be evaluated.

Run once when a policy is compiled, so that mistakes (an unknown function, a missing argument, a
taint effect spelled "NoSchedul") are reported at their column before any node is looked at, and
evaluation never meets a type it did not expect.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from decimal import Decimal

from minisched.policy import ast
from minisched.policy.errors import PolicyTypeError
from minisched.policy.functions import FUNCTIONS, SUBJECTS, Function, Type, Value


def literal_value(expr: ast.Expr) -> Value | None:
    """The value of a literal argument, known before evaluation (None for anything else)."""
    if isinstance(expr, ast.StringLit | ast.BoolLit):
        return expr.value
    if isinstance(expr, ast.NumberLit):
        return Decimal(expr.value)
    if isinstance(expr, ast.ListLit):
        strings = [i.value for i in expr.items if isinstance(i, ast.StringLit)]
        return tuple(strings) if len(strings) == len(expr.items) else None
    return None


class Checker:
    def __init__(self, source: str = "", functions: Mapping[str, Function] | None = None) -> None:
        self.source = source
        self.functions = FUNCTIONS if functions is None else functions

    def _error(self, message: str, node: ast.Expr) -> PolicyTypeError:
        return PolicyTypeError(message, node.span.start, self.source)

    def type_of(self, expr: ast.Expr) -> Type:
        if isinstance(expr, ast.StringLit):
            return Type.STRING
        if isinstance(expr, ast.NumberLit):
            return Type.NUMBER
        if isinstance(expr, ast.BoolLit):
            return Type.BOOL
        if isinstance(expr, ast.Variable):
            if expr.name not in SUBJECTS:
                raise self._error(
                    f"unknown variable .{expr.name}; a policy sees .node and .pod"
                    + (" (the book's .clusterState is not modelled)" if expr.name == "clusterState" else ""),
                    expr,
                )
            return Type.OBJECT
        if isinstance(expr, ast.ListLit):
            for item in expr.items:
                if not isinstance(item, ast.StringLit):
                    raise self._error(f"list items must be strings, not a {self.type_of(item).value}", item)
            return Type.LIST
        return self._call(expr)

    def _call(self, call: ast.Call) -> Type:
        function = self.functions.get(call.name)
        if function is None:
            near = difflib.get_close_matches(call.name, list(self.functions), n=1)
            hint = f"; did you mean {near[0]}?" if near else f"; known: {', '.join(sorted(self.functions))}"
            raise self._error(f"unknown function {call.name!r}{hint}", call)
        args = list(call.args)
        if args and isinstance(args[0], ast.Variable):
            if not function.subject:
                raise self._error(
                    f"{call.name} does not take .node or .pod: it always reads "
                    f"{'the pod' if call.name == 'tolerates' else 'the node and pod it needs'}",
                    args[0],
                )
            self.type_of(args[0])
            args = args[1:]
        params = function.params
        wanted = f"{'at least ' if function.variadic else ''}{len(params)}"
        if len(args) < len(params) or (len(args) > len(params) and not function.variadic):
            at: ast.Expr = args[len(params)] if len(args) > len(params) else call
            raise self._error(
                f"{call.name} takes {wanted} argument{'s' if len(params) != 1 else ''}, got {len(args)}: "
                f"{function.signature()}",
                at,
            )
        for i, arg in enumerate(args):
            param = params[min(i, len(params) - 1)]
            got = self.type_of(arg)
            if got not in param.types:
                raise self._error(
                    f"argument {param.name!r} of {call.name} must be a {param.type_text()}, not a {got.value}",
                    arg,
                )
            value = literal_value(arg)
            if param.check is not None and value is not None:
                problem = param.check(value)
                if problem:
                    raise self._error(f"argument {param.name!r} of {call.name}: {problem}", arg)
        return Type.BOOL


def check(expr: ast.Expr, source: str = "", functions: Mapping[str, Function] | None = None) -> None:
    """Raise PolicyTypeError unless `expr` is a well-typed boolean policy."""
    checker = Checker(source, functions)
    result = checker.type_of(expr)
    if result is not Type.BOOL:
        raise PolicyTypeError(
            f"a policy must be a boolean expression, such as hasLabel(...); this is a {result.value}",
            expr.span.start,
            source,
        )
