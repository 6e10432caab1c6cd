"""Notebooks made diff-able: one canonical JSON form with no volatile metadata.

Chosen over jupytext pairing so that a chapter stays one file with its outputs (the outputs are
what nbval checks). Normalizing removes what changes from run to run or machine to machine:
widget state and widget-view outputs (random model ids), execution timings, kernel and
language versions, editor UI state (collapsed, scrolled); it renumbers execution counts 1, 2, ...,
merges split stream outputs (how stdout is chunked depends on timing), and writes sorted keys with
one-space indentation and a final newline (nbformat's own layout).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import nbformat

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
KEPT_NOTEBOOK_METADATA = ("kernelspec", "language_info")
KEPT_CELL_METADATA = ("tags",)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def normalize(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A normalized copy of `nb` (the input is not changed)."""
    nb = copy.deepcopy(nb)
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
        cell["outputs"] = _normalize_outputs(cell.get("outputs", []), cell.get("execution_count"))
    return nb


def _normalize_outputs(outputs: list[Any], execution_count: int | None) -> list[Any]:
    result: list[Any] = []
    for output in outputs:
        output = nbformat.NotebookNode(dict(output))
        output.pop("transient", None)
        kind = output.get("output_type")
        if kind in ("display_data", "execute_result"):
            data = {k: v for k, v in output.get("data", {}).items() if k != WIDGET_VIEW}
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
