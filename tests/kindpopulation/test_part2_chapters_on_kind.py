"""Every Part II chapter gives the same checked outputs on kind's population as on the empty
embedded cluster (see test_chapters_on_kind.py for Part I): a profile, a CRD-configured or
WebAssembly scheduler, a tracer or a state machine that is not scoped to the chapter's own nodes
and pods picks kind's workers, counts kind's system pods, and this fails.

Part II 4.3 (sharding) is checked by the sharding work's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from minisched.notebooks.check import check_notebook

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
PART_TWO = sorted(p for p in CHAPTERS.glob("p2_*.ipynb") if p.name != "p2_ch04_3_sharding.ipynb")


def test_part_two_is_found() -> None:
    assert len(PART_TWO) >= 10, f"expected Part II's chapters in {CHAPTERS}, found {[p.name for p in PART_TWO]}"


@pytest.mark.parametrize("notebook", PART_TWO, ids=lambda p: p.stem)
def test_part_two_chapter_checked_outputs_hold_on_kind(notebook: Path) -> None:
    result = check_notebook(notebook, backend="embedded:kind")
    assert result.ok, f"{notebook.name} on embedded:kind: {result.problems}\n{result.details}"
