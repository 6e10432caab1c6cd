"""PolicyFilter (Filter): nodes must satisfy every SchedulingPolicy whose selector picks the pod.

Policies come from SchedulingPolicy custom resources (minisched.validation.scheduling_policy), each
compiled once by minisched.policy when loaded. A policy whose expression does not compile is not
applied: it is kept in `rejected` with its PolicyError (line, column, caret), so the mistake is
visible rather than silently filtering nothing or everything. `reload()` re-reads them once;
`follow(informer_factory)` keeps them current from an informer.

A failing node is named with the policy and the part of the expression that was false, e.g.
`node(s) rejected by SchedulingPolicy gpu-only: not(hasLabel("env", "staging"))`. Preemption cannot
change a node's labels, taints or capacity, so failures are UnschedulableAndUnresolvable.

Like the built-in filters it judges all nodes at once: `evaluate_rows` walks the expression once
and turns each built-in function into array operations over the snapshot's columns (label value
ids, the taint position matrix, allocatable in scheduler units); and/or/not become logical_and/
logical_or/logical_not. A function it has no vectorised form for (one registered from outside) is
evaluated node by node. The pure per-node rule `rejections` stays beside it, and tests check that
the two agree on random policies and nodes. Failing nodes are explained from the memoised rows
of every sub-expression, once per distinct pattern of values rather than once per node.
Register it beside the in-tree plugins:

    registry = in_tree_registry(); registry.register(policy_filter.NAME, policy_filter.new)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.errors import ApiError
from minisched.informer import ResourceEventHandlerFuncs, SharedInformerFactory
from minisched.policy import Policy, PolicyContext, PolicyError, ast, checker, compile_policy, to_text
from minisched.policy.evaluator import evaluate
from minisched.policy.functions import allocatable_units, scheduler_units, tolerates_taint, tolerations
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NO_TAINT, NodeTable
from minisched.selectors import LabelSelector, from_label_selector_json
from minisched.validation.scheduling_policy import SCHEDULING_POLICIES

NAME = "PolicyFilter"
_MAX_REASON_BITS = 62

Object = dict[str, Any]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class LoadedPolicy:
    name: str
    policy: Policy
    selector: LabelSelector  # the empty selector picks every pod

    def applies_to(self, pod: Object) -> bool:
        return self.selector.matches((pod.get("metadata") or {}).get("labels") or {})


def load(objects: Iterable[Object]) -> tuple[list[LoadedPolicy], dict[str, PolicyError | ApiError]]:
    """Compile SchedulingPolicy objects: (the usable ones sorted by name, {name: error} for the rest)."""
    loaded: list[LoadedPolicy] = []
    rejected: dict[str, PolicyError | ApiError] = {}
    for obj in objects:
        name = str((obj.get("metadata") or {}).get("name", ""))
        spec = obj.get("spec") or {}
        try:
            policy = compile_policy(str(spec.get("expression", "")))
            raw_selector = spec.get("selector")
            selector = LabelSelector() if raw_selector is None else from_label_selector_json(raw_selector)
        except (PolicyError, ApiError) as err:
            rejected[name] = err
            continue
        loaded.append(LoadedPolicy(name, policy, selector))
    return sorted(loaded, key=lambda p: p.name), rejected


def reason(policy: LoadedPolicy, failed_parts: Sequence[str]) -> str:
    return f"node(s) rejected by SchedulingPolicy {policy.name}: {' and '.join(failed_parts)}"


def rejections(policies: Sequence[LoadedPolicy], pod: Object, node: Object) -> list[str]:
    """The pure per-node rule: one reason per applicable policy that `node` fails for `pod`."""
    out = []
    for p in policies:
        if p.applies_to(pod) and not p.policy.evaluate(node, pod):
            out.append(reason(p, p.policy.explain(node, pod)))
    return out


# --- the vectorised evaluator ---------------------------------------------------------------------

def evaluate_rows(expr: ast.Expr, pod: Object, nodes: NodeTable,
                  memo: dict[int, BoolArray] | None = None) -> BoolArray:
    """`expr` for every node of the snapshot at once: row i is Policy.evaluate(nodes.node_at(i), pod).
    With `memo`, every sub-expression's rows are kept in it, by id(), for `explain_rows`."""
    rows = _rows(expr, pod, nodes, memo)
    if memo is not None:
        memo[id(expr)] = rows
    return rows


def explain_rows(
    expr: ast.Expr, memo: dict[int, BoolArray], failing: npt.NDArray[np.intp]
) -> list[tuple[list[str], npt.NDArray[np.intp]]]:
    """Policy.explain for the failing rows, from the memoised rows of every sub-expression:
    [(the explanation, the rows it explains)].

    Rows whose sub-expressions all have the same values share one explanation, so the tree is
    walked once per distinct pattern (a handful), not once per failing node (thousands)."""
    subexpressions = [e for e in _walk(expr) if id(e) in memo]
    matrix = np.stack([memo[id(e)][failing] for e in subexpressions])  # [sub-expression, failing row]
    if len(subexpressions) <= 62:  # one int64 code per row: a 1-D unique is much faster than axis=1
        weights = np.left_shift(np.int64(1), np.arange(len(subexpressions), dtype=np.int64))
        codes, which = np.unique(weights @ matrix.astype(np.int64), return_inverse=True)
        patterns = ((codes[None, :] >> np.arange(len(subexpressions))[:, None]) & 1).astype(np.bool_)
    else:
        patterns, which = np.unique(matrix, axis=1, return_inverse=True)
    which = np.ravel(which)
    out = []
    for k in range(patterns.shape[1]):
        values = {id(e): bool(patterns[i, k]) for i, e in enumerate(subexpressions)}
        out.append(([to_text(e) for e in _why_false(expr, values)], failing[which == k]))
    return out


def _walk(expr: ast.Expr) -> list[ast.Expr]:
    out = [expr]
    if isinstance(expr, ast.Call) and expr.name in ("and", "or", "not"):
        for arg in expr.args:
            out.extend(_walk(arg))
    return out


def _why_false(expr: ast.Expr, values: dict[int, bool]) -> list[ast.Expr]:
    """minisched.policy.evaluator.why_false over known values."""
    if values[id(expr)]:
        return []
    if isinstance(expr, ast.Call) and expr.name == "and":
        for arg in expr.args:
            if not values[id(arg)]:
                return _why_false(arg, values)
    if isinstance(expr, ast.Call) and expr.name == "or":
        return [leaf for arg in expr.args for leaf in _why_false(arg, values)]
    return [expr]


def _rows(expr: ast.Expr, pod: Object, nodes: NodeTable, memo: dict[int, BoolArray] | None) -> BoolArray:
    n = len(nodes)
    if isinstance(expr, ast.BoolLit):
        return np.full(n, expr.value, np.bool_)
    if not isinstance(expr, ast.Call):
        raise TypeError(f"not a boolean expression: {to_text(expr)}")
    name, args = expr.name, expr.args
    if name == "and":
        out = np.ones(n, np.bool_)
        for arg in args:
            out &= evaluate_rows(arg, pod, nodes, memo)
        return out
    if name == "or":
        out = np.zeros(n, np.bool_)
        for arg in args:
            out |= evaluate_rows(arg, pod, nodes, memo)
        return out
    if name == "not":
        return ~evaluate_rows(args[0], pod, nodes, memo)
    subject = "node"
    if args and isinstance(args[0], ast.Variable):
        subject, args = args[0].name, args[1:]
    values = [checker.literal_value(a) for a in args]
    vectorised = _VECTORISED.get(name)
    if subject == "node" and vectorised is not None:
        return vectorised(nodes, pod, values)
    # The pod's labels (one answer for every node) or a function without a vectorised form.
    if subject == "pod":
        return np.full(n, bool(evaluate(expr, PolicyContext({}, pod))), np.bool_)
    return np.array([bool(evaluate(expr, PolicyContext(nodes.node_at(i), pod))) for i in range(n)], np.bool_)


def _label_equals(nodes: NodeTable, pod: Object, v: list[Any]) -> BoolArray:
    col, value_id = nodes.label_column(str(v[0])), nodes.label_value_id(str(v[0]), str(v[1]))
    if col is None or value_id is None:
        return np.zeros(len(nodes), np.bool_)
    return np.asarray(col == value_id)


def _label_key(nodes: NodeTable, pod: Object, v: list[Any]) -> BoolArray:
    col = nodes.label_column(str(v[0]))
    return np.zeros(len(nodes), np.bool_) if col is None else np.asarray(col >= 0)


def _label_in(nodes: NodeTable, pod: Object, v: list[Any]) -> BoolArray:
    col = nodes.label_column(str(v[0]))
    ids = [nodes.label_value_id(str(v[0]), str(x)) for x in v[1]]
    known = [i for i in ids if i is not None]
    if col is None or not known:
        return np.zeros(len(nodes), np.bool_)
    return np.isin(col, known)


def _has_any_taint(nodes: NodeTable, wanted: list[int]) -> BoolArray:
    if not wanted:
        return np.zeros(len(nodes), np.bool_)
    return np.asarray((nodes.taint_positions[:, wanted] != NO_TAINT).any(axis=1))


def _taint_dict(t: tuple[str, str, str]) -> Object:
    return {"key": t[0], "value": t[1], "effect": t[2]}


def _has_taint(nodes: NodeTable, pod: Object, v: list[Any]) -> BoolArray:
    return _has_any_taint(nodes, [i for i, t in enumerate(nodes.taints) if t[0] == v[0] and t[2] == v[1]])


def _matches_taint(nodes: NodeTable, pod: Object, v: list[Any]) -> BoolArray:
    key, effect, operator = v
    tols = [t for t in tolerations(pod) if (t.get("operator") or "Equal") == operator]
    return _has_any_taint(nodes, [
        i for i, t in enumerate(nodes.taints)
        if t[0] == key and t[2] == effect and any(tolerates_taint(tol, _taint_dict(t)) for tol in tols)
    ])


def _tolerates_node_taints(nodes: NodeTable, pod: Object, v: list[Any]) -> BoolArray:
    tols = tolerations(pod)
    return ~_has_any_taint(nodes, [
        i for i, t in enumerate(nodes.taints)
        if t[2] in ("NoSchedule", "NoExecute") and not any(tolerates_taint(tol, _taint_dict(t)) for tol in tols)
    ])


def _at_least(resource: str | None) -> Callable[[NodeTable, Object, list[Any]], BoolArray]:
    def rows(nodes: NodeTable, pod: Object, v: list[Any]) -> BoolArray:
        name, amount = (str(v[0]), v[1]) if resource is None else (resource, v[0])
        wanted = scheduler_units(name, amount)
        if nodes.resource_column(name) is None:  # a resource the snapshot does not track: read the objects
            return np.array([allocatable_units(nodes.node_at(i), name) >= wanted for i in range(len(nodes))],
                            np.bool_)
        return np.asarray(nodes.allocatable(name) >= wanted)

    return rows


def _pod_only(fn: str) -> Callable[[NodeTable, Object, list[Any]], BoolArray]:
    def rows(nodes: NodeTable, pod: Object, v: list[Any]) -> BoolArray:
        call = ast.Call(fn, tuple(ast.StringLit(str(x)) for x in v))
        return np.full(len(nodes), bool(evaluate(call, PolicyContext({}, pod))), np.bool_)

    return rows


_VECTORISED: dict[str, Callable[[NodeTable, Object, list[Any]], BoolArray]] = {
    "hasLabel": _label_equals,
    "hasLabelKey": _label_key,
    "labelIn": _label_in,
    "hasTaint": _has_taint,
    "matchesTaint": _matches_taint,
    "tolerates": _pod_only("tolerates"),
    "toleratesNodeTaints": _tolerates_node_taints,
    "allocatableAtLeast": _at_least(None),
    "cpuAtLeast": _at_least("cpu"),
    "memoryAtLeast": _at_least("memory"),
}


class PolicyFilter:
    name = NAME

    def __init__(self, objects: Iterable[Object] = (), cluster: Any = None) -> None:
        self._cluster = cluster
        self._lock = threading.Lock()
        self.policies: list[LoadedPolicy] = []
        self.rejected: dict[str, PolicyError | ApiError] = {}
        self.set_policies(objects)

    def set_policies(self, objects: Iterable[Object]) -> None:
        loaded, rejected = load(objects)
        with self._lock:
            self.policies, self.rejected = loaded, rejected

    def follow(self, factory: SharedInformerFactory) -> None:
        """Keep the policies current from a shared informer on SchedulingPolicy objects (the
        scheduler's own factory: `plugin.follow(scheduler.factory)` before `scheduler.start()`).
        Every add, update or delete recompiles the set. The CRD must be installed: the factory
        waits for every informer's first list."""
        informer = factory.informer_for(SCHEDULING_POLICIES)

        def refresh(*_: Any) -> None:
            self.set_policies(informer.store.list())

        informer.add_event_handler(ResourceEventHandlerFuncs(refresh, refresh, refresh))

    def reload(self) -> None:
        """Re-read the SchedulingPolicy objects from the cluster this plugin was made with."""
        if self._cluster is None:
            raise RuntimeError("PolicyFilter was not given a cluster to load SchedulingPolicies from")
        self.set_policies(self._cluster.list(SCHEDULING_POLICIES).get("items") or [])

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        with self._lock:
            applicable = [p for p in self.policies if p.applies_to(pod.pod)]
        if not applicable or n == 0:
            return FilterResult.all_pass(n)
        passed = np.ones(n, np.bool_)
        verdicts = []
        for p in applicable:
            memo: dict[int, BoolArray] = {}
            rows = evaluate_rows(p.policy.expr, pod.pod, nodes, memo)
            verdicts.append((p, rows, memo))
            passed &= rows
        if passed.all():
            return FilterResult.all_pass(n)
        messages: dict[str, int] = {}
        reasons = np.zeros(n, np.int64)
        for p, rows, memo in verdicts:
            failing = np.flatnonzero(~rows)
            if not len(failing):
                continue
            for parts, rows_explained in explain_rows(p.policy.expr, memo, failing):
                bit = messages.setdefault(reason(p, parts), min(len(messages), _MAX_REASON_BITS))
                reasons[rows_explained] |= np.int64(1) << np.int64(bit)
        return FilterResult(passed, reasons, tuple(messages), Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> PolicyFilter:
    """The registry's factory. args {"policies": [SchedulingPolicy objects]} gives them directly;
    otherwise they are listed from the handle's cluster (none if the CRD is not installed)."""
    args = args or {}
    if "policies" in args:
        return PolicyFilter(args["policies"])
    cluster = handle.cluster if handle is not None else None
    plugin = PolicyFilter(cluster=cluster)
    if cluster is not None:
        try:
            plugin.reload()
        except ApiError as err:
            if err.status != 404:  # 404: the SchedulingPolicy CRD is not installed: no policies
                raise
    return plugin
