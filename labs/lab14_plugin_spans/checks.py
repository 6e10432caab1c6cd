"""Lab 14 checks (public).

    python -m labs.lab14_plugin_spans.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from labs.harness import Check, main, schedule_pods
from minisched.objects import make_node, make_pod
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterPlugin, FilterResult, ScorePlugin
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

LAB = "lab14_plugin_spans"
MS = 1_000_000


class Clock:
    """Nanoseconds that move only when a plugin says it worked (plus 1 µs per reading)."""

    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        self.now += 1000
        return self.now

    def work(self, ms: float) -> None:
        self.now += int(ms * MS)


class Sluggish:
    """A Score plugin that is slow for one pod."""

    name = "Sluggish"

    def __init__(self, clock: Clock, slow_pod: str = "slow-one", ms: float = 50.0) -> None:
        self.clock, self.slow_pod, self.ms = clock, slow_pod, ms

    def score(self, state: Any, pod: PodInfo, nodes: NodeTable, rows: Any) -> Any:
        self.clock.work(self.ms if pod.name == self.slow_pod else 1.0)
        return np.zeros(len(rows), np.int64)


class Steady:
    """A Filter plugin that takes 3 ms for every pod, and refuses nodes named "nope"."""

    name = "Steady"
    reads_pods = False

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def filter(self, state: Any, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        self.clock.work(3.0)
        passed = np.array([n != "nope" for n in nodes.names], np.bool_)
        return FilterResult(passed, (~passed).astype(np.uint8), ("node(s) were nope",))


class Broken:
    name = "Broken"

    def score(self, state: Any, pod: PodInfo, nodes: NodeTable, rows: Any) -> Any:
        raise RuntimeError("broken on purpose")


def recording() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("lab14"), exporter


def table(*names: str) -> NodeTable:
    nodes = NodeTable()
    for name in names:
        nodes.add_node(make_node(name))
    return nodes.snapshot()


def check_one_span_per_call(module: Any) -> None:
    tracer, exporter = recording()
    clock = Clock()
    score = module.TracedPlugin(Sluggish(clock), tracer, clock)
    nodes = table("a", "b", "c")
    pod = PodInfo.from_pod(make_pod("slow-one", namespace="team"))
    out = score.score(CycleState(), pod, nodes, np.array([0, 2], np.intp))
    assert list(out) == [0, 0], f"the wrapper must return the inner plugin's scores, got {out!r}"
    spans = exporter.get_finished_spans()
    assert len(spans) == 1, f"one score call: expected one finished span, got {[s.name for s in spans]}"
    span = spans[0]
    assert span.name == "Score/Sluggish", f"span name: expected 'Score/Sluggish', got {span.name!r}"
    want = {"minisched.plugin": "Sluggish", "minisched.point": "Score", "minisched.pod": "team/slow-one",
            "minisched.nodes": 2}
    got = {k: (span.attributes or {}).get(k) for k in want}
    assert got == want, f"attributes: expected {want}, got {got}"
    took = (span.end_time or 0) - (span.start_time or 0)
    assert took == 50 * MS + 1000, (
        f"the plugin worked 50 ms on the injected clock: the span should last 50.001 ms (a reading before the call, "
        f"one after), it lasts {took / MS:g} ms; take start_time and end_time from now_ns()")
    steady = module.TracedPlugin(Steady(clock), tracer, clock)
    result = steady.filter(CycleState(), pod, table("x", "nope"))
    assert list(result.passed) == [True, False], "the wrapper must return the inner plugin's FilterResult"
    span = exporter.get_finished_spans()[-1]
    got = (span.name, (span.attributes or {}).get("minisched.point"), (span.attributes or {}).get("minisched.nodes"))
    assert got == ("Filter/Steady", "Filter", 2), f"a filter call over 2 nodes: got (name, point, nodes) {got}"


def check_wraps_only_what_is_there(module: Any) -> None:
    tracer, exporter = recording()
    clock = Clock()
    score_only = module.TracedPlugin(Sluggish(clock), tracer, clock)
    filter_only = module.TracedPlugin(Steady(clock), tracer, clock)
    got = {"score plugin is a ScorePlugin": isinstance(score_only, ScorePlugin),
           "score plugin is not a FilterPlugin": not isinstance(score_only, FilterPlugin),
           "filter plugin is a FilterPlugin": isinstance(filter_only, FilterPlugin),
           "filter plugin is not a ScorePlugin": not isinstance(filter_only, ScorePlugin),
           "name and reads_pods are the inner plugin's": filter_only.name == "Steady" and filter_only.reads_pods is False}
    wrong = [k for k, ok in got.items() if not ok]
    assert not wrong, f"the wrapper must have exactly the inner plugin's extension points; wrong: {wrong}"
    broken = module.TracedPlugin(Broken(), tracer, clock)
    try:
        broken.score(CycleState(), PodInfo.from_pod(make_pod("p")), table("a"), np.array([0], np.intp))
    except RuntimeError as err:
        assert str(err) == "broken on purpose", f"the inner plugin's exception must pass unchanged, got {err!r}"
    else:
        raise AssertionError("the inner plugin raised RuntimeError; the wrapper swallowed it")
    spans = [s for s in exporter.get_finished_spans() if s.name == "Score/Broken"]
    assert spans and spans[0].status.status_code == StatusCode.ERROR, (
        "a call that raised must still end its span, with status ERROR")


def config() -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "minisched",
                          "plugins": {"filter": {"enabled": [{"name": "Steady"}]},
                                      "score": {"enabled": [{"name": "Sluggish"}]}}}]}


def scheduler_spans(module: Any, pods: list[str]) -> tuple[list[Any], dict[str, str | None]]:
    """Schedule `pods` with Steady, Sluggish and NodeResourcesFit wrapped; the spans and placements."""
    from minisched.scheduler.plugins import in_tree_registry

    tracer, exporter = recording()
    clock = Clock()
    registry = in_tree_registry()
    wrapped = {"Steady": module.traced(lambda args, handle: Steady(clock), tracer, clock),
               "Sluggish": module.traced(lambda args, handle: Sluggish(clock), tracer, clock),
               "NodeResourcesFit": module.traced(registry["NodeResourcesFit"], tracer, clock)}
    placed = schedule_pods([make_node(name, cpu="8") for name in ("n1", "n2", "nope")],
                           [make_pod(name, cpu="100m") for name in pods],
                           config=config(), registry={**dict(registry.items()), **wrapped})
    return list(exporter.get_finished_spans()), {k.removeprefix("default/"): v for k, v in placed.items()}


def check_finds_the_slow_plugin(module: Any) -> None:
    pods = ["p-0", "p-1", "slow-one", "p-2"]
    spans, placed = scheduler_spans(module, pods)
    assert all(placed.get(p) in ("n1", "n2") for p in pods), f"every pod should be placed on n1 or n2, got {placed}"
    names = sorted({s.name for s in spans})
    for expected in ("Filter/NodeResourcesFit", "Filter/Steady", "Score/NodeResourcesFit", "Score/Sluggish"):
        assert expected in names, f"a scheduler with the wrapped plugins should record {expected!r} spans; got {names}"
    finding = module.slowest(spans)
    assert (finding.plugin, finding.worst_pod) == ("Sluggish", "default/slow-one"), (
        f"Sluggish worked 53 ms in all (50 ms on slow-one), Steady 12 ms: expected Finding('Sluggish', 53.004, "
        f"'default/slow-one'), got {finding}")
    assert abs(finding.total_ms - 53.004) < 0.01, f"Sluggish's spans add up to 53.004 ms, got {finding.total_ms}"


CHECKS = [
    Check("one span per plugin call, named, timed and with attributes", check_one_span_per_call,
          "start_span(f'{point}/{name}', start_time=now_ns(), attributes=...); span.end(end_time=now_ns()).",
          points=2),
    Check("the wrapper has only the inner plugin's extension points, and errors pass through", check_wraps_only_what_is_there,
          "set self.filter/self.score in __init__ only when hasattr(inner, ...); end the span in a finally."),
    Check("the slow plugin found from a scheduler's spans", check_finds_the_slow_plugin,
          "sum end_time - start_time per minisched.plugin; keep each plugin's longest span's pod.", points=2),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
