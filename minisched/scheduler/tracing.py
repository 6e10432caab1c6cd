"""The scheduler's tracing hooks: what it tells a tracer about one scheduling attempt.

The scheduler must not import the observability layer above it, so the shape of a tracer is
declared here and minisched.observability.tracing implements it with OpenTelemetry. With no tracer
(the default) the scheduler makes no tracing call at all: one `is None` test per cycle.

One attempt: `begin` when the pod is popped (the tracer samples here; None = not traced), then
`point` for each extension point as it ends (from the framework's observer, on the thread running
it), `decided` with the cycle's outcome, `cycle_done` when the scheduling cycle returns, and for a
pod sent to binding `binding_done` when its binding cycle ends (on a binding thread).
"""

from __future__ import annotations

from typing import Protocol

from minisched.scheduler.framework.decision import Decision
from minisched.scheduler.framework.status import Status


class AttemptTrace(Protocol):
    def point(self, point: str, status: str, seconds: float) -> None:
        """Extension point `point` just ended, after `seconds`, with status label `status`."""

    def decided(self, result: str, status: Status | None, node: str | None, decision: Decision | None) -> None:
        """The scheduling cycle's outcome: result is scheduled, unschedulable or error."""

    def cycle_done(self, binding: bool) -> None:
        """The scheduling cycle returned; `binding`: a binding cycle carries the attempt on."""

    def binding_done(self, result: str, status: Status) -> None:
        """The binding cycle ended (result as in `decided`)."""


class CycleTracer(Protocol):
    def begin(self, pod: str, profile: str, attempts: int) -> AttemptTrace | None:
        """A trace for this attempt, or None when the sampler leaves it out."""


__all__ = ["AttemptTrace", "CycleTracer"]
