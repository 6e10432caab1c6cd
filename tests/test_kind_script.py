"""hack/kind.sh (make cluster-up / cluster-down): says exactly what is missing when it cannot run, and
installs what the README says, in order. kind, docker and kubectl are fakes on PATH that record how
they were called (this machine has neither kind nor a Docker engine)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from minisched.controlplane import CHAPTER_NODE_LABEL, KWOK_VERSION

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "hack" / "kind.sh"
KWOK_RELEASE = f"https://github.com/kubernetes-sigs/kwok/releases/download/{KWOK_VERSION}"


def _basic_path(tmp_path: Path) -> Path:
    """A bin directory with only the basics the script needs (no kind, docker or kubectl)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "dirname", "grep", "printf", "cat"):
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    return bindir


def _fake(bindir: Path, name: str, log: Path, body: str = "") -> None:
    """A command that appends `name args...` (one JSON list per line) to `log`, then runs `body`."""
    script = bindir / name
    record = "import json, sys; print(json.dumps(sys.argv[1:]))"
    script.write_text(f"#!/bin/bash\n{sys.executable} -c '{record}' {name} \"$@\" >> {log}\n{body}\n")
    script.chmod(0o755)


def _run(bindir: Path, action: str = "up") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": str(bindir)}
    env.pop("KWOK_VERSION", None)
    return subprocess.run(["bash", str(SCRIPT), action], cwd=ROOT, env=env, capture_output=True, text=True)


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_cluster_up_names_what_is_missing(tmp_path: Path) -> None:
    result = _run(_basic_path(tmp_path))
    assert result.returncode == 1
    assert "missing:" in result.stderr
    assert "kind (" in result.stderr and "docker (the Docker CLI)" in result.stderr
    assert "kubectl (" in result.stderr
    assert "make cluster-local" in result.stderr  # and what to do instead


def test_a_stopped_docker_engine_and_a_missing_kubectl_are_named(tmp_path: Path) -> None:
    bindir = _basic_path(tmp_path)
    log = tmp_path / "calls.log"
    _fake(bindir, "kind", log)
    _fake(bindir, "docker", log, 'if [ "$1" = info ]; then echo "Cannot connect to the Docker daemon" >&2; exit 1; fi')
    result = _run(bindir)
    assert result.returncode == 1
    assert "a running Docker engine ('docker info' fails" in result.stderr
    assert "kubectl (" in result.stderr
    assert "kind (" not in result.stderr and "docker (the Docker CLI)" not in result.stderr
    assert ["kind", "create", "cluster", "--config", "deploy/kind.yaml", "--wait", "120s"] not in _calls(log)


def test_cluster_up_creates_the_cluster_then_installs_kwok_for_chapter_nodes_and_the_rbac(tmp_path: Path) -> None:
    bindir = _basic_path(tmp_path)
    log = tmp_path / "calls.log"
    _fake(bindir, "kind", log)  # `kind get clusters` prints nothing: no cluster yet
    _fake(bindir, "docker", log)
    _fake(bindir, "kubectl", log)
    result = _run(bindir)
    assert result.returncode == 0, result.stderr
    calls = [c for c in _calls(log) if c[:2] != ["docker", "info"] and c[:3] != ["kind", "get", "clusters"]]
    kube = ["kubectl", "--context", "kind-minisched"]
    assert calls[0] == ["kind", "create", "cluster", "--config", "deploy/kind.yaml", "--wait", "120s"]
    assert calls[1] == [*kube, "apply", "-f", f"{KWOK_RELEASE}/kwok.yaml"]
    assert calls[2] == [*kube, "apply", "-f", f"{KWOK_RELEASE}/stage-fast.yaml"]
    patch = calls[3]
    assert patch[: len(kube) + 5] == [*kube, "-n", "kube-system", "patch", "deployment", "kwok-controller"]
    (args_patch,) = json.loads(patch[patch.index("-p") + 1])
    assert args_patch["path"] == "/spec/template/spec/containers/0/args"
    args = args_patch["value"]
    # Only chapter nodes: the release's annotation selector emptied (KWOK ANDs it with the label selector).
    assert f"--manage-nodes-with-label-selector={CHAPTER_NODE_LABEL}" in args
    assert "--manage-nodes-with-annotation-selector=" in args and "--manage-all-nodes=false" in args
    assert "--config=/root/.kwok/kwok.yaml" in args  # the release's own config and node IP stay
    # kwok-controller itself, and kind's DaemonSets, never go to a chapter node.
    for call, kind, name in zip(
        (calls[4], calls[6], calls[7]),
        ("deployment", "daemonset", "daemonset"),
        ("kwok-controller", "kindnet", "kube-proxy"),
        strict=True,
    ):
        assert call[: len(kube) + 5] == [*kube, "-n", "kube-system", "patch", kind, name]
        affinity = json.loads(call[call.index("-p") + 1])["spec"]["template"]["spec"]["affinity"]
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": [{"key": CHAPTER_NODE_LABEL, "operator": "DoesNotExist"}]}]
    assert calls[5] == [*kube, "-n", "kube-system", "rollout", "status", "deployment/kwok-controller", "--timeout=180s"]
    assert calls[8] == [*kube, "apply", "-f", "deploy/rbac.yaml"]
    assert len(calls) == 9


def test_cluster_up_on_an_existing_cluster_reinstalls_without_creating(tmp_path: Path) -> None:
    bindir = _basic_path(tmp_path)
    log = tmp_path / "calls.log"
    _fake(bindir, "kind", log, 'if [ "$1 $2" = "get clusters" ]; then echo minisched; fi')
    _fake(bindir, "docker", log)
    _fake(bindir, "kubectl", log)
    result = _run(bindir)
    assert result.returncode == 0, result.stderr
    assert "already exists" in result.stdout
    calls = _calls(log)
    assert not any(c[:3] == ["kind", "create", "cluster"] for c in calls)
    assert ["kubectl", "--context", "kind-minisched", "apply", "-f", f"{KWOK_RELEASE}/kwok.yaml"] in calls


def test_a_failing_step_stops_the_script(tmp_path: Path) -> None:
    bindir = _basic_path(tmp_path)
    log = tmp_path / "calls.log"
    _fake(bindir, "kind", log)
    _fake(bindir, "docker", log)
    _fake(bindir, "kubectl", log, 'case "$*" in *kwok.yaml*) echo "unable to fetch" >&2; exit 1;; esac')
    result = _run(bindir)
    assert result.returncode != 0
    assert not any("rbac.yaml" in " ".join(c) for c in _calls(log))


def test_cluster_down_deletes_the_cluster_and_needs_no_kubectl(tmp_path: Path) -> None:
    bindir = _basic_path(tmp_path)
    log = tmp_path / "calls.log"
    _fake(bindir, "kind", log)
    _fake(bindir, "docker", log)
    result = _run(bindir, "down")
    assert result.returncode == 0, result.stderr
    assert ["kind", "delete", "cluster", "--name", "minisched"] in _calls(log)


def test_the_script_pins_the_kwok_version_the_control_plane_builds() -> None:
    assert re.search(rf'KWOK_VERSION="\$\{{KWOK_VERSION:-{re.escape(KWOK_VERSION)}\}}"', SCRIPT.read_text())


def test_unknown_action_is_refused() -> None:
    result = subprocess.run(["bash", str(SCRIPT), "sideways"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and "usage: hack/kind.sh up|down" in result.stderr
