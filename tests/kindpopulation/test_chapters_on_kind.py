"""Every chapter gives the same checked outputs on kind's population as on the empty embedded
cluster: `MINISCHED_BACKEND=embedded:kind` starts the embedded cluster as `make cluster-up` leaves
kind (four big nodes, two of them tainted, 15 system pods), so a chapter that is not scoped to its
own nodes and pods shows kind's nodes in its results, and this fails. In Part II that covers
profiles, CRD-configured and WebAssembly schedulers, tracers, state machines and the sharded
replicas (unscoped, the bind-fence run's pods found room on kind's big workers and the promised
409 never came: issue 23)."""

from __future__ import annotations

from pathlib import Path

import pytest

from minisched.notebooks.check import check_notebook

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
PART_ONE = sorted(CHAPTERS.glob("ch0*.ipynb"))
PART_TWO = sorted(CHAPTERS.glob("p2_*.ipynb"))


def test_both_parts_are_found() -> None:
    assert len(PART_ONE) >= 13, f"expected Part I's chapters in {CHAPTERS}, found {[p.name for p in PART_ONE]}"
    assert len(PART_TWO) >= 11, f"expected Part II's chapters in {CHAPTERS}, found {[p.name for p in PART_TWO]}"


@pytest.mark.parametrize("notebook", PART_ONE + PART_TWO, ids=lambda p: p.stem)
def test_chapter_checked_outputs_hold_on_kind(notebook: Path) -> None:
    result = check_notebook(notebook, backend="embedded:kind")
    assert result.ok, f"{notebook.name} on embedded:kind: {result.problems}\n{result.details}"
