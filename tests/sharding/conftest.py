"""What the sharding tests share: an embedded cluster on a virtual clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster


@pytest.fixture
def world() -> Iterator[tuple[EmbeddedCluster, VirtualClock]]:
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock=clock)
    yield cluster, clock
    cluster.close()
