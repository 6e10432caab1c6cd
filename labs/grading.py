"""Grading a class with nbgrader.

Why nbgrader: it is the Jupyter project's own grader, used by many universities; it runs
locally without Docker (otter-grader's `otter grade` wants a Docker engine per submission), keeps
a gradebook, strips hidden tests from what students get and puts them back when it grades, and
exports per-student scores as CSV.

How minisched's labs map onto it. A student's work is the lab's `exercise.py`; the graded
notebook is generated from the lab's checks: one autograded cell per public check (worth its
points), and one per hidden check whose body sits between nbgrader's HIDDEN TESTS markers, so the
released copy shows an empty cell and the grader runs the instructor's check. The hidden check code
itself stays in `labs/<lab>/hidden_checks.py`, which student copies leave out; the grading kernel
imports it from the instructor's tree (PYTHONPATH is set to the repository).

    python -m labs.grading course COURSE_DIR     # source/ and release/ for every lab
    # students hand in COURSE_DIR/submitted/<student>/<lab>/{<lab>.ipynb, exercise.py}
    python -m labs.grading grade COURSE_DIR      # autograde, export grades.csv, print the table

Where a released notebook runs. Students put `release/<lab>/` in their class copy's
`assignments/<lab>/` (any folder inside their copy will do): the notebook's setup cell finds the
copy above its own folder and imports the checks from it, so it runs without PYTHONPATH or an
installed `labs` package (the class's `pip install -e .` installs minisched only). When grading,
MINISCHED_REPO points the same cell at the instructor's tree, which has the hidden checks.

A lab a student did not hand in is *missing*, never a score of 0: the table prints `missing` and
grades.csv has `status` missing with an empty score (a 0 is a handed-in lab that passed nothing).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import nbformat

from labs import harness

REPO = harness.LABS_DIR.parent
COURSE_ID = "minisched"


def _cell_meta(grade_id: str, points: int) -> dict[str, object]:
    return {"nbgrader": {"grade": True, "grade_id": grade_id, "locked": True, "points": points,
                         "schema_version": 3, "solution": False, "task": False}}


def _readonly(grade_id: str) -> dict[str, object]:
    return {"nbgrader": {"grade": False, "grade_id": grade_id, "locked": True, "schema_version": 3,
                         "solution": False, "task": False}}


# The graded notebook's first cell. It cannot import anything of minisched's to find minisched.
SETUP = """\
# The checks live in your copy of minisched: this folder sits inside it (assignments/<lab>/),
# or MINISCHED_REPO names it. Import them from there.
import os
import sys
from pathlib import Path

here = Path.cwd().resolve()
candidates = [Path(os.environ["MINISCHED_REPO"])] if os.environ.get("MINISCHED_REPO") else []
root = next((p for p in [*candidates, here, *here.parents] if (p / "labs" / "harness.py").is_file()), None)
if root is None:
    raise RuntimeError(f"{here} is not inside a copy of minisched: put this lab's folder in your "
                       "class copy (assignments/<lab>/), or set MINISCHED_REPO to the copy's folder")
sys.path.insert(0, str(root))
from labs.harness import grade_check"""


def graded_notebook(lab: str) -> nbformat.NotebookNode:
    """The nbgrader source notebook of one lab: its README, then one graded cell per check."""
    readme = (harness.LABS_DIR / lab / "README.md").read_text()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_markdown_cell(
        readme + "\n\nWrite your code in `exercise.py` beside this notebook, run every cell to see which "
        "checks pass, and hand in the folder. Some checks are hidden: they run when your work is graded.",
        metadata=_readonly("task")))
    nb.cells.append(nbformat.v4.new_code_cell(SETUP, metadata=_readonly("setup")))
    for i, check in enumerate(harness.lab_checks(lab)):
        nb.cells.append(nbformat.v4.new_code_cell(
            f"grade_check({lab!r}, {check.name!r})", metadata=_cell_meta(f"public_{i}", check.points)))
    for i, check in enumerate(harness.lab_checks(lab, hidden=True)[len(harness.lab_checks(lab)):]):
        source = (f"# a hidden check, run when your work is graded\n### BEGIN HIDDEN TESTS\n"
                  f"grade_check({lab!r}, {check.name!r}, hidden=True)\n### END HIDDEN TESTS")
        nb.cells.append(nbformat.v4.new_code_cell(source, metadata=_cell_meta(f"hidden_{i}", check.points)))
    return nb


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["MINISCHED_REPO"] = str(REPO)  # the graded notebook's setup cell imports the checks from here
    # nbgrader runs `alembic` by name to create its gradebook: the venv's bin must come first
    env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", "")))
    return env


def nbgrader(course: Path, *args: str) -> None:
    cmd = [sys.executable, "-m", "nbgrader", *args, "--CourseDirectory.root=" + str(course),
           "--CourseDirectory.course_id=" + COURSE_ID]
    done = subprocess.run(cmd, cwd=course, env=_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def write_config(course: Path) -> None:
    course.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        "c.ExecutePreprocessor.timeout = 120\n"
        # nbgrader copies the source's version of every other file over the submission's; the
        # student's exercise.py is the work being graded
        f"c.Autograde.exclude_overwriting = {{lab: ['exercise.py'] for lab in {harness.lab_names()!r}}}\n")


def build_course(course: Path, labs: Sequence[str] | None = None) -> list[str]:
    """Write the nbgrader course: source/<lab>/ (graded notebook, starter, README) and release/."""
    write_config(course)
    labs = list(labs or harness.lab_names())
    for lab in labs:
        source = course / "source" / lab
        source.mkdir(parents=True, exist_ok=True)
        nbformat.write(graded_notebook(lab), source / f"{lab}.ipynb")
        shutil.copy(harness.LABS_DIR / lab / "exercise.py", source / "exercise.py")
        shutil.copy(harness.LABS_DIR / lab / "README.md", source / "README.md")
        nbgrader(course, "generate_assignment", lab, "--force")
    return labs


MISSING = "missing"


def grade(course: Path) -> dict[str, dict[str, float | None]]:
    """Autograde every submission, export the gradebook to grades.csv with a `status` column, and
    return {student: {lab: score, or None when the student did not hand that lab in}} over every
    student who handed anything in or is in the gradebook (`nbgrader db student add`), and every lab
    anyone handed in."""
    submitted = course / "submitted"
    students = sorted(p.name for p in submitted.iterdir() if p.is_dir()) if submitted.is_dir() else []
    labs = sorted({p.name for p in submitted.glob("*/*") if p.is_dir()})
    for lab in labs:
        nbgrader(course, "autograde", lab, "--force")
    out = course / "grades.csv"
    nbgrader(course, "export", f"--to={out}")
    scores: dict[str, dict[str, float | None]] = {s: dict.fromkeys(labs) for s in students}
    with out.open() as f:
        reader = csv.DictReader(f)
        fields = [*(reader.fieldnames or []), "status"]
        rows = list(reader)
    for row in rows:
        handed_in = (course / "autograded" / row["student_id"] / row["assignment"]).is_dir()
        row["status"] = "graded" if handed_in else MISSING
        per = scores.setdefault(row["student_id"], dict.fromkeys(labs))  # on the roster, nothing handed in
        if handed_in:
            per[row["assignment"]] = float(row["score"])
        else:  # nbgrader writes 0 for a lab never handed in: an empty score says so instead
            row["score"] = row["raw_score"] = ""
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fields)
        writer.writeheader()
        writer.writerows(rows)
    return scores


def score_table(scores: dict[str, dict[str, float | None]]) -> str:
    """One row per student, one column per lab: `points/max`, or `missing` for a lab not handed in."""
    labs = sorted({lab for per in scores.values() for lab in per})
    lines = ["student".ljust(16) + "".join(lab[:5].ljust(10) for lab in labs)]
    for student, per in sorted(scores.items()):
        cells = [MISSING if per.get(lab) is None else f"{per[lab]:g}/{max_points(lab)}" for lab in labs]
        lines.append(student.ljust(16) + "".join(cell.ljust(10) for cell in cells))
    return "\n".join(lines)


def max_points(lab: str) -> int:
    return sum(c.points for c in harness.lab_checks(lab, hidden=True))


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("course", "grade"):
        print(__doc__)
        return 2
    course = Path(argv[1]).resolve()
    if argv[0] == "course":
        labs = build_course(course)
        print(f"course in {course}: source/ and release/ for {', '.join(labs)}")
        return 0
    print(score_table(grade(course)))
    print(f"gradebook exported to {course / 'grades.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
