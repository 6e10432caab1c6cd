"""Part II §3.1, §3.2 and §4.1's charts: levels of a DAG, layers as bands with counted imports, and
the configuration timeline (headless)."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

from minisched.widgets import charts

matplotlib.use("Agg")

LAYERS = [["m.top"], ["m.mid_a", "m.mid_b"], ["m.low"]]


def test_layer_import_counts_sum_module_imports_per_pair_of_layers() -> None:
    edges = {("m.top", "m.low"): 3, ("m.mid_a", "m.low"): 2, ("m.mid_b", "m.low"): 4, ("m.low", "m.top"): 1,
             ("m.mid_a", "m.mid_b"): 5, ("m.top", "outside"): 7}
    counts = charts.layer_import_counts(LAYERS, edges)
    assert counts.tolist() == [[0, 0, 3], [0, 5, 6], [1, 0, 0]]
    with pytest.raises(ValueError, match="negative import count"):
        charts.layer_import_counts(LAYERS, {("m.top", "m.low"): -1})


def test_layer_bands_label_every_layer_and_paint_sideways_and_upward_counts_red() -> None:
    edges = {("m.top", "m.mid_a"): 2, ("m.low", "m.top"): 1, ("m.mid_a", "m.mid_b"): 5}
    fig = charts.layer_bands(LAYERS, edges, prefix="m.")
    bands, grid = fig.axes
    assert [t.get_text() for t in bands.texts] == ["L3  top", "L2  mid_a | mid_b", "L1  low"]
    cells = {t.get_text(): t.get_color() for t in grid.texts}
    assert cells == {"2": "black", "5": "white", "1": "white"}  # white on red: the broken ones
    reds = [p for p in grid.patches if p.get_facecolor()[:3] == matplotlib.colors.to_rgb("tab:red")]
    assert len(reds) == 2
    assert grid.get_title() == "imports from row to column: 2 down, 6 sideways or up"
    fig.canvas.draw()


def test_dependency_levels_put_each_pod_in_its_level_column() -> None:
    names, levels = ["app", "db", "cache", "volume"], [2, 1, 0, 0]
    fig = charts.dependency_levels(names, levels, [(1, 0), (2, 0), (3, 1)])
    ax = fig.axes[0]
    placed = {t.get_text(): t.get_position() for t in ax.texts if t.get_text()}
    assert {name: x for name, (x, _) in placed.items()} == {"app": 2.0, "db": 1.0, "cache": 0.0, "volume": 0.0}
    assert placed["cache"][1] != placed["volume"][1]  # stacked, not on top of each other
    arrows = [a for a in ax.texts if type(a).__name__ == "Annotation"]
    assert len(arrows) == 3 and all(a.arrow_patch.get_edgecolor()[0] < 0.5 for a in arrows)
    # cache -> app skips level 1, where db sits in the same row: it bends round it, the others are straight
    bends = {(a.xyann[0], a.xy[0]): a.arrowprops["connectionstyle"] for a in arrows}
    assert bends == {(1.0, 2.0): "arc3,rad=0.0", (0.0, 2.0): "arc3,rad=-0.35", (0.0, 1.0): "arc3,rad=0.0"}
    backwards = charts.dependency_levels(names, levels, [(0, 1)])
    assert [a for a in backwards.axes[0].texts if type(a).__name__ == "Annotation"][0].arrow_patch.get_edgecolor()[:3] \
        == matplotlib.colors.to_rgb("tab:red")
    with pytest.raises(ValueError, match="4 names for 3 levels"):
        charts.dependency_levels(names, levels[:3], [])


def test_pods_per_level_labels_each_bar_with_its_count() -> None:
    fig = charts.pods_per_level({"tiny": [2, 1, 1]})
    ax = fig.axes[0]
    assert [round(p.get_height()) for p in ax.patches] == [2, 1, 1]
    assert ax.get_title() == "tiny: 3 levels"


def test_config_timeline_counts_changes_and_marks_edits_and_swaps() -> None:
    timeline = ["A", "A", "B", "B", "B", "A"]
    fig = charts.config_timeline(timeline, ["A", "B"], edits=[1, 2, 3, 4], swaps=[2, 5])
    ax = fig.axes[0]
    assert ax.get_title().endswith(": 2 changes")
    assert np.array_equal(ax.lines[0].get_ydata(), [0, 0, 1, 1, 1, 0])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["4 edits of the object", "2 new frameworks taken by the loop"]
    with pytest.raises(ValueError, match=r"\['MIXED'\]"):
        charts.config_timeline(["A", "MIXED"], ["A", "B"])
