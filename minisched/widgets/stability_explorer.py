"""§2.1 explorer: sliders α, β → the poles against the unit circle, the stable region with the
current point, and the step response.

The widget is a thin shell: `explore()` computes everything and `draw()` renders it, both plain
functions that tests sweep over the sliders' whole ranges without a browser.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import numpy as np

from minisched.analysis import stability


@dataclass(frozen=True)
class SliderRange:
    minimum: float
    maximum: float
    step: float
    value: float

    def values(self) -> np.ndarray:
        count = int(round((self.maximum - self.minimum) / self.step)) + 1
        return np.round(np.linspace(self.minimum, self.maximum, count), 10)


ALPHA = SliderRange(-0.5, 3.5, 0.05, 0.6)
BETA = SliderRange(-1.2, 1.2, 0.05, 0.3)
STEPS = 40


@dataclass(frozen=True)
class View:
    alpha: float
    beta: float
    roots: np.ndarray
    radius: float
    predicted_stable: bool  # from the Jury inequalities
    response: np.ndarray  # x[0..STEPS] for a unit step in r, from rest

    @property
    def numeric_stable(self) -> bool:
        return self.radius < 1.0

    def summary(self) -> str:
        poles = ", ".join(f"{p.real:+.3f}{p.imag:+.3f}j" for p in self.roots)
        verdict = "stable" if self.predicted_stable else "unstable"
        return (
            f"α={self.alpha:.2f} β={self.beta:.2f}: poles {poles}; max |z| = {self.radius:.3f} → {verdict} "
            f"(α > 0: {self.alpha > 0}, |β| < 1: {abs(self.beta) < 1}, α < 2+2β: {self.alpha < 2 + 2 * self.beta})"
        )


def explore(alpha: float, beta: float, steps: int = STEPS) -> View:
    """Everything the explorer shows for one slider position."""
    with np.errstate(over="ignore", invalid="ignore"):
        response = stability.simulate(alpha, beta, steps=steps)
    return View(
        alpha=float(alpha),
        beta=float(beta),
        roots=stability.roots(alpha, beta),
        radius=stability.spectral_radius(alpha, beta),
        predicted_stable=stability.predicted_stable(alpha, beta),
        response=response,
    )


def draw(view: View, figure: Any = None) -> Any:
    """Render `view` on a matplotlib Figure (new one if not given); returns the figure."""
    import matplotlib.pyplot as plt

    fig = figure if figure is not None else plt.figure(figsize=(12, 3.6))
    fig.clear()
    ax_roots, ax_region, ax_step = fig.subplots(1, 3)

    theta = np.linspace(0, 2 * np.pi, 200)
    ax_roots.plot(np.cos(theta), np.sin(theta), color="grey", lw=1)
    ax_roots.scatter(
        view.roots.real, view.roots.imag, color="tab:green" if view.numeric_stable else "tab:red", zorder=3
    )
    lim = max(1.3, float(np.max(np.abs(view.roots))) * 1.1)
    ax_roots.set(
        xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", title=f"poles, max |z| = {view.radius:.3f}"
    )
    ax_roots.axhline(0, color="grey", lw=0.5)
    ax_roots.axvline(0, color="grey", lw=0.5)

    betas = np.linspace(BETA.minimum, BETA.maximum, 200)
    upper = np.clip(2 + 2 * betas, 0, None)
    inside = (betas > -1) & (betas < 1)
    ax_region.fill_between(betas, 0, upper, where=inside, color="tab:green", alpha=0.25, label="stable")
    ax_region.plot(view.beta, view.alpha, "o", color="black")
    ax_region.set(
        xlim=(BETA.minimum, BETA.maximum), ylim=(ALPHA.minimum, ALPHA.maximum), xlabel="β", ylabel="α",
        title="α > 0, |β| < 1, α < 2 + 2β",
    )  # fmt: skip

    shown = np.clip(view.response, -5, 7)  # diverging runs would flatten the plot
    ax_step.step(range(len(shown)), shown, where="post")
    ax_step.axhline(1.0, color="grey", ls="--", lw=1)
    ax_step.set(ylim=(-5, 7), xlabel="k", title="x[k] for a unit step in r (clipped)")
    fig.tight_layout()
    return fig


def build_explorer() -> Any:
    """The ipywidgets explorer: two sliders, a summary line and the three plots."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from IPython.display import display

    from minisched.widgets.static import StaticVBox

    alpha_slider = widgets.FloatSlider(
        value=ALPHA.value, min=ALPHA.minimum, max=ALPHA.maximum, step=ALPHA.step, description="α"
    )
    beta_slider = widgets.FloatSlider(
        value=BETA.value, min=BETA.minimum, max=BETA.maximum, step=BETA.step, description="β"
    )
    text = widgets.Label()
    out = widgets.Output()

    def update(_: object = None) -> None:
        view = explore(alpha_slider.value, beta_slider.value)
        text.value = view.summary()
        with out:
            out.clear_output(wait=True)
            fig = draw(view)
            display(fig)
            plt.close(fig)

    alpha_slider.observe(update, names="value")
    beta_slider.observe(update, names="value")
    update()
    # a saved notebook shows the summary at the sliders' position when displayed (the plots need a kernel)
    box = StaticVBox([widgets.HBox([alpha_slider, beta_slider]), text, out], lambda: (
        f"<p>{html.escape(text.value)}<br><i>α and β are sliders in a live notebook; "
        "the plots are drawn from the same <code>explore(α, β)</code>.</i></p>"))
    box.sliders = (alpha_slider, beta_slider)  # so tests (and readers) can move them
    box.summary_label = text
    return box
