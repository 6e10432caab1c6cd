"""§3.3: the book's balanced-allocation formula beside kube-scheduler's, and the score breakdown view."""

from __future__ import annotations

import numpy as np
import pytest

from minisched.analysis.scoring import (
    book_balanced_score,
    book_vs_kube_pick,
    compare_balanced,
    go_round,
    kube_balanced_score,
    least_allocated_score,
    two_resource_grid,
    weighted_total,
)
from minisched.scheduler.framework.decision import Decision, PluginScores
from minisched.scheduler.framework.interface import FilterResult
from minisched.widgets.score_breakdown import (
    VIEWS,
    breakdown_html,
    breakdown_rows,
    breakdown_text,
    filtered_nodes,
    plot_breakdown,
    score_breakdown_widget,
)


def test_go_round_sends_halves_away_from_zero() -> None:
    assert [go_round(x) for x in (0.5, 1.5, 2.5, -0.5, 2.4999)] == [1, 2, 3, -1, 2]
    assert round(2.5) == 2  # Python's own round would not be the book's Go


@pytest.mark.parametrize(
    ("fractions", "book", "kube"),
    [
        ([0.5, 0.5], 100, 100),  # balanced: both agree
        ([0.6, 0.4], 95, 90),  # the book's own example: std 0.1
        ([0.0, 1.0], 75, 50),  # the extreme: book bottoms out at 75, kube at 50
        ([0.3, 0.1], 95, 90),
        ([0.25, 0.2], 99, 97),  # rounding vs truncation
        ([0.2, 0.2, 0.8], 86, 71),  # three resources: population std sqrt(0.08)
    ],
)
def test_book_and_kube_formulas(fractions: list[float], book: int, kube: int) -> None:
    assert book_balanced_score(fractions) == book
    assert kube_balanced_score(fractions) == kube


def test_where_the_formulas_differ_over_the_grid() -> None:
    f, book, kube = two_resource_grid(11)
    assert (np.diag(book) == 100).all() and (np.diag(kube) == 100).all()  # agree when balanced
    off = ~np.eye(len(f), dtype=bool)
    assert (book[off] > kube[off]).all()  # elsewhere the book always scores higher
    assert book.min() == 75 and kube.min() == 50  # half the range
    # Both fall as the spread grows, but float noise in |f1 - f2| moves scores by one at the edges
    # (kube truncates 64.99999999999999 to 64; the book's round() meets exact halves like 2.5).
    spread = np.round(np.abs(f[:, None] - f[None, :]), 9)
    for d in np.unique(spread):
        same = spread == d
        assert max(book[same]) - min(book[same]) <= 1 and max(kube[same]) - min(kube[same]) <= 1
    assert kube_balanced_score([0.7, 0.0]) == 65 and kube_balanced_score([0.8, 0.1]) == 64
    assert book_balanced_score([0.1, 0.0]) == 97 and book_balanced_score([0.3, 0.2]) == 98


def test_sample_std_is_another_reading_of_the_book() -> None:
    c = compare_balanced([600, 400], [1000, 1000])
    assert (c.book, c.book_sample_std, c.kube) == (95, 93, 90)
    assert c.difference == 5


def test_compare_caps_fractions_and_skips_zero_allocatable_like_kube() -> None:
    c = compare_balanced([2000, 100, 5], [1000, 1000, 0])
    assert c.fractions == (1.0, 0.1)
    assert c.kube == 55  # (1 - 0.45) * 100


def test_weighted_with_least_allocated_the_book_can_pick_another_node() -> None:
    nodes = {"balanced": ([500, 500], [1000, 1000]), "skewed": ([100, 600], [1000, 1000])}
    result = book_vs_kube_pick(nodes)
    assert result["kube_pick"] == "balanced" and result["book_pick"] == "skewed"
    assert result["kube"] == {"balanced": 150, "skewed": 140}
    # with balanced allocation weighted 2, the book's halved penalty is compensated here
    assert book_vs_kube_pick(nodes, balanced_weight=2)["book_pick"] == "balanced"


def test_least_allocated_and_weighted_total() -> None:
    assert least_allocated_score([100, 600], [1000, 1000]) == 65
    assert weighted_total({"A": 50, "B": 10}, {"A": 2}) == 110


def _decision() -> Decision:
    names = ["n1", "n2", "n3", "n4"]
    failed = np.array([False, False, False, True])
    taint = FilterResult.fail_where(failed, "node(s) had untolerated taint(s)")
    feasible = np.array([0, 1, 2], np.intp)
    scores = {
        "TaintToleration": PluginScores(np.array([0, 2, 1]), np.array([100, 0, 50]), 3),
        "NodeResourcesBalancedAllocation": PluginScores(np.array([90, 100, 80]), np.array([90, 100, 80]), 1),
    }
    total = sum(s.weighted for s in scores.values())
    return Decision(
        pod="default/web", profile="minisched", node_names=names,
        evaluated_rows=np.arange(4, dtype=np.intp), filter_plugins=["TaintToleration"], filter_results=[taint],
        first_fail=np.array([-1, -1, -1, 0]), feasible_rows=feasible, score_plugins=scores,
        total=np.asarray(total, np.int64), chosen="n1",
    )


def test_breakdown_rows_in_every_view() -> None:
    d = _decision()
    weighted = breakdown_rows(d, "weighted")
    assert [r["node"] for r in weighted] == ["n1", "n3", "n2"]
    assert weighted[0] == {"node": "n1", "TaintToleration": 300, "NodeResourcesBalancedAllocation": 90,
                           "total": 390, "chosen": True}
    assert breakdown_rows(d, "raw")[2]["TaintToleration"] == 2
    assert breakdown_rows(d, "normalized")[1]["TaintToleration"] == 50
    for view in VIEWS:  # the total is the weighted sum whatever the view
        assert [r["total"] for r in breakdown_rows(d, view)] == [390, 230, 100]
    with pytest.raises(ValueError, match="view must be one of"):
        breakdown_rows(d, "scaled")


def test_text_and_html_renderings() -> None:
    d = _decision()
    text = breakdown_text(d)
    assert text.splitlines()[0] == "pod default/web: weighted scores, 3 feasible of 4 evaluated"
    assert "* n1" in text and "x n4: filtered by TaintToleration: node(s) had untolerated taint(s)" in text
    assert text.splitlines()[-1] == "chosen: n1"
    assert "(x3)" in text.splitlines()[1]
    page = breakdown_html(d, "raw")
    assert page.count("<tr") == 4 and "n4" in page and "&lt;" not in page


def test_widget_toggles_views_headlessly() -> None:
    d = _decision()
    box = score_breakdown_widget(d)
    toggle, table = box.children[1], box.children[2]
    before = table.value
    toggle.value = "raw"
    assert table.value == breakdown_html(d, "raw") != before


def test_plot_has_one_bar_series_per_plugin() -> None:
    import matplotlib

    matplotlib.use("Agg")
    ax = plot_breakdown(_decision())
    assert len(ax.containers) == 2
    assert filtered_nodes(_decision()) == [("n4", "TaintToleration", "node(s) had untolerated taint(s)")]


def test_unweighted_views_say_their_total_is_weighted_and_the_legend_leaves_the_bars_free() -> None:
    import matplotlib

    matplotlib.use("Agg")
    d = _decision()
    assert "total (weighted)" in breakdown_text(d, "raw") and "total (weighted)" in breakdown_html(d, "normalized")
    assert "total (weighted)" not in breakdown_text(d, "weighted")
    ax = plot_breakdown(d)
    ax.figure.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    axes = ax.get_window_extent()
    assert legend.x0 >= axes.x1, "the legend must sit outside the bars"


def test_a_saved_notebook_shows_the_table_the_toggle_is_on() -> None:
    d = _decision()
    box = score_breakdown_widget(d, view="normalized")
    data = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert breakdown_html(d, "normalized") in data["text/html"] and "<b>normalized</b>" in data["text/html"]
    box.children[1].value = "raw"
    assert breakdown_html(d, "raw") in box._repr_mimebundle_()["text/html"]
