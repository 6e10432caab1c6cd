"""Where the control-plane binaries are, and how they get built.

`hack/build-controlplane.sh` builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
KWOK from Go modules
into a cache directory keyed by their versions (outside the work tree, so nothing built is ever
committed). This module finds them again: `MINISCHED_CONTROLPLANE_BIN` overrides, else the cache
directory for the pinned versions below.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from minisched.cluster.local import CACHE_ENV, cache_root  # noqa: F401 (re-exported)

# Keep in step with the defaults in hack/build-controlplane.sh (a test checks they agree).
ETCD_VERSION = "v3.6.16"
KUBERNETES_VERSION = "v1.35.4"
KWOK_VERSION = "v0.8.0"

BIN_ENV = "MINISCHED_CONTROLPLANE_BIN"
STAGES_ENV = "MINISCHED_KWOK_STAGES"

# Keep in step with BINARIES in hack/build-controlplane.sh (a test checks they agree).
BINARY_NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


class BinariesNotFound(RuntimeError):
    """The control-plane binaries are not built (or not where the settings say)."""


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def build_script() -> Path:
    return repo_root() / "hack" / "build-controlplane.sh"


def cache_key(
    etcd: str = ETCD_VERSION, kubernetes: str = KUBERNETES_VERSION, kwok: str = KWOK_VERSION
) -> str:
    return f"etcd-{etcd}_k8s-{kubernetes}_kwok-{kwok}"


def default_build_dir() -> Path:
    """The cache directory the build script fills for the pinned versions."""
    return cache_root() / "controlplane" / cache_key()


@dataclass(frozen=True)
class Binaries:
    directory: Path
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path
    kwok_stages: Path

    def versions(self) -> dict[str, str]:
        """First line of each binary's `--version` (slow-ish: five process starts)."""
        found: dict[str, str] = {}
        for name, path in (
            ("etcd", self.etcd),
            ("kube-apiserver", self.kube_apiserver),
            ("kube-controller-manager", self.kube_controller_manager),
            ("kube-scheduler", self.kube_scheduler),
            ("kwok", self.kwok),
        ):
            out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
            found[name] = (
                (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else ""
            )
        return found


def how_to_build() -> str:
    return (
        "build them with `make controlplane` (runs hack/build-controlplane.sh: needs Go >= 1.25 and the "
        f"Go module proxy; the first build takes several minutes), or point {BIN_ENV} at a directory "
        "holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok"
    )


def find_binaries() -> Binaries:
    """The binaries to run, or BinariesNotFound saying what is missing and how to build it."""
    override = os.environ.get(BIN_ENV)
    directory = Path(override).expanduser() if override else default_build_dir() / "bin"
    missing = [n for n in BINARY_NAMES if not os.access(directory / n, os.X_OK)]
    if missing:
        source = f"{BIN_ENV}={override}" if override else "the build cache"
        raise BinariesNotFound(f"{', '.join(missing)} not found in {directory} ({source}); {how_to_build()}")
    stages_setting = os.environ.get(STAGES_ENV)
    candidates = (
        [Path(stages_setting)]
        if stages_setting
        else [directory / "stages.yaml", directory.parent / "stages.yaml"]
    )
    stages = next((c for c in candidates if c.is_file()), None)
    if stages is None:
        raise BinariesNotFound(
            f"KWOK stage manifests not found (looked at {', '.join(map(str, candidates))}); the build script "
            f"writes them next to bin/, or set {STAGES_ENV}"
        )
    return Binaries(
        directory=directory,
        etcd=directory / "etcd",
        kube_apiserver=directory / "kube-apiserver",
        kube_controller_manager=directory / "kube-controller-manager",
        kube_scheduler=directory / "kube-scheduler",
        kwok=directory / "kwok",
        kwok_stages=stages,
    )


def binaries_available() -> bool:
    try:
        find_binaries()
    except BinariesNotFound:
        return False
    return True


def run_build_script(force: bool = False) -> int:
    """Run hack/build-controlplane.sh in the foreground (progress goes to the terminal)."""
    env = dict(os.environ)
    if force:
        env["MINISCHED_FORCE_BUILD"] = "1"
    env.setdefault("ETCD_VERSION", ETCD_VERSION)
    env.setdefault("KUBERNETES_VERSION", KUBERNETES_VERSION)
    env.setdefault("KWOK_VERSION", KWOK_VERSION)
    return subprocess.call(["bash", str(build_script())], env=env)
