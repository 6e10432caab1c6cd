"""The printer: an AST back to canonical policy text that parses to the same AST.

`to_text(expr)` gives one line; `to_text(expr, width=60)` breaks calls that do not fit across
lines, indented as the book writes its policies. Comments and layout are not kept: the AST does
not hold them.
"""

from __future__ import annotations

from minisched.policy import ast

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def quote(value: str) -> str:
    """A string literal for `value`: control characters escaped, everything else as is."""
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _flat(expr: ast.Expr) -> str:
    if isinstance(expr, ast.StringLit):
        return quote(expr.value)
    if isinstance(expr, ast.NumberLit):
        return format(expr.value, "f")  # "f": never an exponent, which the lexer would not read
    if isinstance(expr, ast.BoolLit):
        return "true" if expr.value else "false"
    if isinstance(expr, ast.Variable):
        return "." + expr.name
    if isinstance(expr, ast.ListLit):
        return "[" + ", ".join(_flat(item) for item in expr.items) + "]"
    return expr.name + "(" + ", ".join(_flat(arg) for arg in expr.args) + ")"


def _broken(expr: ast.Expr, width: int, indent: str, level: int) -> str:
    here = indent * level
    flat = _flat(expr)
    if not isinstance(expr, ast.Call) or not expr.args or len(here) + len(flat) <= width:
        return here + flat
    inner = ",\n".join(_broken(arg, width, indent, level + 1) for arg in expr.args)
    return f"{here}{expr.name}(\n{inner}\n{here})"


def to_text(expr: ast.Expr, *, width: int | None = None, indent: str = "  ") -> str:
    """Canonical text for `expr`: one line, or lines of at most about `width` characters."""
    if width is None:
        return _flat(expr)
    return _broken(expr, width, indent, 0)
