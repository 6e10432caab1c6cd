"""Every chapter and lab notebook keeps the chapter rules (minisched.notebooks.rules), read from the
committed files: no kernel, all notebooks in seconds.

issue 24: the notebooks below broke a rule when the rules were written and are being fixed. The
lists only shrink: a listed notebook that now keeps its rule FAILS here until it is taken off its
list, and a notebook not listed that breaks a rule fails as any regression does. To see what is
wrong with one: `python -m minisched.notebooks rules chapters/X.ipynb` (or `prose`).
"""

from __future__ import annotations

import os
import subprocess
from functools import cache
from pathlib import Path

import nbformat
import pytest

from minisched.notebooks.check import find_notebooks
from minisched.notebooks.prose import _quoted_sentences, _sentences, _strip_non_prose, check_prose, figures_in
from minisched.notebooks.rules import RULES, applies, check_rules

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = find_notebooks([ROOT / "chapters", ROOT / "labs"])

# issue 24: notebooks still to fix, per rule (paths from the repository's root): none left, and a new rule
# starts here with the notebooks that break it, so that its list can only shrink
PENDING: dict[str, set[str]] = {rule: set() for rule in ("prose", "hygiene", "banner", "namespace", "cell-length")}


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# A class's copy (`make student-copy`: no lab solutions) checks its notebooks as handed out; a
# student who runs a chapter and saves it gets new timings and paths in its outputs, which is no
# defect of theirs. So there (and not under CI=true) a notebook changed since its commit is skipped.
STUDENT_COPY = not any((ROOT / "labs").glob("*/solution.py"))


@cache
def _changed_since_commit() -> frozenset[str]:
    try:
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", "chapters", "labs"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(line[3:].strip() for line in status.splitlines())


def _skip_a_students_run(notebook: str) -> None:
    if STUDENT_COPY and os.environ.get("CI") != "true" and notebook in _changed_since_commit():
        pytest.skip(
            f"{notebook} changed since its commit (a student's run): the rules hold for it as handed out"
        )


@pytest.fixture(scope="module")
def found() -> dict[str, dict[str, list[str]]]:
    """notebook -> rule -> problems, for every notebook (read once: a few seconds for all)."""
    return {_name(path): check_rules(path) for path in NOTEBOOKS}


CASES = [(rule, _name(path)) for rule in RULES for path in NOTEBOOKS if applies(rule, path)]


@pytest.mark.parametrize(("rule", "notebook"), CASES, ids=[f"{r}:{n}" for r, n in CASES])
def test_notebook_keeps_the_rule(found: dict[str, dict[str, list[str]]], rule: str, notebook: str) -> None:
    _skip_a_students_run(notebook)
    problems = found[notebook][rule]
    if notebook in PENDING[rule]:
        assert problems, (
            f"{notebook} now keeps the {rule!r} rule: take it off PENDING[{rule!r}] in "
            "tests/notebooks/test_chapter_rules.py (issue 24)"
        )
    else:
        assert not problems, f"{notebook} breaks the {rule!r} rule:\n" + "\n".join(problems)


def test_the_pending_lists_name_notebooks_that_exist_and_rules_that_apply() -> None:
    assert set(PENDING) == set(RULES)
    known = {_name(p) for p in NOTEBOOKS}
    for rule, names in PENDING.items():
        assert names <= known, f"PENDING[{rule!r}] names notebooks that do not exist: {sorted(names - known)}"
        for name in names:
            assert applies(rule, ROOT / name), (
                f"PENDING[{rule!r}] lists {name}, to which the rule does not apply"
            )


KEPT_PROSE = [_name(p) for p in NOTEBOOKS if _name(p) not in PENDING["prose"]]


@pytest.mark.parametrize("notebook", KEPT_PROSE)
def test_changing_a_figure_in_a_kept_chapters_prose_to_one_no_output_shows_fails(notebook: str) -> None:
    """The prose check on a real chapter: every exact figure it states (not quoted, not a bound),
    changed to 987,654 of the same unit, is caught in its cell."""
    _skip_a_students_run(notebook)
    nb = nbformat.read(ROOT / notebook, as_version=4)
    changed = 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        spans = _sentences(cell.source)
        quoted = _quoted_sentences(cell.source, spans)
        for position, figure in figures_in(_strip_non_prose(cell.source)):
            if not figure.number or not figure.number[0].isdigit() or figure.bound:
                continue  # a bound ("up to 256 items") is kept by any value within a factor of 10
            if any(start <= position < end for i, (start, end) in enumerate(spans) if i in quoted):
                continue  # a quoted figure may be anything
            original = cell.source
            cell.source = original[:position] + original[position:].replace(figure.number, "987,654", 1)
            assert any(p.cell == index for p in check_prose(nb)), (
                f"cell {index}: {figure.text} -> 987,654 passed"
            )
            cell.source = original
            changed += 1
    if not changed:
        pytest.skip(f"{notebook} states no figure in its prose")
