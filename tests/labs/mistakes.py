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


# ---- lab 6 ----
def _histogram_variant(solution: types.ModuleType, **methods: Any) -> types.ModuleType:
    m = _copy(solution)
    cls = type("Variant", (solution.LatencyHistogram,), methods)
    m.new = lambda buckets=solution.DEFAULT_BUCKETS: cls(buckets)
    return m


def lab06_exclusive_bounds(solution: types.ModuleType) -> types.ModuleType:
    """bisect_right: a measurement equal to a bound lands one bucket too high."""
    import bisect

    def observe(self: Any, seconds: float) -> None:
        with self._lock:
            self._counts[bisect.bisect_right(self.buckets, seconds)] += 1
            self._sum += seconds

    return _histogram_variant(solution, observe=observe)


def lab06_no_interpolation(solution: types.ModuleType) -> types.ModuleType:
    """Answers the upper bound of the bucket the quantile falls in."""
    def quantile(self: Any, q: float) -> float:
        counts = self.counts()
        b = int(np.searchsorted(np.cumsum(counts), q * counts.sum(), side="left"))
        return self.buckets[min(b, len(self.buckets) - 1)]

    return _histogram_variant(solution, quantile=quantile)


def lab06_keeps_every_sample(solution: types.ModuleType) -> types.ModuleType:
    """Keeps the measurements in a list and counts them on demand: right answers, growing memory."""
    def observe(self: Any, seconds: float) -> None:
        with self._lock:
            self.__dict__.setdefault("samples", []).append(seconds)

    def counts(self: Any) -> Any:
        with self._lock:
            samples = list(self.__dict__.get("samples", []))
        return np.bincount(np.searchsorted(self.buckets, samples, side="left"),
                           minlength=len(self.buckets) + 1).astype(np.int64)

    return _histogram_variant(solution, observe=observe, counts=counts,
                              count=property(lambda self: len(self.__dict__.get("samples", []))),
                              sum=property(lambda self: float(sum(self.__dict__.get("samples", [])))))


def lab06_new_child_every_time(solution: types.ModuleType) -> types.ModuleType:
    return _histogram_variant(solution, labels=lambda self, **labels: solution.LatencyHistogram(self.buckets))


# ---- lab 7 ----
def _queue_variant(solution: types.ModuleType, **methods: Any) -> types.ModuleType:
    m = _copy(solution)
    cls = type("Variant", (solution.LatestQueue,), methods)
    m.new = lambda maxsize: cls(maxsize)
    return m


def lab07_drops_the_newest(solution: types.ModuleType) -> types.ModuleType:
    """The chapter's DroppingQueue policy: a full queue refuses the new item."""
    def offer(self: Any, item: Any) -> bool:
        with self._cond:
            if len(self._items) >= self.maxsize:
                self.dropped += 1
                return False
            self._items.append(item)
            self.accepted += 1
            self._cond.notify()
            return True

    return _queue_variant(solution, offer=offer)


def lab07_evicts_without_counting(solution: types.ModuleType) -> types.ModuleType:
    def offer(self: Any, item: Any) -> bool:
        with self._cond:
            full = len(self._items) >= self.maxsize
            if full:
                self._items.popleft()
            self._items.append(item)
            self.accepted += 1
            self._cond.notify()
            return not full

    return _queue_variant(solution, offer=offer)


def lab07_get_raises_when_empty(solution: types.ModuleType) -> types.ModuleType:
    """queue.Queue's habit: raise Empty when the time is up, instead of answering None."""
    import queue

    def get(self: Any, timeout: float | None = None) -> Any:
        with self._cond:
            if not self._items:
                self._cond.wait(timeout)
            if not self._items:
                raise queue.Empty
            return self._items.popleft()

    return _queue_variant(solution, get=get)


# ---- lab 8 ----
def lab08_resolves_every_rank(solution: types.ModuleType) -> types.ModuleType:
    """Keeps the plugins and asks isinstance in every rank(): right answers, a Protocol check per call."""
    m = _copy(solution)

    class PerCall(solution.PluginSet):
        def __init__(self, plugins: Any, weights: Any = None) -> None:
            super().__init__(plugins, weights)
            self.plugins, self.weights = list(plugins), dict(weights or {})

        def rank(self, candidates: Any) -> Any:
            admitters = [p for p in self.plugins if isinstance(p, solution.Admitter)]
            admitted = [c for c in candidates if all(p.admit(c) for p in admitters)]
            totals = [0.0] * len(admitted)
            for p in self.plugins:
                if isinstance(p, solution.Scorer):
                    raw = [float(p.score(c)) for c in admitted]
                    if isinstance(p, solution.Normalizer):
                        raw = list(p.normalize(raw))
                    totals = [t + self.weights.get(p.name, 1.0) * r for t, r in zip(totals, raw, strict=True)]
            order = sorted(range(len(admitted)), key=lambda i: -totals[i])
            return [solution.Ranked(admitted[i], totals[i]) for i in order]

    m.PluginSet = PerCall
    m.new = lambda plugins, weights=None: PerCall(plugins, weights)
    return m


def lab08_ignores_normalize(solution: types.ModuleType) -> types.ModuleType:
    m = _copy(solution)

    class Raw(solution.PluginSet):
        def __init__(self, plugins: Any, weights: Any = None) -> None:
            super().__init__(plugins, weights)
            self._scoring = [solution._Scoring(s.name, s.weight, s.score, None) for s in self._scoring]

    m.new = lambda plugins, weights=None: Raw(plugins, weights)
    return m


def lab08_ties_reversed(solution: types.ModuleType) -> types.ModuleType:
    """sorted(zip(totals, indices), reverse=True): equal totals come out last-first."""
    m = _copy(solution)

    class Reversed(solution.PluginSet):
        def rank(self, candidates: Any) -> Any:
            ranked = super().rank(candidates)
            index = {id(r.item): i for i, r in enumerate(ranked)}
            order = sorted(((r.score, index[id(r.item)]) for r in ranked), reverse=True)
            return [ranked[i] for _, i in order]

    m.new = lambda plugins, weights=None: Reversed(plugins, weights)
    return m


def lab08_skips_unusable_plugins(solution: types.ModuleType) -> types.ModuleType:
    """Quietly leaves out a plugin that implements nothing, so a typo in a method name goes unnoticed."""
    m = _copy(solution)

    def new(plugins: Any, weights: Any = None) -> Any:
        usable = [p for p in plugins if isinstance(p, (solution.Admitter, solution.Scorer))]
        return solution.PluginSet(usable, weights)

    m.new = new
    return m


# ---- lab 9 ----
def _finder_variant(solution: types.ModuleType, compare: str = "each", every: bool = True,
                    leave_tracing: bool = False) -> types.ModuleType:
    import gc
    import tracemalloc

    def growing_lines(run_round: Any, rounds: int = 4, warmup: int = 2, min_bytes: int = 1) -> Any:
        if rounds < 2 or warmup < 0:
            raise ValueError(f"rounds ({rounds}) must be at least 2 and warmup ({warmup}) not negative")
        started = not tracemalloc.is_tracing()
        if started:
            tracemalloc.start()
        try:
            for _ in range(warmup):
                run_round()
            first = previous = solution._snapshot()
            grown: dict[str, list[int]] = {}
            for _ in range(rounds):
                run_round()
                now = solution._snapshot()
                if compare == "each":
                    for stat in now.compare_to(previous, "lineno"):
                        if stat.size_diff >= min_bytes:
                            frame = stat.traceback[0]
                            grown.setdefault(f"{frame.filename}:{frame.lineno}", []).append(stat.size_diff)
                previous = now
            if compare == "first-last":
                for stat in previous.compare_to(first, "lineno"):
                    if stat.size_diff >= min_bytes:
                        frame = stat.traceback[0]
                        grown[f"{frame.filename}:{frame.lineno}"] = [stat.size_diff] * rounds
            found = [solution.Growth(loc, sum(d) / rounds) for loc, d in grown.items() if not every or len(d) == rounds]
            return sorted(found, key=lambda g: (-g.bytes_per_round, g.location))
        finally:
            gc.collect()
            if started and not leave_tracing:
                tracemalloc.stop()

    m = _copy(solution)
    m.growing_lines = growing_lines
    return m


def lab09_first_and_last_only(solution: types.ModuleType) -> types.ModuleType:
    return _finder_variant(solution, compare="first-last")


def lab09_grew_in_any_round(solution: types.ModuleType) -> types.ModuleType:
    return _finder_variant(solution, every=False)


def lab09_leaves_tracemalloc_on(solution: types.ModuleType) -> types.ModuleType:
    return _finder_variant(solution, leave_tracing=True)


# ---- lab 10 ----
def _walk_variant(solution: types.ModuleType, waiting_on: Callable[[Any, Any], list[str]]) -> types.ModuleType:
    m = _copy(solution)
    m.waiting_on = waiting_on
    return m


def lab10_direct_only(solution: types.ModuleType) -> types.ModuleType:
    """Only the pods that name one of `names` themselves: one step, not the whole walk."""
    def waiting_on(graph: Any, names: Any) -> list[str]:
        sources = np.array([graph.index_of(n) for n in names], dtype=np.int64)
        seen = np.zeros(graph.n, dtype=bool)
        seen[solution._successors(graph, sources)] = True
        seen[sources] = False
        return [graph.names[i] for i in np.flatnonzero(seen)]

    return _walk_variant(solution, waiting_on)


def lab10_keeps_the_names(solution: types.ModuleType) -> types.ModuleType:
    """Forgets to leave out a name reached from another name (or from itself, round a cycle)."""
    def waiting_on(graph: Any, names: Any) -> list[str]:
        sources = np.array([graph.index_of(n) for n in names], dtype=np.int64)
        seen = np.zeros(graph.n, dtype=bool)
        frontier = np.unique(solution._successors(graph, sources))
        while frontier.size:
            seen[frontier] = True
            nxt = np.unique(solution._successors(graph, frontier))
            frontier = nxt[~seen[nxt]]
        return [graph.names[i] for i in np.flatnonzero(seen)]

    return _walk_variant(solution, waiting_on)


def lab10_alphabetical(solution: types.ModuleType) -> types.ModuleType:
    return _walk_variant(solution, lambda graph, names: sorted(solution.waiting_on(graph, names)))


def lab10_recursive(solution: types.ModuleType) -> types.ModuleType:
    """A recursive depth-first walk: right on small graphs, RecursionError down a long chain."""
    def waiting_on(graph: Any, names: Any) -> list[str]:
        sources = [graph.index_of(n) for n in names]
        seen: set[int] = set()

        def visit(i: int) -> None:
            for j in map(int, graph.successors(i)):
                if j not in seen:
                    seen.add(j)
                    visit(j)

        for s in sources:
            visit(s)
        return [graph.names[i] for i in sorted(seen - set(sources))]

    return _walk_variant(solution, waiting_on)


# ---- lab 16 ----
def _ledger_variant(solution: types.ModuleType, *, fenced: bool = True, reread: bool = True,
                    conflict_is_success: bool = False, full_refuses: bool = False) -> types.ModuleType:
    """The solution's Ledger with one thing gotten wrong in reserve (and its write)."""
    from minisched.errors import Conflict
    from minisched.resources import CONFIG_MAPS

    class Variant(solution.Ledger):
        def reserve(self, node: str, uid: str, requests: Any, allocatable: Any, *, pod: str = "") -> bool:
            key = self.key(uid)
            solution.check_amounts(requests, "requests")
            solution.check_amounts(allocatable, "allocatable")
            ledger = None
            for _ in range(self.max_attempts):
                if ledger is None or reread:
                    ledger = self.read(node)
                entries = self.entries(ledger)
                if key in entries:
                    return True
                used = solution.total(r.requests for r in entries.values())
                after = {r: used.get(r, 0) + amount for r, amount in requests.items() if amount}
                if any(after[r] >= allocatable.get(r, 0) if full_refuses else after[r] > allocatable.get(r, 0)
                       for r in after):
                    self.refusals += 1
                    return False
                data = {**(ledger.get("data") or {}), key: self.entry(uid, pod, requests)}
                if fenced:
                    return_value = self._write(ledger, data)
                else:  # no resourceVersion: an unconditional update, last write wins
                    metadata = {k: v for k, v in ledger["metadata"].items() if k != "resourceVersion"}
                    self.cluster.update(CONFIG_MAPS, {**ledger, "metadata": metadata, "data": data})
                    return_value = True
                if return_value or conflict_is_success:
                    return True
            raise solution.FenceContention(f"reserving {pod or uid} on node {node}: lost {self.max_attempts} times")

        def _write(self, ledger: Any, data: Any) -> bool:
            try:
                self.cluster.update(CONFIG_MAPS, {**ledger, "data": data})
            except Conflict:
                self.conflicts += 1
                return False
            return True

    m = _copy(solution)
    m.Ledger = Variant
    m.new = lambda cluster, holder="replica-a", **options: Variant(cluster, holder=holder, **options)
    return m


def lab16_last_write_wins(solution: types.ModuleType) -> types.ModuleType:
    """Writes the ledger back without the resourceVersion it read: nobody ever gets a 409."""
    return _ledger_variant(solution, fenced=False)


def lab16_retries_the_stale_read(solution: types.ModuleType) -> types.ModuleType:
    """On a 409 writes the same stale object again instead of re-reading: it can never succeed."""
    return _ledger_variant(solution, reread=False)


def lab16_counts_a_failed_reservation(solution: types.ModuleType) -> types.ModuleType:
    """Answers True when its write got a 409: a reservation the server refused is counted as made."""
    return _ledger_variant(solution, conflict_is_success=True)


def lab16_refuses_exactly_full(solution: types.ModuleType) -> types.ModuleType:
    """Compares with >= : a pod that fills the node exactly is refused."""
    return _ledger_variant(solution, full_refuses=True)
# ---- lab 11 ----
def _selector_variant(solution: types.ModuleType, filter_: Callable[..., Any]) -> types.ModuleType:
    m = _copy(solution)
    cls = type("Variant", (solution.NamespaceNodeSelector,), {"filter": filter_})
    m.new = lambda args, handle: cls(solution.new(args, handle).cluster)
    return m


def lab11_lists_every_namespace(solution: types.ModuleType) -> types.ModuleType:
    """Lists every namespace and picks the pod's: works, but asks the API server for all of them."""
    from minisched.resources import NAMESPACES

    def filter_(self: Any, state: Any, pod: Any, nodes: Any) -> Any:
        items = self.cluster.list(NAMESPACES).get("items") or []
        mine = next((ns for ns in items if ns["metadata"]["name"] == pod.namespace), {"metadata": {}})

        class One:
            def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
                return mine

        return solution.NamespaceNodeSelector(One()).filter(state, pod, nodes)

    return _selector_variant(solution, filter_)


def lab11_not_found_escapes(solution: types.ModuleType) -> types.ModuleType:
    from minisched.resources import NAMESPACES

    def filter_(self: Any, state: Any, pod: Any, nodes: Any) -> Any:
        self.cluster.get(NAMESPACES, pod.namespace)  # NotFound escapes
        return solution.NamespaceNodeSelector.filter(self, state, pod, nodes)

    return _selector_variant(solution, filter_)


def lab11_any_pair_matches(solution: types.ModuleType) -> types.ModuleType:
    """A node passes when it has any one of the selector's labels."""
    from minisched.scheduler.framework.interface import FilterResult
    from minisched.scheduler.framework.status import Code

    def filter_(self: Any, state: Any, pod: Any, nodes: Any) -> Any:
        text = self._selector_text(pod.namespace)
        pairs = solution.parse_selector(text) if text else None
        if not pairs:
            return solution.NamespaceNodeSelector.filter(self, state, pod, nodes)
        passed = np.zeros(len(nodes), np.bool_)
        for key, value in pairs.items():
            column, wanted = nodes.label_column(key), nodes.label_value_id(key, value)
            if column is not None and wanted is not None:
                passed |= column == wanted
        return FilterResult(passed, (~passed).astype(np.uint8),
                            (f"node(s) didn't match the node selector of namespace {pod.namespace}",),
                            Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    return _selector_variant(solution, filter_)


def lab11_imports_observability(solution: types.ModuleType) -> types.ModuleType:
    """The chapter's planted mistake: the plugin imports a layer above it (to count something)."""
    import tempfile
    from pathlib import Path

    m = _copy(solution)
    path = Path(tempfile.mkdtemp(prefix="lab11-mistake-")) / "exercise.py"
    path.write_text(Path(solution.__file__).read_text() + "\nimport minisched.observability.metrics  # noqa\n")
    m.__file__ = str(path)
    return m


# ---- lab 12 ----
def lab12_unbounded_weights(solution: types.ModuleType) -> types.ModuleType:
    from pydantic import Field

    from minisched.resources import Resource
    from minisched.validation.crd import crd_for
    from minisched.validation.model import ResourceModel

    class Spec(ResourceModel):
        label: str = Field(min_length=1, max_length=63)
        weights: dict[str, int] = Field(min_length=1)

    m = _copy(solution)
    m.CRD = crd_for(Spec, group=solution.GROUP, version=solution.VERSION, kind=solution.KIND, plural=solution.PLURAL,
                    scope="Cluster")
    m.LABEL_PREFERENCES = Resource.from_crd(m.CRD)
    return m


def lab12_scores_every_node(solution: types.ModuleType) -> types.ModuleType:
    """Ignores `rows` and scores the whole snapshot."""
    m = _copy(solution)

    class Variant(solution.LabelPreferenceScore):
        def score(self, state: Any, pod: Any, nodes: Any, rows: Any) -> Any:
            return super().score(state, pod, nodes, np.arange(len(nodes), dtype=np.intp))

    m.new = lambda args, handle: _followed(Variant(), handle)
    return m


def _followed(plugin: Any, handle: Any) -> Any:
    factory = getattr(handle, "informer_factory", None)
    if factory is not None:
        plugin.follow(factory)
    return plugin


def lab12_reads_once(solution: types.ModuleType) -> types.ModuleType:
    """Lists the objects once when built and never follows them."""
    m = _copy(solution)

    class Variant(solution.LabelPreferenceScore):
        def follow(self, factory: Any) -> None:
            self.set_preferences(factory.cluster.list(solution.LABEL_PREFERENCES).get("items") or [])

    m.new = lambda args, handle: _followed(Variant(), handle)
    return m


def lab12_forgets_deletes(solution: types.ModuleType) -> types.ModuleType:
    from minisched.informer import ResourceEventHandlerFuncs

    m = _copy(solution)

    class Variant(solution.LabelPreferenceScore):
        def follow(self, factory: Any) -> None:
            informer = factory.informer_for(solution.LABEL_PREFERENCES)

            def refresh(*_: Any) -> None:
                self.set_preferences(informer.store.list())

            informer.add_event_handler(ResourceEventHandlerFuncs(refresh, refresh, None))

    m.new = lambda args, handle: _followed(Variant(), handle)
    return m


# ---- lab 13 ----
def _wat_variant(solution: types.ModuleType, old: str, new: str) -> types.ModuleType:
    assert old in solution.WAT, f"the mistake's anchor {old!r} is not in the solution's WAT"
    m = _copy(solution)
    m.WAT = solution.WAT.replace(old, new)
    return m


def lab13_least_allocated(solution: types.ModuleType) -> types.ModuleType:
    """Hands in the chapter's bundled guest, which spreads instead of packing."""
    from minisched.scheduler.plugins import wasm

    m = _copy(solution)
    m.WAT = wasm.guest_path("least_allocated").read_text()
    return m


def lab13_divides_by_zero(solution: types.ModuleType) -> types.ModuleType:
    return _wat_variant(solution, "(i64.le_s (local.get $alloc) (i64.const 0))", "(i32.const 0)")


def lab13_forgets_the_pod(solution: types.ModuleType) -> types.ModuleType:
    return _wat_variant(solution, "(local.get $pod_mem)", "(i64.const 0)")


# ---- lab 14 ----
def lab14_claims_every_point(solution: types.ModuleType) -> types.ModuleType:
    """filter and score as methods of the class: every wrapped plugin seems to have both."""
    m = _copy(solution)

    class Always(solution.TracedPlugin):
        def filter(self, state: Any, pod: Any, nodes: Any) -> Any:
            return self._filter(state, pod, nodes)

        def score(self, state: Any, pod: Any, nodes: Any, rows: Any) -> Any:
            return self._score(state, pod, nodes, rows)

    m.TracedPlugin = Always
    m.traced = lambda factory, tracer, now_ns: lambda args, handle: Always(factory(args, handle), tracer, now_ns)
    return m


def lab14_wall_clock(solution: types.ModuleType) -> types.ModuleType:
    """Times the spans with the wall clock instead of the injected one."""
    import time

    m = _copy(solution)

    class Wall(solution.TracedPlugin):
        def __init__(self, inner: Any, tracer: Any, now_ns: Any) -> None:
            super().__init__(inner, tracer, time.time_ns)

    m.TracedPlugin = Wall
    m.traced = lambda factory, tracer, now_ns: lambda args, handle: Wall(factory(args, handle), tracer, now_ns)
    return m


def lab14_longest_not_total(solution: types.ModuleType) -> types.ModuleType:
    m = _copy(solution)

    def slowest(spans: Any) -> Any:
        calls = [s for s in spans if (s.attributes or {}).get(solution.PLUGIN) is not None]
        worst = max(calls, key=lambda s: s.end_time - s.start_time)
        attributes = worst.attributes or {}
        total = sum(s.end_time - s.start_time for s in calls if (s.attributes or {}).get(solution.PLUGIN)
                    == attributes[solution.PLUGIN])
        return solution.Finding(str(attributes[solution.PLUGIN]), total / 1e6, str(attributes[solution.POD]))

    m.slowest = slowest
    return m


# ---- lab 15 ----
def _table_variant(solution: types.ModuleType, **changes: Any) -> types.ModuleType:
    from minisched.scheduler.lifecycle import QueueEvent, QueueState

    m = _copy(solution)
    m.TRANSITIONS = dict(solution.TRANSITIONS)
    for pair, target in changes.items():
        state, event = pair.split("__")
        m.TRANSITIONS[QueueState[state], QueueEvent[event]] = target
    return m


def lab15_deleted_pod_stays_in_backoff(solution: types.ModuleType) -> types.ModuleType:
    """Chapter 5's planted bug: DELETE ignored in BACKOFF."""
    from minisched.scheduler.lifecycle import IGNORE

    return _table_variant(solution, BACKOFF__DELETE=IGNORE)


def lab15_rejected_pod_backs_off(solution: types.ModuleType) -> types.ModuleType:
    from minisched.scheduler.lifecycle import QueueState

    return _table_variant(solution, IN_FLIGHT__REJECT=QueueState.BACKOFF)


def lab15_requeues_a_deleted_pod(solution: types.ModuleType) -> types.ModuleType:
    """A pod deleted during its cycle comes back when the cycle rejects it."""
    from minisched.scheduler.lifecycle import QueueState

    return _table_variant(solution, ABSENT__REJECT=QueueState.UNSCHEDULABLE)


def lab15_pops_from_backoff(solution: types.ModuleType) -> types.ModuleType:
    """Lets a pod in backoffQ be popped (REFUSE written as a move)."""
    from minisched.scheduler.lifecycle import QueueState

    return _table_variant(solution, BACKOFF__POP=QueueState.IN_FLIGHT)


def lab15_held_pod_stays_unschedulable(solution: types.ModuleType) -> types.ModuleType:
    """kube keeps gated pods with the unschedulable ones: a pod PreEnqueue holds stays put (IGNORE)."""
    from minisched.scheduler.lifecycle import IGNORE

    return _table_variant(solution, UNSCHEDULABLE__GATE_CLOSED=IGNORE)


def lab15_held_pod_backs_off(solution: types.ModuleType) -> types.ModuleType:
    """A failed attempt's pod that PreEnqueue holds goes to backoffQ anyway."""
    from minisched.scheduler.lifecycle import QueueState

    return _table_variant(solution, IN_FLIGHT__GATE_CLOSED=QueueState.BACKOFF)


MISTAKES: dict[str, list[Mistake]] = {
    "lab01_spot_avoidance": [lab01_ignores_annotation, lab01_scores_all_rows, lab01_any_annotation_value],
    "lab02_cordon_reconciler": [lab02_uncordons_everything, lab02_crashes_on_deleted],
    "lab03_policy_function": [lab03_float_compare, lab03_node_only, lab03_raises_on_text],
    "lab04_jitter_backoff": [lab04_no_overflow_guard, lab04_half_jitter, lab04_global_counter],
    "lab05_aging_queue_sort": [lab05_plain_priority, lab05_ages_the_wrong_way, lab05_non_strict],
    "lab06_latency_histogram": [lab06_exclusive_bounds, lab06_no_interpolation, lab06_keeps_every_sample,
                                lab06_new_child_every_time],
    "lab07_latest_queue": [lab07_drops_the_newest, lab07_evicts_without_counting, lab07_get_raises_when_empty],
    "lab08_plugin_set": [lab08_resolves_every_rank, lab08_ignores_normalize, lab08_ties_reversed,
                         lab08_skips_unusable_plugins],
    "lab09_leak_finder": [lab09_first_and_last_only, lab09_grew_in_any_round, lab09_leaves_tracemalloc_on],
    "lab10_waiting_pods": [lab10_direct_only, lab10_keeps_the_names, lab10_alphabetical, lab10_recursive],
    "lab16_capacity_fence": [lab16_last_write_wins, lab16_retries_the_stale_read, lab16_counts_a_failed_reservation,
                             lab16_refuses_exactly_full],
    "lab11_namespace_selector": [lab11_lists_every_namespace, lab11_not_found_escapes, lab11_any_pair_matches,
                                 lab11_imports_observability],
    "lab12_crd_label_preference": [lab12_unbounded_weights, lab12_scores_every_node, lab12_reads_once,
                                   lab12_forgets_deletes],
    "lab13_wasm_scorer": [lab13_least_allocated, lab13_divides_by_zero, lab13_forgets_the_pod],
    "lab14_plugin_spans": [lab14_claims_every_point, lab14_wall_clock, lab14_longest_not_total],
    "lab15_queue_state_table": [lab15_deleted_pod_stays_in_backoff, lab15_rejected_pod_backs_off,
                                lab15_requeues_a_deleted_pod, lab15_pops_from_backoff,
                                lab15_held_pod_stays_unschedulable, lab15_held_pod_backs_off],
}


# ==== labs 09-16: mistakes found by trying the labs as a student would and by mutation (labs/mutants.py) ====
def _edited(solution: types.ModuleType, *edits: tuple[str, str]) -> types.ModuleType:
    """The solution's source with each (old, new) edit made (each old text must be there), loaded
    from a file of its own as a submission is."""
    import tempfile
    from pathlib import Path

    from labs import harness

    source = Path(solution.__file__ or "").read_text()
    for old, new in edits:
        assert old in source, f"the edit's text is not in {solution.__file__}: {old!r}"
        source = source.replace(old, new)
    lab = solution.__name__.split(".")[1] if solution.__name__.startswith("labs.") else "lab"
    path = Path(tempfile.mkdtemp(prefix=f"{lab}-mistake-")) / "exercise.py"
    path.write_text(source)
    return harness.load_lab_module(lab, str(path))


def lab09_smallest_first(solution: types.ModuleType) -> types.ModuleType:
    return _edited(solution, ("key=lambda g: (-g.bytes_per_round, g.location)",
                              "key=lambda g: (g.bytes_per_round, g.location)"))


def lab09_ignores_min_bytes(solution: types.ModuleType) -> types.ModuleType:
    return _edited(solution, ("if stat.size_diff >= min_bytes:", "if stat.size_diff > 0:"))


def lab09_divides_by_every_call(solution: types.ModuleType) -> types.ModuleType:
    return _edited(solution, ("sum(diffs) / rounds", "sum(diffs) / (rounds + warmup)"))


_DELEGATES = '''

from minisched.sharding import fence as _fence


class Ledger(LedgerBase):
    """minisched's own CapacityLedger does the work (reached by getattr, so no name gives it away)."""

    def __init__(self, cluster, **options):
        super().__init__(cluster, **options)
        self._inner = getattr(_fence, "Capacity" + "Ledger")(cluster, holder=self.holder, namespace=self.namespace,
                                                            prefix=self.prefix, max_attempts=self.max_attempts)

    def reserve(self, node, uid, requests, allocatable, *, pod=""):
        check_amounts(requests, "requests")
        check_amounts(allocatable, "allocatable")
        try:
            return self._inner.reserve(node, uid, requests, allocatable, pod=pod)
        finally:
            self.conflicts, self.refusals = self._inner.conflicts, self._inner.refusals

    def release(self, node, uid):
        try:
            return self._inner.release(node, uid)
        finally:
            self.conflicts = self._inner.conflicts


def new(cluster, holder="replica-a", **options):
    return Ledger(cluster, holder=holder, **options)
'''


def lab16_delegates_to_capacity_ledger(solution: types.ModuleType) -> types.ModuleType:
    """Hands reserve and release to minisched.sharding.fence.CapacityLedger, the chapter's answer."""
    return _edited(solution, ("def new(cluster: Cluster, holder: str = \"replica-a\", **options: Any) -> Ledger:\n"
                              "    return Ledger(cluster, holder=holder, **options)", _DELEGATES))


def lab16_retries_for_ever(solution: types.ModuleType) -> types.ModuleType:
    """Retries a 409 until it succeeds: under endless contention reserve never returns (a hang)."""
    return _edited(solution, ("""        for _ in range(self.max_attempts):
            ledger = self.read(node)""", """        while True:
            ledger = self.read(node)"""))


def lab16_release_retries_for_ever(solution: types.ModuleType) -> types.ModuleType:
    return _edited(solution, ("""        for _ in range(self.max_attempts):
            ledger = self.read(node, create=False)""", """        while True:
            ledger = self.read(node, create=False)"""))


def lab15_copies_through_getattr(solution: types.ModuleType) -> types.ModuleType:
    """Copies minisched's own table, reached by getattr so that its name is nowhere in the source."""
    return _edited(solution, ("\nTRANSITIONS: dict[", "\n_WRITTEN: dict["),
                   ("Q, E = QueueState, QueueEvent",
                    "Q, E = QueueState, QueueEvent\nimport minisched.scheduler.lifecycle as _lc\n"
                    "TRANSITIONS = dict(getattr(_lc, 'QUEUE_' + 'TRANSITIONS'))"))


def lab15_copies_the_queues_default(solution: types.ModuleType) -> types.ModuleType:
    """Takes the table a SchedulingQueue uses when given none."""
    return _edited(solution, ("\nTRANSITIONS: dict[", "\n_WRITTEN: dict["),
                   ("Q, E = QueueState, QueueEvent",
                    "Q, E = QueueState, QueueEvent\nfrom minisched.scheduler.queue import SchedulingQueue as _SQ\n"
                    "TRANSITIONS = dict(_SQ()._transitions)"))


def lab11_skips_an_unknown_value(solution: types.ModuleType) -> types.ModuleType:
    """A key=value no node carries restricts nothing, instead of failing every node."""
    return _edited(solution, ("""            if column is None or wanted is None:
                passed[:] = False""", """            if column is None or wanted is None:
                continue"""))


def lab11_unknown_value_only_for_known_keys(solution: types.ModuleType) -> types.ModuleType:
    """Fails every node for a label no node has, but skips a value no node carries of a known label."""
    return _edited(solution, ("""            if column is None or wanted is None:
                passed[:] = False""", """            if column is None:
                passed[:] = False
            elif wanted is None:
                continue"""))


def lab12_lists_every_cycle(solution: types.ModuleType) -> types.ModuleType:
    """Lists the LabelPreferences from the API server in every Score call instead of following them
    with the informer: always up to date, and one API call per scheduling cycle."""
    return _edited(solution, ("""        total = np.zeros(len(rows), np.int64)
""", """        if self.cluster is not None:
            self.set_preferences(self.cluster.list(LABEL_PREFERENCES)["items"])
        total = np.zeros(len(rows), np.int64)
"""), ("""    plugin = LabelPreferenceScore()
    if handle is not None:  # built without a handle (a check on a table), it follows nothing
        plugin.follow(handle.informer_factory)
    return plugin""", """    plugin = LabelPreferenceScore()
    plugin.cluster = handle.cluster if handle is not None else None
    return plugin"""), ("""        self.preferences: list[tuple[str, dict[str, int]]] = []""",
                        """        self.preferences: list[tuple[str, dict[str, int]]] = []
        self.cluster = None"""))


def lab13_full_is_no_room(solution: types.ModuleType) -> types.ModuleType:
    """Scores an exactly full node 0, as if the pod did not fit (`>=` where the rule says `>`)."""
    return _edited(solution, ("(i64.gt_s (local.get $used) (local.get $alloc))",
                              "(i64.ge_s (local.get $used) (local.get $alloc))"))


def lab13_rounds_the_average_up(solution: types.ModuleType) -> types.ModuleType:
    """Adds 1 before halving: (cpu part + memory part + 1) / 2, a point too many on odd sums."""
    return _edited(solution, ("            (i64.const 2)))", "            (i64.const 2)))\n")
                   , ("(i64.div_s\n            (i64.add\n", "(i64.div_s\n            (i64.add (i64.const 1)\n             (i64.add\n"),
                   ("                                   (local.get $pod_mem))))\n            (i64.const 2)))",
                    "                                   (local.get $pod_mem)))))\n            (i64.const 2)))"))


def lab14_names_spans_by_class(solution: types.ModuleType) -> types.ModuleType:
    """Names spans and minisched.plugin by the inner plugin's class, not by the name it was registered under."""
    return _edited(solution, ("attributes = {PLUGIN: self.inner.name,", "attributes = {PLUGIN: type(self.inner).__name__,"),
                   ('f"{point}/{self.inner.name}"', 'f"{point}/{type(self.inner).__name__}"'))


def lab10_reruns_the_checks_search(solution: types.ModuleType) -> types.ModuleType:
    """Answers with the public checks' own breadth-first search, reached through importlib."""
    return _edited(solution, ("def waiting_on(graph: PodGraph, names: Sequence[str]) -> list[str]:\n",
                              "def waiting_on(graph: PodGraph, names: Sequence[str]) -> list[str]:\n"
                              "    import importlib\n"
                              "    return importlib.import_module('labs.lab10_waiting_pods.checks').expected(graph, names)\n"
                              "\n\ndef _unused(graph: PodGraph, names: Sequence[str]) -> list[str]:\n"))


def lab10_scipy_traversal(solution: types.ModuleType) -> types.ModuleType:
    """Lets scipy's breadth_first_order walk the graph, one source at a time."""
    return _edited(solution, ("def waiting_on(graph: PodGraph, names: Sequence[str]) -> list[str]:\n",
                              "def waiting_on(graph: PodGraph, names: Sequence[str]) -> list[str]:\n"
                              "    from scipy.sparse.csgraph import breadth_first_order\n"
                              "    sources = [graph.index_of(n) for n in names]\n"
                              "    reach = np.zeros(graph.n, dtype=bool)\n"
                              "    for s in sources:\n"
                              "        order = breadth_first_order(graph.as_csr(), s, directed=True, "
                              "return_predecessors=False)\n"
                              "        reach[order[1:]] = True\n"
                              "        reach[graph.successors(s)] = True\n"
                              "    reach[sources] = False\n"
                              "    return [graph.names[i] for i in np.flatnonzero(reach)]\n"
                              "\n\ndef _unused(graph: PodGraph, names: Sequence[str]) -> list[str]:\n"))


MISTAKES_09_16: dict[str, list[Mistake]] = {
    "lab09_leak_finder": [lab09_smallest_first, lab09_ignores_min_bytes, lab09_divides_by_every_call],
    "lab10_waiting_pods": [lab10_reruns_the_checks_search, lab10_scipy_traversal],
    "lab11_namespace_selector": [lab11_skips_an_unknown_value, lab11_unknown_value_only_for_known_keys],
    "lab12_crd_label_preference": [lab12_lists_every_cycle],
    "lab13_wasm_scorer": [lab13_full_is_no_room, lab13_rounds_the_average_up],
    "lab14_plugin_spans": [lab14_names_spans_by_class],
    "lab15_queue_state_table": [lab15_copies_through_getattr, lab15_copies_the_queues_default],
    "lab16_capacity_fence": [lab16_delegates_to_capacity_ledger, lab16_retries_for_ever, lab16_release_retries_for_ever],
}
for _lab, _more in MISTAKES_09_16.items():
    MISTAKES[_lab] = [*MISTAKES[_lab], *_more]


# ==== labs 01-08: wrong answers found by trying the labs as a student would (issue 25) ====
# Each passed every public and hidden check before the checks named in its docstring were added.
def lab01_hard_coded_names(solution: types.ModuleType) -> types.ModuleType:
    """Gaming: the pure rule keys on the names the checks use (nodes spot*, the pod batch)."""
    m = _copy(solution)
    m.node_score = lambda pod, node: 0 if node["metadata"]["name"].startswith("spot") and pod.name != "batch" \
        else 100
    return m


def lab01_pure_rule_any_lifecycle(solution: types.ModuleType) -> types.ModuleType:
    """The pure rule treats any node with the lifecycle label as spot (the vectorised face is right)."""
    m = _copy(solution)
    m.node_score = lambda pod, node: 0 if solution.SPOT_LABEL in (node["metadata"].get("labels") or {}) \
        and not solution.spot_ok(pod) else 100
    return m


def lab02_takes_over_admin_cordon(solution: types.ModuleType) -> types.ModuleType:
    """Marks every node asking for a drain as its own, even one an administrator had cordoned by hand;
    when the drain annotation goes, it uncordons the administrator's node."""
    def reconcile(self: Any, request: Any) -> Any:
        from minisched.errors import NotFound

        try:
            node = self.cluster.get("nodes", request.name)
        except NotFound:
            return solution.Result()
        annotations = node["metadata"].get("annotations") or {}
        wants = annotations.get(solution.DRAIN) == "true"
        if wants and annotations.get(solution.CORDONED_BY) != solution.ME:
            self.cluster.patch("nodes", request.name, {
                "metadata": {"annotations": {solution.CORDONED_BY: solution.ME}}, "spec": {"unschedulable": True}})
        elif not wants and annotations.get(solution.CORDONED_BY) == solution.ME:
            self.cluster.patch("nodes", request.name, {
                "metadata": {"annotations": {solution.CORDONED_BY: None}}, "spec": {"unschedulable": None}})
        return solution.Result()

    return _reconciler_variant(solution, reconcile)


def _policy_variant(solution: types.ModuleType, impl: Callable[[Any, Any, Any], bool]) -> types.ModuleType:
    m = _copy(solution)
    m.FUNCTION = solution.FUNCTION.__class__(**{**solution.FUNCTION.__dict__, "impl": impl})
    return m


def lab03_compares_text(solution: types.ModuleType) -> types.ModuleType:
    """Checks the label is a number, then compares the texts: "10" >= "2" is false."""
    from decimal import Decimal, InvalidOperation

    from minisched.policy.functions import labels

    def impl(ctx: Any, obj: Any, args: Any) -> bool:
        text = labels(obj).get(str(args[0]))
        try:
            Decimal(text or "x")
        except InvalidOperation:
            return False
        return str(text) >= str(args[1])

    return _policy_variant(solution, impl)


def lab03_digits_only(solution: types.ModuleType) -> types.ModuleType:
    """Tells numbers apart with isdigit() (after taking the dot out): every negative label is false."""
    from decimal import Decimal

    from minisched.policy.functions import labels

    def impl(ctx: Any, obj: Any, args: Any) -> bool:
        text = labels(obj).get(str(args[0]))
        if not text or not text.replace(".", "", 1).isdigit():
            return False
        return Decimal(text) >= Decimal(str(args[1]))

    return _policy_variant(solution, impl)


def lab04_no_lock(solution: types.ModuleType) -> types.ModuleType:
    """Counts failures without the lock: two workers failing the same item at once lose one."""
    def when(self: Any, item: Any) -> float:
        n = self._failures.get(item, 0)
        self._failures[item] = n + 1
        bound = self.max_delay if n >= 1024 else min(self.max_delay, self.base_delay * 2.0**n)
        return bound * self.rng.random()

    return _limiter_variant(solution, when)


def lab05_ignores_args(solution: types.ModuleType) -> types.ModuleType:
    """new() never reads args: agingSeconds is always the default 60."""
    m = _copy(solution)
    m.new = lambda args, handle: solution.AgingSort()
    return m


def lab06_unsorted_label_key(solution: types.ModuleType) -> types.ModuleType:
    """Keys the children by the labels in the order given: labels(a=, b=) and labels(b=, a=) differ."""
    def labels(self: Any, **labels: str) -> Any:
        key = tuple((k, str(v)) for k, v in labels.items())
        with self._lock:
            return self._children.setdefault(key, solution.LatencyHistogram(self.buckets))

    return _histogram_variant(solution, labels=labels)


def lab06_no_lock(solution: types.ModuleType) -> types.ModuleType:
    """observe() without the lock: two threads adding to the sum at once lose one."""
    import bisect

    def observe(self: Any, seconds: float) -> None:
        self._counts[bisect.bisect_left(self.buckets, seconds)] += 1
        self._sum += seconds

    return _histogram_variant(solution, observe=observe)


def lab06_labels_without_lock(solution: types.ModuleType) -> types.ModuleType:
    """labels() checks then creates without the lock: two threads asking at once get two children."""
    def labels(self: Any, **labels: str) -> Any:
        key = tuple(sorted((k, str(v)) for k, v in labels.items()))
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = solution.LatencyHistogram(self.buckets)
        return child

    return _histogram_variant(solution, labels=labels)


def lab07_offer_blocks_when_full(solution: types.ModuleType) -> types.ModuleType:
    """queue.Queue's put: a full queue makes offer() wait for room, for ever when nobody reads."""
    def offer(self: Any, item: Any) -> bool:
        with self._cond:
            while len(self._items) >= self.maxsize:
                self._cond.wait()
            self._items.append(item)
            self.accepted += 1
            self._cond.notify_all()
            return True

    def get(self: Any, timeout: float | None = None) -> Any:
        item = solution.LatestQueue.get(self, timeout)
        with self._cond:
            self._cond.notify_all()  # room for a waiting offer
        return item

    return _queue_variant(solution, offer=offer, get=get)


def lab07_deadline_restarts(solution: types.ModuleType) -> types.ModuleType:
    """Waits the whole timeout again after every wake-up that found nothing: a get(timeout=1) can
    wait for ever while other consumers keep taking the items first."""
    def get(self: Any, timeout: float | None = None) -> Any:
        with self._cond:
            while not self._items:
                if timeout is not None and timeout <= 0:
                    return None
                if not self._cond.wait(timeout):
                    return None
            return self._items.popleft()

    return _queue_variant(solution, get=get)


def lab07_offer_without_lock(solution: types.ModuleType) -> types.ModuleType:
    """Tests for room and appends outside the lock (only notify under it): two offers into the last
    free place both append, and the queue holds more than maxsize."""
    def offer(self: Any, item: Any) -> bool:
        full = len(self._items) >= self.maxsize
        if full:
            self._items.popleft()
            self.dropped += 1
        self._items.append(item)
        self.accepted += 1
        with self._cond:
            self._cond.notify()
        return not full

    return _queue_variant(solution, offer=offer)


def lab08_any_admitter(solution: types.ModuleType) -> types.ModuleType:
    """Admits a candidate when any admitter admits it (all of them when there are none)."""
    m = _copy(solution)

    class Any_(solution.PluginSet):
        def rank(self, candidates: Any) -> Any:
            admit = self._admit
            if len(admit) < 2:
                return super().rank(candidates)
            self._admit = [lambda c: any(a(c) for a in admit)]
            try:
                return super().rank(candidates)
            finally:
                self._admit = admit

    m.new = lambda plugins, weights=None: Any_(plugins, weights)
    return m


def lab08_names_by_class(solution: types.ModuleType) -> types.ModuleType:
    """Names plugins by their class (type(p).__name__), not their `name`: the checks' plugins were all
    named like their classes, so weights and points() looked right."""
    from minisched.scheduler.framework.strategies import Admitter, Scorer

    m = _copy(solution)

    class ByClass(solution.PluginSet):
        def __init__(self, plugins: Any, weights: Any = None) -> None:
            super().__init__(plugins, weights)
            weights = weights or {}
            names = [type(p).__name__ for p in plugins]
            self._points = {"admit": [n for n, p in zip(names, plugins, strict=True) if isinstance(p, Admitter)],
                            "score": [n for n, p in zip(names, plugins, strict=True) if isinstance(p, Scorer)],
                            "normalize": [n for n, p in zip(names, plugins, strict=True)
                                          if isinstance(p, Scorer) and isinstance(p, solution.Normalizer)]}
            scorers = [(n, p) for n, p in zip(names, plugins, strict=True) if isinstance(p, Scorer)]
            self._scoring = [solution._Scoring(n, float(weights.get(n, 1.0)), s.score, s.normalize)
                             for (n, _), s in zip(scorers, self._scoring, strict=True)]

    m.PluginSet = ByClass
    m.new = lambda plugins, weights=None: ByClass(plugins, weights)
    return m


MISTAKES_01_08: dict[str, list[Mistake]] = {
    "lab01_spot_avoidance": [lab01_hard_coded_names, lab01_pure_rule_any_lifecycle],
    "lab02_cordon_reconciler": [lab02_takes_over_admin_cordon],
    "lab03_policy_function": [lab03_compares_text, lab03_digits_only],
    "lab04_jitter_backoff": [lab04_no_lock],
    "lab05_aging_queue_sort": [lab05_ignores_args],
    "lab06_latency_histogram": [lab06_unsorted_label_key, lab06_no_lock, lab06_labels_without_lock],
    "lab07_latest_queue": [lab07_offer_blocks_when_full, lab07_deadline_restarts, lab07_offer_without_lock],
    "lab08_plugin_set": [lab08_any_admitter, lab08_names_by_class],
}
for _lab, _mistakes in MISTAKES_01_08.items():
    MISTAKES[_lab] = MISTAKES[_lab] + _mistakes
# ==== end of labs 01-08 ====
