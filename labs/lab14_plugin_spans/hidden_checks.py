"""Lab 14 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

from typing import Any

from labs.harness import Check
from labs.lab14_plugin_spans.checks import MS, Clock, Sluggish, recording


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


CHECKS = [
    Check("the slowest plugin is the one with the most time in all", check_total_not_longest,
          "add up every span of a plugin; skip spans without minisched.plugin."),
    Check("traced() builds the inner plugin with the same args and handle", check_factory,
          "def new(args, handle): return TracedPlugin(factory(args, handle), tracer, now_ns)."),
]
