"""Work queue metrics as hooks, like client-go's workqueue.MetricsProvider.

A queue asks its provider for one metric object of each kind, named after the queue, and then
updates them as items move through: depth (items waiting), adds (total adds), latency (seconds an
item waited before a worker took it), work_duration (seconds a worker held it), unfinished work
and the longest-running worker (refreshed every 0.5 s), and retries (rate-limited re-adds).

This module knows no metrics library: the observability layer plugs Prometheus in above it by
implementing `MetricsProvider`. `InMemoryMetricsProvider` records everything for tests and notebooks.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from minisched.clock import Clock


@runtime_checkable
class GaugeMetric(Protocol):
    def inc(self) -> None: ...

    def dec(self) -> None: ...


@runtime_checkable
class SettableGaugeMetric(Protocol):
    def set(self, value: float) -> None: ...


@runtime_checkable
class CounterMetric(Protocol):
    def inc(self) -> None: ...


@runtime_checkable
class HistogramMetric(Protocol):
    def observe(self, value: float) -> None: ...


@runtime_checkable
class MetricsProvider(Protocol):
    """Makes the metrics of the queue called `name` (client-go: NewDepthMetric(name) and so on)."""

    def depth(self, name: str) -> GaugeMetric: ...

    def adds(self, name: str) -> CounterMetric: ...

    def latency(self, name: str) -> HistogramMetric: ...

    def work_duration(self, name: str) -> HistogramMetric: ...

    def unfinished_work_seconds(self, name: str) -> SettableGaugeMetric: ...

    def longest_running_processor_seconds(self, name: str) -> SettableGaugeMetric: ...

    def retries(self, name: str) -> CounterMetric: ...


class _Noop:
    def inc(self) -> None:
        pass

    def dec(self) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, value: float) -> None:
        pass


_NOOP = _Noop()


class NoopMetricsProvider:
    """Records nothing. Queues with this provider start no metrics-refresh thread."""

    def depth(self, name: str) -> GaugeMetric:
        return _NOOP

    def adds(self, name: str) -> CounterMetric:
        return _NOOP

    def latency(self, name: str) -> HistogramMetric:
        return _NOOP

    def work_duration(self, name: str) -> HistogramMetric:
        return _NOOP

    def unfinished_work_seconds(self, name: str) -> SettableGaugeMetric:
        return _NOOP

    def longest_running_processor_seconds(self, name: str) -> SettableGaugeMetric:
        return _NOOP

    def retries(self, name: str) -> CounterMetric:
        return _NOOP


@dataclass
class RecordedGauge:
    value: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def inc(self) -> None:
        with self._lock:
            self.value += 1

    def dec(self) -> None:
        with self._lock:
            self.value -= 1

    def set(self, value: float) -> None:
        with self._lock:
            self.value = value


@dataclass
class RecordedCounter:
    value: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def inc(self) -> None:
        with self._lock:
            self.value += 1


@dataclass
class RecordedHistogram:
    observations: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def observe(self, value: float) -> None:
        with self._lock:
            self.observations.append(value)

    @property
    def count(self) -> int:
        return len(self.observations)

    @property
    def total(self) -> float:
        return sum(self.observations)


@dataclass
class QueueRecord:
    """Everything recorded for one queue name."""

    depth: RecordedGauge = field(default_factory=RecordedGauge)
    adds: RecordedCounter = field(default_factory=RecordedCounter)
    latency: RecordedHistogram = field(default_factory=RecordedHistogram)
    work_duration: RecordedHistogram = field(default_factory=RecordedHistogram)
    unfinished_work_seconds: RecordedGauge = field(default_factory=RecordedGauge)
    longest_running_processor_seconds: RecordedGauge = field(default_factory=RecordedGauge)
    retries: RecordedCounter = field(default_factory=RecordedCounter)


class InMemoryMetricsProvider:
    """Keeps every queue's metrics in memory: `provider.queues["name"].depth.value`."""

    def __init__(self) -> None:
        self.queues: dict[str, QueueRecord] = {}
        self._lock = threading.Lock()

    def record(self, name: str) -> QueueRecord:
        with self._lock:
            return self.queues.setdefault(name, QueueRecord())

    def depth(self, name: str) -> GaugeMetric:
        return self.record(name).depth

    def adds(self, name: str) -> CounterMetric:
        return self.record(name).adds

    def latency(self, name: str) -> HistogramMetric:
        return self.record(name).latency

    def work_duration(self, name: str) -> HistogramMetric:
        return self.record(name).work_duration

    def unfinished_work_seconds(self, name: str) -> SettableGaugeMetric:
        return self.record(name).unfinished_work_seconds

    def longest_running_processor_seconds(self, name: str) -> SettableGaugeMetric:
        return self.record(name).longest_running_processor_seconds

    def retries(self, name: str) -> CounterMetric:
        return self.record(name).retries


_global_provider: MetricsProvider = NoopMetricsProvider()
_global_lock = threading.Lock()


def set_provider(provider: MetricsProvider) -> None:
    """Use `provider` for every named queue created from now on (client-go: workqueue.SetProvider).

    Unlike client-go, which honours only the first call, the last call wins: notebooks re-run cells."""
    global _global_provider
    with _global_lock:
        _global_provider = provider


def global_provider() -> MetricsProvider:
    with _global_lock:
        return _global_provider


class QueueMetrics:
    """What a queue calls as items move; turns item events into metric updates (client-go's
    defaultQueueMetrics). A queue without a name records nothing, as in client-go."""

    def __init__(self, name: str, provider: MetricsProvider | None, clock: Clock) -> None:
        provider = provider or global_provider()
        if not name:
            provider = NoopMetricsProvider()
        self.enabled = not isinstance(provider, NoopMetricsProvider)
        self._clock = clock
        self._depth = provider.depth(name)
        self._adds = provider.adds(name)
        self._latency = provider.latency(name)
        self._work_duration = provider.work_duration(name)
        self._unfinished = provider.unfinished_work_seconds(name)
        self._longest = provider.longest_running_processor_seconds(name)
        self._retries = provider.retries(name)
        # Only the queue's lock guards these: every call below is made with it held.
        self._added_at: dict[Hashable, float] = {}
        self._started_at: dict[Hashable, float] = {}

    def add(self, item: Hashable) -> None:
        if not self.enabled:
            return
        self._adds.inc()
        self._depth.inc()
        self._added_at.setdefault(item, self._clock.monotonic())

    def get(self, item: Hashable) -> None:
        if not self.enabled:
            return
        self._depth.dec()
        now = self._clock.monotonic()
        self._started_at[item] = now
        added = self._added_at.pop(item, None)
        if added is not None:
            self._latency.observe(now - added)

    def done(self, item: Hashable) -> None:
        if not self.enabled:
            return
        started = self._started_at.pop(item, None)
        if started is not None:
            self._work_duration.observe(self._clock.monotonic() - started)

    def retry(self) -> None:
        if self.enabled:
            self._retries.inc()

    def update_unfinished_work(self) -> None:
        if not self.enabled:
            return
        now = self._clock.monotonic()
        ages = [now - t for t in self._started_at.values()]
        self._unfinished.set(sum(ages))
        self._longest.set(max(ages, default=0.0))
