"""A server whose watch history can be expired on demand, for showing a real 410 Gone.

A watch resumes from a resourceVersion; once the server no longer keeps that version it answers
410 Gone and the client must list again. Forcing that on purpose needs a hand on the server:

- the embedded cluster compacts its history with a fault hook (`faults.force_expiry`);
- a real API server answers from etcd, whose history we compact (`ControlPlane.compact_etcd`), but
  only where the request reaches etcd: with its watch cache on (the default, and what a student's
  cluster runs) it serves an old version from the cache's event window instead. So for a
  real backend `history_expiry` starts a private control plane (etcd + kube-apiserver, no KWOK) with
  `--watch-cache=false`, from the binaries `make controlplane` built.

Chapter 2.2 uses it on both backends; a RuntimeError says what is missing when neither applies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minisched.cluster.base import Cluster
from minisched.controlplane.binaries import BinariesNotFound, find_binaries
from minisched.controlplane.harness import ControlPlane, ControlPlaneOptions


@dataclass
class HistoryExpiry:
    cluster: Cluster  # where to list and watch
    description: str
    _expire: Any = field(repr=False)
    _control_plane: ControlPlane | None = field(default=None, repr=False)

    def expire(self) -> None:
        """Forget every resourceVersion older than now: watching from one answers 410 Gone."""
        self._expire()

    def close(self) -> None:
        """Stops the private control plane, if one was started (the embedded cluster stays)."""
        if self._control_plane is not None:
            self.cluster.close()
            self._control_plane.stop()
            self._control_plane = None


def history_expiry(cluster: Cluster, *, ready_timeout: float = 60.0) -> HistoryExpiry:
    faults = getattr(cluster, "faults", None)
    if faults is not None:
        return HistoryExpiry(cluster, "the embedded cluster, its history compacted by a fault hook",
                             faults.force_expiry)  # fmt: skip
    try:
        binaries = find_binaries()
    except BinariesNotFound as err:
        raise RuntimeError(
            f"a real 410 needs an API server without a watch cache, started from the binaries `make "
            f"controlplane` builds; they are missing here ({err})"
        ) from err
    from minisched.cluster.real import RealCluster

    options = ControlPlaneOptions(start_kwok=False, watch_cache=False, ready_timeout=ready_timeout)
    cp = ControlPlane(options, binaries).start()
    try:
        private = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
    except BaseException:
        cp.stop()
        raise
    return HistoryExpiry(
        private,
        "a private kube-apiserver with --watch-cache=false on its own etcd, compacted through etcd's API",
        cp.compact_etcd,
        cp,
    )
