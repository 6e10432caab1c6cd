"""The evaluator: runs a checked AST against one node and one pod.

A plain tree walk. and/or short-circuit left to right, as the book's engine would; every other call
evaluates its arguments and hands them to the function's implementation. `why_false` walks the same
tree to find the smallest parts that made a policy false, for messages like "node n1 rejected:
hasLabel("gpu", "true") is false".
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from minisched.policy import ast
from minisched.policy.functions import FUNCTIONS, Function, PolicyContext, Value


class PolicyEvaluationError(RuntimeError):
    """Evaluation met something the checker should have rejected: a bug, not bad policy text."""


def evaluate(expr: ast.Expr, ctx: PolicyContext, functions: Mapping[str, Function] | None = None) -> Value:
    registry = FUNCTIONS if functions is None else functions
    return _eval(expr, ctx, registry)


def _eval(expr: ast.Expr, ctx: PolicyContext, registry: Mapping[str, Function]) -> Value:
    if isinstance(expr, ast.StringLit | ast.BoolLit):
        return expr.value
    if isinstance(expr, ast.NumberLit):
        return Decimal(expr.value)
    if isinstance(expr, ast.Variable):
        return ctx.subject(expr.name)
    if isinstance(expr, ast.ListLit):
        return tuple(str(_eval(item, ctx, registry)) for item in expr.items)
    name = expr.name
    if name == "and":
        return all(_truth(arg, ctx, registry) for arg in expr.args)
    if name == "or":
        return any(_truth(arg, ctx, registry) for arg in expr.args)
    if name == "not":
        return not _truth(expr.args[0], ctx, registry)
    function = registry.get(name)
    if function is None or function.impl is None:
        raise PolicyEvaluationError(f"no implementation for {name!r}: was the policy checked?")
    args = list(expr.args)
    subject = ctx.subject(function.subject or "node")
    if args and isinstance(args[0], ast.Variable):
        subject = ctx.subject(args[0].name)
        args = args[1:]
    return function.impl(ctx, subject, [_eval(arg, ctx, registry) for arg in args])


def _truth(expr: ast.Expr, ctx: PolicyContext, registry: Mapping[str, Function]) -> bool:
    value = _eval(expr, ctx, registry)
    if not isinstance(value, bool):
        raise PolicyEvaluationError(f"expected a boolean, got {value!r}: was the policy checked?")
    return value


def why_false(expr: ast.Expr, ctx: PolicyContext, functions: Mapping[str, Function] | None = None) -> list[ast.Expr]:
    """The sub-expressions that make `expr` false: the first false argument of an and(), every
    argument of a false or(), a not() whose argument is true, a false function call.
    Empty when `expr` is true."""
    registry = FUNCTIONS if functions is None else functions
    if _truth(expr, ctx, registry):
        return []
    if isinstance(expr, ast.Call) and expr.name == "and":
        for arg in expr.args:
            if not _truth(arg, ctx, registry):
                return why_false(arg, ctx, registry)
    if isinstance(expr, ast.Call) and expr.name == "or":
        return [leaf for arg in expr.args for leaf in why_false(arg, ctx, registry)]
    return [expr]
