"""history_expiry: a 410 on demand, on the embedded cluster (and the error when it cannot be had)."""

from __future__ import annotations

import pytest

from minisched.cluster.embedded import EmbeddedCluster
from minisched.controlplane import expiry
from minisched.controlplane.binaries import BinariesNotFound
from minisched.errors import Expired
from minisched.objects import make_pod


def test_on_the_embedded_cluster_expiry_is_the_fault_hook() -> None:
    cluster = EmbeddedCluster()
    history = expiry.history_expiry(cluster)
    assert history.cluster is cluster and "embedded" in history.description
    old = cluster.list("pods", "default")["metadata"]["resourceVersion"]
    cluster.create("pods", make_pod("a"))
    history.expire()
    with pytest.raises(Expired):
        list(cluster.watch("pods", "default", resource_version=old, timeout_seconds=2))
    history.close()
    assert cluster.get("pods", "a", "default")  # closing leaves the caller's cluster alone


def test_a_real_backend_without_binaries_is_told_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise BinariesNotFound("no cache at /nowhere")

    monkeypatch.setattr(expiry, "find_binaries", missing)

    class NoFaults:
        name = "real"

    with pytest.raises(RuntimeError, match="without a watch cache.*no cache at /nowhere"):
        expiry.history_expiry(NoFaults())  # type: ignore[arg-type]
