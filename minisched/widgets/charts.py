"""The chapters' charts: each takes what a chapter measured and returns a matplotlib Figure.

They build `Chart`s, matplotlib Figures made without pyplot (no global state) that render
themselves as PNG for IPython: a notebook shows one by ending a cell with it, whatever the
matplotlib backend, and tests draw them headless.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

if TYPE_CHECKING:  # for the annotations only: importing them pulls in sympy, seconds a notebook would wait
    from minisched.concurrency.throughput import Measurement
    from minisched.controllers.gain_loop import LoopRun

LEADING = "started leading"
STOPPED = "stopped leading"


class Chart(Figure):
    """A Figure that IPython displays by itself (no pyplot, no inline-backend set-up needed)."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=90)
        return buf.getvalue()


# -- chapter 1 -------------------------------------------------------------------------------------------


def placements(layouts: Mapping[str, Mapping[str, int]], nodes: Sequence[str], *, capacity: int | None = None) -> Figure:
    """Pods per node, one group of bars per node and one bar per layout (say, score vs first fit)."""
    fig = Chart(figsize=(7, 3.2), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(layouts))
    x = np.arange(len(nodes))
    for i, (label, counts) in enumerate(layouts.items()):
        bars = ax.bar(x + (i - (len(layouts) - 1) / 2) * width, [counts.get(n, 0) for n in nodes], width, label=label)
        ax.bar_label(bars)
    if capacity is not None:
        ax.axhline(capacity, color="grey", linestyle=":", linewidth=1)
        ax.annotate("node full", (len(nodes) - 0.5, capacity), ha="right", va="bottom", color="grey")
    ax.set_xticks(x, list(nodes))
    ax.set_ylabel("pods on the node")
    ax.legend(loc="upper right", fontsize="small")
    ax.margins(y=0.2)
    return fig


# -- chapter 2 -------------------------------------------------------------------------------------------


def gain_runs(runs: Mapping[str, LoopRun], models: Mapping[str, Sequence[int]]) -> Figure:
    """One panel per loop: pods counted on the cluster (dots) over the quantized model (line), the
    reference (dashed) and the actuator's limits (grey)."""
    cols = min(3, len(runs))
    rows = -(-len(runs) // cols)
    fig = Chart(figsize=(4.2 * cols, 2.8 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, (label, run) in zip(axes.flat, runs.items(), strict=False):
        steps = np.arange(len(run.observed))
        ax.plot(steps, models[label], color="tab:blue", linewidth=1.2, label="model")
        ax.plot(steps, run.observed, "o", color="tab:orange", markersize=3.5, label="cluster")
        ax.axhline(run.reference, color="black", linestyle="--", linewidth=0.8, label="reference r")
        ax.axhspan(run.max_replicas, run.max_replicas * 1.15, color="grey", alpha=0.15)
        ax.axhspan(-0.15 * run.max_replicas, 0, color="grey", alpha=0.15)
        ax.set_ylim(-0.1 * run.max_replicas, run.max_replicas * 1.1)
        ax.set_title(f"{label}\nρ = {run.predicted_radius:.3f}", fontsize="medium")
        ax.set_xlabel("step k")
        ax.set_ylabel("pods")
    for ax in list(axes.flat)[len(runs):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize="small", loc="lower right")
    return fig


def startup_cost(points: Sequence[tuple[int, float]], *, backend: str) -> Figure:
    """Informer start-up (start → synced and handled) against the number of objects listed."""
    objects = np.array([n for n, _ in points], dtype=float)
    millis = np.array([s for _, s in points], dtype=float) * 1e3
    fig = Chart(figsize=(8, 3.2), layout="constrained")
    total, per_object = fig.subplots(1, 2)
    total.plot(objects, millis, "o-")
    total.set_xlabel("objects listed")
    total.set_ylabel("start-up (ms)")
    total.set_title(f"informer start-up, {backend} backend")
    total.set_ylim(bottom=0)
    per_object.plot(objects, millis * 1e3 / objects, "o-", color="tab:green")
    per_object.set_xlabel("objects listed")
    per_object.set_ylabel("µs per object")
    per_object.set_title("cost per object")
    per_object.set_ylim(bottom=0)
    return fig


def queue_throughput(results: Mapping[str, Measurement]) -> Figure:
    """Median items per second for each queue, with the slowest and fastest run as whiskers."""
    kinds = list(results)
    medians = np.array([results[k].median_rate for k in kinds])
    slow = np.array([results[k].spread[0] for k in kinds])
    fast = np.array([results[k].spread[1] for k in kinds])
    fig = Chart(figsize=(8, 0.5 * len(kinds) + 1.4), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(kinds))[::-1]
    ax.barh(y, medians / 1e6, xerr=[(medians - slow) / 1e6, (fast - medians) / 1e6], capsize=4, color="tab:blue")
    ax.set_yticks(y, kinds)
    ax.set_xlabel("million items per second (median; whiskers: slowest and fastest run)")
    ax.set_title("one producer, one consumer")
    return fig


def backoff_waits(waits: Sequence[float], *, cap: float | None = None) -> Figure:
    """A rate limiter's wait after each consecutive failure of one key, on a log scale."""
    fig = Chart(figsize=(7, 3), layout="constrained")
    ax = fig.add_subplot()
    failures = np.arange(1, len(waits) + 1)
    ax.step(failures, waits, where="mid", color="tab:red")
    ax.plot(failures, waits, "o", color="tab:red", markersize=3)
    ax.set_yscale("log")
    if cap is not None:
        ax.axhline(cap, color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"cap {cap:g} s", (1, cap), va="bottom", color="grey")
    ax.set_xlabel("consecutive failures of one key")
    ax.set_ylabel("wait before the next try (s)")
    return fig


# -- chapter 4 -------------------------------------------------------------------------------------------


def retry_herd(arrivals: Mapping[str, np.ndarray], *, bin_seconds: float = 0.1) -> Figure:
    """Retry arrivals per `bin_seconds` over time, one panel per policy, on a shared scale."""
    end = max(float(np.max(times)) for times in arrivals.values())
    edges = np.arange(0.0, end + bin_seconds, bin_seconds)
    fig = Chart(figsize=(8, 1.9 * len(arrivals) + 0.6), layout="constrained")
    axes = fig.subplots(len(arrivals), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    for ax, (label, times) in zip(axes, arrivals.items(), strict=True):
        counts, _ = np.histogram(times, bins=edges)
        ax.bar(edges[:-1], counts, width=bin_seconds, align="edge", color="tab:purple")
        ax.set_title(f"{label}: busiest {bin_seconds * 1e3:g} ms holds {int(counts.max())} requests", fontsize="medium")
        ax.set_ylabel(f"requests per {bin_seconds * 1e3:g} ms")
    axes[-1].set_xlabel("time since the shared failure (s)")
    return fig


def leading_intervals(timeline: Sequence[tuple[float, str]], end: float) -> list[tuple[float, float]]:
    """(start, stop) of every stretch a replica led, from its (time, what) records; a stretch still
    open at `end` stops there."""
    intervals: list[tuple[float, float]] = []
    started: float | None = None
    for at, what in sorted(timeline, key=lambda r: r[0]):
        if what == LEADING and started is None:
            started = at
        elif what == STOPPED and started is not None:
            intervals.append((started, at))
            started = None
    if started is not None:
        intervals.append((started, max(end, started)))
    return intervals


def leader_timeline(
    timelines: Mapping[str, Sequence[tuple[float, str]]], *, end: float, marks: Mapping[str, float] | None = None
) -> Figure:
    """Who led when: one row per replica, a bar for each stretch it led, and vertical lines for
    the moments in `marks` (say, the partition)."""
    fig = Chart(figsize=(8, 0.7 * len(timelines) + 1.3), layout="constrained")
    ax = fig.add_subplot()
    names = list(timelines)
    for row, name in enumerate(names):
        spans = [(a, b - a) for a, b in leading_intervals(timelines[name], end)]
        ax.broken_barh(spans, (row - 0.3, 0.6), color="tab:green")
        for a, width in spans:
            ax.annotate(f"{a:g}–{a + width:g} s", (a + width / 2, row), ha="center", va="center", color="white",
                        fontsize="small")  # fmt: skip
    for i, (label, at) in enumerate((marks or {}).items()):
        ax.axvline(at, color="tab:red", linestyle="--", linewidth=1)
        ax.annotate(label, (at, len(names) - 0.5 + 0.25 * i), xytext=(3, 0), textcoords="offset points",
                    color="tab:red", fontsize="small", va="center")  # fmt: skip
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(-0.6, len(names) - 0.1 + 0.25 * len(marks or {}))
    ax.set_xlim(0, end)
    ax.set_xlabel("virtual seconds")
    ax.set_title("who holds the lease (green: leading)")
    return fig


# -- chapter 3 -------------------------------------------------------------------------------------------


def verdict_grid(panels: Mapping[str, Mapping[tuple[str, str], bool]], rows: Sequence[str], cols: Sequence[str]) -> Figure:
    """One grid per panel: a green cell where (row, col) passes, a red one where it does not."""
    from matplotlib.colors import ListedColormap

    fig = Chart(figsize=(3.2 * len(panels) + 1.2, 0.45 * len(rows) + 1.6), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    for ax, (title, verdicts) in zip(axes, panels.items(), strict=True):
        grid = np.array([[1.0 if verdicts[(r, c)] else 0.0 for c in cols] for r in rows])
        ax.imshow(grid, cmap=ListedColormap(["#d62728", "#2ca02c"]), vmin=0, vmax=1, aspect="auto")
        for (i, j), passed in np.ndenumerate(grid):
            ax.text(j, i, "yes" if passed else "no", ha="center", va="center", color="white", fontsize="small")
        ax.set_xticks(range(len(cols)), list(cols), rotation=30, ha="right")
        ax.set_yticks(range(len(rows)), list(rows))
        ax.set_title(title, fontsize="medium")
    return fig


# -- chapter 4 (the decision log) -------------------------------------------------------------------------


def event_swimlanes(
    events: Sequence[tuple[str, int, str, str]], *, x_label: str = "position in the log (commit order)"
) -> Figure:
    """An event log as lanes: one row per aggregate, each event at its log position, one marker per
    event type, annotated (say, with the node): (aggregate, position, event type, note)."""
    lanes = sorted({aggregate for aggregate, *_ in events})
    types = sorted({kind for _, _, kind, _ in events})
    markers = dict(zip(types, "oXsD^v<>P*", strict=False))
    fig = Chart(figsize=(8, 0.45 * len(lanes) + 1.5), layout="constrained")
    ax = fig.add_subplot()
    for kind in types:
        xs = [pos for _, pos, k, _ in events if k == kind]
        ys = [lanes.index(agg) for agg, _, k, _ in events if k == kind]
        ax.scatter(xs, ys, marker=markers[kind], s=60, label=kind, zorder=3)
    for aggregate, position, _, note in events:
        if note:
            ax.annotate(note, (position, lanes.index(aggregate)), xytext=(6, 5), textcoords="offset points",
                        fontsize="x-small")  # fmt: skip
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_xlabel(x_label)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.margins(x=0.08, y=0.15)
    return fig


# -- Part II §4.3 --------------------------------------------------------------------------------------


def node_fill(runs: Mapping[str, Mapping[str, tuple[int, int]]]) -> Figure:
    """One panel per run: each node's CPU requested by its bound pods (bars, in CPUs) against its
    allocatable (the line); bars over it in red. `runs`: label -> node -> (millicores, allocatable)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig = Chart(figsize=(9, 3.0), layout="constrained")
    axes = fig.subplots(1, max(1, len(runs)), sharey=True, squeeze=False)[0]
    top = 1.0
    for ax, (label, nodes) in zip(axes, runs.items(), strict=False):
        names = sorted(nodes)
        used = np.array([nodes[n][0] for n in names], dtype=float) / 1000
        alloc = np.array([nodes[n][1] for n in names], dtype=float) / 1000
        over = used > alloc
        x = np.arange(len(names))
        ax.bar(x, used, width=0.9, color=np.where(over, "tab:red", "tab:blue"))
        if len(names):
            ax.step(np.append(x, len(names)) - 0.5, np.append(alloc, alloc[-1]), where="post", color="black", linewidth=1)
            top = max(top, float(used.max()), float(alloc.max()))
        ax.set_title(f"{label}: {int(over.sum())} of {len(names)} nodes over", fontsize="medium")
        ax.set_xlabel("node")
        ax.set_xticks([])
    axes[0].set_ylim(0, top * 1.4)
    axes[0].set_ylabel("CPUs requested by bound pods")
    axes[0].legend(handles=[Patch(color="tab:blue", label="within allocatable"),
                            Patch(color="tab:red", label="over allocatable"),
                            Line2D([], [], color="black", linewidth=1, label="allocatable")],
                   loc="upper left", ncols=3, fontsize="small")
    return fig


# -- Part II §2.2 ----------------------------------------------------------------------------------------


def cost_bars(costs: Mapping[str, float], *, title: str, unit: str = "ns", scale: float = 1e9) -> Chart:
    """Seconds per operation as horizontal bars on a log axis, each labelled with its value in
    `unit` (`scale` converts seconds to it): costs that differ by orders of magnitude side by side,
    where a linear axis would flatten all but the largest to nothing."""
    if not costs or any(not np.isfinite(v) or v <= 0 for v in costs.values()):
        raise ValueError(f"cost_bars needs at least one positive, finite cost, got {dict(costs)}")
    names, values = list(costs), np.array([costs[k] * scale for k in costs])
    fig = Chart(figsize=(7.5, 0.45 * len(names) + 1.2))
    ax = fig.add_subplot()
    y = np.arange(len(names))[::-1]
    ax.barh(y, values, color="tab:blue")
    ax.set_xscale("log")
    ax.set_yticks(y, names, fontsize=8)
    for yi, v in zip(y, values, strict=True):
        ax.annotate(f"{v:,.0f} {unit}", (v, yi), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlim(values.min() / 3, values.max() * 8)
    ax.set_xlabel(f"{unit} per operation (log scale), measured")
    ax.set_title(title)
    fig.tight_layout()
    return fig


# -- Part II §3.1 --------------------------------------------------------------------------------------


def dependency_levels(names: Sequence[str], levels: Sequence[int], edges: Sequence[tuple[int, int]]) -> Figure:
    """A small dependency DAG drawn by its levels: one column per level (level 0, what waits for
    nothing, on the left), an arrow from each pod to the pods that wait for it. `levels[i]` is
    node i's level, `edges` are (before, after) index pairs; an edge that does not point to a
    higher level (impossible in a correct levelling) is drawn red."""
    if len(names) != len(levels):
        raise ValueError(f"{len(names)} names for {len(levels)} levels")
    fig = Chart(figsize=(1.8 * (max(levels, default=0) + 1) + 1, 0.55 * _tallest(levels) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    rows: dict[int, int] = {}
    pos = []
    for level in levels:
        pos.append((float(level), float(rows.get(level, 0))))
        rows[level] = rows.get(level, 0) + 1
    for a, b in edges:
        wrong = levels[b] <= levels[a]
        # an arrow that skips a level bends, so it cannot pass through a pod in between
        bend = -0.35 if abs(levels[b] - levels[a]) > 1 else 0.0
        ax.annotate("", xy=pos[b], xytext=pos[a],
                    arrowprops={"arrowstyle": "->", "color": "tab:red" if wrong else "0.35", "shrinkA": 16, "shrinkB": 16,
                                "connectionstyle": f"arc3,rad={bend}"})
    for name, (x, y) in zip(names, pos, strict=True):
        ax.text(x, y, name, ha="center", va="center", fontsize=9, bbox={"boxstyle": "round", "fc": "white", "ec": "0.3"})
    top = max(levels, default=0)
    ax.set_xticks(range(top + 1), [f"level {k}" for k in range(top + 1)])
    ax.set_xlim(-0.6, top + 0.6)
    ax.set_ylim(max(rows.values(), default=1) - 0.2, -1.2)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title("each arrow: the pod at its tail must be bound before the pod at its head", fontsize="medium")
    return fig


def _tallest(levels: Sequence[int]) -> int:
    return max(np.bincount(np.asarray(levels, dtype=np.int64)).tolist(), default=1) if len(levels) else 1


def pods_per_level(sizes: Mapping[str, Sequence[int]]) -> Figure:
    """Pods per Kahn level, one panel per graph (label -> sizes, level 0 first), each bar labelled."""
    fig = Chart(figsize=(4.6 * max(1, len(sizes)), 2.8), layout="constrained")
    axes = fig.subplots(1, max(1, len(sizes)), squeeze=False)[0]
    for ax, (label, counts) in zip(axes, sizes.items(), strict=False):
        bars = ax.bar(range(len(counts)), counts, color="tab:blue")
        ax.bar_label(bars, fontsize=7)
        ax.set_xlabel("level (the Python loop runs once per level)")
        ax.set_title(f"{label}: {len(counts)} levels", fontsize="medium")
        ax.margins(y=0.15)
    axes[0].set_ylabel("pods in the level")
    return fig


# -- Part II §3.2 --------------------------------------------------------------------------------------


def layer_import_counts(layers: Sequence[Sequence[str]], edges: Mapping[tuple[str, str], int]) -> np.ndarray:
    """counts[i, j]: module imports from layer i to layer j, rows and columns in the contract's order
    (top layer first). A kept layers contract has counts only right of the diagonal (from a layer
    to one below it); the diagonal (siblings) and the left (upward) must be zero. Imports of
    modules outside the contract are left out."""
    row = {m: i for i, layer in enumerate(layers) for m in layer}
    counts = np.zeros((len(layers), len(layers)), dtype=np.int64)
    for (a, b), n in edges.items():
        if n < 0:
            raise ValueError(f"negative import count {n} for {a} -> {b}")
        if a in row and b in row:
            counts[row[a], row[b]] += n
    return counts


def layer_bands(layers: Sequence[Sequence[str]], edges: Mapping[tuple[str, str], int], *, prefix: str = "minisched.") -> Figure:
    """The layers as labelled bands (top layer at the top) beside a grid of the imports counted
    between them: row = the importing layer, column = the imported one. Counts below a layer
    (right of the diagonal) are grey; siblings (the diagonal) and upward imports (left of it),
    which break the contract, are red."""
    counts = layer_import_counts(layers, edges)
    n = len(layers)
    fig = Chart(figsize=(12, 0.42 * n + 1.6), layout="constrained")
    bands, grid = fig.subplots(1, 2, sharey=True, width_ratios=[1.1, 1])
    for i, layer in enumerate(layers):
        bands.axhspan(i - 0.45, i + 0.45, color="tab:blue" if i % 2 else "tab:cyan", alpha=0.18)
        names = " | ".join(m.removeprefix(prefix) for m in layer)
        bands.text(0.01, i, f"L{n - i}  {names}", va="center", fontsize=8)
    bands.set_xlim(0, 1)
    bands.set_ylim(n - 0.5, -0.5)
    bands.set_xticks([])
    bands.set_yticks([])
    bands.set_title("the contract's layers, top first", fontsize="medium")
    for i in range(n):
        for j in range(n):
            if counts[i, j]:
                broken = j <= i
                grid.add_patch(_cell(j, i, "tab:red" if broken else "0.85"))
                grid.text(j, i, str(counts[i, j]), ha="center", va="center", fontsize=7,
                          color="white" if broken else "black", fontweight="bold" if broken else "normal")
    grid.plot([-0.5, n - 0.5], [-0.5, n - 0.5], color="0.5", linewidth=0.6, linestyle=":")
    grid.set_xlim(-0.5, n - 0.5)
    grid.set_xticks(range(n), [f"L{n - j}" for j in range(n)], fontsize=7)
    grid.tick_params(left=False)
    grid.set_xlabel("imported layer")
    up = int(np.tril(counts).sum())
    grid.set_title(f"imports from row to column: {int(np.triu(counts, 1).sum())} down, {up} sideways or up",
                   fontsize="medium")
    return fig


def _cell(x: int, y: int, color: str) -> object:
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, color=color)


# -- Part II §4.1 --------------------------------------------------------------------------------------


def config_timeline(timeline: Sequence[str], order: Sequence[str], *, edits: Sequence[int] = (),
                    swaps: Sequence[int] = ()) -> Figure:
    """The configuration each scheduling cycle ran with (a step line over `order`), with the cycles
    at which the object was edited (ticks above) and the cycles that started with a new framework
    (`swaps`, ticks below), so a reader can see which edits never showed up as a change."""
    unknown = sorted(set(timeline) - set(order))
    if unknown:
        raise ValueError(f"timeline names {unknown}, not in order {list(order)}")
    fig = Chart(figsize=(9, 2.6), layout="constrained")
    ax = fig.add_subplot()
    ax.step(range(len(timeline)), [order.index(t) for t in timeline], where="post", linewidth=1)
    top, bottom = len(order) - 0.4, -0.6
    if edits:
        ax.vlines(edits, top - 0.35, top, color="tab:orange", linewidth=1, label=f"{len(edits)} edits of the object")
    if swaps:
        ax.vlines(swaps, bottom, bottom + 0.35, color="tab:green", linewidth=1, label=f"{len(swaps)} new frameworks taken by the loop")
    ax.set_ylim(bottom, top)
    ax.set_yticks(range(len(order)), list(order))
    ax.set_xlabel("scheduling cycle")
    changes = sum(a != b for a, b in zip(timeline, timeline[1:], strict=False))
    ax.set_title(f"the configuration each cycle ran with: {changes} changes", fontsize="medium")
    if edits or swaps:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small")
    return fig



def key_rings(rings: Mapping[str, Mapping[str, str]], angles: Mapping[str, float]) -> Figure:
    """Keys on concentric rings, one ring per assignment (outermost first), each key a dot at its
    angle (radians) coloured by its owner; a key whose owner differs from the outermost ring's is
    outlined (it moved), and each inner ring's label counts them. `rings`: label -> key -> owner;
    an owner has one colour over all rings."""
    from matplotlib.lines import Line2D

    if not rings:
        raise ValueError("key_rings needs at least one assignment")
    owners = sorted({o for ring in rings.values() for o in ring.values()})
    colour = {o: f"C{i % 10}" for i, o in enumerate(owners)}
    fig = Chart(figsize=(6.5, 6.5), layout="constrained")
    ax = fig.add_subplot()
    first = next(iter(rings.values()))
    for depth, (label, ring) in enumerate(rings.items()):
        radius = 1.0 - 0.22 * depth
        keys = list(ring)
        theta = np.array([angles[k] for k in keys])
        moved = [k in first and first[k] != ring[k] for k in keys]
        ax.scatter(radius * np.cos(theta), radius * np.sin(theta), s=30, c=[colour[ring[k]] for k in keys],
                   edgecolors=["black" if m else "none" for m in moved], linewidths=1.2)
        ax.text(0, radius - 0.1, f"{label}: {sum(moved)} moved" if depth else label, ha="center", va="center",
                fontsize=8)
    ax.legend(handles=[Line2D([], [], marker="o", linestyle="", color=colour[o], label=o) for o in owners],
              loc="center", fontsize="small", frameon=False)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


def node_partition(partitions: Mapping[str, Mapping[str, Sequence[str]]]) -> Figure:
    """One row per way of splitting the nodes (label -> member -> its nodes): a cell per node, in
    name order, coloured by the member that gets it; the row's label counts each member's nodes."""
    from matplotlib.patches import Patch

    if not partitions:
        raise ValueError("node_partition needs at least one partition")
    members = sorted({m for part in partitions.values() for m in part})
    colour = {m: f"C{i % 10}" for i, m in enumerate(members)}
    nodes = sorted({n for part in partitions.values() for ns in part.values() for n in ns})
    fig = Chart(figsize=(9, 0.9 + 0.6 * len(partitions)), layout="constrained")
    ax = fig.add_subplot()
    labels = []
    for y, (label, part) in enumerate(partitions.items()):
        owner = {n: m for m, ns in part.items() for n in ns}
        for x, node in enumerate(nodes):
            ax.add_patch(Rectangle((x, y), 0.92, 0.8, color=colour[owner[node]] if node in owner else "lightgrey"))
        labels.append(f"{label}\n" + ", ".join(str(len(part.get(m, []))) for m in members))
    ax.set_xlim(-0.1, len(nodes))
    ax.set_ylim(len(partitions) - 0.1, -0.1)
    ax.set_yticks(np.arange(len(partitions)) + 0.4, labels, fontsize="small")
    ax.set_xticks(np.arange(len(nodes)) + 0.46, nodes, rotation=90, fontsize=7)
    ax.legend(handles=[Patch(color=colour[m], label=m) for m in members], loc="upper center",
              bbox_to_anchor=(0.5, -0.35 if len(nodes) > 10 else -0.2), ncols=len(members), fontsize="small")
    ax.set_title("nodes per member: " + ", ".join(members), fontsize="medium")
    return fig


def replica_timeline(runs: Mapping[str, tuple[Sequence[tuple[float, str, bool]], str, float, float]], *,
                     marks: Mapping[str, float] | None = None) -> Figure:
    """One panel per run: a row per replica, a mark per binding it sent at its time (accepted: a
    dot; refused: a red cross), the paused replica's pause shaded. `runs`: label -> (timeline of
    (seconds, replica, accepted), the paused replica, paused from, resumed at); `marks`: moments
    drawn as dashed lines on every panel (text -> seconds)."""
    from matplotlib.lines import Line2D

    if not runs:
        raise ValueError("replica_timeline needs at least one run")
    fig = Chart(figsize=(9, 1.2 + 1.1 * len(runs)), layout="constrained")
    axes = fig.subplots(len(runs), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, (timeline, paused, start, end)) in zip(axes, runs.items(), strict=True):
        replicas = sorted({r for _, r, _ in timeline} | {paused})
        row = {r: i for i, r in enumerate(replicas)}
        rng = np.random.default_rng(0)  # jitter inside a row only, so overlapping marks stay visible
        # refused first, so the few accepted late bindings among them stay on top, visible
        for accepted, marker, colour in ((False, "x", "tab:red"), (True, "o", "tab:blue")):
            pts = [(t, row[r]) for t, r, ok in timeline if ok is accepted]
            if pts:
                t, y = np.array(pts, dtype=float).T
                ax.scatter(t, y + rng.uniform(-0.25, 0.25, len(y)), marker=marker, s=10, color=colour, linewidths=1)
        ax.add_patch(Rectangle((start, row[paused] - 0.4), end - start, 0.8, color="grey", alpha=0.25))
        for text, t in (marks or {}).items():
            ax.axvline(t, color="black", linestyle="--", linewidth=0.8)
            ax.annotate(f" {text}", (t, len(replicas) - 0.5), fontsize=7, va="bottom")
        ax.set_yticks(range(len(replicas)), replicas)
        ax.set_ylim(len(replicas) - 0.5, -0.5)
        ax.set_title(label, fontsize="medium")
    axes[-1].set_xlabel("seconds on the virtual clock")
    axes[0].legend(handles=[Line2D([], [], marker="o", linestyle="", color="tab:blue", label="binding accepted"),
                            Line2D([], [], marker="x", linestyle="", color="tab:red", label="binding refused (409)"),
                            Rectangle((0, 0), 1, 1, color="grey", alpha=0.25, label="paused")],
                   loc="upper right", fontsize="small", ncols=3)
    return fig


def replica_share(runs: Mapping[str, Mapping[str, int]], *, ylabel: str = "pods bound") -> Figure:
    """One stacked bar per run (label -> replica -> count): how the replicas split one backlog,
    each segment labelled with its count."""
    if not runs:
        raise ValueError("replica_share needs at least one run")
    replicas = sorted({r for run in runs.values() for r in run})
    colour = {r: f"C{i % 10}" for i, r in enumerate(replicas)}
    fig = Chart(figsize=(5.5, 3.0), layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(len(runs))
    bottom = np.zeros(len(runs))
    for r in replicas:
        counts = np.array([run.get(r, 0) for run in runs.values()], dtype=float)
        bars = ax.bar(x, counts, 0.6, bottom=bottom, color=colour[r], label=r)
        ax.bar_label(bars, labels=[f"{int(c)}" if c else "" for c in counts], label_type="center", fontsize="small")
        bottom += counts
    ax.set_xticks(x, list(runs))
    ax.set_ylabel(ylabel)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig


def span_waterfall(spans: Sequence[tuple[int, str, int, int]], *, title: str = "") -> Figure:
    """One trace's spans as a waterfall: a bar per span from its start to its end (µs since the
    first span started), indented by colour per depth, labelled with its name and duration.
    `spans`: (depth, name, start_ns, end_ns), in the order to draw them top to bottom."""
    if not spans:
        raise ValueError("span_waterfall needs at least one span")
    t0 = min(start for _, _, start, _ in spans)
    fig = Chart(figsize=(7, 0.6 + 0.25 * len(spans)), layout="constrained")
    ax = fig.add_subplot()
    for y, (depth, name, start, end) in enumerate(spans):
        ax.barh(y, (end - start) / 1e3, left=(start - t0) / 1e3, color=f"C{depth % 10}", edgecolor="black", linewidth=0.3)
        ax.text((end - t0) / 1e3, y, f" {name} {(end - start) / 1e3:.0f} µs", va="center", fontsize=7)
    ax.set_yticks([])
    ax.invert_yaxis()
    ax.set_xlabel("µs since the attempt started")
    ax.margins(x=0.25)
    if title:
        ax.set_title(title)
    return fig

# -- Part II §5 ------------------------------------------------------------------------------------------


def state_diagram(edges: Mapping[tuple[object, object], Sequence[object]], *, title: str = "") -> Figure:
    """A state machine's moves: states on a circle (in the order they first appear), an arrow per
    (from, to) pair labelled with the events that take it, one per line. `edges` is what
    `minisched.scheduler.lifecycle.transition_edges(table)` returns, so the drawing comes from the
    table itself. Two opposite arrows between a pair bend to either side instead of overlapping."""
    from matplotlib.patches import FancyArrowPatch

    def name(x: object) -> str:
        return str(getattr(x, "name", x))

    states: list[object] = []
    for src, dst in edges:
        for s in (src, dst):
            if s not in states:
                states.append(s)
    if not states:
        raise ValueError("state_diagram needs at least one move to draw (every entry was IGNORE or REFUSE)")
    angles = np.pi / 2 - 2 * np.pi * np.arange(len(states)) / len(states)
    pos = {s: (float(np.cos(a)), float(np.sin(a))) for s, a in zip(states, angles, strict=True)}
    fig = Chart(figsize=(8, 7), layout="constrained")
    ax = fig.add_subplot()
    for s, (x, y) in pos.items():
        ax.text(x, y, name(s), ha="center", va="center", fontsize=10, zorder=3,
                bbox={"boxstyle": "round,pad=0.4", "facecolor": "lightyellow", "edgecolor": "black"})
    placed: list[tuple[float, float, float, float]] = []  # the labels drawn: centre and half sizes
    for (src, dst), events in edges.items():
        (x0, y0), (x1, y1) = pos[src], pos[dst]
        bend = 0.18
        ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), connectionstyle=f"arc3,rad={bend}", arrowstyle="-|>",
                                     mutation_scale=14, shrinkA=28, shrinkB=28, color="tab:blue", linewidth=1.1))
        # the label sits on the arc: matplotlib's arc3 is a quadratic Bézier whose control point is the
        # chord's midpoint pushed sideways by the bend. At the arc's middle, or slid along it when a
        # label drawn before is there (two arcs that cross near the centre)
        mx, my = (x0 + x1) / 2, (y0 + y1) / 2
        cx, cy = mx + bend * (y1 - y0), my - bend * (x1 - x0)
        label = [name(e) for e in events]
        half_w, half_h = 0.014 * max(map(len, label)) + 0.02, 0.032 * len(label) + 0.01  # fontsize 7, roughly
        spots = [((1 - t) ** 2 * x0 + 2 * (1 - t) * t * cx + t * t * x1,
                  (1 - t) ** 2 * y0 + 2 * (1 - t) * t * cy + t * t * y1) for t in (0.5, 0.4, 0.6, 0.3, 0.7)]
        lx, ly = next(((x, y) for x, y in spots
                       if all(abs(x - px) >= half_w + pw or abs(y - py) >= half_h + ph for px, py, pw, ph in placed)),
                      spots[0])
        placed.append((lx, ly, half_w, half_h))
        ax.text(lx, ly, "\n".join(label), ha="center", va="center", fontsize=7, zorder=2,
                color="tab:blue", bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none",
                                        "alpha": 0.85})
    ax.set_xlim(-1.35, 1.35)
    ax.set_ylim(-1.3, 1.3)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title)
    return fig


# -- Part II §4.4 ----------------------------------------------------------------------------------------


def run_spread(values: Mapping[str, Sequence[float]], *, xlabel: str, scale: float = 1e6) -> Figure:
    """One row per setting: each run's figure as a dot (times `scale`: seconds to µs by default) and
    their median as a bar, so a difference between settings can be read against the spread of one
    setting's runs."""
    if not values or any(len(v) == 0 for v in values.values()):
        raise ValueError("run_spread needs at least one run per setting")
    fig = Chart(figsize=(6.5, 0.6 + 0.55 * len(values)), layout="constrained")
    ax = fig.add_subplot()
    for y, runs in enumerate(values.values()):
        xs = np.asarray(runs, dtype=float) * scale
        ax.plot(xs, np.full(len(xs), y), "o", color="tab:blue", alpha=0.7, markersize=6)
        ax.plot([np.median(xs)] * 2, [y - 0.3, y + 0.3], color="black", linewidth=2)
    ax.set_yticks(range(len(values)), list(values))
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    return fig
