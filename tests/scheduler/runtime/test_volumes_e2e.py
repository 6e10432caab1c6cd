"""The volume plugins end to end on the embedded cluster: the scheduler reads claims and volumes
through its informers, places a pod where its volume can follow, leaves a pod with a missing claim
pending with kube's message, and moves it when the claim appears."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_claim, make_node, make_pod, make_storage_class, make_volume
from minisched.resources import NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, PODS, STORAGE_CLASSES
from minisched.scheduler.events import events_for
from minisched.scheduler.plugins.volume_binding import wait_for_first_consumer_message
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import node_of, wait_for_nodes, wait_until

ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster()
    for zone in ("a", "b"):
        c.create(NODES, make_node(f"node-{zone}", labels={ZONE: zone}))
    yield c
    c.close()


@pytest.fixture
def sched(cluster: EmbeddedCluster) -> Iterator[Scheduler]:
    s = Scheduler(cluster, bind_workers=2)
    s.start()
    wait_for_nodes(s, 2)
    yield s
    s.stop()


def test_a_pod_goes_where_its_bound_volume_is(cluster: EmbeddedCluster, sched: Scheduler) -> None:
    cluster.create(PERSISTENT_VOLUMES, make_volume("pv-b", node_affinity=[
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["b"]}]}]))
    cluster.create(PERSISTENT_VOLUME_CLAIMS, make_claim("data", volume_name="pv-b"))
    for i in range(3):
        cluster.create(PODS, make_pod(f"db-{i}", claims=["data"]))
    wait_until(lambda: all(node_of(cluster, f"db-{i}") == "node-b" for i in range(3)), what="all on node-b")


def test_a_zonal_volume_keeps_its_pod_in_the_zone(cluster: EmbeddedCluster, sched: Scheduler) -> None:
    cluster.create(PERSISTENT_VOLUMES, make_volume("pv-a", labels={ZONE: "a"}))
    cluster.create(PERSISTENT_VOLUME_CLAIMS, make_claim("data", volume_name="pv-a"))
    cluster.create(PODS, make_pod("web", claims=["data"]))
    wait_until(lambda: node_of(cluster, "web") == "node-a", what="web on node-a")


def test_a_missing_claim_waits_and_its_arrival_moves_the_pod(cluster: EmbeddedCluster, sched: Scheduler) -> None:
    pod = cluster.create(PODS, make_pod("app", claims=["later"]))
    wait_until(lambda: sched.pending_pods()["unschedulable"] == 1, what="app parked")
    sched.recorder.flush()
    (event,) = events_for(cluster, pod, "FailedScheduling")
    assert event["message"].startswith('0/2 nodes are available: persistentvolumeclaim "later" not found.')
    cluster.create(PERSISTENT_VOLUMES, make_volume("pv-1"))
    cluster.create(PERSISTENT_VOLUME_CLAIMS, make_claim("later", volume_name="pv-1"))
    wait_until(lambda: node_of(cluster, "app") in ("node-a", "node-b"), what="app bound once its claim exists")


def test_unbound_claims_are_refused_with_kubes_message_or_ours(cluster: EmbeddedCluster, sched: Scheduler) -> None:
    cluster.create(STORAGE_CLASSES, make_storage_class("late", binding_mode="WaitForFirstConsumer"))
    cluster.create(PERSISTENT_VOLUME_CLAIMS, make_claim("now", storage_class=""))
    cluster.create(PERSISTENT_VOLUME_CLAIMS, make_claim("first-consumer", storage_class="late"))
    now = cluster.create(PODS, make_pod("immediate", claims=["now"]))
    late = cluster.create(PODS, make_pod("delayed", claims=["first-consumer"]))
    wait_until(lambda: sched.pending_pods()["unschedulable"] == 2, what="both parked")
    sched.recorder.flush()
    (event,) = events_for(cluster, now, "FailedScheduling")
    assert "pod has unbound immediate PersistentVolumeClaims" in event["message"]
    (event,) = events_for(cluster, late, "FailedScheduling")
    assert wait_for_first_consumer_message("first-consumer") in event["message"]
