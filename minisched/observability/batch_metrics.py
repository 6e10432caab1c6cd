"""kube-scheduler 1.35's batching metrics, read from each profile's batch state at scrape time.

| metric | labels | what |
|---|---|---|
| scheduler_batch_attempts_total | profile, result | cycles by what batching did: no_hint, hint_used, hint_not_used |
| scheduler_batch_cache_flushed_total | profile, reason | kept scores that could not serve a cycle, by why |

Same names and labels as kube's (pkg/scheduler/metrics); the counts live in the frameworks
(`Framework.batch.stats`), so nothing on the scheduling path touches Prometheus.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["BatchCollector", "register_batch_metrics"]


class BatchCollector(Collector):
    def __init__(self, frameworks: Callable[[], Mapping[str, Any]]) -> None:
        self.frameworks = frameworks

    def collect(self) -> Iterator[Metric]:
        attempts = CounterMetricFamily("scheduler_batch_attempts_total",
                                       "Counts of results when we attempt to use batching.",
                                       labels=["profile", "result"])
        flushed = CounterMetricFamily("scheduler_batch_cache_flushed_total", "Counts of cache flushes by reason.",
                                      labels=["profile", "reason"])
        for profile, fwk in sorted(self.frameworks().items()):
            batch = getattr(fwk, "batch", None)
            if batch is None:  # OpportunisticBatching is off
                continue
            for result, count in batch.stats.attempts.items():
                attempts.add_metric([profile, result], count)
            for reason, count in batch.stats.flushed.items():
                flushed.add_metric([profile, reason], count)
        yield attempts
        yield flushed


def register_batch_metrics(registry: CollectorRegistry, frameworks: Callable[[], Mapping[str, Any]]) -> BatchCollector:
    """`frameworks()`: the scheduler's frameworks by profile now (a replica may build a new scheduler)."""
    collector = BatchCollector(frameworks)
    registry.register(collector)
    return collector
