"""Plugging the observability pieces into the scheduler.

- Metrics: `SchedulerMetrics` already has the methods of the scheduler's observer protocol
  (minisched.scheduler.scheduler.SchedulerObserver), so `Scheduler(cluster, observer=metrics)` is
  the whole adapter; `WorkqueueMetrics` is the work queue's MetricsProvider.
- Decisions: `DecisionLogRecorder` is the scheduler's `EventRecorder` (it still writes every Event
  and status change to the API) that also records each decision in the event log, through a
  `DecisionRecorder`, under the pod's uid as correlation id, so the Kubernetes Event, the JSON log
  line and the event-log entry of one decision can be joined.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minisched.cluster.base import Cluster
from minisched.meta import key_of, uid_of
from minisched.observability.logging import correlation
from minisched.observability.recorder import DecisionRecorder
from minisched.scheduler.events import REASON_PREEMPTED, EventRecorder

if TYPE_CHECKING:  # mypy proves the Prometheus classes fit the hooks they are plugged into
    from minisched.observability.metrics import SchedulerMetrics, WorkqueueMetrics
    from minisched.scheduler.scheduler import SchedulerObserver
    from minisched.workqueue.metrics import MetricsProvider

    def _scheduler_observer(metrics: SchedulerMetrics) -> SchedulerObserver:
        return metrics

    def _workqueue_provider(metrics: WorkqueueMetrics) -> MetricsProvider:
        return metrics

__all__ = ["DecisionLogRecorder"]

Object = dict[str, Any]

_BINDING_REJECTED = "Binding rejected"  # the scheduler's prefix for a failed binding cycle


class DecisionLogRecorder(EventRecorder):
    """An EventRecorder that also appends the scheduler's decisions to an event log."""

    def __init__(self, cluster: Cluster, decisions: DecisionRecorder, **kwargs: Any) -> None:
        super().__init__(cluster, **kwargs)
        self.decisions = decisions

    def scheduled(self, pod: Object, node_name: str) -> None:
        with correlation(uid_of(pod) or None):
            self.decisions.scheduled(key_of(pod), node_name, uid=uid_of(pod) or None)
        super().scheduled(pod, node_name)

    def failed_scheduling(self, pod: Object, message: str) -> None:
        with correlation(uid_of(pod) or None):
            if message.startswith(_BINDING_REJECTED):
                self.decisions.binding_failed(key_of(pod), "", message, uid=uid_of(pod) or None)
            else:
                self.decisions.attempt_failed(key_of(pod), message, uid=uid_of(pod) or None)
        super().failed_scheduling(pod, message)

    def event(self, obj: Object, event_type: str, reason: str, message: str, *, action: str = "") -> None:
        if reason == REASON_PREEMPTED and obj.get("kind", "Pod") == "Pod":
            with correlation(uid_of(obj) or None):
                self.decisions.preempted(key_of(obj), by=message)
        super().event(obj, event_type, reason, message, action=action)
