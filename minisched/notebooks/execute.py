"""Execute a notebook in a fresh kernel of this environment, with the backend chosen by setting."""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

BACKEND_ENV = "MINISCHED_BACKEND"


def notebook_env(backend: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The kernel's environment: ours, with the backend set and hashing made repeatable (and
    `extra`, e.g. a student's MINISCHED_NAMESPACE)."""
    env = dict(os.environ)
    env.update(extra or {})
    env[BACKEND_ENV] = backend
    env["PYTHONHASHSEED"] = "0"
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    return env


def execute_notebook(
    path: str | Path, *, backend: str = "embedded", cell_timeout: float = 120.0, env: dict[str, str] | None = None
) -> tuple[nbformat.NotebookNode, float]:
    """Run every cell of `path` (cwd = its directory); returns the executed notebook and the
    seconds it took, kernel start included. A failing cell raises nbclient's CellExecutionError,
    whose message names the cell and shows the traceback."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=cell_timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    started = time.perf_counter()
    client.execute(env=notebook_env(backend, env))
    return nb, time.perf_counter() - started
