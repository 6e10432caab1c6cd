"""The chapters' charts draw what they are given (headless)."""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest

from minisched.concurrency.throughput import Measurement
from minisched.controllers.gain_loop import GainLoop, simulate_quantized
from minisched.widgets import charts
from tests.chapters12.test_gain_loop import IdealPlant

matplotlib.use("Agg")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def test_leading_intervals_pair_starts_with_stops_and_close_at_the_end() -> None:
    timeline = [(0.0, "sees leader a"), (0.0, "started leading"), (14.0, "stopped leading"),
                (30.0, "started leading")]  # fmt: skip
    assert charts.leading_intervals(timeline, end=40.0) == [(0.0, 14.0), (30.0, 40.0)]
    assert charts.leading_intervals([(5.0, "sees leader b")], end=9.0) == []
    assert charts.leading_intervals([(3.0, "stopped leading")], end=9.0) == []


def test_leader_timeline_draws_one_bar_per_stretch_and_the_marks() -> None:
    fig = charts.leader_timeline({"a": [(0.0, "started leading"), (14.0, "stopped leading")],
                                  "b": [(22.0, "started leading")]}, end=30.0, marks={"cut": 3.0})  # fmt: skip
    ax = fig.axes[0]
    bars = [c for c in ax.collections]
    assert [list(map(tuple, b.get_paths()[0].vertices[:1])) for b in bars] == [[(0.0, -0.3)], [(22.0, 0.7)]]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert any(t.get_text() == "cut" for t in ax.texts)
    assert _png(fig)[:4] == b"\x89PNG"


def test_gain_runs_plots_cluster_against_model() -> None:
    run = GainLoop(IdealPlant(), alpha=0.6, beta=0.3, reference=10, max_replicas=20).run_steps(12)
    fig = charts.gain_runs({"x": run}, {"x": simulate_quantized(0.6, 0.3, 10, 20, 12)})
    lines = fig.axes[0].get_lines()
    assert list(lines[1].get_ydata()) == run.observed
    assert _png(fig)[:4] == b"\x89PNG"


def test_the_other_charts_draw_their_numbers() -> None:
    cost = charts.startup_cost([(100, 0.005), (1000, 0.03)], backend="embedded")
    assert list(cost.axes[0].get_lines()[0].get_ydata()) == pytest.approx([5.0, 30.0])
    assert list(cost.axes[1].get_lines()[0].get_ydata()) == pytest.approx([50.0, 30.0])
    queues = charts.queue_throughput({"a": Measurement("a", 1000, [0.001, 0.002, 0.004]),
                                      "b": Measurement("b", 1000, [0.01])})  # fmt: skip
    widths = [p.get_width() for p in queues.axes[0].patches]
    assert widths == pytest.approx([0.5, 0.1])  # median rates, million items per second
    herd = charts.retry_herd({"no jitter": np.array([1.0, 1.0, 1.0, 3.0]), "jitter": np.array([1.0, 1.5, 2.0, 3.0])})
    assert herd.axes[0].get_title().endswith("holds 3 requests")
    assert herd.axes[1].get_title().endswith("holds 1 requests")
    waits = charts.backoff_waits([0.005, 0.01, 0.02], cap=1000)
    assert waits.axes[0].get_yscale() == "log"
    layout = charts.placements({"score": {"n1": 3, "n2": 3}, "first": {"n1": 5}}, ["n1", "n2"], capacity=5)
    assert [p.get_height() for p in layout.axes[0].patches] == [3, 3, 5, 0]
    for fig in (cost, queues, herd, waits, layout):
        assert _png(fig)[:4] == b"\x89PNG"


def test_a_chart_renders_itself_for_ipython() -> None:
    fig = charts.backoff_waits([0.005, 0.01])
    assert isinstance(fig, charts.Chart)
    assert fig._repr_png_()[:4] == b"\x89PNG"


def test_verdict_grid_colours_each_cell_by_its_verdict() -> None:
    fig = charts.verdict_grid({"p": {("a", "x"): True, ("a", "y"): False, ("b", "x"): False, ("b", "y"): True}},
                              ["a", "b"], ["x", "y"])  # fmt: skip
    ax = fig.axes[0]
    assert ax.images[0].get_array().tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert [t.get_text() for t in ax.texts] == ["yes", "no", "no", "yes"]


def test_event_swimlanes_put_each_event_on_its_aggregates_lane() -> None:
    fig = charts.event_swimlanes([("ns/a", 1, "Failed", ""), ("ns/b", 2, "Scheduled", "n1"), ("ns/a", 3, "Scheduled", "n2")])
    ax = fig.axes[0]
    scheduled = next(c for c in ax.collections if c.get_label() == "Scheduled")
    assert scheduled.get_offsets().tolist() == [[2.0, 1.0], [3.0, 0.0]]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["ns/a", "ns/b"]
    assert _png(fig)[:4] == b"\x89PNG"
