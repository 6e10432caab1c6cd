"""The notebook's real-API-server part as a test: three in-process replicas on kube-apiserver and the
real clock, one paused past its lease and resumed (the separate-process version, replicas started
as `minisched run --shards`, is in tests/realcluster)."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.exhibits.sharding_sim import paused_replica_live
from minisched.resources import CONFIG_MAPS, LEASES, NODES, PODS

pytestmark = pytest.mark.realcluster


def test_a_paused_replica_on_a_real_api_server_binds_nothing_twice_and_its_pods_are_taken_over(
        real_cluster: Any, real_namespace: str) -> None:
    run = paused_replica_live(real_cluster, namespace=real_namespace, scheduler_name="shard-live-test",
                              group="shard-live", lease_namespace=real_namespace, lease_duration=3,
                              nodes=8, node_cpu=8, pods=60)
    assert run.bound == run.pods and run.bound_twice == [] and run.overcommitted == {}
    assert run.owned_by_paused > 0 and run.taken_over == run.owned_by_paused and run.stale_bound == 0
    assert run.seconds_to_take_over >= 2.0
    assert all(ring == ("sched-a", "sched-b", "sched-c") for ring in run.rings.values())
    assert not [n for n in real_cluster.list(NODES)["items"] if n["metadata"]["name"].startswith("shard-live-")]
    for resource in (PODS, LEASES, CONFIG_MAPS):
        assert not [o for o in real_cluster.list(resource, real_namespace)["items"]
                    if o["metadata"]["name"].startswith("shard-live-")]


@pytest.mark.parametrize("bind_fence", [True, False], ids=["fenced", "unfenced"])
def test_a_holder_paused_before_its_bind_on_a_real_api_server(
        real_cluster: Any, real_namespace: str, bind_fence: bool) -> None:
    # kube-apiserver's own resourceVersion precondition on pods/binding is the fence: the same steps
    # as tests/sharding/test_bind_fence.py (time moved by hand, the replicas in this process)
    from minisched.clock import VirtualClock
    from minisched.exhibits.sharding_sim import paused_before_bind_run

    run = paused_before_bind_run(real_cluster, VirtualClock(), bind_fence=bind_fence, namespace=real_namespace,
                                 lease_namespace=real_namespace, group="bind-fence-live")
    assert run.filled_by_peer == "bind-fence-live-n1" and run.pruned >= 1
    if bind_fence:
        assert "Precondition failed: ResourceVersion in precondition" in run.holder_answer
        assert run.overcommitted == {} and run.p_binds == 1 and run.p_node == "bind-fence-live-n2"
        assert run.revocations >= 1 and run.bind_stale_versions == 1
    else:
        assert run.holder_answer == "bound"
        assert run.overcommitted == {"bind-fence-live-n1": {"cpu": (6000, 4000)}}
    assert not [n for n in real_cluster.list(NODES)["items"] if n["metadata"]["name"].startswith("bind-fence-live-")]
