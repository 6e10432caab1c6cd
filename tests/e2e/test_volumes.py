"""The volume plugins end to end, on the embedded cluster and on the real control plane: the
scheduler reads claims and volumes through its informers, places a pod where its volume can follow,
leaves a pod with a missing claim pending with kube's message, and moves it when the claim appears."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.cluster import Cluster
from minisched.errors import NotFound
from minisched.objects import make_claim, make_namespace, make_node, make_pod, make_storage_class, make_volume
from minisched.resources import (
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    STORAGE_CLASSES,
    Resource,
)
from minisched.scheduler.events import events_for
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import wait_for_nodes, wait_until

ZONE = "topology.kubernetes.io/zone"
Object = dict[str, Any]


class Env:
    """A namespace, two nodes (zones a and b) and a started scheduler on one backend; cluster-scoped
    storage objects made through it are removed afterwards (their protection finalizers first)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.tag = uuid.uuid4().hex[:6]
        self.ns = f"vol-{self.tag}"
        cluster.create("namespaces", make_namespace(self.ns))
        self.made: list[tuple[Resource, str]] = []
        self.nodes = {}
        for zone in ("a", "b"):
            name = f"vol-{zone}-{self.tag}"
            if cluster.name == "embedded":
                node = make_node(name, labels={ZONE: zone})
            else:
                from minisched.controlplane import fake_node

                node = fake_node(name, labels={ZONE: zone})
            cluster.create(NODES, node)
            self.nodes[zone] = name
        self.sched = Scheduler(cluster, bind_workers=2)
        self.sched.start()
        wait_for_nodes(self.sched, 2)

    def global_object(self, resource: Resource, obj: Object) -> str:
        name = obj["metadata"]["name"] = f"{obj['metadata']['name']}-{self.tag}"
        self.cluster.create(resource, obj)
        self.made.append((resource, name))
        return name

    def said(self, pod: Object, message: str) -> bool:
        """Has a FailedScheduling event about `pod` said `message` (a pod may be tried more than once)?"""
        self.sched.recorder.flush()
        return any(message in e["message"] for e in events_for(self.cluster, pod, "FailedScheduling"))

    def node_of(self, pod: str) -> str:
        return str(self.cluster.get(PODS, pod, self.ns)["spec"].get("nodeName") or "")

    def close(self) -> None:
        self.sched.stop()
        for resource, name in reversed(self.made):
            try:
                self.cluster.patch(resource, name, {"metadata": {"finalizers": None}})
                self.cluster.delete(resource, name)
            except NotFound:
                pass


@pytest.fixture
def env(cluster: Cluster) -> Iterator[Env]:
    e = Env(cluster)
    yield e
    e.close()


def test_a_pod_goes_where_its_bound_volume_is(env: Env) -> None:
    c, ns = env.cluster, env.ns
    pv = env.global_object(PERSISTENT_VOLUMES, make_volume("pv-b", node_affinity=[
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["b"]}]}]))
    c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("data", namespace=ns, volume_name=pv))
    for i in range(3):
        c.create(PODS, make_pod(f"db-{i}", namespace=ns, claims=["data"]))
    wait_until(lambda: all(env.node_of(f"db-{i}") == env.nodes["b"] for i in range(3)), what="all in zone b")


def test_a_zonal_volume_keeps_its_pod_in_the_zone(env: Env) -> None:
    c, ns = env.cluster, env.ns
    pv = env.global_object(PERSISTENT_VOLUMES, make_volume("pv-a", labels={ZONE: "a"}))
    c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("data", namespace=ns, volume_name=pv))
    c.create(PODS, make_pod("web", namespace=ns, claims=["data"]))
    wait_until(lambda: env.node_of("web") == env.nodes["a"], what="web in zone a")


def test_a_missing_claim_waits_and_its_arrival_moves_the_pod(env: Env) -> None:
    c, ns = env.cluster, env.ns
    pod = c.create(PODS, make_pod("app", namespace=ns, claims=["later"]))
    wait_until(lambda: env.said(pod, '0/2 nodes are available: persistentvolumeclaim "later" not found.'),
               what="FailedScheduling naming the claim")
    pv = env.global_object(PERSISTENT_VOLUMES, make_volume("pv-1"))
    c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("later", namespace=ns, volume_name=pv))
    wait_until(lambda: env.node_of("app") in env.nodes.values(), what="app bound once its claim exists")


def test_unbound_claims_wait_with_kubes_messages(env: Env) -> None:
    c, ns = env.cluster, env.ns
    # a delayed class nothing provisions, with no volume: no node can give the claim a volume
    local = env.global_object(STORAGE_CLASSES, make_storage_class(
        "local", provisioner="kubernetes.io/no-provisioner", binding_mode="WaitForFirstConsumer"))
    c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("now", namespace=ns, storage_class=""))
    c.create(PERSISTENT_VOLUME_CLAIMS, make_claim("first-consumer", namespace=ns, storage_class=local))
    now = c.create(PODS, make_pod("immediate", namespace=ns, claims=["now"]))
    delayed = c.create(PODS, make_pod("delayed", namespace=ns, claims=["first-consumer"]))
    # (a pod may first be tried before the scheduler's informer has seen its claim: "not found",
    # then the claim's arrival moves it and the next attempt says what kube says)
    for pod, message in ((now, "pod has unbound immediate PersistentVolumeClaims"),
                         (delayed, "0/2 nodes are available: 2 node(s) didn't find available persistent volumes "
                                   "to bind.")):
        wait_until(lambda pod=pod, message=message: env.said(pod, message), what=message)
    assert not env.node_of("immediate") and not env.node_of("delayed")
