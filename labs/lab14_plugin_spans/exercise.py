"""Lab 14 starter: fill in TracedPlugin, traced and slowest (see README.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

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
        # your code here: give this object filter/score only where the inner plugin has them

    def __getattr__(self, attribute: str) -> Any:  # everything else is the inner plugin's
        return getattr(self.inner, attribute)


def traced(factory: Factory, tracer: trace.Tracer, now_ns: Callable[[], int]) -> Factory:
    raise NotImplementedError("traced")  # your code here


def slowest(spans: Sequence[ReadableSpan]) -> Finding:
    raise NotImplementedError("slowest")  # your code here
