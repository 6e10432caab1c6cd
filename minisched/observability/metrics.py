"""Prometheus metrics under kube-scheduler's and client-go's own names.

Dashboards and alerts written for kube-scheduler (pkg/scheduler/metrics) and for client-go work
queues (component-base/metrics/prometheus/workqueue) read these unchanged: same names, same labels,
same buckets. The book's invented `scheduler_job_*` names are not used.

Every `SchedulerMetrics` owns a `CollectorRegistry`, never the process-wide default one, so two
schedulers in one process (the leader-election chapter runs two) or two tests never collide, and
each scheduler's /metrics shows only its own numbers.

`WorkqueueMetrics` implements the work queue's `MetricsProvider` protocol
(minisched.workqueue.metrics) by handing out labelled Prometheus children, which already have the
inc/dec/set/observe methods the queue calls.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics import MetricWrapperBase

__all__ = [
    "SchedulerMetrics",
    "WorkqueueMetrics",
    "exponential_buckets",
    "SCHEDULE_RESULTS",
    "PENDING_QUEUES",
]

# The label values kube-scheduler uses.
SCHEDULE_RESULTS = ("scheduled", "unschedulable", "error")
PENDING_QUEUES = ("active", "backoff", "unschedulable", "gated")


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus' ExponentialBuckets: start, start*factor, ... (`count` upper bounds)."""
    if start <= 0 or factor <= 1 or count < 1:
        raise ValueError(f"exponential_buckets needs start > 0, factor > 1, count >= 1; got {start}, {factor}, {count}")
    return tuple(start * factor**i for i in range(count))


class SchedulerMetrics:
    """kube-scheduler's metrics for one scheduler instance, on its own registry."""

    def __init__(self, registry: CollectorRegistry | None = None, *, profile: str = "minisched") -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.profile = profile
        self._extension_point_children: dict[tuple[str, str], Histogram] = {}
        # the labelled children of the per-attempt metrics, looked up once (see observe_extension_point)
        self._attempt_children: dict[tuple[str, str], tuple[Counter, Histogram]] = {}
        self._sli_children: dict[int, Histogram] = {}
        r = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not "
            "be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=r,
        )
        self.scheduling_attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.scheduling_algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds",
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
            "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
            "unschedulablePods; 'gated' means number of pods held by scheduling gates.",
            ["queue"],
            registry=r,
        )
        self.pod_scheduling_sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue "
            "and might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=exponential_buckets(0.01, 2, 20),
            registry=r,
        )
        self.framework_extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=r,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=exponential_buckets(1, 2, 7),
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now",
            registry=r,
        )
        # client-go's leaderelection metric (component-base): 1 while this instance leads.
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=r,
        )
        for queue in PENDING_QUEUES:  # present from the start, as in kube-scheduler
            self.pending_pods.labels(queue=queue).set(0)

    # -- the calls a scheduler makes ------------------------------------------------------------------

    def observe_attempt(self, result: str, seconds: float) -> None:
        """One scheduling attempt ended with `result` after `seconds` (algorithm + binding)."""
        children = self._attempt_children.get((result, self.profile))
        if children is None:
            if result not in SCHEDULE_RESULTS:
                raise ValueError(f"schedule attempt result must be one of {SCHEDULE_RESULTS}, got {result!r}")
            children = (self.schedule_attempts.labels(result=result, profile=self.profile),
                        self.scheduling_attempt_duration.labels(result=result, profile=self.profile))
            self._attempt_children[(result, self.profile)] = children
        attempts, duration = children
        attempts.inc()
        duration.observe(seconds)

    def observe_algorithm(self, seconds: float) -> None:
        self.scheduling_algorithm_duration.observe(seconds)

    def observe_scheduled(self, attempts: int, seconds_since_first_enqueue: float) -> None:
        """The SLI: a pod finally scheduled after `attempts` attempts."""
        child = self._sli_children.get(attempts)
        if child is None:
            if attempts < 1:
                raise ValueError(f"a scheduled pod took at least one attempt, got attempts={attempts}")
            child = self._sli_children[attempts] = self.pod_scheduling_sli_duration.labels(attempts=str(attempts))
        child.observe(seconds_since_first_enqueue)

    def observe_extension_point(self, extension_point: str, status: str, seconds: float) -> None:
        # ~9 calls per pod: the labelled child is looked up once per (point, status), since
        # prometheus_client's labels() validates and joins the label values on every call (~2 µs)
        child = self._extension_point_children.get((extension_point, status))
        if child is None:
            child = self.framework_extension_point_duration.labels(
                extension_point=extension_point, status=status, profile=self.profile)
            self._extension_point_children[(extension_point, status)] = child
        child.observe(seconds)

    def set_pending(self, queue: str, count: int) -> None:
        if queue not in PENDING_QUEUES:
            raise ValueError(f"pending queue must be one of {PENDING_QUEUES}, got {queue!r}")
        self.pending_pods.labels(queue=queue).set(count)

    def observe_preemption(self, victims: int) -> None:
        self.preemption_attempts.inc()
        self.preemption_victims.observe(victims)

    def set_leader(self, lease_name: str, leading: bool) -> None:
        self.leader_election_master_status.labels(name=lease_name).set(1 if leading else 0)

    def exposition(self) -> str:
        """The text a Prometheus scrape of /metrics gets."""
        return generate_latest(self.registry).decode()



class RecordingSchedulerMetrics(SchedulerMetrics):
    """SchedulerMetrics that also keeps every attempt's exact duration, by result: for comparing
    what `histogram_quantile` estimates from the buckets with the exact quantile of the very same
    observations (chapter 4.2). Memory grows with the attempts: for runs of bounded size."""

    def __init__(self, registry: CollectorRegistry | None = None, *, profile: str = "minisched") -> None:
        super().__init__(registry, profile=profile)
        self.attempt_seconds: dict[str, list[float]] = {result: [] for result in SCHEDULE_RESULTS}

    def observe_attempt(self, result: str, seconds: float) -> None:
        super().observe_attempt(result, seconds)
        self.attempt_seconds[result].append(seconds)

    def all_attempt_seconds(self) -> list[float]:
        return [s for values in self.attempt_seconds.values() for s in values]

class WorkqueueMetrics:
    """client-go's workqueue metrics as a `minisched.workqueue.metrics.MetricsProvider`.

    Pass it to a work queue; each method returns the Prometheus child labelled with the queue's
    name. By default the metrics go on a new registry; pass a scheduler's registry to expose them
    on the same /metrics.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        buckets = exponential_buckets(1e-8, 10, 10)  # 10 ns .. 10 s, as client-go
        self._depth = Gauge("workqueue_depth", "Current depth of workqueue", ["name"], registry=r)
        self._adds = Counter("workqueue_adds_total", "Total number of adds handled by workqueue", ["name"], registry=r)
        self._latency = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            ["name"],
            buckets=buckets,
            registry=r,
        )
        self._work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            ["name"],
            buckets=buckets,
            registry=r,
        )
        self._unfinished = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed by "
            "work_duration. Large values indicate stuck threads.",
            ["name"],
            registry=r,
        )
        self._longest = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            ["name"],
            registry=r,
        )
        self._retries = Counter(
            "workqueue_retries_total", "Total number of retries handled by workqueue", ["name"], registry=r
        )

    @staticmethod
    def _child(metric: MetricWrapperBase, name: str) -> MetricWrapperBase:
        if not name:
            raise ValueError("a work queue needs a name to have metrics (client-go skips unnamed queues)")
        return metric.labels(name=name)

    def depth(self, name: str) -> Gauge:
        return self._child(self._depth, name)  # type: ignore[return-value]

    def adds(self, name: str) -> Counter:
        return self._child(self._adds, name)  # type: ignore[return-value]

    def latency(self, name: str) -> Histogram:
        return self._child(self._latency, name)  # type: ignore[return-value]

    def work_duration(self, name: str) -> Histogram:
        return self._child(self._work_duration, name)  # type: ignore[return-value]

    def unfinished_work_seconds(self, name: str) -> Gauge:
        return self._child(self._unfinished, name)  # type: ignore[return-value]

    def longest_running_processor_seconds(self, name: str) -> Gauge:
        return self._child(self._longest, name)  # type: ignore[return-value]

    def retries(self, name: str) -> Counter:
        return self._child(self._retries, name)  # type: ignore[return-value]
