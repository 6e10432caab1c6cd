"""§4.2 The scheduling-latency heatmap, drawn from measured histogram buckets.

A Prometheus latency heatmap (Grafana's "heatmap" panel on a `_bucket` series) has time on x,
the histogram's buckets on y (latency, log scale) and, as colour, how many observations fell in
each bucket during each time slice: the increase of each cumulative bucket counter between two
scrapes, minus the bucket below it. It shows the whole distribution over time, tail included.

The book's heatmap is something else: hours on x, priority on y, colour = *mean* latency. A mean
per cell cannot show a bimodal distribution or a tail, and its query sums means (see
`promql`). The chapter draws this one and says why.

Two ways in, both from measurements: consecutive `promql.Scrape`s of a live /metrics, or raw
(time, latency) observations bucketed with the same bounds (`from_observations`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from minisched.observability.promql import Scrape, increase, sum_by

__all__ = ["LatencyHeatmap", "from_observations", "from_scrapes", "plot"]


@dataclass(frozen=True)
class LatencyHeatmap:
    """counts[i, j]: observations in bucket i (bounds[i-1], bounds[i]] during slice j (edges[j], edges[j+1]]."""

    edges: np.ndarray  # len n_slices + 1, seconds
    bounds: np.ndarray  # bucket upper bounds, last is +inf
    counts: np.ndarray  # shape (len(bounds), n_slices)

    @property
    def total(self) -> int:
        return int(self.counts.sum())


def _decumulate(cumulative: np.ndarray) -> np.ndarray:
    per_bucket = np.diff(cumulative, prepend=0.0)
    return np.clip(per_bucket, 0, None)  # scrapes are not atomic; never show a negative count


def from_scrapes(scrapes: Sequence[Scrape], histogram: str, /, **matchers: str) -> LatencyHeatmap:
    """One time slice per pair of consecutive scrapes of `<histogram>_bucket` (summed over the
    other labels, i.e. `sum by (le) (increase(...))`)."""
    if len(scrapes) < 2:
        raise ValueError(f"a heatmap needs at least two scrapes to take differences, got {len(scrapes)}")
    bounds: list[float] | None = None
    columns = []
    for before, after in zip(scrapes, scrapes[1:], strict=False):
        per_le = sum_by(increase(before, after, f"{histogram}_bucket", **matchers), ("le",))
        if not per_le:
            raise ValueError(f"no series {histogram}_bucket{matchers or ''} in the scrape at {after.at}")
        ordered = sorted((float(dict(labels)["le"]), value) for labels, value in per_le.items())
        these = [le for le, _ in ordered]
        if bounds is None:
            bounds = these
        elif these != bounds:
            raise ValueError("the histogram's buckets changed between scrapes")
        columns.append(_decumulate(np.array([v for _, v in ordered])))
    assert bounds is not None
    edges = np.array([s.at for s in scrapes], dtype=float)
    return LatencyHeatmap(edges - edges[0], np.array(bounds), np.stack(columns, axis=1))


def from_observations(
    times: Iterable[float], latencies: Iterable[float], *, bounds: Sequence[float], slice_seconds: float
) -> LatencyHeatmap:
    """Bucket raw (time, latency) measurements as a Prometheus histogram with `bounds` would
    (le is inclusive), one column per `slice_seconds` from the first time."""
    t, lat = np.asarray(list(times), dtype=float), np.asarray(list(latencies), dtype=float)
    if t.shape != lat.shape or t.size == 0:
        raise ValueError("from_observations needs as many times as latencies, and at least one")
    if slice_seconds <= 0:
        raise ValueError(f"slice_seconds must be > 0, got {slice_seconds}")
    finite = sorted(b for b in bounds if not math.isinf(b))
    upper = np.array([*finite, math.inf])
    start = t.min()
    n_slices = max(1, math.ceil((t.max() - start) / slice_seconds + 1e-12))
    edges = np.arange(n_slices + 1) * slice_seconds
    col = np.minimum(((t - start) // slice_seconds).astype(int), n_slices - 1)
    row = np.searchsorted(upper, lat, side="left")  # first bound >= latency: Prometheus' le
    counts = np.zeros((upper.size, n_slices))
    np.add.at(counts, (row, col), 1)
    return LatencyHeatmap(edges, upper, counts)


def plot(
    data: LatencyHeatmap,
    *,
    title: str = "Scheduling latency",
    unit: str = "s",
    slice_labels: Sequence[str] | None = None,
    slice_axis: str = "time since first sample (s)",
) -> Figure:
    """Draw the heatmap: x time slices, y buckets (log), colour = observations (log scale).

    The y axis spans only the buckets that hold observations (one empty bucket either side), so
    the data fills the axes. With `slice_labels` (say, one per wave) the slices are drawn side by
    side, equally wide, and labelled, instead of on a time axis. Empty cells stay white; the +Inf
    bucket is drawn as one more row above the last bound."""
    finite = data.bounds[np.isfinite(data.bounds)]
    lowest = finite[0] / 2 if finite.size else 1.0
    top = finite[-1] * 2 if finite.size else 2.0
    y_edges = np.array([lowest, *finite, top])
    if slice_labels is not None and len(slice_labels) != data.counts.shape[1]:
        raise ValueError(f"{len(slice_labels)} slice labels for {data.counts.shape[1]} slices")
    x_edges = np.arange(data.counts.shape[1] + 1) if slice_labels is not None else data.edges
    fig = Figure(figsize=(8, 4), layout="constrained")
    ax = fig.add_subplot()
    masked = np.ma.masked_less_equal(data.counts, 0)
    vmax = max(1.0, float(data.counts.max()))
    mesh = ax.pcolormesh(x_edges, y_edges, masked, norm=LogNorm(vmin=1, vmax=vmax), cmap="viridis", shading="flat")
    ax.set_yscale("log")
    used = np.nonzero(data.counts.sum(axis=1) > 0)[0]
    if used.size:
        first, last = max(int(used[0]) - 1, 0), min(int(used[-1]) + 1, len(y_edges) - 2)
        ax.set_ylim(y_edges[first], y_edges[last + 1])
    if slice_labels is not None:
        ax.set_xticks(np.arange(len(slice_labels)) + 0.5, list(slice_labels))
    ax.set_xlabel(slice_axis)
    ax.set_ylabel(f"latency bucket upper bound ({unit})")
    ax.set_title(f"{title}: {data.total} observations")
    fig.colorbar(mesh, ax=ax, label="observations per slice")
    return fig
