"""Cluster backends behind one interface (`Cluster`), and `connect()` to pick one.

The backend comes from one setting, so a notebook switches from the embedded cluster to kind by
changing nothing but that setting:

- `MINISCHED_BACKEND=embedded` (the default): an in-process API server.
- `MINISCHED_BACKEND=embedded:kind`: the same, started as `make cluster-up` leaves kind (its four
  nodes, 15 system pods and default StorageClass, minisched.cluster.kindcluster): a fast way to see
  what a chapter does on a student's kind cluster.
- `MINISCHED_BACKEND=context:kind-minisched`: a kubeconfig context (`KUBECONFIG` or ~/.kube/config).
- `MINISCHED_BACKEND=kubeconfig:/path/to/kubeconfig`: that file's current context.
- `MINISCHED_BACKEND=incluster`: the service account of the pod minisched runs in.
- `MINISCHED_BACKEND=local`: the local control plane started by `make cluster-local`.
"""

from __future__ import annotations

import os
from typing import Any

from minisched.cluster.base import Cluster, Object, PatchType, Watch, WatchEvent

__all__ = ["Cluster", "Object", "PatchType", "Watch", "WatchEvent", "connect", "backend_setting"]

BACKEND_ENV = "MINISCHED_BACKEND"


def backend_setting() -> str:
    return os.environ.get(BACKEND_ENV, "embedded").strip() or "embedded"


def connect(setting: str | None = None, **options: Any) -> Cluster:
    """A cluster for `setting` (default: the MINISCHED_BACKEND environment variable)."""
    setting = setting or backend_setting()
    kind, _, arg = setting.partition(":")
    if kind == "embedded":
        from minisched.cluster.embedded import EmbeddedCluster

        if arg not in ("", "kind"):
            raise ValueError(f"unknown {BACKEND_ENV} setting {setting!r}: use embedded or embedded:kind")
        cluster = EmbeddedCluster(**options)
        if arg == "kind":
            from minisched.cluster.kindcluster import populate

            populate(cluster)
        return cluster
    from minisched.cluster.real import RealCluster

    if kind == "context":
        return RealCluster.from_kubeconfig(context=arg or None, **options)
    if kind == "kubeconfig":
        return RealCluster.from_kubeconfig(path=arg or None, **options)
    if kind == "incluster":
        return RealCluster.in_cluster(**options)
    if kind == "local":
        from minisched.cluster.local import local_kubeconfig_path

        return RealCluster.from_kubeconfig(path=str(local_kubeconfig_path()), **options)
    raise ValueError(
        f"unknown {BACKEND_ENV} setting {setting!r}: use embedded, embedded:kind, context:NAME, kubeconfig:PATH, "
        "incluster or local"
    )
