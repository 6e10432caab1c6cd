"""§4.2 the book's PromQL computed from scrapes, and the heatmap from measured buckets."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from minisched.observability import heatmap, promql
from minisched.observability.metrics import SchedulerMetrics, exponential_buckets

H = "scheduler_scheduling_attempt_duration_seconds"


def test_histogram_quantile_matches_prometheus_rules() -> None:
    # 100 observations: 50 <= 0.1, 40 in (0.1, 0.2], 10 in (0.2, 0.4].
    buckets = [(0.1, 50.0), (0.2, 90.0), (0.4, 100.0), (math.inf, 100.0)]
    assert promql.histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert promql.histogram_quantile(0.7, buckets) == pytest.approx(0.15)  # 20 of 40 into (0.1, 0.2]
    assert promql.histogram_quantile(0.99, buckets) == pytest.approx(0.38)
    assert promql.histogram_quantile(0.25, buckets) == pytest.approx(0.05)  # from 0 in the first bucket
    in_inf = [(0.1, 1.0), (math.inf, 10.0)]
    assert promql.histogram_quantile(0.99, in_inf) == 0.1, "a rank in +Inf returns the top finite bound"
    assert math.isnan(promql.histogram_quantile(0.5, [(0.1, 5.0)])), "no +Inf bucket: no answer"
    assert math.isnan(promql.histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]))
    assert promql.histogram_quantile(1.5, buckets) == math.inf and promql.histogram_quantile(-1, buckets) == -math.inf
    # Non-monotonic counts (a non-atomic scrape) are evened out, not trusted.
    assert promql.histogram_quantile(0.5, [(0.1, 6.0), (0.2, 5.0), (math.inf, 10.0)]) == pytest.approx(
        promql.histogram_quantile(0.5, [(0.1, 6.0), (0.2, 6.0), (math.inf, 10.0)]))


def test_p99_over_a_window_from_two_scrapes_and_counter_resets() -> None:
    m = SchedulerMetrics()
    for _ in range(10):
        m.observe_attempt("scheduled", 0.0015)  # before the window: must not count
    before = promql.parse(m.exposition(), at=100.0)
    for i in range(100):
        m.observe_attempt("scheduled", 0.0015 if i < 90 else 0.05)
    after = promql.parse(m.exposition(), at=400.0)
    p99 = promql.quantile_over_window(0.99, before, after, H)
    # 100 in the window: 90 in (0.001, 0.002], 10 in (0.032, 0.064]; rank 99 is 9/10 into the last.
    assert p99[()] == pytest.approx(0.032 + 0.032 * 0.9)
    assert promql.rate(before, after, "scheduler_schedule_attempts_total",
                       result="scheduled")[(("profile", "minisched"), ("result", "scheduled"))] == pytest.approx(100 / 300)
    mean = promql.mean_latency(before, after, H)[()]
    assert mean == pytest.approx((90 * 0.0015 + 10 * 0.05) / 100)
    fresh = SchedulerMetrics()
    fresh.observe_attempt("scheduled", 0.0015)
    restarted = promql.parse(fresh.exposition(), at=500.0)
    inc = promql.increase(after, restarted, "scheduler_schedule_attempts_total", result="scheduled")
    assert list(inc.values()) == [1.0], "a counter that went down was reset: count from zero"
    with pytest.raises(ValueError, match="later scrape"):
        promql.rate(after, before, "scheduler_schedule_attempts_total")


def test_the_books_sum_of_means_is_not_a_mean() -> None:
    m = SchedulerMetrics()
    before = promql.parse(m.exposition(), at=0.0)
    for _ in range(99):
        m.observe_attempt("scheduled", 0.01)
    m.observe_attempt("unschedulable", 1.0)
    after = promql.parse(m.exposition(), at=60.0)
    per_result = promql.mean_latency(before, after, H, by=("result",))
    books = sum(per_result.values())  # sum by (...) (rate(sum)/rate(count)) summed across series
    right = promql.mean_latency(before, after, H)[()]
    assert books == pytest.approx(1.01) and right == pytest.approx((0.99 + 1.0) / 100)


def test_heatmap_from_scrapes_equals_heatmap_from_the_same_observations() -> None:
    m = SchedulerMetrics()
    bounds = list(exponential_buckets(0.001, 2, 15))
    rng = np.random.default_rng(3)
    scrapes, times, lats = [promql.parse(m.exposition(), at=0.0)], [], []
    for second in range(1, 6):
        for _ in range(40):
            lat = float(rng.lognormal(mean=math.log(0.004 * second), sigma=0.5))
            m.observe_attempt("scheduled", lat)
            times.append(second - 0.5)
            lats.append(lat)
        scrapes.append(promql.parse(m.exposition(), at=float(second)))
    a = heatmap.from_scrapes(scrapes, H, result="scheduled")
    b = heatmap.from_observations(times, lats, bounds=bounds, slice_seconds=1.0)
    assert a.counts.shape == (16, 5) and a.total == 200
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.edges, b.edges)
    fig = heatmap.plot(a)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="two scrapes"):
        heatmap.from_scrapes(scrapes[:1], H)
    with pytest.raises(ValueError, match="no series"):
        heatmap.from_scrapes(scrapes, "scheduler_nothing")


def test_the_plot_fills_its_axes_with_used_buckets_and_labels_slices() -> None:
    bounds = [0.001 * 2**i for i in range(15)] + [math.inf]
    data = heatmap.from_observations([0.1, 0.2, 1.1, 2.5], [0.003, 0.005, 0.02, 0.004], bounds=bounds, slice_seconds=1.0)
    ax = heatmap.plot(data, slice_labels=["50 nodes", "150", "400"], slice_axis="wave").axes[0]
    low, high = ax.get_ylim()
    # buckets used: (0.002, 0.004] .. (0.016, 0.032]; one empty bucket either side
    assert low == pytest.approx(0.001) and high == pytest.approx(0.064)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["50 nodes", "150", "400"]
    assert ax.get_xlabel() == "wave"
    with pytest.raises(ValueError, match="2 slice labels for 3 slices"):
        heatmap.plot(data, slice_labels=["a", "b"])


def test_histogram_quantile_lands_in_the_bucket_of_the_observation_at_its_rank() -> None:
    """Chapter 4.2 checks that histogram_quantile's p99 and the exact p99 share a bucket. That holds
    for the exact p99 ranked as Prometheus ranks (the smallest observation with 99 % at or below
    it: numpy's inverted_cdf), not for numpy's default, which interpolates between two
    observations and near a bucket's edge falls in the bucket below (a fresh-clone run hit it)."""
    bounds = np.array([0.001 * 2**i for i in range(15)])

    def bucket(v: float) -> tuple[float, float]:
        return float(bounds[bounds < v].max(initial=0.0)), float(bounds[bounds >= v].min())

    rng = np.random.default_rng(7)
    interpolated_misses = 0
    for case in range(400):
        x = np.minimum(rng.lognormal(-6, 1.2, int(rng.integers(50, 900))), 10.0)
        if case % 3 == 0:
            x = np.round(x / 0.001) * 0.001  # observations on the buckets' edges too
        cumulative = [(float(b), float((x <= b).sum())) for b in bounds] + [(math.inf, float(len(x)))]
        estimate = promql.histogram_quantile(0.99, cumulative)
        assert bucket(estimate) == bucket(float(np.quantile(x, 0.99, method="inverted_cdf"))), case
        interpolated_misses += bucket(estimate) != bucket(float(np.quantile(x, 0.99)))
    assert interpolated_misses > 0  # the default ranking does miss: this is the case the chapter met
