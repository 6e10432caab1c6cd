"""The §2.1 widget's callbacks, swept over the sliders' full ranges without a browser."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from minisched.analysis import stability  # noqa: E402
from minisched.widgets import stability_explorer as ex  # noqa: E402


def test_explore_over_every_slider_position() -> None:
    alphas, betas = ex.ALPHA.values(), ex.BETA.values()
    assert alphas[0] == ex.ALPHA.minimum and alphas[-1] == ex.ALPHA.maximum
    seen = {True: 0, False: 0}
    for a in alphas:
        for b in betas:
            view = ex.explore(a, b)
            assert len(view.roots) == 2 and len(view.response) == ex.STEPS + 1
            if abs(view.radius - 1) > 1e-9:
                assert view.predicted_stable == view.numeric_stable, (a, b)
            seen[view.predicted_stable] += 1
            if view.predicted_stable:
                assert np.all(np.isfinite(view.response))
    assert seen[True] > 100 and seen[False] > 100  # the ranges cross the boundary both ways


def test_summary_states_the_three_conditions() -> None:
    text = ex.explore(0.6, 0.3).summary()
    assert "stable" in text and "α < 2+2β: True" in text and "0.548" in text
    assert "unstable" in ex.explore(3.0, 0.3).summary()


def test_draw_renders_corners_and_an_unstable_point() -> None:
    fig = plt.figure()
    for a, b in [
        (ex.ALPHA.minimum, ex.BETA.minimum),
        (ex.ALPHA.maximum, ex.BETA.maximum),
        (0.6, 0.3),
        (3.5, -1.2),
    ]:
        out = ex.draw(ex.explore(a, b), fig)
        assert len(out.axes) == 3
    plt.close(fig)


def test_widget_updates_when_sliders_move() -> None:
    box = ex.build_explorer()
    alpha_slider, beta_slider = box.sliders
    alpha_slider.value = 3.0
    assert "unstable" in box.summary_label.value
    beta_slider.value = 0.9
    assert box.summary_label.value.startswith("α=3.00 β=0.90") and " stable" in box.summary_label.value
    assert stability.predicted_stable(3.0, 0.9)
    plt.close("all")


def test_a_saved_notebook_shows_the_explorers_summary_not_its_repr() -> None:
    box = ex.build_explorer()
    box.sliders[0].value = 3.0
    data = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data  # still live where a kernel draws it
    assert "α=3.00 β=0.30" in data["text/html"] and "unstable" in data["text/html"]
    assert "VBox(" not in data["text/html"]
    plt.close("all")
