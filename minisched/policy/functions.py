"""The function registry: every name a policy can call, with its signature and its meaning.

A function is data (name, parameters, the object it looks at by default, documentation) plus an
implementation; the checker reads the data, the evaluator calls the implementation. Adding a
function means adding one `Function` here (or `register()` from outside): parser, printer and
checker need no change.

Label functions look at `.node` unless given `.pod` (or `.node`) as their first argument:
`hasLabel("zone", "a")` is `hasLabel(.node, "zone", "a")`; `hasLabel(.pod, "team", "ml")` reads the
pod's labels. Taint and resource functions always look at the node, toleration functions at the pod.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from minisched import quantity

Object = dict[str, Any]
Value = bool | str | Decimal | tuple[str, ...] | Object

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")


class Type(enum.Enum):
    BOOL = "boolean"
    STRING = "string"
    NUMBER = "number"
    LIST = "list of strings"
    OBJECT = "object (.node or .pod)"


@dataclass(frozen=True)
class PolicyContext:
    """What a policy is evaluated against: one candidate node and the pod being scheduled."""

    node: Object
    pod: Object

    def subject(self, name: str) -> Object:
        return self.node if name == "node" else self.pod


SUBJECTS = ("node", "pod")


@dataclass(frozen=True)
class Param:
    name: str
    types: frozenset[Type]
    # Checks a literal argument before evaluation: returns what is wrong with it, or None.
    check: Callable[[Value], str | None] | None = None

    def type_text(self) -> str:
        return " or ".join(sorted(t.value for t in self.types))


Impl = Callable[[PolicyContext, Object, Sequence[Value]], bool]


@dataclass(frozen=True)
class Function:
    name: str
    params: tuple[Param, ...]
    doc: str
    impl: Impl | None  # None for and/or/not, which the evaluator runs itself (they short-circuit)
    subject: str | None = None  # "node"/"pod": takes an optional leading .node/.pod, defaulting to this
    variadic: bool = False  # the last parameter repeats (at least once)

    def signature(self) -> str:
        params = [f"{p.name}: {p.type_text()}" for p in self.params]
        if self.variadic:
            params[-1] += ", ..."
        if self.subject:
            params.insert(0, f"[.node|.pod = .{self.subject}]")
        return f"{self.name}({', '.join(params)}) -> boolean"


# --- argument checks -------------------------------------------------------------------------

def _one_of(allowed: Sequence[str]) -> Callable[[Value], str | None]:
    def check(value: Value) -> str | None:
        if value in allowed:
            return None
        return f"{value!r} is not one of {', '.join(allowed)}"

    return check


def parse_quantity(value: Value) -> Fraction:
    """A Kubernetes quantity ("500m", "2", "16Gi") as an exact number, as resource.Quantity reads it."""
    text = format(value, "f") if isinstance(value, Decimal) else str(value)
    return quantity.parse_quantity(text).amount


def _is_quantity(value: Value) -> str | None:
    try:
        parse_quantity(value)
    except (ValueError, ArithmeticError):
        return f"{value!r} is not a Kubernetes quantity (like \"500m\", \"2\" or \"16Gi\")"
    return None


def _non_empty(value: Value) -> str | None:
    return "must not be empty" if value == "" else None


# --- Kubernetes semantics --------------------------------------------------------------------

def labels(obj: Object) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def taints(node: Object) -> list[Object]:
    return list((node.get("spec") or {}).get("taints") or [])


def tolerations(pod: Object) -> list[Object]:
    return list((pod.get("spec") or {}).get("tolerations") or [])


def tolerates_taint(toleration: Object, taint: Object) -> bool:
    """k8s.io/api/core/v1 Toleration.ToleratesTaint: an empty key or effect matches any; Exists
    matches any value; Equal (the default operator) needs the same value."""
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != taint.get("effect"):
        return False
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


# --- implementations ---------------------------------------------------------------------------

def _has_label(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
    return labels(obj).get(str(args[0])) == args[1]


def _has_label_key(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
    return str(args[0]) in labels(obj)


def _label_in(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
    value = labels(obj).get(str(args[0]))
    return value is not None and value in tuple(args[1])  # type: ignore[arg-type]


def _has_taint(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
    return any(t.get("key") == args[0] and t.get("effect") == args[1] for t in taints(ctx.node))


def _matches_taint(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
    key, effect, operator = args
    for taint in taints(ctx.node):
        if taint.get("key") != key or taint.get("effect") != effect:
            continue
        for tol in tolerations(ctx.pod):
            if (tol.get("operator") or "Equal") == operator and tolerates_taint(tol, taint):
                return True
    return False


def _tolerates(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
    key, value, effect = (str(a) for a in args)
    taint = {"key": key, "value": value, "effect": effect}
    return any(tolerates_taint(tol, taint) for tol in tolerations(ctx.pod))


def _tolerates_node_taints(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
    # What kube-scheduler's TaintToleration Filter requires: PreferNoSchedule taints do not filter.
    return all(
        any(tolerates_taint(tol, t) for tol in tolerations(ctx.pod))
        for t in taints(ctx.node)
        if t.get("effect") in ("NoSchedule", "NoExecute")
    )


def scheduler_units(resource: str, value: Value) -> int:
    """A quantity as the scheduler counts it: millicores for cpu, whole units otherwise, rounded up
    (resource.Quantity's MilliValue/Value), so that "cpuAtLeast" means what NodeResourcesFit sees."""
    text = format(value, "f") if isinstance(value, Decimal) else str(value)
    q = quantity.parse_quantity(text)
    return q.milli_value() if resource == "cpu" else q.value()


def allocatable_units(node: Object, resource: str) -> int:
    """The node's allocatable `resource` in scheduler units; capacity when allocatable is not
    reported (as the scheduler's snapshot reads it); 0 when the node has none."""
    status = node.get("status") or {}
    value = (status.get("allocatable") or status.get("capacity") or {}).get(resource)
    return 0 if value is None else scheduler_units(resource, value)


def _allocatable_at_least(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
    resource = str(args[0])
    return allocatable_units(ctx.node, resource) >= scheduler_units(resource, args[1])


def _resource_at_least(resource: str) -> Impl:
    def impl(ctx: PolicyContext, obj: Object, args: Sequence[Value]) -> bool:
        return allocatable_units(ctx.node, resource) >= scheduler_units(resource, args[0])

    return impl


# --- the registry ------------------------------------------------------------------------------

_BOOL = frozenset({Type.BOOL})
_STR = frozenset({Type.STRING})
_LIST = frozenset({Type.LIST})
_QUANTITY = frozenset({Type.STRING, Type.NUMBER})

KEY = Param("key", _STR, _non_empty)
EFFECT = Param("effect", _STR, _one_of(TAINT_EFFECTS))

BUILTINS: tuple[Function, ...] = (
    Function("and", (Param("condition", _BOOL),), "true when every condition is true", None, variadic=True),
    Function("or", (Param("condition", _BOOL),), "true when any condition is true", None, variadic=True),
    Function("not", (Param("condition", _BOOL),), "true when the condition is false", None),
    Function("hasLabel", (KEY, Param("value", _STR)), "the label `key` is set to `value`", _has_label,
             subject="node"),
    Function("hasLabelKey", (KEY,), "the label `key` is set, to any value", _has_label_key, subject="node"),
    Function("labelIn", (KEY, Param("values", _LIST)), "the label `key` is set to one of `values`", _label_in,
             subject="node"),
    Function("hasTaint", (KEY, EFFECT), "the node has a taint with this key and effect", _has_taint),
    Function(
        "matchesTaint",
        (KEY, EFFECT, Param("operator", _STR, _one_of(TOLERATION_OPERATORS))),
        "the node has a taint with this key and effect AND the pod has a toleration with this operator "
        "that tolerates it (the book's definition)",
        _matches_taint,
    ),
    Function("tolerates", (KEY, Param("value", _STR), EFFECT),
             "the pod tolerates the taint key=value:effect", _tolerates),
    Function("toleratesNodeTaints", (), "the pod tolerates every NoSchedule and NoExecute taint on the node "
             "(kube-scheduler's TaintToleration filter)", _tolerates_node_taints),
    Function("allocatableAtLeast", (Param("resource", _STR, _non_empty), Param("quantity", _QUANTITY, _is_quantity)),
             "the node's allocatable `resource` is at least `quantity`, both in scheduler units (rounded up)",
             _allocatable_at_least),
    Function("cpuAtLeast", (Param("quantity", _QUANTITY, _is_quantity),),
             "the node's allocatable cpu is at least `quantity` (\"500m\", \"2\")", _resource_at_least("cpu")),
    Function("memoryAtLeast", (Param("quantity", _QUANTITY, _is_quantity),),
             "the node's allocatable memory is at least `quantity` (\"16Gi\")", _resource_at_least("memory")),
)

FUNCTIONS: dict[str, Function] = {f.name: f for f in BUILTINS}


def register(function: Function, registry: dict[str, Function] | None = None) -> None:
    """Add a function to the registry (the global one by default). Names must be new identifiers."""
    target = FUNCTIONS if registry is None else registry
    if not function.name.isidentifier() or not function.name.isascii() or function.name in ("true", "false"):
        raise ValueError(f"{function.name!r} cannot be a policy function name")
    if function.name in target:
        raise ValueError(f"policy function {function.name!r} is already registered")
    if function.impl is None:
        raise ValueError(f"policy function {function.name!r} needs an implementation")
    target[function.name] = function


def describe_functions(registry: Mapping[str, Function] | None = None) -> str:
    """One line per function: its signature and what it means."""
    reg = FUNCTIONS if registry is None else registry
    return "\n".join(f"{f.signature()}\n    {f.doc}" for f in reg.values())
