"""Notebooks made diff-able: one canonical JSON form with no volatile metadata.

Chosen over jupytext pairing so that a chapter stays one file with its outputs (the outputs are
what nbval checks). Normalizing removes what changes from run to run or machine to machine:
widget state and widget-view outputs (random model ids), execution timings, kernel and
language versions, editor UI state (collapsed, scrolled); it renumbers execution counts 1, 2, ...,
merges split stream outputs (how stdout is chunked depends on timing), and writes sorted keys with
one-space indentation and a final newline (nbformat's own layout).

A progress bar (tqdm.auto in a kernel) is a widget: its output's text/plain is the bar's first
frame ("0/5"), and only the widget state, dropped here, knows how it ended. So before the state
goes, each bar's text is rebuilt from its final state ("work: 100%|██████████| 5/5"): a finished
bar is stored finished, a bar that stopped short is stored where it stopped (and the chapter rules
flag it). Elapsed time and rate are left out, so the stored text is the same on every run. Any
other widget's text is its repr ("VBox(children=(HBox(...") and is dropped with its view: the
chapter shows a static rendering beside it (AUTHORING.md, "Widgets").
"""

from __future__ import annotations

import copy
import html
import re
from pathlib import Path
from typing import Any

import nbformat

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
KEPT_NOTEBOOK_METADATA = ("kernelspec", "language_info")
KEPT_CELL_METADATA = ("tags",)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
BAR_WIDTH = 10  # tqdm's own width for a bar rendered as text in a notebook


def normalize(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A normalized copy of `nb` (the input is not changed)."""
    nb = copy.deepcopy(nb)
    widgets = _widget_models(nb)
    nb.nbformat, nb.nbformat_minor = 4, max(int(nb.get("nbformat_minor", 5)), 5)
    nb.metadata = nbformat.NotebookNode({k: v for k, v in nb.metadata.items() if k in KEPT_NOTEBOOK_METADATA})
    nb.metadata["kernelspec"] = nbformat.NotebookNode(dict(KERNELSPEC))
    nb.metadata["language_info"] = nbformat.NotebookNode({"name": "python"})
    count = 0
    for index, cell in enumerate(nb.cells):
        cell.metadata = nbformat.NotebookNode(
            {k: v for k, v in cell.get("metadata", {}).items() if k in KEPT_CELL_METADATA}
        )
        if not cell.get("id"):
            cell["id"] = f"cell-{index:03d}"
        if isinstance(cell.get("source"), list):
            cell["source"] = "".join(cell["source"])
        if cell.cell_type != "code":
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
            continue
        if cell.get("execution_count") is not None:
            count += 1
            cell["execution_count"] = count
        cell["outputs"] = _normalize_outputs(cell.get("outputs", []), cell.get("execution_count"), widgets)
    return nb


def _widget_models(nb: nbformat.NotebookNode) -> dict[str, dict[str, Any]]:
    """model id -> the widget's final state, from the executed notebook's widget state (if kept)."""
    state = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return {
        model_id: dict(model.get("state", {}), _model=model.get("model_name"))
        for model_id, model in state.items()
    }


def progress_bar_text(model_id: str, widgets: dict[str, dict[str, Any]]) -> str | None:
    """A tqdm widget's final frame as text ("work: 100%|██████████| 5/5"), or None if `model_id`
    is not a progress bar (tqdm.notebook draws an HBox of HTML, a progress bar and HTML)."""
    box = widgets.get(model_id, {})
    children = [widgets.get(str(c).removeprefix("IPY_MODEL_"), {}) for c in box.get("children") or []]
    bars = [c for c in children if c.get("_model") in ("FloatProgressModel", "IntProgressModel")]
    texts = [c for c in children if c.get("_model") == "HTMLModel"]
    if box.get("_model") != "HBoxModel" or len(bars) != 1 or len(texts) != 2:
        return None

    def plain(value: object) -> str:
        return html.unescape(re.sub(r"<[^>]+>", "", str(value or ""))).replace("\u2007", " ").strip()

    value, total = float(bars[0].get("value") or 0), float(bars[0].get("max") or 0)
    label = plain(texts[0].get("value"))
    counts = plain(texts[1].get("value")).split(" [", 1)[0]  # "5/5", without the run's time and rate
    filled = round(BAR_WIDTH * value / total) if total else 0
    return f"{label}|{'█' * filled}{' ' * (BAR_WIDTH - filled)}| {counts}"


def _normalize_outputs(
    outputs: list[Any], execution_count: int | None, widgets: dict[str, dict[str, Any]] | None = None
) -> list[Any]:
    result: list[Any] = []
    for output in outputs:
        output = nbformat.NotebookNode(dict(output))
        output.pop("transient", None)
        kind = output.get("output_type")
        if kind in ("display_data", "execute_result"):
            view = output.get("data", {}).get(WIDGET_VIEW)
            bar = progress_bar_text(str(view.get("model_id")), widgets or {}) if view else None
            data = {k: v for k, v in output.get("data", {}).items() if k != WIDGET_VIEW}
            if bar is not None:
                data["text/plain"] = bar
            elif view:
                data.pop("text/plain", None)  # "VBox(children=(...": a repr, not what the widget shows
            if not data:
                continue  # a widget with no static form: nothing a reader of the file can see
            output["data"] = nbformat.NotebookNode(data)
            output.setdefault("metadata", nbformat.NotebookNode())
            if kind == "execute_result":
                output["execution_count"] = execution_count
        if kind == "stream":
            text = output.get("text", "")
            output["text"] = "".join(text) if isinstance(text, list) else text
            if (
                result
                and result[-1].get("output_type") == "stream"
                and result[-1].get("name") == output.get("name")
            ):
                result[-1]["text"] += output["text"]
                continue
        result.append(output)
    return result


def normalized_text(nb: nbformat.NotebookNode) -> str:
    """The canonical file content of `nb`."""
    text: str = nbformat.writes(normalize(nb), version=4)
    return text if text.endswith("\n") else text + "\n"


def is_normalized(path: str | Path) -> bool:
    raw = Path(path).read_text(encoding="utf-8")
    return raw == normalized_text(nbformat.reads(raw, as_version=4))


def normalize_file(path: str | Path) -> bool:
    """Normalize `path` in place; True if the file changed."""
    path = Path(path)
    raw = path.read_text(encoding="utf-8")
    text = normalized_text(nbformat.reads(raw, as_version=4))
    if text == raw:
        return False
    path.write_text(text, encoding="utf-8")
    return True
