"""Every lab's nbgrader notebook (labs/grading.py) is built from its checks: one graded cell per
check, each naming a check the harness finds, the hidden ones between nbgrader's HIDDEN TESTS
markers. Cheap (no nbgrader run); test_grading.py grades a fake class end to end on one lab."""

from __future__ import annotations

import pytest

from labs import grading, harness

LABS = harness.lab_names()


@pytest.mark.parametrize("lab", LABS)
def test_graded_notebook_has_a_cell_per_check(lab: str) -> None:
    if not harness.has_module(lab, "hidden_checks"):
        pytest.skip(f"labs/{lab}: the hidden checks are not in this copy")
    nb = grading.graded_notebook(lab)
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    public, every = harness.lab_checks(lab), harness.lab_checks(lab, hidden=True)
    assert len(graded) == len(every)
    assert sum(c.metadata["nbgrader"]["points"] for c in graded) == grading.max_points(lab)
    for cell, check in zip(graded, every, strict=True):
        hidden = check not in public
        assert repr(check.name) in cell.source
        assert ("### BEGIN HIDDEN TESTS" in cell.source) == hidden
        assert harness.find_check(lab, check.name, hidden=hidden) is check
