"""make cluster-up without kind or Docker says exactly what is missing (this machine has neither a
kind binary nor a Docker engine, and neither has a student who has not installed them yet)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_cluster_up_names_what_is_missing(tmp_path: Path) -> None:
    # A PATH with only the basics: no kind, no docker.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "dirname", "grep", "printf"):
        src = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if src.startswith("/"):
            (bindir / tool).symlink_to(src)
    env = {**os.environ, "PATH": str(bindir)}
    result = subprocess.run(["bash", "hack/kind.sh", "up"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert "missing:" in result.stderr
    assert "kind (" in result.stderr and "docker (the Docker CLI)" in result.stderr
    assert "make cluster-local" in result.stderr  # and what to do instead


def test_unknown_action_is_refused() -> None:
    result = subprocess.run(["bash", "hack/kind.sh", "sideways"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and "usage: hack/kind.sh up|down" in result.stderr
