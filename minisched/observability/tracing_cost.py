"""What tracing costs a scheduling cycle, measured so that a shared machine's drift cannot decide it
(Part II §4.4; bench/tracing_bench.py runs the same at a larger size).

One run drains a backlog on a fresh embedded cluster with `schedule_one()` in a tight loop and keeps
every scheduling cycle's duration (pop to hand-off). A measurement runs every setting once per
round, in an order that rotates from round to round, with a garbage collection before each run: a
setting measured always first, or always after the one that left the most garbage, would carry
that. Each run is summed up by its median cycle; a setting by the median of its runs, and the
spread of its runs (lowest and highest run median) says how far two runs of the same setting
disagree, which is the yardstick for a difference between settings.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from minisched.observability.tracing import ATTEMPT_SPAN, SchedulingTracer, tracer_provider

__all__ = ["SETTINGS", "CostRun", "TracingCost", "drain_cycles", "tracing_cost"]

# label -> sample ratio (None: no tracer at all)
SETTINGS: dict[str, float | None] = {"off": None, "ratio 0.1": 0.1, "ratio 1": 1.0}


class _CountingExporter(SpanExporter):
    """Drops the spans (the figure is the SDK's cost, not a collector's) but counts the attempts."""

    def __init__(self) -> None:
        self.attempts = 0

    def export(self, spans: Sequence[object]) -> SpanExportResult:
        self.attempts += sum(getattr(s, "name", "") == ATTEMPT_SPAN for s in spans)
        return SpanExportResult.SUCCESS


@dataclass
class CostRun:
    setting: str
    round: int
    cycles: list[float]  # seconds, one per scheduling cycle
    traced: int  # attempts exported

    @property
    def median(self) -> float:
        return statistics.median(self.cycles)


@dataclass
class TracingCost:
    pods: int
    nodes: int
    rounds: int
    runs: list[CostRun] = field(default_factory=list)

    def medians(self, setting: str) -> list[float]:
        """The run medians of `setting`, in round order."""
        return [r.median for r in sorted(self.runs, key=lambda r: r.round) if r.setting == setting]

    def median(self, setting: str) -> float:
        return statistics.median(self.medians(setting))

    def spread(self, setting: str) -> tuple[float, float]:
        meds = self.medians(setting)
        return min(meds), max(meds)

    def traced(self, setting: str) -> list[int]:
        return [r.traced for r in sorted(self.runs, key=lambda r: r.round) if r.setting == setting]

    def order(self, round_: int) -> list[str]:
        return [r.setting for r in self.runs if r.round == round_]


def drain_cycles(ratio: float | None, *, nodes: int, pods: int, seed: int = 1) -> tuple[list[float], int]:
    """A backlog of `pods` drained on `nodes` nodes of a fresh embedded cluster, with a tracer
    sampling at `ratio` (None: no tracer): every cycle's seconds, and the attempts traced."""
    from minisched.cluster.embedded import EmbeddedCluster
    from minisched.objects import make_node, make_pod
    from minisched.resources import NODES, PODS
    from minisched.scheduler.scheduler import Scheduler

    exporter = _CountingExporter()
    provider = None if ratio is None else tracer_provider(ratio=ratio, exporter=exporter, batch=False)
    cluster = EmbeddedCluster(seed=seed)
    try:
        for i in range(nodes):
            cluster.create(NODES, make_node(f"node-{i:04d}", cpu="32", memory="128Gi"))
        sched = Scheduler(cluster, bind_workers=4, seed=seed,
                          tracer=None if provider is None else SchedulingTracer(provider))
        sched.start(loop=False)
        for i in range(pods):
            cluster.create(PODS, make_pod(f"p{i:05d}", cpu=f"{100 + i % 97}m"))
        deadline = time.monotonic() + 30
        while sum(sched.pending_pods().values()) < pods:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the backlog of {pods} pods did not reach the queue in 30 s")
            time.sleep(0.01)
        while sched.schedule_one(timeout=0.2):
            pass
        sched.stop()
    finally:
        cluster.close()
    if provider is not None:
        provider.shutdown()
    return list(sched.stats.cycle_seconds), exporter.attempts


def tracing_cost(
    settings: dict[str, float | None] | None = None,
    *,
    rounds: int = 5,
    nodes: int = 20,
    pods: int = 150,
    progress: Callable[[str, int], None] | None = None,
    drain: Callable[..., tuple[list[float], int]] = drain_cycles,
) -> TracingCost:
    """Every setting once per round, the order rotating by one each round, a collection before each
    run. `progress(setting, round)` is called after each run (a progress bar's update)."""
    settings = dict(SETTINGS if settings is None else settings)
    if not settings:
        raise ValueError("tracing_cost needs at least one setting")
    if rounds < 1 or nodes < 1 or pods < 1:
        raise ValueError(f"rounds, nodes and pods must be positive, got {rounds}, {nodes}, {pods}")
    names = list(settings)
    result = TracingCost(pods=pods, nodes=nodes, rounds=rounds)
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            cycles, traced = drain(settings[name], nodes=nodes, pods=pods)
            result.runs.append(CostRun(name, r, cycles, traced))
            if progress is not None:
                progress(name, r)
    return result
