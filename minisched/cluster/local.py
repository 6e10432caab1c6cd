"""Where minisched keeps its cache, and where the local control plane's kubeconfig lives.

The cluster layer needs these paths to connect (`MINISCHED_BACKEND=local`); the control plane,
which sits above it, writes there. Keeping them here lets `connect()` find the kubeconfig without
importing minisched.controlplane (which imports the cluster layer: that was an import cycle).
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "MINISCHED_CACHE"
LOCAL_KUBECONFIG_ENV = "MINISCHED_LOCAL_KUBECONFIG"


def cache_root() -> Path:
    """$MINISCHED_CACHE, else ~/.cache/minisched."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "minisched"


def local_kubeconfig_path() -> Path:
    """Where `python -m minisched.controlplane up` writes the kubeconfig of the cluster it runs."""
    configured = os.environ.get(LOCAL_KUBECONFIG_ENV)
    if configured:
        return Path(configured).expanduser()
    return cache_root() / "controlplane" / "local" / "kubeconfig"
