"""Part II §4.3 (sharding) gives the same checked outputs on kind's population as on the empty
embedded cluster. Its replicas must be scoped to the chapter's nodes: unscoped, the bind-fence run's
pods found room on kind's big workers, the peer's pod never filled n1, and the promised 409 never
came (issue 23). Kept apart from test_chapters_on_kind.py, which covers Part I."""

from __future__ import annotations

from pathlib import Path

from minisched.notebooks.check import check_notebook

CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "p2_ch04_3_sharding.ipynb"


def test_sharding_chapter_checked_outputs_hold_on_kind() -> None:
    result = check_notebook(CHAPTER, backend="embedded:kind")
    assert result.ok, f"{CHAPTER.name} on embedded:kind: {result.problems}\n{result.details}"
