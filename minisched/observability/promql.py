"""What a PromQL query computes, computed by hand from two scrapes of /metrics.

Prometheus stores every scrape; a query such as

    histogram_quantile(0.99, sum by (le) (rate(scheduler_scheduling_attempt_duration_seconds_bucket[5m])))

means: for each bucket series, how fast did its counter grow over the last 5 minutes (`rate`);
add the series up per upper bound `le` (`sum by (le)`), which gives one cumulative histogram of
the attempts made during the window; then find the latency below which 99% of them fell, by
linear interpolation inside the bucket that holds the 99th percentile (`histogram_quantile`).

Here the window is the time between two `Scrape`s, and `rate` is (later - earlier) / seconds,
with a counter reset (the process restarted) handled as Prometheus does: a value that went down
counts from zero. Prometheus also extrapolates rate() to the window's edges when its first and
last samples are not at them; with two scrapes that *are* the window, there is nothing to
extrapolate, so the figures agree.

The book's own query, `sum by (hour, priority) (rate(x_sum[1h]) / rate(x_count[1h]))`, averages
latency (a mean hides the tail that a scheduler's users feel) and then *sums* averages across
series, which is not an average of anything; `mean_latency` shows the right way (ratio of sums),
and `histogram_quantile` the quantity that matters.
"""

from __future__ import annotations

import math
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from minisched.clock import Clock, RealClock

__all__ = [
    "Labels",
    "Scrape",
    "histogram_quantile",
    "increase",
    "mean_latency",
    "parse",
    "quantile_over_window",
    "rate",
    "scrape",
    "sum_by",
]

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs


def _labels(mapping: Mapping[str, str]) -> Labels:
    return tuple(sorted(mapping.items()))


@dataclass(frozen=True)
class Scrape:
    """One scrape: every sample by (sample name, labels), taken at `at` (seconds)."""

    at: float
    samples: dict[tuple[str, Labels], float]

    def select(self, name: str, /, **matchers: str) -> dict[Labels, float]:
        """Series of the sample `name` whose labels equal `matchers` (PromQL `name{k="v"}`).
        `name` is positional-only, so a label called "name" (work-queue metrics) can be matched."""
        return {
            labels: value
            for (sample, labels), value in self.samples.items()
            if sample == name and all(dict(labels).get(k) == v for k, v in matchers.items())
        }


def parse(text: str, at: float) -> Scrape:
    """Parse Prometheus text exposition (prometheus_client's parser) into a `Scrape`."""
    samples: dict[tuple[str, Labels], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, _labels(sample.labels))] = float(sample.value)
    return Scrape(at, samples)


def scrape(url: str, clock: Clock | None = None, timeout: float = 5.0) -> Scrape:
    """GET a /metrics URL and parse it, stamped with the clock's time."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        text = resp.read().decode()
    return parse(text, (clock or RealClock()).monotonic())


def increase(before: Scrape, after: Scrape, name: str, /, **matchers: str) -> dict[Labels, float]:
    """PromQL increase() of counter `name` between two scrapes, per series. A series that went
    down was reset (process restart), so its whole later value is the increase. Series absent
    from `before` started at 0."""
    old = before.select(name, **matchers)
    out: dict[Labels, float] = {}
    for labels, value in after.select(name, **matchers).items():
        prev = old.get(labels, 0.0)
        out[labels] = value - prev if value >= prev else value
    return out


def rate(before: Scrape, after: Scrape, name: str, /, **matchers: str) -> dict[Labels, float]:
    """PromQL rate(): per-second increase between the two scrapes."""
    seconds = after.at - before.at
    if seconds <= 0:
        raise ValueError(f"rate needs the later scrape after the earlier one (got {seconds:+.3f} s)")
    return {labels: inc / seconds for labels, inc in increase(before, after, name, **matchers).items()}


def sum_by(values: Mapping[Labels, float], by: Iterable[str]) -> dict[Labels, float]:
    """PromQL `sum by (labels...)`: add series that agree on the `by` labels; drop the others."""
    keep = tuple(by)
    out: dict[Labels, float] = {}
    for labels, value in values.items():
        group = tuple((k, v) for k, v in labels if k in keep)
        out[group] = out.get(group, 0.0) + value
    return out


def histogram_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float:
    """Prometheus' histogram_quantile over (upper bound, cumulative count) pairs.

    The same steps as promql/quantile.go: sort by bound, need a +Inf bucket, merge equal bounds,
    force counts monotonic, find the bucket holding rank q*total, interpolate linearly inside it
    (from 0 for the first bucket); a rank in the +Inf bucket returns the highest finite bound.
    NaN when there is nothing to estimate from."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    merged: dict[float, float] = {}
    for bound, count in buckets:
        merged[bound] = merged.get(bound, 0.0) + count
    ordered = sorted(merged.items())
    if not ordered or not math.isinf(ordered[-1][0]) or len(ordered) < 2:
        return math.nan
    counts, highest = [], 0.0
    for _, count in ordered:  # scrapes at different instants can break monotonicity: fix as Prometheus does
        highest = max(highest, count)
        counts.append(highest)
    total = counts[-1]
    if total == 0:
        return math.nan
    rank = q * total
    b = next(i for i, c in enumerate(counts) if c >= rank)
    if b == len(ordered) - 1:
        return ordered[-2][0]
    if b == 0 and ordered[0][0] <= 0:
        return ordered[0][0]
    start, end, count = 0.0, ordered[b][0], counts[b]
    if b > 0:
        start = ordered[b - 1][0]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (end - start) * (rank / count)


def quantile_over_window(
    q: float, before: Scrape, after: Scrape, histogram: str, /, *, by: Iterable[str] = (), **matchers: str
) -> dict[Labels, float]:
    """histogram_quantile(q, sum by (le, <by>) (rate(<histogram>_bucket[window]))), one value per
    group of the `by` labels (one group, key (), when `by` is empty)."""
    keep = tuple(by)
    per_le = sum_by(rate(before, after, f"{histogram}_bucket", **matchers), ("le", *keep))
    groups: dict[Labels, list[tuple[float, float]]] = {}
    for labels, value in per_le.items():
        le = float(dict(labels)["le"])
        group = tuple((k, v) for k, v in labels if k != "le")
        groups.setdefault(group, []).append((le, value))
    return {group: histogram_quantile(q, pairs) for group, pairs in sorted(groups.items())}


def mean_latency(
    before: Scrape, after: Scrape, histogram: str, /, *, by: Iterable[str] = (), **matchers: str
) -> dict[Labels, float]:
    """sum by (<by>) (rate(x_sum[w])) / sum by (<by>) (rate(x_count[w])): the mean, done right
    (ratio of sums, so busy series weigh more than idle ones). NaN for groups with no events."""
    keep = tuple(by)
    sums = sum_by(rate(before, after, f"{histogram}_sum", **matchers), keep)
    counts = sum_by(rate(before, after, f"{histogram}_count", **matchers), keep)
    return {g: (sums.get(g, 0.0) / c if c else math.nan) for g, c in sorted(counts.items())}
