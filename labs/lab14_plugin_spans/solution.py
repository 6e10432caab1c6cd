"""Lab 14, the instructor's solution."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

PLUGIN = "minisched.plugin"
POINT = "minisched.point"
POD = "minisched.pod"
NODES = "minisched.nodes"

Factory = Callable[[Any, Any], Any]


class Finding(NamedTuple):
    plugin: str
    total_ms: float
    worst_pod: str


class TracedPlugin:
    def __init__(self, inner: Any, tracer: trace.Tracer, now_ns: Callable[[], int]) -> None:
        self.inner, self.tracer, self.now_ns = inner, tracer, now_ns
        # instance attributes, so that the framework's isinstance checks see only what inner has
        if hasattr(inner, "filter"):
            self.filter = self._filter
        if hasattr(inner, "score"):
            self.score = self._score

    def __getattr__(self, attribute: str) -> Any:  # everything else is the inner plugin's
        return getattr(self.inner, attribute)

    def _call(self, point: str, pod: Any, nodes: int, call: Callable[[], Any]) -> Any:
        start = self.now_ns()
        attributes = {PLUGIN: self.inner.name, POINT: point, POD: pod.key, NODES: nodes}
        span = self.tracer.start_span(f"{point}/{self.inner.name}", context=Context(), start_time=start,
                                      attributes=attributes)
        try:
            return call()
        except BaseException as err:
            span.record_exception(err)
            span.set_status(StatusCode.ERROR, f"{type(err).__name__}: {err}")
            raise
        finally:
            span.end(end_time=self.now_ns())

    def _filter(self, state: Any, pod: Any, nodes: Any) -> Any:
        return self._call("Filter", pod, len(nodes), lambda: self.inner.filter(state, pod, nodes))

    def _score(self, state: Any, pod: Any, nodes: Any, rows: Any) -> Any:
        return self._call("Score", pod, len(rows), lambda: self.inner.score(state, pod, nodes, rows))


def traced(factory: Factory, tracer: trace.Tracer, now_ns: Callable[[], int]) -> Factory:
    def new(args: Any, handle: Any) -> TracedPlugin:
        return TracedPlugin(factory(args, handle), tracer, now_ns)

    return new


def slowest(spans: Sequence[ReadableSpan]) -> Finding:
    totals: dict[str, int] = defaultdict(int)
    longest: dict[str, tuple[int, str]] = {}
    for span in spans:
        attributes = span.attributes or {}
        plugin = attributes.get(PLUGIN)
        if plugin is None or span.start_time is None or span.end_time is None:
            continue
        took = span.end_time - span.start_time
        totals[str(plugin)] += took
        if took > longest.get(str(plugin), (-1, ""))[0]:
            longest[str(plugin)] = (took, str(attributes.get(POD, "")))
    if not totals:
        raise ValueError("no plugin spans among these spans")
    plugin = max(totals, key=lambda p: totals[p])
    return Finding(plugin, totals[plugin] / 1e6, longest[plugin][1])
