"""What tracing costs a scheduling cycle (Part II §4.4; a benchmark, not a test).

The real loop on the embedded cluster: N nodes, a backlog of pods, drained by `schedule_one()` in a
tight loop with the bindings running on the pool, once per setting, in rounds that alternate the
settings in a rotating order (so drift on a shared machine, and garbage left by the run before, hit them alike). Printed: the median and p90 scheduling
cycle (pop to hand-off) per setting, and its difference from no tracer at all:

- off:        Scheduler(tracer=None): the only cost is one `is None` test per cycle;
- ratio 0:    a tracer whose sampler keeps nothing: one non-recording span per cycle, and the
              framework's per-point timing calls (the observer hook);
- ratio 0.1:  kube's plugin-metrics sampling rate, spans exported through a BatchSpanProcessor
              (to an exporter that drops them, so the figure is the SDK's cost, not the network's);
- ratio 1:    every attempt traced;
- ratio 1 + profile: every cycle also under cProfile (the span-linked profile).

Then the tracer's own pieces measured alone: begin() unsampled, and one whole sampled attempt.

    .venv/bin/python bench/tracing_bench.py [--nodes 300] [--pods 1500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class DropExporter(SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def make_tracer(setting: str) -> Any:
    from minisched.observability.tracing import SchedulingTracer, tracer_provider

    if setting == "off":
        return None
    ratio = {"ratio 0": 0.0, "ratio 0.1": 0.1}.get(setting, 1.0)
    provider = tracer_provider(ratio=ratio, exporter=DropExporter())
    return SchedulingTracer(provider, profile=setting.endswith("profile"))


def drain(setting: str, nodes: int, pods: int) -> list[float]:
    from minisched.cluster.embedded import EmbeddedCluster
    from minisched.objects import make_node, make_pod
    from minisched.resources import NODES, PODS
    from minisched.scheduler.scheduler import Scheduler

    cluster = EmbeddedCluster(seed=1)
    for i in range(nodes):
        cluster.create(NODES, make_node(f"node-{i:04d}", cpu="32", memory="128Gi"))
    sched = Scheduler(cluster, bind_workers=4, percentage_of_nodes_to_score=100, seed=1, tracer=make_tracer(setting))
    sched.start(loop=False)
    for i in range(pods):
        cluster.create(PODS, make_pod(f"p{i:05d}", cpu=f"{100 + i % 97}m"))
    deadline = time.monotonic() + 5
    while sum(sched.pending_pods().values()) < pods and time.monotonic() < deadline:
        time.sleep(0.01)
    while sched.schedule_one(timeout=0.2):
        pass
    sched.stop()
    cluster.close()
    return list(sched.stats.cycle_seconds)


def tracer_alone() -> tuple[float, float]:
    from minisched.observability.tracing import SchedulingTracer, tracer_provider
    from minisched.scheduler.framework.status import Status

    unsampled = SchedulingTracer(tracer_provider(ratio=0.0, exporter=DropExporter()))
    sampled = SchedulingTracer(tracer_provider(ratio=1.0, exporter=DropExporter()))
    n = 20_000
    t0 = time.perf_counter()
    for i in range(n):
        unsampled.begin("default/p", "minisched", i)
    begin = (time.perf_counter() - t0) / n
    n = 3_000
    t0 = time.perf_counter()
    for i in range(n):
        a = sampled.begin("default/p", "minisched", i)
        assert a is not None
        for point in ("PreFilter", "Filter", "Score", "SchedulePod", "Reserve", "Permit"):
            a.point(point, "Success", 1e-5)
        a.decided("scheduled", Status.success(), "node-1", None)
        a.cycle_done(binding=True)
        for point in ("PreBind", "Bind", "PostBind"):
            a.point(point, "Success", 1e-5)
        a.binding_done("scheduled", Status.success())
    whole = (time.perf_counter() - t0) / n
    sampled.provider.shutdown()  # type: ignore[attr-defined]
    return begin, whole


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--pods", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    settings = ["off", "ratio 0", "ratio 0.1", "ratio 1", "ratio 1 + profile"]
    cycles: dict[str, list[float]] = {s: [] for s in settings}
    for r in range(args.rounds):
        # a different order each round, and a collection before each run: a run must not pay for
        # the garbage of the one before it
        for s in settings[r % len(settings):] + settings[: r % len(settings)]:
            gc.collect()
            cycles[s] += drain(s, args.nodes, args.pods)
    base = statistics.median(cycles["off"])
    print(f"{args.nodes} nodes, {args.pods} pods x {args.rounds} rounds; scheduling cycle (pop to hand-off):")
    for s in settings:
        data = sorted(cycles[s])
        med = statistics.median(data)
        p90 = data[int(0.9 * (len(data) - 1))]
        print(f"  {s:18} median {med * 1e6:7.1f} µs  p90 {p90 * 1e6:7.1f} µs  vs off {(med - base) * 1e6:+7.1f} µs")
    begin, whole = tracer_alone()
    print(f"tracer alone: begin() unsampled {begin * 1e6:.2f} µs; one sampled attempt "
          f"(11 spans made and batched) {whole * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
