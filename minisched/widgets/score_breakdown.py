"""§3.3: the score breakdown of one scheduling decision: nodes by score plugins, raw, normalised
and weighted, and the nodes filters rejected.

The data shaping is plain functions over `minisched.scheduler.framework.decision.Decision`
(`breakdown_rows`, `breakdown_text`, `breakdown_html`, `filtered_nodes`), tested without a kernel;
`score_breakdown_widget` wires them to ipywidgets, and `plot_breakdown` draws the weighted parts as
stacked bars. What each view means:

- raw: what the plugin's Score returned (its own units: TaintToleration counts taints, the others
  are already 0..100);
- normalized: after the plugin's NormalizeScore, 0..100 (plugins without one pass raw through);
- weighted: normalized * the plugin's weight in the profile; a node's total is their sum.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from minisched.scheduler.framework.decision import Decision

if TYPE_CHECKING:
    import ipywidgets

View = Literal["raw", "normalized", "weighted"]
VIEWS: tuple[View, ...] = ("raw", "normalized", "weighted")


def _check_view(view: str) -> View:
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}, not {view!r}")
    return view


def plugins_of(decision: Decision) -> list[str]:
    return list(decision.score_plugins)


def weights_of(decision: Decision) -> dict[str, int]:
    return {plugin: s.weight for plugin, s in decision.score_plugins.items()}


def breakdown_rows(decision: Decision, view: str = "weighted") -> list[dict[str, Any]]:
    """One row per feasible node, best total first (ties by name):
    {"node", <plugin>: value in `view`, ..., "total", "chosen"}. The total is always weighted."""
    view = _check_view(view)
    scores = decision.scores()
    final = decision.final_scores()
    rows = []
    for node, per_plugin in scores.items():
        row: dict[str, Any] = {"node": node}
        for plugin in decision.score_plugins:
            row[plugin] = per_plugin[plugin][view]
        row["total"] = final.get(node, sum(per_plugin[p]["weighted"] for p in per_plugin))
        row["chosen"] = node == decision.chosen
        rows.append(row)
    rows.sort(key=lambda r: (-r["total"], r["node"]))
    return rows


def filtered_nodes(decision: Decision) -> list[tuple[str, str, str]]:
    """(node, the first filter plugin that rejected it, its reasons), by node name."""
    first = decision.first_failure()
    return [(node, plugin, ", ".join(reasons)) for node, (plugin, reasons) in sorted(first.items())]


def _short(plugin: str) -> str:
    """Column headers: NodeResourcesBalancedAllocation -> NodeResourcesBalanced..., kept unique by callers."""
    return plugin if len(plugin) <= 18 else plugin[:17] + "…"


def total_header(view: str) -> str:
    """The total is always the weighted sum (what the scheduler compares); say so where the other
    columns are not weighted."""
    return "total" if view == "weighted" else "total (weighted)"


def breakdown_text(decision: Decision, view: str = "weighted", *, max_nodes: int = 20) -> str:
    """A plain-text table (for print() and checked notebook cells)."""
    view = _check_view(view)
    rows = breakdown_rows(decision, view)[:max_nodes]
    plugins = plugins_of(decision)
    weights = weights_of(decision)
    headers = ["node"] + [f"{_short(p)} (x{weights[p]})" for p in plugins] + [total_header(view)]
    body = [[("* " if r["chosen"] else "  ") + r["node"]] + [str(r[p]) for p in plugins] + [str(r["total"])]
            for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in body)) if body else len(h) for i, h in enumerate(headers)]
    lines = [f"pod {decision.pod}: {view} scores, {decision.feasible} feasible of {decision.evaluated} evaluated"]
    lines.append("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths,
                                                                                               strict=True))))
    for line in body:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths,
                                                                                                   strict=True))))
    hidden = decision.feasible - len(rows)
    if hidden > 0:
        lines.append(f"  ... and {hidden} more feasible node(s)")
    for node, plugin, reasons in filtered_nodes(decision):
        lines.append(f"  x {node}: filtered by {plugin}: {reasons}")
    lines.append(f"chosen: {decision.chosen}" if decision.chosen else f"no node: {decision.message}")
    return "\n".join(lines)


def breakdown_html(decision: Decision, view: str = "weighted", *, max_nodes: int = 50) -> str:
    """The same table as HTML, with each cell shaded by its value (darker = higher)."""
    view = _check_view(view)
    rows = breakdown_rows(decision, view)[:max_nodes]
    plugins = plugins_of(decision)
    weights = weights_of(decision)
    top = max([1] + [int(r[p]) for r in rows for p in plugins])
    head = "".join(f"<th title='{html.escape(p)}'>{html.escape(_short(p))}<br>x{weights[p]}</th>" for p in plugins)
    out = [f"<table class='minisched-scores'><tr><th>node</th>{head}<th>{total_header(view)}</th></tr>"]
    for r in rows:
        style = " style='font-weight:bold'" if r["chosen"] else ""
        cells = "".join(
            f"<td style='background: rgba(31,119,180,{0.08 + 0.6 * int(r[p]) / top:.2f})'>{r[p]}</td>" for p in plugins
        )
        out.append(f"<tr{style}><td>{html.escape(r['node'])}</td>{cells}<td>{r['total']}</td></tr>")
    out.append("</table>")
    failed = filtered_nodes(decision)
    if failed:
        items = "".join(f"<li>{html.escape(n)}: {html.escape(p)}: {html.escape(why)}</li>" for n, p, why in failed)
        out.append(f"<p>Filtered out:</p><ul>{items}</ul>")
    return "".join(out)


def score_breakdown_widget(decision: Decision, view: str = "weighted") -> ipywidgets.VBox:
    """Toggle between raw, normalized and weighted scores of one decision."""
    import ipywidgets as w

    from minisched.widgets.static import StaticVBox

    toggle = w.ToggleButtons(options=list(VIEWS), value=_check_view(view), description="scores")
    table = w.HTML(breakdown_html(decision, view))

    def on_change(change: dict[str, Any]) -> None:
        table.value = breakdown_html(decision, str(change["new"]))

    toggle.observe(on_change, names="value")
    title = w.HTML(f"<b>{html.escape(decision.pod)}</b> → {html.escape(str(decision.chosen))}")
    # a saved notebook shows the view the toggle is on when displayed
    return StaticVBox([title, toggle, table], lambda: (
        f"{title.value}<br>scores: <b>{html.escape(str(toggle.value))}</b> "
        f"(raw / normalized / weighted: a toggle in a live notebook){table.value}"))


def plot_breakdown(decision: Decision, ax: Any = None, *, max_nodes: int = 20) -> Any:
    """Stacked horizontal bars: each node's weighted score, one colour per plugin."""
    import matplotlib.pyplot as plt

    rows = breakdown_rows(decision, "weighted")[:max_nodes]
    plugins: Sequence[str] = plugins_of(decision)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.4 * len(rows) + 1.4), layout="constrained")
    names = [("* " if r["chosen"] else "") + r["node"] for r in rows][::-1]
    left = [0] * len(rows)
    for plugin in plugins:
        values = [int(r[plugin]) for r in rows][::-1]
        ax.barh(names, values, left=left, label=f"{plugin} (x{decision.score_plugins[plugin].weight})")
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_xlabel("weighted score (sum = total)")
    ax.set_title(f"{decision.pod} → {decision.chosen}")
    # Outside the axes: inside, it covers the longest bars, and the chosen node's is one of them.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", title="plugin (weight)")
    return ax
