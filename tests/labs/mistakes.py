"""Plausible student mistakes, two or more per lab: each is the instructor's solution with one thing
gotten wrong, and the lab's checks (public and hidden together) must catch every one."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np

Mistake = Callable[[types.ModuleType], types.ModuleType]


def _copy(module: types.ModuleType) -> types.ModuleType:
    clone = types.ModuleType(f"mistake_of_{module.__name__}")
    clone.__dict__.update({k: v for k, v in module.__dict__.items() if k != "__name__"})
    return clone


# ---- lab 1 ----
def lab01_ignores_annotation(solution: types.ModuleType) -> types.ModuleType:
    m = _copy(solution)
    m.spot_ok = lambda pod: False
    m.node_score = lambda pod, node: 0 if (node["metadata"].get("labels") or {}).get(solution.SPOT_LABEL) == "spot" \
        else 100

    class Ignores(solution.SpotAvoidance):
        def score(self, state: Any, pod: Any, nodes: Any, rows: Any) -> Any:
            col, spot = nodes.label_column(solution.SPOT_LABEL), nodes.label_value_id(solution.SPOT_LABEL, "spot")
            scores = np.full(len(rows), 100, np.int64)
            if col is not None and spot is not None:
                scores[col[rows] == spot] = 0
            return scores

    m.new = lambda args, handle: Ignores()
    return m


def lab01_scores_all_rows(solution: types.ModuleType) -> types.ModuleType:
    """Forgets that only `rows` are scored and scores every node of the table."""
    m = _copy(solution)

    class AllRows(solution.SpotAvoidance):
        def score(self, state: Any, pod: Any, nodes: Any, rows: Any) -> Any:
            return super().score(state, pod, nodes, np.arange(len(nodes), dtype=np.intp))

    m.new = lambda args, handle: AllRows()
    return m


def lab01_any_annotation_value(solution: types.ModuleType) -> types.ModuleType:
    m = _copy(solution)
    m.spot_ok = lambda pod: solution.SPOT_OK_ANNOTATION in ((pod.pod.get("metadata") or {}).get("annotations") or {})
    m.node_score = lambda pod, node: 0 if (node["metadata"].get("labels") or {}).get(solution.SPOT_LABEL) == "spot" \
        and not m.spot_ok(pod) else 100
    return m


# ---- lab 2 ----
def _reconciler_variant(solution: types.ModuleType, reconcile: Callable[[Any, Any], Any]) -> types.ModuleType:
    m = _copy(solution)
    cls = type("Variant", (solution.CordonReconciler,), {"reconcile": reconcile})
    m.new = lambda cluster: cls(cluster)
    return m


def lab02_uncordons_everything(solution: types.ModuleType) -> types.ModuleType:
    from minisched.errors import NotFound

    def reconcile(self: Any, request: Any) -> Any:
        try:
            node = self.cluster.get("nodes", request.name)
        except NotFound:
            return solution.Result()
        wants = (node["metadata"].get("annotations") or {}).get(solution.DRAIN) == "true"
        self.cluster.patch("nodes", request.name, {"spec": {"unschedulable": True if wants else None},
                                                   "metadata": {"annotations": {solution.CORDONED_BY:
                                                                                solution.ME if wants else None}}})
        return solution.Result()

    return _reconciler_variant(solution, reconcile)


def lab02_crashes_on_deleted(solution: types.ModuleType) -> types.ModuleType:
    def reconcile(self: Any, request: Any) -> Any:
        node = self.cluster.get("nodes", request.name)  # NotFound escapes
        annotations = node["metadata"].get("annotations") or {}
        if annotations.get(solution.DRAIN) == "true" and not node["spec"].get("unschedulable"):
            self.cluster.patch("nodes", request.name, {"metadata": {"annotations": {solution.CORDONED_BY: solution.ME}},
                                                       "spec": {"unschedulable": True}})
        elif annotations.get(solution.DRAIN) != "true" and annotations.get(solution.CORDONED_BY) == solution.ME:
            self.cluster.patch("nodes", request.name, {"metadata": {"annotations": {solution.CORDONED_BY: None}},
                                                       "spec": {"unschedulable": None}})
        return solution.Result()

    return _reconciler_variant(solution, reconcile)


# ---- lab 3 ----
def lab03_float_compare(solution: types.ModuleType) -> types.ModuleType:
    from minisched.policy.functions import labels

    def impl(ctx: Any, obj: Any, args: Any) -> bool:
        try:
            return float(labels(obj).get(str(args[0]), "")) >= float(str(args[1]))
        except ValueError:
            return False

    m = _copy(solution)
    m.FUNCTION = solution.FUNCTION.__class__(**{**solution.FUNCTION.__dict__, "impl": impl})
    return m


def lab03_node_only(solution: types.ModuleType) -> types.ModuleType:
    m = _copy(solution)
    m.FUNCTION = solution.FUNCTION.__class__(**{**solution.FUNCTION.__dict__, "subject": None})
    return m


def lab03_raises_on_text(solution: types.ModuleType) -> types.ModuleType:
    from decimal import Decimal

    from minisched.policy.functions import labels

    def impl(ctx: Any, obj: Any, args: Any) -> bool:
        text = labels(obj).get(str(args[0]))
        return text is not None and Decimal(text) >= Decimal(str(args[1]))

    m = _copy(solution)
    m.FUNCTION = solution.FUNCTION.__class__(**{**solution.FUNCTION.__dict__, "impl": impl})
    return m


# ---- lab 4 ----
def _limiter_variant(solution: types.ModuleType, when: Callable[[Any, Any], float]) -> types.ModuleType:
    m = _copy(solution)
    cls = type("Variant", (solution.FullJitterRateLimiter,), {"when": when})
    m.new = lambda base_delay=0.005, max_delay=1000.0, rng=None: cls(base_delay, max_delay, rng or __import__(
        "random").Random())
    return m


def lab04_no_overflow_guard(solution: types.ModuleType) -> types.ModuleType:
    def when(self: Any, item: Any) -> float:
        with self._lock:
            n = self._failures.get(item, 0)
            self._failures[item] = n + 1
            return min(self.max_delay, self.base_delay * 2.0**n) * self.rng.random()

    return _limiter_variant(solution, when)


def lab04_half_jitter(solution: types.ModuleType) -> types.ModuleType:
    def when(self: Any, item: Any) -> float:
        with self._lock:
            n = self._failures.get(item, 0)
            self._failures[item] = n + 1
            bound = self.max_delay if n >= 1024 else min(self.max_delay, self.base_delay * 2.0**n)
            return bound / 2 + bound / 2 * self.rng.random()

    return _limiter_variant(solution, when)


def lab04_global_counter(solution: types.ModuleType) -> types.ModuleType:
    m = _copy(solution)

    class Global(solution.FullJitterRateLimiter):
        def when(self, item: Any) -> float:
            return super().when("*")

        def num_requeues(self, item: Any) -> int:
            return super().num_requeues("*")

        def forget(self, item: Any) -> None:
            super().forget("*")

    m.new = lambda base_delay=0.005, max_delay=1000.0, rng=None: Global(base_delay, max_delay,
                                                                         rng or __import__("random").Random())
    return m


# ---- lab 5 ----
def _sort_variant(solution: types.ModuleType, less: Callable[[Any, Any, Any], bool]) -> types.ModuleType:
    m = _copy(solution)
    cls = type("Variant", (solution.AgingSort,), {"less": less})
    m.new = lambda args, handle: cls(float((args or {}).get("agingSeconds", 60.0)))
    return m


def lab05_plain_priority(solution: types.ModuleType) -> types.ModuleType:
    return _sort_variant(solution, lambda self, a, b: a.priority > b.priority or (
        a.priority == b.priority and a.timestamp < b.timestamp))


def lab05_ages_the_wrong_way(solution: types.ModuleType) -> types.ModuleType:
    def less(self: Any, a: Any, b: Any) -> bool:
        ka, kb = a.priority + a.timestamp / self.aging_seconds, b.priority + b.timestamp / self.aging_seconds
        return ka > kb or (ka == kb and a.timestamp < b.timestamp)

    return _sort_variant(solution, less)


def lab05_non_strict(solution: types.ModuleType) -> types.ModuleType:
    def less(self: Any, a: Any, b: Any) -> bool:
        return a.priority - a.timestamp / self.aging_seconds >= b.priority - b.timestamp / self.aging_seconds

    return _sort_variant(solution, less)


MISTAKES: dict[str, list[Mistake]] = {
    "lab01_spot_avoidance": [lab01_ignores_annotation, lab01_scores_all_rows, lab01_any_annotation_value],
    "lab02_cordon_reconciler": [lab02_uncordons_everything, lab02_crashes_on_deleted],
    "lab03_policy_function": [lab03_float_compare, lab03_node_only, lab03_raises_on_text],
    "lab04_jitter_backoff": [lab04_no_overflow_guard, lab04_half_jitter, lab04_global_counter],
    "lab05_aging_queue_sort": [lab05_plain_priority, lab05_ages_the_wrong_way, lab05_non_strict],
}
