"""Write the class's copy of the repository: everything tracked, minus what only instructors see.

    python -m labs.student_copy DEST      (or: make student-copy DEST=...)

Left out: each lab's `solution.py` and `hidden_checks.py`, and the mistake catalogue the tests use
to prove the checks (tests/labs/mistakes.py: near-solutions). Lab notebooks keep the outputs of the
untouched starter (what a student sees before writing anything), never a solution's. The copy is a
git repository of its own with one commit, so `git checkout -- chapters/` restores a notebook.
Its `make test` passes: the tests that need a solution skip, saying why.
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The mutation study (labs/mutants.py, its results and their test) quotes the solutions line by line.
INSTRUCTOR_ONLY = (
    "labs/*/solution.py",
    "labs/*/hidden_checks.py",
    "tests/labs/mistakes.py",
    "labs/mutants.py",
    "labs/mutants.json",
    "labs/MUTANTS.md",
    "tests/labs/test_mutants.py",
)


def tracked_files(repo: Path = REPO) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=repo, check=True, capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p]


def instructor_only(path: str) -> bool:
    return any(fnmatch.fnmatch(path, pattern) for pattern in INSTRUCTOR_ONLY)


def write_student_copy(dest: Path, repo: Path = REPO) -> list[str]:
    """Copy the tracked files that students get into `dest` (which must not exist or be empty)."""
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty: choose a new folder for the student copy")
    left_out = []
    for path in tracked_files(repo):
        if instructor_only(path):
            left_out.append(path)
            continue
        source = repo / path
        if not source.exists():  # deleted in the working tree but still tracked
            continue
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    git = ["git", "-c", "user.name=minisched", "-c", "user.email=minisched@localhost"]
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-qm", "minisched: the class's copy"], cwd=dest, check=True)
    return left_out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    dest = Path(argv[0]).resolve()
    left_out = write_student_copy(dest)
    print(f"student copy in {dest}; left out ({len(left_out)}): {', '.join(left_out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
