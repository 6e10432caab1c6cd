"""hack/build-controlplane.sh: instant when cached, a clear message when Go is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from minisched.controlplane.binaries import (
    BINARY_NAMES,
    ETCD_VERSION,
    KUBERNETES_VERSION,
    KWOK_VERSION,
    build_script,
    cache_key,
)
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


def _script_array(name: str) -> list[str]:
    """An array the build script defines at its top (e.g. BINARIES), as bash expands it."""
    lines = [line for line in build_script().read_text().splitlines() if line.startswith(("KUBE_COMMANDS=", "BINARIES="))]
    done = subprocess.run(
        ["bash", "-c", "\n".join(lines) + f'\nprintf "%s\\n" "${{{name}[@]}}"'], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_script_builds_the_binaries_the_harness_looks_for() -> None:
    assert sorted(_script_array("BINARIES")) == sorted(BINARY_NAMES)
    assert "kube-controller-manager" in _script_array("KUBE_COMMANDS")


def _fake_cache(tmp_path: Path, *, complete_but: str | None, stamp: bool = True) -> tuple[dict[str, str], Path]:
    """A build cache whose binaries are scripts answering --version as the pinned ones do (all but
    `complete_but`), and a `go` on PATH that records its arguments and fails (so no real build runs)."""
    out = tmp_path / "cache" / "controlplane" / cache_key()
    (out / "bin").mkdir(parents=True)
    if stamp:
        (out / "STAMP").write_text(cache_key() + "\n")
    (out / "stages.yaml").write_text("kind: Stage\n")
    answers = {
        "etcd": f"etcd Version: {ETCD_VERSION[1:]}",
        "kwok": f"kwok version {KWOK_VERSION}",
        **{b: f"Kubernetes {KUBERNETES_VERSION}" for b in BINARY_NAMES if b.startswith("kube-")},
    }
    for binary, answer in answers.items():
        if binary != complete_but:
            path = out / "bin" / binary
            path.write_text(f"#!/bin/sh\necho '{answer}'\n")
            path.chmod(0o755)
    tools = tmp_path / "tools"
    tools.mkdir()
    go_log = tmp_path / "go.log"
    go = tools / "go"
    go.write_text(f'#!/bin/sh\necho "$*" >> {go_log}\n[ "$1" = env ] && {{ echo go-fake; exit 0; }}\nexit 1\n')
    go.chmod(0o755)
    env = dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", MINISCHED_CACHE=str(tmp_path / "cache"))
    env.pop("MINISCHED_FORCE_BUILD", None)
    return env, go_log


def test_a_complete_cache_missing_one_binary_builds_only_that_one(tmp_path: Path) -> None:
    env, go_log = _fake_cache(tmp_path, complete_but="kube-controller-manager")
    done = subprocess.run(["bash", str(build_script())], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode != 0  # the fake go fails at its first build step
    assert "complete but for: kube-controller-manager; building only those" in done.stderr
    build_steps = [line for line in go_log.read_text().splitlines() if not line.startswith("env")]
    # Straight to k8s.io/kubernetes: neither KWOK (`install`, built first in a full build) nor etcd.
    assert build_steps[0] == f"mod download -json k8s.io/kubernetes@{KUBERNETES_VERSION}", build_steps


def test_a_cache_without_its_stamp_builds_everything(tmp_path: Path) -> None:
    env, go_log = _fake_cache(tmp_path, complete_but="kube-controller-manager", stamp=False)
    done = subprocess.run(["bash", str(build_script())], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode != 0
    assert "building only those" not in done.stderr
    build_steps = [line for line in go_log.read_text().splitlines() if not line.startswith("env")]
    assert build_steps[0].startswith("install ") and "sigs.k8s.io/kwok/cmd/kwok" in build_steps[0], build_steps


def test_a_complete_cache_builds_nothing(tmp_path: Path) -> None:
    env, go_log = _fake_cache(tmp_path, complete_but=None)
    done = subprocess.run(["bash", str(build_script())], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "up to date" in done.stderr
    assert not go_log.exists() or all(line.startswith("env") for line in go_log.read_text().splitlines())
