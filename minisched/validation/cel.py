"""A SMALL subset of CEL, enough for the x-kubernetes-validations rules minisched's CRDs use.

The real API server evaluates rules with cel-go and Kubernetes' CEL libraries. The embedded
cluster cannot ship cel-go, so it runs this subset: a hand-written parser and an evaluator over the
same JSON values. What is covered:

    literals      1  "s"  'x'  true  false  null  [a, b]
    variables     self  oldSelf
    field access  self.spec.replicas   self["key"]
    operators     ! - * / % + - < <= > >= == != in && ||   (CEL's precedence)
    macros        has(self.field)
    functions     size(x), x.size(), x.startsWith(s), x.endsWith(s), x.contains(s), x.matches(re),
                  isQuantity(s), quantity(s), q.compareTo(q), q.isGreaterThan(q), q.isLessThan(q)

Anything else (ternaries, comprehensions such as all()/exists(), timestamps, other libraries) raises
`CelUnsupported` when the rule is compiled, and the caller decides what to do: the embedded
cluster skips such a rule and says so; the real server enforces it. `&&` and `||` are commutative
with respect to errors, as in CEL: `false && error` is false, `true || error` is true.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from minisched import quantity


class CelError(Exception):
    """A rule failed to evaluate (no such key, wrong types): the API server rejects the object."""


class CelUnsupported(CelError):
    """The rule uses CEL this subset does not implement."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # "int", "float", "str", "ident", "op", "eof"
    text: str
    value: Any
    at: int


_OPS = ("&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "+", "-", "*", "/", "%", "(", ")", "[", "]",
        ".", ",", "?", ":", "{", "}")
_NUMBER = re.compile(r"\d+(\.\d+)?([eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}


def _lex(rule: str) -> list[_Tok]:
    out: list[_Tok] = []
    i = 0
    while i < len(rule):
        ch = rule[i]
        if ch.isspace():
            i += 1
            continue
        if ch in "\"'":
            j, chars = i + 1, []
            while j < len(rule) and rule[j] != ch:
                if rule[j] == "\\" and j + 1 < len(rule):
                    if rule[j + 1] not in _ESC:
                        raise CelUnsupported(f"escape \\{rule[j + 1]} at {j}")
                    chars.append(_ESC[rule[j + 1]])
                    j += 2
                else:
                    chars.append(rule[j])
                    j += 1
            if j >= len(rule):
                raise CelError(f"unterminated string at {i}")
            out.append(_Tok("str", rule[i : j + 1], "".join(chars), i))
            i = j + 1
            continue
        m = _NUMBER.match(rule, i)
        if m:
            text = m.group()
            if m.group(1) or m.group(2):
                out.append(_Tok("float", text, float(text), i))
            else:
                out.append(_Tok("int", text, int(text), i))
            i = m.end()
            continue
        m = _IDENT.match(rule, i)
        if m:
            out.append(_Tok("ident", m.group(), m.group(), i))
            i = m.end()
            continue
        for op in _OPS:
            if rule.startswith(op, i):
                out.append(_Tok("op", op, op, i))
                i += len(op)
                break
        else:
            raise CelError(f"unexpected character {ch!r} at {i}")
    out.append(_Tok("eof", "", None, len(rule)))
    return out


Node = tuple[Any, ...]  # ("lit", v) ("var", name) ("field", obj, name) ("index", obj, key) ("call", name, target, args)
# ("unary", op, x) ("binary", op, a, b) ("has", obj, name) ("list", items)

_BINARY_LEVELS: tuple[tuple[str, ...], ...] = (
    ("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%"),
)


class _Parser:
    def __init__(self, rule: str) -> None:
        self.toks = _lex(rule)
        self.i = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1 if tok.kind != "eof" else 0
        return tok

    def expect(self, text: str) -> None:
        tok = self.take()
        if tok.text != text or tok.kind not in ("op", "ident"):
            raise CelError(f"expected {text!r} at {tok.at}, found {tok.text or 'end of rule'!r}")

    def parse(self) -> Node:
        node = self.binary(0)
        tok = self.peek()
        if tok.text in ("?", ":"):
            raise CelUnsupported("the conditional operator ?: is not in minisched's CEL subset")
        if tok.kind != "eof":
            raise CelError(f"unexpected {tok.text!r} at {tok.at}")
        return node

    def binary(self, level: int) -> Node:
        if level == len(_BINARY_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek().text in _BINARY_LEVELS[level] and self.peek().kind in ("op", "ident"):
            op = self.take().text
            right = self.binary(level + 1)
            left = ("binary", op, left, right)
            if level == 2:  # CEL relations do not chain: a < b < c is a syntax error
                break
        return left

    def unary(self) -> Node:
        if self.peek().text in ("!", "-") and self.peek().kind == "op":
            op = self.take().text
            return ("unary", op, self.unary())
        return self.member()

    def args(self) -> list[Node]:
        self.expect("(")
        items: list[Node] = []
        while self.peek().text != ")":
            items.append(self.binary(0))
            if self.peek().text == ",":
                self.take()
            elif self.peek().text != ")":
                raise CelError(f"expected ',' or ')' at {self.peek().at}")
        self.take()
        return items

    def member(self) -> Node:
        node = self.primary()
        while True:
            tok = self.peek()
            if tok.text == "." and tok.kind == "op":
                self.take()
                name = self.take()
                if name.kind != "ident":
                    raise CelError(f"expected a field name at {name.at}")
                if self.peek().text == "(":
                    node = ("call", name.text, node, self.args())
                else:
                    node = ("field", node, name.text)
            elif tok.text == "[" and tok.kind == "op":
                self.take()
                key = self.binary(0)
                self.expect("]")
                node = ("index", node, key)
            else:
                return node

    def primary(self) -> Node:
        tok = self.take()
        if tok.kind in ("int", "float", "str"):
            return ("lit", tok.value)
        if tok.kind == "ident":
            if tok.text in ("true", "false"):
                return ("lit", tok.text == "true")
            if tok.text == "null":
                return ("lit", None)
            if self.peek().text == "(":
                args = self.args()
                if tok.text == "has":
                    if len(args) != 1 or args[0][0] != "field":
                        raise CelError("has() takes one field selection, such as has(self.spec)")
                    return ("has", args[0][1], args[0][2])
                return ("call", tok.text, None, args)
            return ("var", tok.text)
        if tok.text == "(":
            node = self.binary(0)
            self.expect(")")
            return node
        if tok.text == "[":
            items: list[Node] = []
            while self.peek().text != "]":
                items.append(self.binary(0))
                if self.peek().text == ",":
                    self.take()
                elif self.peek().text != "]":
                    raise CelError(f"expected ',' or ']' at {self.peek().at}")
            self.take()
            return ("list", items)
        if tok.text == "{":
            raise CelUnsupported("map literals are not in minisched's CEL subset")
        raise CelError(f"unexpected {tok.text or 'end of rule'!r} at {tok.at}")


_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


def _check_supported(node: Node) -> None:
    kind = node[0]
    if kind == "call":
        name, target, args = node[1], node[2], node[3]
        if name in _MACROS:
            raise CelUnsupported(f"the {name}() macro is not in minisched's CEL subset")
        if (target is None and name not in _GLOBALS) or (target is not None and name not in _METHODS):
            raise CelUnsupported(f"function {name}() is not in minisched's CEL subset")
        if target is not None:
            _check_supported(target)
        for arg in args:
            _check_supported(arg)
    elif kind == "var" and node[1] not in ("self", "oldSelf"):
        raise CelUnsupported(f"variable {node[1]!r} is not available (only self and oldSelf)")
    else:
        for part in node[1:]:
            if isinstance(part, tuple):
                _check_supported(part)
            elif isinstance(part, list):
                for item in part:
                    _check_supported(item)


def _size(x: Any) -> int:
    if isinstance(x, str | list | dict):
        return len(x)
    raise CelError(f"no such overload: size({type(x).__name__})")


# resource.ParseQuantity's two errors, which the server's CEL quantity library passes on. Its
# hand-written scanner reads sign, digits, fraction, suffix letters, sign, digits: text it cannot
# scan that way is "format wrong"; text it scans but whose suffix it does not know is "suffix".
_QUANTITY_SHAPE = re.compile(r"[+-]?[0-9]*(\.[0-9]*)?[eEinumkKMGTP]*[-+]?[0-9]*\Z")
QUANTITY_FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
QUANTITY_SUFFIX = "unable to parse quantity's suffix"


def _quantity(x: Any) -> quantity.Quantity:
    if not isinstance(x, str):
        raise CelError("no such overload: quantity() takes a string")
    if not x or not _QUANTITY_SHAPE.match(x):
        raise CelError(QUANTITY_FORMAT_WRONG)
    try:
        return quantity.parse_quantity(x)
    except ValueError:
        raise CelError(QUANTITY_SUFFIX) from None


def _is_quantity(x: Any) -> bool:
    try:
        _quantity(x)
    except CelError:
        return False
    return True


def _compare(a: quantity.Quantity, b: quantity.Quantity) -> int:
    return (a.amount > b.amount) - (a.amount < b.amount)


_GLOBALS: dict[str, Callable[..., Any]] = {"size": _size, "quantity": _quantity, "isQuantity": _is_quantity}


def _str_method(fn: Callable[[str, str], Any]) -> Callable[[Any, Any], Any]:
    def method(target: Any, arg: Any) -> Any:
        if not isinstance(target, str) or not isinstance(arg, str):
            raise CelError("no such overload for string method")
        return fn(target, arg)

    return method


def _q_method(fn: Callable[[quantity.Quantity, quantity.Quantity], Any]) -> Callable[[Any, Any], Any]:
    def method(target: Any, arg: Any) -> Any:
        if not isinstance(target, quantity.Quantity) or not isinstance(arg, quantity.Quantity):
            raise CelError("no such overload for quantity method")
        return fn(target, arg)

    return method


_METHODS: dict[str, Callable[..., Any]] = {
    "size": _size,
    "startsWith": _str_method(str.startswith),
    "endsWith": _str_method(str.endswith),
    "contains": _str_method(lambda s, t: t in s),
    "matches": _str_method(lambda s, r: re.search(r, s) is not None),
    "compareTo": _q_method(_compare),
    "isGreaterThan": _q_method(lambda a, b: _compare(a, b) > 0),
    "isLessThan": _q_method(lambda a, b: _compare(a, b) < 0),
}


def _num(x: Any) -> bool:
    return isinstance(x, int | float | Fraction) and not isinstance(x, bool)


def _eval(node: Node, env: dict[str, Any]) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "var":
        if node[1] not in env:
            raise CelError(f"undeclared reference to {node[1]!r}")
        return env[node[1]]
    if kind == "list":
        return [_eval(item, env) for item in node[1]]
    if kind in ("field", "has"):
        target = _eval(node[1], env)
        if not isinstance(target, dict):
            raise CelError(f"no such key: {node[2]} (not an object)")
        if kind == "has":
            return node[2] in target
        if node[2] not in target:
            raise CelError(f"no such key: {node[2]}")
        return target[node[2]]
    if kind == "index":
        target, key = _eval(node[1], env), _eval(node[2], env)
        try:
            return target[key]
        except (KeyError, IndexError, TypeError):
            raise CelError(f"no such key: {key!r}") from None
    if kind == "call":
        name, target, args = node[1], node[2], [_eval(a, env) for a in node[3]]
        if target is None:
            return _GLOBALS[name](*args)
        return _METHODS[name](_eval(target, env), *args)
    if kind == "unary":
        value = _eval(node[2], env)
        if node[1] == "!":
            if not isinstance(value, bool):
                raise CelError("no such overload: !_ needs a bool")
            return not value
        if not _num(value):
            raise CelError("no such overload: -_ needs a number")
        return -value
    op, left_node, right_node = node[1], node[2], node[3]
    if op in ("&&", "||"):
        return _logical(op, left_node, right_node, env)
    a, b = _eval(left_node, env), _eval(right_node, env)
    return _binary(op, a, b)


def _logical(op: str, left_node: Node, right_node: Node, env: dict[str, Any]) -> bool:
    decisive = op == "||"  # the value that decides the result on its own
    values: list[bool] = []
    error: CelError | None = None
    for part in (left_node, right_node):
        try:
            value = _eval(part, env)
        except CelError as err:
            error = error or err
            continue
        if not isinstance(value, bool):
            raise CelError(f"no such overload: {op} needs bools")
        if value is decisive:
            return decisive
        values.append(value)
    if error is not None:
        raise error
    return not decisive


def _binary(op: str, a: Any, b: Any) -> Any:
    if op == "==":
        return _equal(a, b)
    if op == "!=":
        return not _equal(a, b)
    if op == "in":
        if isinstance(b, list):
            return any(_equal(a, x) for x in b)
        if isinstance(b, dict):
            return a in b
        raise CelError("no such overload: in needs a list or map")
    same_kind = (_num(a) and _num(b)) or (isinstance(a, str) and isinstance(b, str))
    if not same_kind:
        raise CelError(f"no such overload: {type(a).__name__} {op} {type(b).__name__}")
    if op in ("<", "<=", ">", ">="):
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    if op == "+":
        return a + b
    if isinstance(a, str):
        raise CelError(f"no such overload: string {op} string")
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise CelError("division by zero" if op == "/" else "modulus by zero")
    if isinstance(a, int) and isinstance(b, int):
        # CEL integer division and modulus truncate toward zero, like Go (Python floors).
        quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return quotient if op == "/" else a - quotient * b
    if op == "/":
        return a / b
    raise CelError("no such overload: % needs integers")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


@dataclass(frozen=True)
class Program:
    rule: str
    ast: Node

    def evaluate(self, self_value: Any, old_self: Any = None, *, has_old: bool = False) -> Any:
        env: dict[str, Any] = {"self": self_value}
        if has_old:
            env["oldSelf"] = old_self
        return _eval(self.ast, env)

    @property
    def uses_old_self(self) -> bool:
        return "oldSelf" in repr(self.ast)


def compile_rule(rule: str) -> Program:
    """Parse a rule. Raises CelUnsupported for CEL outside the subset, CelError for bad syntax."""
    ast = _Parser(rule).parse()
    _check_supported(ast)
    return Program(rule, ast)


@lru_cache(maxsize=256)
def compiled(rule: str) -> Program:
    """compile_rule, remembered: rules are few and evaluated on every object."""
    return compile_rule(rule)
