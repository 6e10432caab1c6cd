"""nbgrader grades a fake class: one correct student, one partly, one who handed in the starter.
Hidden checks are absent from what students get and count when graded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from labs import grading, harness

LAB = "lab04_jitter_backoff"
pytestmark = pytest.mark.slow


def test_a_class_of_three_is_graded(tmp_path: Path) -> None:
    if not harness.has_module(LAB, "solution"):
        pytest.skip("the instructor's solution is not in this copy")
    course = tmp_path / "course"
    grading.build_course(course, [LAB])
    released = course / "release" / LAB / f"{LAB}.ipynb"
    text = released.read_text()
    assert "grade_check" in text and "hidden=True" not in text, "the released notebook must not name hidden checks"
    assert (course / "release" / LAB / "exercise.py").read_text() == (harness.LABS_DIR / LAB / "exercise.py").read_text()
    solution = (harness.LABS_DIR / LAB / "solution.py").read_text()
    work = {
        "alice": solution,
        # overflows past 1,023 failures: passes every public check, fails hidden ones
        "bob": solution.replace("bound = self.max_delay if n >= 1024 else min(", "bound = min("),
        "carol": (harness.LABS_DIR / LAB / "exercise.py").read_text(),
    }
    assert work["bob"] != solution
    for student, exercise in work.items():
        folder = course / "submitted" / student / LAB
        folder.mkdir(parents=True)
        shutil.copy(released, folder)
        (folder / "exercise.py").write_text(exercise)
    scores = grading.grade(course)
    full = grading.max_points(LAB)
    assert scores["alice"][LAB] == full
    assert 0 < scores["bob"][LAB] < full
    public = sum(c.points for c in harness.lab_checks(LAB))
    assert scores["bob"][LAB] >= public  # what bob lost, he lost on hidden checks
    assert scores["carol"][LAB] == 0
    graded = json.loads((course / "autograded" / "bob" / LAB / f"{LAB}.ipynb").read_text())
    outputs = json.dumps([c.get("outputs") for c in graded["cells"]])
    assert "FAIL thousands of failures stay within the cap" in outputs  # the teaching message reaches the grader
