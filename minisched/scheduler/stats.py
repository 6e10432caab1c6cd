"""What a Scheduler counts and whom it tells: SchedulerStats, the counters and recent cycle
latencies kept on the scheduler, and SchedulerObserver, the metrics hooks it calls (kube's
pkg/scheduler/metrics is where kube-scheduler's counterparts live; minisched.observability plugs
Prometheus into the hooks).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Protocol


class SchedulerObserver(Protocol):
    """The metrics hooks (all optional: the scheduler calls those the observer has)."""

    def observe_attempt(self, result: str, seconds: float) -> None: ...

    def observe_algorithm(self, seconds: float) -> None: ...

    def observe_scheduled(self, attempts: int, seconds_since_first_enqueue: float) -> None: ...

    def observe_extension_point(self, extension_point: str, status: str, seconds: float) -> None: ...

    def set_pending(self, queue: str, count: int) -> None: ...

    def observe_preemption(self, victims: int) -> None: ...


@dataclass
class SchedulerStats:
    """Counters and recent cycle latencies, for the demo, the bench and a curious notebook."""

    scheduled: int = 0
    unschedulable: int = 0
    errors: int = 0
    bound: int = 0
    bind_conflicts: int = 0
    bind_errors: int = 0
    preemptions: int = 0
    victims: int = 0
    # with a pod_filter: pods popped after the filter gave them to another scheduler (a shard's
    # ring changed since they were queued)
    not_owned: int = 0
    # of bind_conflicts, those whose resourceVersion precondition failed: the pod was written after
    # the cycle decided (a legitimate update, or another replica revoked our reservation); retried
    bind_stale_versions: int = 0
    cycle_seconds: collections.deque[float] = field(default_factory=lambda: collections.deque(maxlen=200_000))

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100) of recent scheduling-cycle latencies, in seconds."""
        data = sorted(self.cycle_seconds)
        if not data:
            return 0.0
        idx = min(len(data) - 1, max(0, int(round(q / 100 * (len(data) - 1)))))
        return data[idx]
