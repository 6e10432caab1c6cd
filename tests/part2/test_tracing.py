"""§4.4: a span per scheduling attempt, read back with the SDK's in-memory exporter (a provider of
the test's own: the global one can be set once per process)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.observability.tracing import (
    ATTEMPT_SPAN,
    PROFILE_ATTRIBUTE,
    SchedulingTracer,
    attempt_spans,
    trace_of,
    tracer_provider,
)
from minisched.resources import NODES, PODS
from minisched.scheduler.plugins import in_tree_registry
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import bound_pods, wait_for_nodes, wait_until


class _ExtraScore:
    """A score plugin for the tests: planted slow work, or a crash."""

    def __init__(self, name: str, mode: str) -> None:
        self.name = name
        self.mode = mode
        self.reads_pods = False

    def score(self, state: Any, pod: Any, nodes: Any, rows: Any) -> Any:
        if self.mode == "crash":
            raise RuntimeError("planted failure")
        if self.mode == "slow" and pod.name.startswith("slow"):
            planted_slow_work()
        return np.zeros(len(rows), np.int64)


def planted_slow_work() -> int:
    total = 0
    for i in range(400_000):
        total += i * i % 7
    return total


def _config(*extra: str) -> Mapping[str, Any]:
    enabled = [{"name": n, "weight": 1} for n in extra]
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "minisched", "plugins": {"score": {"enabled": enabled}}}]}


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster()
    yield c
    c.close()


def _run(cluster: EmbeddedCluster, tracer: SchedulingTracer | None, pods: list[dict[str, Any]], *,
         extra: tuple[str, str] | None = None, nodes: int = 2) -> Scheduler:
    registry = in_tree_registry()
    config = None
    if extra is not None:
        name, mode = extra
        registry.register(name, lambda _args, _handle: _ExtraScore(name, mode))
        config = _config(name)
    sched = Scheduler(cluster, config=config, registry=registry, tracer=tracer, bind_workers=2)
    for i in range(nodes):
        cluster.create(NODES, make_node(f"n{i}", cpu="2"))
    sched.start()
    wait_for_nodes(sched, nodes)
    for pod in pods:
        cluster.create(PODS, pod)
    return sched


def test_every_sampled_attempt_has_its_points_binding_and_attributes(cluster: EmbeddedCluster) -> None:
    exporter = InMemorySpanExporter()
    tracer = SchedulingTracer(tracer_provider(ratio=1.0, exporter=exporter, batch=False))
    sched = _run(cluster, tracer, [make_pod(f"p{i}") for i in range(3)] + [make_pod("huge", cpu="3")])
    try:
        wait_until(lambda: len(bound_pods(cluster)) == 3, what="3 pods bound")
        wait_until(lambda: sched.pending_pods()["unschedulable"] == 1, what="huge parked")
        sched.wait_for_bindings()
    finally:
        sched.stop()
    spans = exporter.get_finished_spans()
    roots = {s.attributes["minisched.pod"]: s for s in attempt_spans(spans)}
    assert set(roots) == {"default/p0", "default/p1", "default/p2", "default/huge"}
    for i in range(3):
        root = roots[f"default/p{i}"]
        assert root.parent is None and root.attributes["minisched.result"] == "scheduled"
        assert root.attributes["minisched.node"] == bound_pods(cluster)[f"p{i}"]
        assert root.attributes["minisched.nodes.feasible"] == 2
        spans_of = trace_of(spans, root)
        by_name = {s.name: s for s in spans_of}
        assert {"SchedulePod", "PreFilter", "Filter", "Score", "Reserve", "Permit", "Binding", "Bind"} <= set(by_name)
        # points of the algorithm inside SchedulePod, binding points inside Binding, all inside the attempt
        for child, parent in [("Filter", "SchedulePod"), ("Score", "SchedulePod"), ("Bind", "Binding"),
                              ("SchedulePod", ATTEMPT_SPAN), ("Binding", ATTEMPT_SPAN), ("Reserve", ATTEMPT_SPAN)]:
            c, p = by_name[child], by_name[parent]
            assert c.parent is not None and c.parent.span_id == p.context.span_id, (child, parent)
            assert p.start_time <= c.start_time <= c.end_time <= p.end_time, (child, parent)
        assert by_name["Bind"].attributes["minisched.status"] == "Success"
        assert by_name["Score"].attributes["minisched.score.weight.TaintToleration"] == 3
    huge = roots["default/huge"]
    assert huge.attributes["minisched.result"] == "unschedulable"
    assert huge.attributes["minisched.nodes.feasible"] == 0
    filter_span = next(s for s in trace_of(spans, huge) if s.name == "Filter")
    assert filter_span.attributes["minisched.filter.rejected.NodeResourcesFit"] == 2
    assert "Insufficient cpu" in huge.attributes["minisched.status.message"]
    assert not any(s.name == "Binding" for s in trace_of(spans, huge))


def test_a_plugin_error_marks_the_attempt_and_names_the_plugin(cluster: EmbeddedCluster) -> None:
    exporter = InMemorySpanExporter()
    tracer = SchedulingTracer(tracer_provider(ratio=1.0, exporter=exporter, batch=False))
    sched = _run(cluster, tracer, [make_pod("p0")], extra=("Crashy", "crash"))
    try:
        wait_until(lambda: attempt_spans(exporter.get_finished_spans()), what="an attempt traced")
    finally:
        sched.stop()
    root = attempt_spans(exporter.get_finished_spans())[0]
    assert root.attributes["minisched.result"] == "error"
    assert root.attributes["minisched.status.plugin"] == "Crashy"
    assert root.status.status_code == StatusCode.ERROR and "planted failure" in (root.status.description or "")
    score = next(s for s in trace_of(exporter.get_finished_spans(), root) if s.name == "Score")
    assert score.status.status_code == StatusCode.ERROR


def test_the_ratio_sampler_keeps_some_attempts_and_none_at_zero(cluster: EmbeddedCluster) -> None:
    exporter = InMemorySpanExporter()
    half = SchedulingTracer(tracer_provider(ratio=0.5, exporter=exporter, batch=False))
    none = SchedulingTracer(tracer_provider(ratio=0.0, exporter=exporter, batch=False))
    assert all(none.begin(f"p{i}", "minisched", 0) is None for i in range(100))
    kept = [half.begin(f"p{i}", "minisched", 0) for i in range(200)]
    assert 40 < sum(t is not None for t in kept) < 160
    for t in kept:
        if t is not None:
            t.cycle_done(binding=False)
    assert len(attempt_spans(exporter.get_finished_spans())) == sum(t is not None for t in kept)


def test_without_a_tracer_the_framework_is_not_timed(cluster: EmbeddedCluster) -> None:
    sched = Scheduler(cluster)
    assert all(f.observer is None for f in sched.frameworks.values())
    traced = Scheduler(cluster, tracer=SchedulingTracer(tracer_provider(ratio=0.0)))
    assert all(f.observer is not None for f in traced.frameworks.values())


def test_a_planted_slow_plugin_is_found_from_the_slowest_span_to_its_profile(
        cluster: EmbeddedCluster, tmp_path: Any) -> None:
    exporter = InMemorySpanExporter()
    tracer = SchedulingTracer(tracer_provider(ratio=1.0, exporter=exporter, batch=False), profile_dir=tmp_path,
                              keep_profiles=5)
    pods = [make_pod(f"fast{i}") for i in range(4)] + [make_pod("slow0")] + [make_pod(f"fast{i}") for i in range(4, 6)]
    sched = _run(cluster, tracer, pods, extra=("Sluggish", "slow"))
    try:
        wait_until(lambda: len(bound_pods(cluster)) == 7, what="7 pods bound")
        sched.wait_for_bindings()
    finally:
        sched.stop()
    spans = exporter.get_finished_spans()
    score_spans = [s for s in spans if s.name == "Score"]
    slowest = max(score_spans, key=lambda s: s.end_time - s.start_time)
    root = next(s for s in attempt_spans(spans) if s.context.trace_id == slowest.context.trace_id)
    assert root.attributes["minisched.pod"] == "default/slow0"
    entry = tracer.profile_for(slowest)
    assert entry is not None and entry.span_id == root.attributes[PROFILE_ATTRIBUTE] == f"{root.context.span_id:016x}"
    top_function = entry.top(1)[0][0]
    assert "planted_slow_work" in top_function
    assert "planted_slow_work" in entry.text(5)
    # the same profile on disk under the span id (as `minisched run --trace-profiles DIR` writes it)
    assert sorted(p.stem for p in tmp_path.glob("*.prof")) == sorted(tracer.profiles)
    assert len(tracer.profiles) == 5
    import pstats

    on_disk = pstats.Stats(str(tmp_path / f"{entry.span_id}.prof"))
    assert any(func == "planted_slow_work" for (_f, _l, func) in on_disk.stats)  # type: ignore[attr-defined]
