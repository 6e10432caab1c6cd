"""OpenTelemetry tracing of scheduling attempts (Part II §4.4), optionally linked with profiles.

    provider = tracer_provider(ratio=0.1, exporter=OTLPSpanExporter(...))   # or InMemorySpanExporter()
    tracer = SchedulingTracer(provider, profile=True)
    Scheduler(cluster, tracer=tracer)

One trace per sampled attempt:

    scheduling_attempt              pod, profile, attempts, result, node, nodes evaluated/feasible,
    ├── SchedulePod                 the error's plugin and message, filter rejections per plugin
    │   ├── PreFilter
    │   ├── Filter                  minisched.filter.rejected.<Plugin>: nodes it was first to reject
    │   └── Score                   minisched.score.weight.<Plugin>
    ├── PostFilter / Reserve / Permit
    └── Binding                     (on a binding thread; the attempt ends when binding ends)
        ├── PreBind
        ├── Bind
        └── PostBind

The scheduler reports each extension point as it ends, with its duration (the framework's observer
hook, which also feeds the Prometheus histograms); the spans are made when the cycle is over, with
those start and end times, so a traced cycle pays for its spans once, after the work, and an
unsampled one pays only for the sampler's decision (a non-recording span).

Sampling is the SDK's TraceIdRatioBased sampler at the root (kube-scheduler samples its per-plugin
metrics at 10%, pluginMetricsSamplePercent; upstream kube-scheduler has no spans yet, KEP-5927).

With `profile=True` a sampled scheduling cycle also runs under cProfile; its statistics are kept
under the attempt span's id, and the span carries that id (minisched.profile.id), so a slow span
leads straight to the functions that made it slow (`profile_for(span)`).

The global TracerProvider can be set only once per process, so everything here takes a provider
object; only `minisched run` builds one for the process.
"""

from __future__ import annotations

import collections
import copy
import cProfile
import io
import os
import pstats
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.trace import Span, SpanKind, StatusCode

from minisched.scheduler.framework.decision import Decision
from minisched.scheduler.framework.status import Status

INSTRUMENTATION_NAME = "minisched.scheduler"
ATTEMPT_SPAN = "scheduling_attempt"
BINDING_SPAN = "Binding"
ALGORITHM_POINT = "SchedulePod"
ALGORITHM_POINTS = frozenset({"PreFilter", "Filter", "PreScore", "Score"})  # inside SchedulePod
BINDING_POINTS = frozenset({"PreBind", "Bind", "PostBind"})
PROFILE_ATTRIBUTE = "minisched.profile.id"
DEFAULT_SAMPLE_RATIO = 0.1  # kube-scheduler's pluginMetricsSamplePercent


def tracer_provider(
    *,
    ratio: float | None = DEFAULT_SAMPLE_RATIO,
    exporter: SpanExporter | None = None,
    batch: bool = True,
    service_name: str = "minisched",
    resource_attributes: Mapping[str, Any] | None = None,
) -> TracerProvider:
    """A TracerProvider of its own (never the global one): ParentBased(TraceIdRatioBased(ratio)),
    exporting to `exporter` through a batch (or, for tests, a simple synchronous) processor.

    ratio None: the sampler the standard variables OTEL_TRACES_SAMPLER(_ARG) name (the SDK's default,
    always on, when they are unset). OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are honoured."""
    if ratio is not None and not 0.0 <= ratio <= 1.0:
        raise ValueError(f"sample ratio {ratio} must be in [0, 1]")
    sampler: Sampler | None = ParentBased(TraceIdRatioBased(ratio)) if ratio is not None else None
    attributes = {"service.name": os.environ.get("OTEL_SERVICE_NAME") or service_name, **(resource_attributes or {})}
    provider = TracerProvider(sampler=sampler, resource=Resource.create(attributes))
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    return provider


def otlp_traces_endpoint(base: str) -> str:
    """An OTLP/HTTP base URL (as OTEL_EXPORTER_OTLP_ENDPOINT) -> its traces URL."""
    base = base.rstrip("/")
    return base if base.endswith("/v1/traces") else f"{base}/v1/traces"


def otlp_provider(endpoint: str | None = None, *, ratio: float | None = None) -> TracerProvider | None:
    """The provider `minisched run` uses: OTLP/HTTP (protobuf) to `endpoint` (a base URL, as
    OTEL_EXPORTER_OTLP_ENDPOINT), else to what OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
    OTEL_EXPORTER_OTLP_ENDPOINT say. None when no endpoint is set or OTEL_SDK_DISABLED=true.

    The sampler: `ratio` if given; else OTEL_TRACES_SAMPLER(_ARG) if set; else 10%."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    env_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if endpoint is None and not env_endpoint:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    # Without an explicit endpoint the exporter reads the variables itself (headers, timeout, ...).
    exporter = OTLPSpanExporter(endpoint=otlp_traces_endpoint(endpoint)) if endpoint else OTLPSpanExporter()
    if ratio is None and not os.environ.get("OTEL_TRACES_SAMPLER"):
        ratio = DEFAULT_SAMPLE_RATIO
    return tracer_provider(ratio=ratio, exporter=exporter)


_PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
_KERNEL_CELL = re.compile(r"ipykernel_\d+[/\\]\d+\.py$")


def source_name(filename: str) -> str:
    """A profiled function's file as a reader wants it: minisched's own files relative to the
    repository (minisched/scheduler/queue.py), a notebook cell's as "<notebook cell>" (IPython
    compiles each cell to /tmp/ipykernel_<pid>/<hash>.py, a name that changes with every kernel),
    anything else by its base name (site-packages, the standard library)."""
    if _KERNEL_CELL.search(filename):
        return "<notebook cell>"
    if not filename or filename.startswith(("<", "~")):
        return filename  # built-ins: "~", "<frozen ...>", "<string>"
    path = Path(filename)
    try:
        return path.resolve().relative_to(_PACKAGE_ROOT).as_posix()
    except ValueError:
        return path.name


@dataclass(frozen=True)
class ProfileEntry:
    span_id: str  # the attempt span's, as 16 hex digits
    trace_id: int
    pod: str
    stats: pstats.Stats

    def top(self, n: int = 10, sort: str = "tottime") -> list[tuple[str, float, float, int]]:
        """The n costliest functions: (module:line(function), own seconds, cumulative seconds, calls)."""
        rows = []
        for (filename, line, func), (_cc, calls, tottime, cumtime, _callers) in self.stats.stats.items():  # type: ignore[attr-defined]
            where = f"{source_name(filename)}:{line}({func})" if line else func
            rows.append((where, tottime, cumtime, calls))
        key = 1 if sort == "tottime" else 2
        rows.sort(key=lambda r: r[key], reverse=True)
        return rows[:n]

    def text(self, n: int = 15, *, full_paths: bool = False) -> str:
        """pstats' own report of the n costliest functions (by own time). Files are named as
        `source_name` names them (the machine's paths and the kernel's temporary file names stay
        out of a stored report) unless `full_paths`."""
        out = io.StringIO()
        report = copy.copy(self.stats)  # the shared Stats keeps printing to its own stream
        if not full_paths:
            report.stats = {(source_name(f), line, func): (cc, nc, tt, ct, {  # type: ignore[attr-defined]
                (source_name(cf), cl, cfunc): v for (cf, cl, cfunc), v in callers.items()})
                for (f, line, func), (cc, nc, tt, ct, callers) in self.stats.stats.items()}  # type: ignore[attr-defined]
            report.fcn_list = 0  # type: ignore[attr-defined]  # the sort order was of the old keys
        report.stream = out  # type: ignore[attr-defined]
        report.sort_stats("tottime").print_stats(n)
        return out.getvalue()


class SchedulingTracer:
    """The scheduler's CycleTracer (minisched.scheduler.tracing) on OpenTelemetry."""

    def __init__(self, provider: trace.TracerProvider | None = None, *, profile: bool = False,
                 keep_profiles: int = 64, profile_dir: str | Path | None = None) -> None:
        """`profile_dir`: also write each kept profile there as <span id>.prof (pstats' format, for
        `python -m pstats` or snakeviz), the oldest files removed beyond `keep_profiles`."""
        self.provider = provider if provider is not None else trace.get_tracer_provider()
        self.tracer = self.provider.get_tracer(INSTRUMENTATION_NAME)
        self.profile = profile or profile_dir is not None
        self.keep_profiles = keep_profiles
        self.profile_dir = Path(profile_dir) if profile_dir is not None else None
        if self.profile_dir is not None:
            self.profile_dir.mkdir(parents=True, exist_ok=True)
        self.profiles: collections.OrderedDict[str, ProfileEntry] = collections.OrderedDict()
        self._lock = threading.Lock()

    def begin(self, pod: str, profile: str, attempts: int) -> _Attempt | None:
        span = self.tracer.start_span(
            ATTEMPT_SPAN, context=Context(), kind=SpanKind.INTERNAL,
            attributes={"minisched.pod": pod, "minisched.profile": profile, "minisched.attempts": attempts},
        )
        if not span.is_recording():
            return None  # not sampled: nothing more is done for this attempt
        return _Attempt(self, span, pod)

    def keep_profile(self, entry: ProfileEntry) -> None:
        evicted = []
        with self._lock:
            self.profiles[entry.span_id] = entry
            while len(self.profiles) > self.keep_profiles:
                evicted.append(self.profiles.popitem(last=False)[0])
        if self.profile_dir is not None:
            entry.stats.dump_stats(str(self.profile_dir / f"{entry.span_id}.prof"))
            for span_id in evicted:
                (self.profile_dir / f"{span_id}.prof").unlink(missing_ok=True)

    def profile_for(self, span: ReadableSpan | str) -> ProfileEntry | None:
        """The profile of the attempt a span belongs to: the attempt span, any span of its trace,
        or the attempt span's id (what minisched.profile.id says)."""
        if isinstance(span, str):
            return self.profiles.get(span)
        trace_id = span.context.trace_id
        with self._lock:
            return next((e for e in reversed(self.profiles.values()) if e.trace_id == trace_id), None)


class _Attempt:
    """One sampled attempt. Points are buffered and become spans when their cycle ends."""

    def __init__(self, owner: SchedulingTracer, span: Span, pod: str) -> None:
        self.owner = owner
        self.span = span
        self.pod = pod
        self.cycle_points: list[tuple[str, str, int, int]] = []  # (point, status, start ns, end ns)
        self.binding_points: list[tuple[str, str, int, int]] = []
        self.result = "skipped"  # popped but not tried (deleted meanwhile, already assumed, ...)
        self.status: Status | None = None
        self.node: str | None = None
        self.decision: Decision | None = None
        self._lock = threading.Lock()
        self._cycle_finished = False
        self._binding_finished = False
        self._profiler: cProfile.Profile | None = None
        if owner.profile:
            profiler = cProfile.Profile()
            try:
                profiler.enable()
                self._profiler = profiler
            except ValueError:  # another profiler is active on this thread: trace without one
                pass

    # -- from the scheduler ----------------------------------------------------------------------------
    def point(self, point: str, status: str, seconds: float) -> None:
        end = time.time_ns()
        entry = (point, status, end - int(seconds * 1e9), end)
        (self.binding_points if point in BINDING_POINTS else self.cycle_points).append(entry)

    def decided(self, result: str, status: Status | None, node: str | None, decision: Decision | None) -> None:
        self.result = result
        if status is not None:
            self.status = status
        if node is not None or result != "scheduled":
            self.node = node
        if decision is not None:
            self.decision = decision

    def cycle_done(self, binding: bool) -> None:
        profiler, self._profiler = self._profiler, None
        if profiler is not None:
            profiler.disable()
            context = self.span.get_span_context()
            span_id = format(context.span_id, "016x")
            self.owner.keep_profile(ProfileEntry(span_id, context.trace_id, self.pod, pstats.Stats(profiler)))
            self.span.set_attribute(PROFILE_ATTRIBUTE, span_id)
        self._emit_cycle()
        with self._lock:  # the binding cycle may already have ended (it runs on another thread)
            self._cycle_finished = True
            done = not binding or self._binding_finished
        if done:
            self._end()

    def binding_done(self, result: str, status: Status) -> None:
        self.result = result
        if not status.is_success:
            self.status = status
        self._emit_binding(status)
        with self._lock:
            self._binding_finished = True
            done = self._cycle_finished
        if done:
            self._end()

    # -- spans -----------------------------------------------------------------------------------------------
    def _child(self, parent: Span, name: str, start: int, end: int, status: str,
               attributes: Mapping[str, Any] | None = None) -> Span:
        ctx = trace.set_span_in_context(parent, Context())
        span = self.owner.tracer.start_span(name, context=ctx, start_time=start,
                                            attributes={"minisched.status": status, **(attributes or {})})
        if status == "Error":
            span.set_status(StatusCode.ERROR)
        span.end(end_time=end)
        return span

    def _emit_cycle(self) -> None:
        points = self.cycle_points
        algo = next((p for p in points if p[0] == ALGORITHM_POINT), None)
        algo_span: Span | None = None
        if algo is not None:
            ctx = trace.set_span_in_context(self.span, Context())
            algo_span = self.owner.tracer.start_span(ALGORITHM_POINT, context=ctx, start_time=algo[2],
                                                     attributes={"minisched.status": algo[1]})
        for point, status, start, end in points:
            if point == ALGORITHM_POINT:
                continue
            inside = algo_span is not None and point in ALGORITHM_POINTS
            parent = algo_span if inside and algo_span is not None else self.span
            self._child(parent, point, start, end, status, self._plugin_attributes(point))
        if algo_span is not None and algo is not None:
            if algo[1] == "Error":
                algo_span.set_status(StatusCode.ERROR)
            algo_span.end(end_time=algo[3])

    def _plugin_attributes(self, point: str) -> dict[str, Any]:
        d = self.decision
        if d is None:
            return {}
        if point == "Filter" and d.filter_plugins:
            counts = np.bincount(d.first_fail[d.first_fail >= 0], minlength=len(d.filter_plugins))
            return {f"minisched.filter.rejected.{name}": int(c) for name, c in zip(d.filter_plugins, counts, strict=True)}
        if point == "Score" and d.score_plugins:
            return {f"minisched.score.weight.{name}": s.weight for name, s in d.score_plugins.items()}
        return {}

    def _emit_binding(self, status: Status) -> None:
        points = self.binding_points
        if not points:
            return
        start = min(p[2] for p in points)
        end = max(p[3] for p in points)
        ctx = trace.set_span_in_context(self.span, Context())
        binding = self.owner.tracer.start_span(BINDING_SPAN, context=ctx, start_time=start,
                                               attributes={"minisched.status": status.code.label})
        for point, label, p_start, p_end in points:
            self._child(binding, point, p_start, p_end, label)
        if status.is_error:
            binding.set_status(StatusCode.ERROR, status.message())
        binding.end(end_time=end)

    def _end(self) -> None:
        span = self.span
        span.set_attribute("minisched.result", self.result)
        if self.node:
            span.set_attribute("minisched.node", self.node)
        d = self.decision
        if d is not None:
            span.set_attribute("minisched.nodes.evaluated", d.evaluated)
            span.set_attribute("minisched.nodes.feasible", d.feasible)
            if d.filter_plugins:
                span.set_attribute("minisched.filter.plugins", list(d.filter_plugins))
            if d.score_plugins:
                span.set_attribute("minisched.score.plugins", list(d.score_plugins))
        status = self.status
        if status is not None and not status.is_success:
            span.set_attribute("minisched.status.code", status.code.label)
            if status.plugin:
                span.set_attribute("minisched.status.plugin", status.plugin)
            span.set_attribute("minisched.status.message", status.message()[:512])
            if status.is_error:
                span.set_status(StatusCode.ERROR, status.message()[:512])
        span.end()


def attempt_spans(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """The attempt (root) spans among `spans`."""
    return [s for s in spans if s.name == ATTEMPT_SPAN]


def trace_of(spans: Sequence[ReadableSpan], root: ReadableSpan) -> list[ReadableSpan]:
    """Every span of `root`'s trace, parents before children, in start order."""
    trace_id = root.context.trace_id
    return sorted((s for s in spans if s.context.trace_id == trace_id), key=lambda s: (s.start_time or 0))


__all__ = [
    "ATTEMPT_SPAN",
    "DEFAULT_SAMPLE_RATIO",
    "PROFILE_ATTRIBUTE",
    "ProfileEntry",
    "SchedulingTracer",
    "attempt_spans",
    "otlp_provider",
    "otlp_traces_endpoint",
    "trace_of",
    "tracer_provider",
]
