"""A class graded end to end from its own copy of the repository: the class copy is written, the
nbgrader course built, the released notebook runs inside the class copy where the README says
students put it (assignments/<lab>/), and five students are graded: one with full marks, one
wrong on a hidden check, one whose code hangs, one who handed in the starter (0) and one who
handed in nothing (missing, never 0)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from labs import grading, harness, student_copy

LAB = "lab04_jitter_backoff"
pytestmark = pytest.mark.slow


def _outputs(notebook: Path) -> str:
    return json.dumps([c.get("outputs") for c in json.loads(notebook.read_text())["cells"]])


def _run_as_a_student(folder: Path, notebook: Path) -> nbformat.NotebookNode:
    """Execute the released notebook in `folder`, as Jupyter started there would, plus one cell
    that prints where the checks were imported from."""
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import labs.harness\nprint('checks from', labs.harness.__file__)"))
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(folder)}}).execute()
    return nb


def test_a_class_is_graded_end_to_end_from_its_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not harness.has_module(LAB, "solution"):
        pytest.skip("the instructor's solution is not in this copy")
    solution = (harness.LABS_DIR / LAB / "solution.py").read_text()
    starter = (harness.LABS_DIR / LAB / "exercise.py").read_text()
    work = {
        "alice": solution,
        # overflows past 1,023 failures: passes every public check, fails a hidden one
        "bob": solution.replace(
            "            try:  # base·2ⁿ exactly (ldexp); past the float range it overflows, and only the cap is left\n"
            "                grown = math.ldexp(self.base_delay, n)\n"
            "            except OverflowError:\n"
            "                grown = math.inf\n",
            "            grown = self.base_delay * 2.0**n\n"),
        # takes its own (non-reentrant) lock twice: every call to when() deadlocks
        "carol": solution.replace("            n = self._failures.get(item, 0)\n",
                                  "            n = self.num_requeues(item)\n"),
        "erin": starter,
    }
    assert work["bob"] != solution and work["carol"] != solution

    # the instructor writes the class's copy and the course
    classroom = tmp_path / "class"
    student_copy.write_student_copy(classroom)
    course = tmp_path / "course"
    grading.build_course(course, [LAB])
    released = course / "release" / LAB
    text = (released / f"{LAB}.ipynb").read_text()
    assert "grade_check" in text and "hidden=True" not in text, "the released notebook must not name hidden checks"
    assert (released / "exercise.py").read_text() == starter

    # a student runs it where the README says: assignments/<lab>/ in the class copy, nothing on
    # PYTHONPATH (the bug: the first cell raised ModuleNotFoundError: No module named 'labs')
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("MINISCHED_REPO", raising=False)
    folder = classroom / "assignments" / LAB
    shutil.copytree(released, folder)
    (folder / "exercise.py").write_text(solution)
    ran = _run_as_a_student(folder, folder / f"{LAB}.ipynb")
    errors = [o for c in ran.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"the released notebook failed in the class copy: {errors[0]['ename']}: {errors[0]['evalue']}"
    printed = json.dumps([c.get("outputs") for c in ran.cells])
    assert "PASS full jitter" in printed
    assert f"checks from {classroom.resolve() / 'labs' / 'harness.py'}" in printed, "the checks must come from the class copy"

    # what they hand in; dave hands in nothing but is on the roster
    for student, exercise in work.items():
        submission = course / "submitted" / student / LAB
        shutil.copytree(released, submission)
        (submission / "exercise.py").write_text(exercise)
    grading.nbgrader(course, "db", "student", "add", "dave")
    monkeypatch.setenv("MINISCHED_CHECK_TIMEOUT", "2")  # carol's hung checks give up after 2 s each
    scores = grading.grade(course)

    full, public = grading.max_points(LAB), sum(c.points for c in harness.lab_checks(LAB))
    assert scores["alice"][LAB] == full
    assert public <= (scores["bob"][LAB] or 0) < full  # what bob lost, he lost on a hidden check
    assert scores["erin"][LAB] == 0
    assert scores["dave"][LAB] is None
    assert scores["carol"][LAB] == 0  # every check calls when(), and every one was stopped at its limit
    carol = _outputs(course / "autograded" / "carol" / LAB / f"{LAB}.ipynb")
    for check in harness.lab_checks(LAB, hidden=True):  # each hang reported as its own check's failure
        assert f"timed out: the check {check.name!r} was still running after its limit of 2 s" in carol
    assert "exercise.py line" in carol  # with the line it was stuck on
    assert "FAIL thousands of failures stay within the cap" in _outputs(
        course / "autograded" / "bob" / LAB / f"{LAB}.ipynb")  # the teaching message reaches the grader

    table = grading.score_table(scores).splitlines()
    row = {line.split()[0]: line.split()[1] for line in table[1:]}
    assert row == {"alice": f"{full:g}/{full}", "bob": f"{scores['bob'][LAB]:g}/{full}",
                   "carol": f"0/{full}", "dave": "missing", "erin": f"0/{full}"}
    with (course / "grades.csv").open() as f:
        exported = {r["student_id"]: r for r in csv.DictReader(f)}
    assert (exported["dave"]["status"], exported["dave"]["score"]) == ("missing", "")
    assert (exported["erin"]["status"], float(exported["erin"]["score"])) == ("graded", 0.0)
    assert float(exported["alice"]["score"]) == full
