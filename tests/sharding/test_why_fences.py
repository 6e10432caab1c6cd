"""What the API server fences by itself and what it does not, which is why sharding needs fence.py:
a second binding of one pod is refused (409), a binding that over-fills a node is not."""

from __future__ import annotations

import pytest

from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import Conflict
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.sharding.fence import CapacityLedger, ledger_units


def test_the_server_refuses_a_second_binding_of_one_pod() -> None:
    cluster = EmbeddedCluster()
    cluster.create(NODES, make_node("n1"))
    cluster.create(NODES, make_node("n2"))
    cluster.create(PODS, make_pod("p"))
    cluster.bind("default", "p", "n1")  # replica A, which owns p by its view of the ring
    with pytest.raises(Conflict):
        cluster.bind("default", "p", "n2")  # replica B, whose ring view is stale
    assert cluster.get(PODS, "p", "default")["spec"]["nodeName"] == "n1"


def test_the_server_accepts_bindings_that_overfill_a_node_and_the_ledger_refuses_the_second() -> None:
    cluster = EmbeddedCluster()
    node = cluster.create(NODES, make_node("n1", cpu="4"))
    uids = {name: cluster.create(PODS, make_pod(name, cpu="3", memory=None))["metadata"]["uid"]
            for name in ("a", "b")}
    # two replicas, each seeing the node empty, both bind a 3-CPU pod onto 4 CPUs: both accepted
    cluster.bind("default", "a", "n1")
    cluster.bind("default", "b", "n1")
    bound = [p for p in cluster.list(PODS, "default")["items"] if p["spec"].get("nodeName") == "n1"]
    assert len(bound) == 2
    # reserving first, as a sharded replica must, the second is refused before any bind is sent
    ledger = CapacityLedger(cluster)
    allocatable = ledger_units(node["status"]["allocatable"])
    requests = ledger_units({"cpu": "3"})
    assert ledger.reserve("n1", uids["a"], requests, allocatable, pod="default/a")
    assert not ledger.reserve("n1", uids["b"], requests, allocatable, pod="default/b")
