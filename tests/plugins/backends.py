"""The `cluster` fixture: the same test runs against every backend.

`embedded` always runs. `real` runs against the local control plane (etcd + kube-apiserver +
KWOK built by `make controlplane`); the `real_cluster` fixture in tests/plugins/controlplane.py
decides whether it is available, and fails rather than skips when CI=true.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from minisched.cluster import Cluster

BACKENDS = ["embedded", pytest.param("real", marks=pytest.mark.realcluster)]


@pytest.fixture
def embedded_cluster() -> Iterator[Cluster]:
    from minisched.cluster.embedded import EmbeddedCluster

    cluster = EmbeddedCluster()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(params=BACKENDS)
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """Every backend in turn. Contract tests take this fixture."""
    if request.param == "embedded":
        return request.getfixturevalue("embedded_cluster")
    return request.getfixturevalue("real_cluster")
