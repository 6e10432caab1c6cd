"""Check notebooks: normalized on disk, stored checked outputs reproduced, each under the limit.

Output comparison is nbval's, run in lax mode in a pytest subprocess per notebook (so a crashed or
hung kernel takes only its own notebook down, and each notebook gets its own wall-clock time).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from minisched.notebooks.execute import notebook_env
from minisched.notebooks.normalize import is_normalized, normalized_text
from minisched.notebooks.sanitize import sanitize_config

TIME_LIMIT_SECONDS = 60.0
CHECK_MARKER = "NBVAL_CHECK_OUTPUT"

# Our own pytest configuration, so the repository's (testpaths, plugins) does not apply.
_PYTEST_INI = """[pytest]
addopts = -p no:cacheprovider
timeout = 300
"""


@dataclass
class NotebookResult:
    path: Path
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    details: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def find_notebooks(paths: list[str | Path]) -> list[Path]:
    """Every .ipynb under `paths` (files are taken as given), sorted, checkpoints skipped."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"no such notebook or directory: {path}")
        if path.is_file():
            if path.suffix != ".ipynb":
                raise ValueError(f"not a notebook (expected .ipynb): {path}")
            found.append(path)
            continue
        found.extend(p for p in sorted(path.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts)
    return found


def checked_cell_count(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    return sum(1 for c in nb.cells if c.cell_type == "code" and CHECK_MARKER in c.source)


def check_notebook(
    path: str | Path, *, time_limit: float = TIME_LIMIT_SECONDS, strict: bool | None = None,
    backend: str = "embedded",
) -> NotebookResult:
    """Check one notebook on the embedded backend (the one its stored outputs come from), or on
    `backend` (a MINISCHED_BACKEND setting, e.g. "embedded:kind"), whose checked outputs must match
    the same stored ones.

    What JupyterLab changes when a student saves a notebook (metadata, execution counts, widget
    state) is normalized away before the check, so a student's `make test` still passes; only
    `strict` (default: under CI=true, where committed notebooks must be clean) makes it a failure."""
    path = Path(path)
    strict = os.environ.get("CI") == "true" if strict is None else strict
    result = NotebookResult(path)
    if not is_normalized(path):
        message = f"not normalized: run `python -m minisched.notebooks fix {path}`"
        if strict:
            result.problems.append(message)
        else:
            result.warnings.append(message + " (JupyterLab's changes on save are ignored by this check)")
            copy = path.with_name(f".nbcheck-{path.name}")
            copy.write_text(normalized_text(nbformat.read(path, as_version=4)), encoding="utf-8")
            try:
                checked = _run_nbval(copy, result, time_limit, backend)
            finally:
                copy.unlink(missing_ok=True)
            checked.path = path
            return checked
    return _run_nbval(path, result, time_limit, backend)


def _run_nbval(path: Path, result: NotebookResult, time_limit: float, backend: str = "embedded") -> NotebookResult:
    if checked_cell_count(path) == 0:
        result.warnings.append(f"no cell carries # {CHECK_MARKER}: none of its results are checked")
    with tempfile.TemporaryDirectory(prefix="minisched-nbcheck-") as tmp:
        ini = Path(tmp, "pytest.ini")
        ini.write_text(_PYTEST_INI)
        sanitize_file = Path(tmp, "sanitize.cfg")
        sanitize_file.write_text(sanitize_config())
        command = [
            # -vv: pytest's diff of a differing cell in full, not cut at a few lines
            sys.executable, "-m", "pytest", "-vv", "-c", str(ini), "--rootdir", str(path.parent.resolve()),
            "--nbval-lax", "--nbval-current-env", "--nbval-sanitize-with", str(sanitize_file),
            "--nbval-cell-timeout", "120", str(path.resolve()),
        ]  # fmt: skip
        started = time.perf_counter()
        try:
            proc = subprocess.run(
                command, env=notebook_env(backend), cwd=tmp, capture_output=True, text=True,
                timeout=max(time_limit * 3, 180),
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            result.seconds = time.perf_counter() - started
            result.problems.append(f"still running after {result.seconds:.0f} s: stopped")
            return result
        result.seconds = time.perf_counter() - started
    if proc.returncode != 0:
        result.problems.append("cells failed or checked outputs differ from a fresh run (see details)")
        result.details = failure_report(proc.stdout + proc.stderr)
    if result.seconds > time_limit:
        result.problems.append(f"took {result.seconds:.1f} s, over the {time_limit:.0f} s limit")
    return result


_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
# pytest writes `assert reference_output == test_output` with "+" for the left side: the stored output.
DIFF_LEGEND = "(in each diff below, '+' lines are the stored output, '-' lines this run's)"


def failure_report(text: str, max_lines: int = 400) -> str:
    """nbval's report of the cells that failed or differ (from pytest's FAILURES section on), without
    its colour codes, for a reader: each cell named (`notebook.ipynb::Cell N`, N counting code cells
    from 0), its source, and the diff of its output."""
    lines = _ANSI_ESCAPE.sub("", text).strip().splitlines()
    start = next((i for i, line in enumerate(lines) if "= FAILURES =" in line), None)
    if start is None:
        return "\n".join(lines[-80:])
    end = next((i for i in range(start, len(lines)) if "short test summary info" in lines[i]), len(lines))
    kept = lines[start:end] + lines[-1:]  # pytest's last line counts what failed and passed
    if len(kept) > max_lines:
        kept = kept[:max_lines] + [f"... {len(kept) - max_lines} more lines"]
    return "\n".join([DIFF_LEGEND, *kept])
