"""The class's copy: no solutions, no hidden checks, and its own tests collect and pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from labs import harness, student_copy

pytestmark = pytest.mark.slow


def test_student_copy_leaves_out_instructor_material_and_its_tests_pass(tmp_path: Path) -> None:
    dest = tmp_path / "class"
    left_out = student_copy.write_student_copy(dest)
    for lab in harness.lab_names():
        assert not (dest / "labs" / lab / "solution.py").exists()
        assert not (dest / "labs" / lab / "hidden_checks.py").exists()
        assert (dest / "labs" / lab / "exercise.py").exists() and (dest / "labs" / lab / "checks.py").exists()
    if (student_copy.REPO / "tests" / "labs" / "mistakes.py").exists():  # the instructor's tree, not a class copy
        assert "tests/labs/mistakes.py" in left_out
    assert not (dest / "tests" / "labs" / "mistakes.py").exists()
    # the mutation study quotes solution lines: none of it goes to students
    for study in ("labs/mutants.py", "labs/mutants.json", "labs/MUTANTS.md", "tests/labs/test_mutants.py"):
        assert not (dest / study).exists(), f"{study} would show students the solutions"
    assert not any("solution" in p.read_text() and "def " in p.read_text()
                   for p in (dest / "labs").rglob("solution*.py"))
    # the copy's own code, not this tree's, is what its tests import
    env = dict(os.environ, PYTHONPATH=str(dest))
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                               cwd=dest, env=env, capture_output=True, text=True)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests/labs",
                          "-k", "not grading and not student_copy"],
                         cwd=dest, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert "skipped" in ran.stdout and "not in this copy" in ran.stdout
    assert "failed" not in ran.stdout
    with pytest.raises(FileExistsError, match="not empty"):
        student_copy.write_student_copy(dest)
