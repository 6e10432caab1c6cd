"""hack/build-controlplane.sh: instant when cached, a clear message when Go is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from minisched.controlplane.binaries import build_script
from tests.plugins.controlplane import require_binaries, skip_unless_ci


@pytest.mark.realcluster
def test_a_second_build_is_instant_and_prints_the_bin_directory() -> None:
    binaries = require_binaries()
    if os.environ.get("MINISCHED_CONTROLPLANE_BIN"):
        pytest.skip("binaries come from MINISCHED_CONTROLPLANE_BIN, not the build cache")
    started = time.monotonic()
    done = subprocess.run(["bash", str(build_script())], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 15
    assert Path(done.stdout.strip().splitlines()[-1]) == binaries.directory
    assert "up to date" in done.stderr


def test_without_go_the_build_says_so(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash
    # A PATH with the basic tools but no `go`.
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "cat", "date", "grep", "sed", "nice", "printf", "mkdir", "rm"):
        found = shutil.which(tool)
        if found and "go" not in Path(found).parts:
            (tools / tool).symlink_to(found)
    env = {"PATH": str(tools), "HOME": str(tmp_path), "MINISCHED_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([bash, str(build_script())], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode != 0
    assert "Go toolchain ('go') is not on PATH" in done.stderr


def test_a_module_that_cannot_be_fetched_is_named(tmp_path: Path) -> None:
    if shutil.which("go") is None:
        skip_unless_ci("needs the Go toolchain")
    env = dict(os.environ, MINISCHED_CACHE=str(tmp_path / "cache"), KWOK_VERSION="v0.0.0-does-not-exist")
    done = subprocess.run(["bash", str(build_script())], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0
    assert "fetching Go module sigs.k8s.io/kwok/cmd/kwok@v0.0.0-does-not-exist failed" in done.stderr
