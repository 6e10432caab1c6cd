"""history_expiry for a real backend: a private uncached kube-apiserver whose 410 is real."""

from __future__ import annotations

import pytest

from minisched.controlplane.expiry import history_expiry
from minisched.errors import Expired
from minisched.objects import make_pod
from tests.plugins.controlplane import require_binaries

pytestmark = pytest.mark.realcluster


def test_a_private_uncached_server_answers_410_after_compaction(real_cluster) -> None:
    require_binaries()
    history = history_expiry(real_cluster)
    try:
        assert history.cluster is not real_cluster and "watch-cache=false" in history.description
        old = history.cluster.list("pods", "default")["metadata"]["resourceVersion"]
        for name in ("a", "b"):  # etcd keeps the compaction revision itself: two writes put old+1 before it
            history.cluster.create("pods", make_pod(name))
        history.expire()
        with pytest.raises(Expired):
            list(history.cluster.watch("pods", "default", resource_version=old, timeout_seconds=5))
    finally:
        history.close()
