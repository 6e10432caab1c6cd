"""Lab 14 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

from typing import Any

import numpy as np

from labs.harness import Check
from labs.lab14_plugin_spans.checks import MS, Clock, Sluggish, recording, table
from minisched.objects import make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable


def made_spans(plan: list[tuple[str | None, str, float]]) -> list[Any]:
    """Finished spans from (plugin or None, pod, ms), one after another."""
    tracer, exporter = recording()
    t = 10**9
    for plugin, pod, ms in plan:
        attributes = {"minisched.pod": pod} if plugin is None else {
            "minisched.plugin": plugin, "minisched.point": "Score", "minisched.pod": pod, "minisched.nodes": 1}
        span = tracer.start_span("scheduling_attempt" if plugin is None else f"Score/{plugin}", start_time=t,
                                 attributes=attributes)
        t += int(ms * MS)
        span.end(end_time=t)
    return list(exporter.get_finished_spans())


def check_total_not_longest(module: Any) -> None:
    spans = made_spans([("Rare", "ns/a", 30.0)] + [("Often", f"ns/p{i}", 10.0 + i) for i in range(5)]
                       + [(None, "ns/a", 500.0)])
    finding = module.slowest(spans)
    assert (finding.plugin, finding.worst_pod) == ("Often", "ns/p4"), (
        f"Often: five calls of 10..14 ms (60 ms in all, the longest for ns/p4); Rare: one of 30 ms; the 500 ms "
        f"scheduling_attempt span is no plugin's. Expected Finding('Often', 60.0, 'ns/p4'), got {finding}")
    assert abs(finding.total_ms - 60.0) < 1e-6, f"Often's total is 60.0 ms, got {finding.total_ms}"


def check_factory(module: Any) -> None:
    tracer, _ = recording()
    clock = Clock()
    seen: list[tuple[Any, Any]] = []

    def factory(args: Any, handle: Any) -> Sluggish:
        seen.append((args, handle))
        return Sluggish(clock)

    handle = object()
    plugin = module.traced(factory, tracer, clock)({"x": 1}, handle)
    assert seen == [({"x": 1}, handle)], f"traced(factory)(args, handle) must call factory(args, handle); it made {seen}"
    assert plugin.name == "Sluggish" and hasattr(plugin, "score") and not hasattr(plugin, "filter"), (
        "traced(factory)(args, handle) must return the wrapped plugin")


class Configured:
    """One Score plugin class registered as several plugins, each under the name its instance
    carries (as a registry may build one class under two names), taking `ms` every call."""

    def __init__(self, clock: Clock, name: str, ms: float) -> None:
        self.clock, self.name, self.ms = clock, name, ms

    def score(self, state: Any, pod: PodInfo, nodes: NodeTable, rows: Any) -> Any:
        self.clock.work(self.ms)
        return np.zeros(len(rows), np.int64)


def check_named_by_plugin(module: Any) -> None:
    tracer, exporter = recording()
    clock = Clock()
    quick = module.TracedPlugin(Configured(clock, "QuickScore", 2.0), tracer, clock)
    heavy = module.TracedPlugin(Configured(clock, "HeavyScore", 20.0), tracer, clock)
    nodes, rows = table("a", "b"), np.array([0, 1], np.intp)
    for i in range(3):
        pod = PodInfo.from_pod(make_pod(f"p{i}", namespace="ns"))
        quick.score(CycleState(), pod, nodes, rows)
        heavy.score(CycleState(), pod, nodes, rows)
    spans = exporter.get_finished_spans()
    got = sorted({(span.name, (span.attributes or {}).get("minisched.plugin")) for span in spans})
    want = [("Score/HeavyScore", "HeavyScore"), ("Score/QuickScore", "QuickScore")]
    assert got == want, (
        f"one class ({Configured.__name__}) configured as two plugins, QuickScore and HeavyScore: spans and "
        f"minisched.plugin must carry the plugin's name (its .name), not its class's; got {got}")
    finding = module.slowest(spans)
    assert finding.plugin == "HeavyScore", f"HeavyScore took 20 ms a call, QuickScore 2: got {finding}"
    instant = module.slowest(made_spans([("Instant", "ns/zero", 0.0)]))
    assert (instant.plugin, instant.total_ms, instant.worst_pod) == ("Instant", 0.0, "ns/zero"), (
        f"one span of no duration (a coarse clock read twice): expected Finding('Instant', 0.0, 'ns/zero'), "
        f"got {instant}")


CHECKS = [
    Check("the slowest plugin is the one with the most time in all", check_total_not_longest,
          "add up every span of a plugin; skip spans without minisched.plugin."),
    Check("spans carry the plugin's name, not its class's", check_named_by_plugin,
          "name spans and minisched.plugin by self.inner.name: one class can be several plugins; a span of no "
          "duration is still a plugin's longest when it is its only one."),
    Check("traced() builds the inner plugin with the same args and handle", check_factory,
          "def new(args, handle): return TracedPlugin(factory(args, handle), tracer, now_ns)."),
]
