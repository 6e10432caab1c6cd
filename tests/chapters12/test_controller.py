"""§2.3: the reconciler contract, the controller runner and the MiniReplicaSet worked example."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.cluster import Cluster
from minisched.controllers import replicaset as mrs
from minisched.controllers.controller import Controller, owner_request
from minisched.controllers.reconciler import Kind, Request, Result, raw_kind
from minisched.informer import SharedInformerFactory
from minisched.resources import CONFIG_MAPS, CRDS, PODS
from minisched.workqueue import ItemExponentialFailureRateLimiter

Object = dict[str, Any]


def pod_names(cluster: Cluster, namespace: str = "default") -> list[str]:
    return sorted(p["metadata"]["name"] for p in cluster.list(PODS, namespace)["items"])


@pytest.fixture
def rs_cluster(embedded_cluster: Cluster) -> Cluster:
    embedded_cluster.create(CRDS, mrs.crd())
    return embedded_cluster


@pytest.fixture
def factories() -> Iterator[list[SharedInformerFactory]]:
    made: list[SharedInformerFactory] = []
    yield made
    for factory in made:
        factory.shutdown()


def start_controller(cluster: Cluster, factories: list[SharedInformerFactory]) -> Controller[Any, Any]:
    factory = SharedInformerFactory(cluster)
    factories.append(factory)
    controller = Controller("mrs", mrs.MiniReplicaSetReconciler(cluster, factory), factory)
    controller.start_informers()
    assert controller.wait_for_sync(10)
    return controller


# --- the contract ------------------------------------------------------------------------------


def test_request_keys_and_result_validation() -> None:
    assert Request.from_key("ns/a") == Request("ns", "a") and Request("ns", "a").key == "ns/a"
    assert Request.from_key("node-1").key == "node-1"
    assert Request.for_object({"metadata": {"name": "x", "namespace": "y"}}) == Request("y", "x")
    with pytest.raises(ValueError, match="requeue_after must not be negative"):
        Result(requeue_after=-1)


def test_owner_request_follows_only_the_controller_reference() -> None:
    ref = {"apiVersion": mrs.RESOURCE.api_version, "kind": mrs.KIND, "name": "web", "uid": "u"}
    pod = {"metadata": {"name": "p", "namespace": "ns", "ownerReferences": [dict(ref, controller=True)]}}
    assert owner_request(pod, mrs.KIND, mrs.RESOURCE.api_version) == Request("ns", "web")
    pod["metadata"]["ownerReferences"] = [ref]  # not the controller
    assert owner_request(pod, mrs.KIND, mrs.RESOURCE.api_version) is None


def test_typed_decode_rejects_bad_replicas() -> None:
    bad = mrs.make_mini_replica_set("web", 1)
    bad["spec"]["replicas"] = -2
    with pytest.raises(ValueError, match="spec.replicas must be an integer"):
        mrs.MINI_REPLICA_SETS.decode(bad)
    good = mrs.MINI_REPLICA_SETS.decode(mrs.make_mini_replica_set("web", 2))
    assert good.replicas == 2 and mrs.MINI_REPLICA_SETS.encode(good)["spec"]["replicas"] == 2


# --- the worked example --------------------------------------------------------------------------


def test_scales_up_down_and_reports_status(
    rs_cluster: Cluster, factories: list[SharedInformerFactory]
) -> None:
    rs_cluster.create(mrs.RESOURCE, mrs.make_mini_replica_set("web", 3))
    controller = start_controller(rs_cluster, factories)
    controller.settle(until=lambda: len(pod_names(rs_cluster)) == 3)
    assert pod_names(rs_cluster) == ["web-0", "web-1", "web-2"]
    status = rs_cluster.get(mrs.RESOURCE, "web", "default")["status"]
    assert status == {"replicas": 3, "observedGeneration": 1}

    rs_cluster.patch(mrs.RESOURCE, "web", {"spec": {"replicas": 1}}, "default")
    controller.settle(until=lambda: len(pod_names(rs_cluster)) == 1)
    assert pod_names(rs_cluster) == ["web-0"]  # the highest indexes go first

    rs_cluster.delete(PODS, "web-0", "default", grace_period_seconds=0)
    rs_cluster.patch(mrs.RESOURCE, "web", {"spec": {"replicas": 2}}, "default")
    controller.settle(until=lambda: len(pod_names(rs_cluster)) == 2)
    assert pod_names(rs_cluster) == ["web-0", "web-1"]
    pod = rs_cluster.get(PODS, "web-1", "default")
    assert pod["metadata"]["ownerReferences"][0]["controller"] is True
    assert pod["metadata"]["labels"] == {"app": "web"}


def test_level_based_recovers_from_missed_events(
    rs_cluster: Cluster, factories: list[SharedInformerFactory]
) -> None:
    rs_cluster.create(mrs.RESOURCE, mrs.make_mini_replica_set("web", 3))
    first = start_controller(rs_cluster, factories)
    first.settle(until=lambda: len(pod_names(rs_cluster)) == 3)
    factories[0].shutdown()  # the controller goes down: every event from here on is missed
    rs_cluster.delete(PODS, "web-1", "default", grace_period_seconds=0)
    rs_cluster.delete(PODS, "web-2", "default", grace_period_seconds=0)
    rs_cluster.patch(mrs.RESOURCE, "web", {"spec": {"replicas": 4}}, "default")
    second = start_controller(rs_cluster, factories)
    ran = second.settle(until=lambda: len(pod_names(rs_cluster)) == 4)
    assert pod_names(rs_cluster) == ["web-0", "web-1", "web-2", "web-3"]
    assert ran >= 1 and second.stats.errors == 0


def test_reconcile_from_a_stale_cache_creates_nothing_twice(
    rs_cluster: Cluster, factories: list[SharedInformerFactory]
) -> None:
    rs_cluster.create(mrs.RESOURCE, mrs.make_mini_replica_set("web", 2))
    factory = SharedInformerFactory(rs_cluster)
    factories.append(factory)
    reconciler = mrs.MiniReplicaSetReconciler(rs_cluster, factory)
    factory.start()
    assert all(factory.wait_for_cache_sync(10).values())
    factory.shutdown()  # freeze the cache: it will never see the pods we create
    reconciler.reconcile(Request("default", "web"))
    assert reconciler.last["default/web"].created == ["web-0", "web-1"]
    reconciler.reconcile(Request("default", "web"))
    assert (
        reconciler.last["default/web"].created == [] and reconciler.last["default/web"].already_existed == 2
    )
    assert pod_names(rs_cluster) == ["web-0", "web-1"]


def test_invalid_spec_is_reported_not_retried(rs_cluster: Cluster) -> None:
    bad = mrs.make_mini_replica_set("web", 1)
    bad["spec"]["replicas"] = "many"
    bad["metadata"]["uid"] = "u-1"
    with pytest.raises(Exception, match="replicas"):
        rs_cluster.create(mrs.RESOURCE, bad)  # the server validates the CRD schema (422)
    # An old object stored before a schema tightened can still be invalid: put one in the cache directly.
    reconciler = mrs.MiniReplicaSetReconciler(rs_cluster, SharedInformerFactory(rs_cluster))
    reconciler.sets.store.add(bad)
    assert reconciler.reconcile(Request("default", "web")) == Result()  # not an error: retrying cannot help
    report = reconciler.last["default/web"]
    assert report.invalid and "spec.replicas must be an integer" in report.invalid
    assert pod_names(rs_cluster) == []


# --- the runner's retry rules ----------------------------------------------------------------------


class Flaky:
    """Fails `failures` times per key, then asks to be looked at again in `after` seconds once."""

    def __init__(self, failures: int, after: float = 0.0) -> None:
        self.failures, self.after = failures, after
        self.calls: list[str] = []

    @property
    def primary(self) -> Kind[Object]:
        return raw_kind(CONFIG_MAPS)

    @property
    def owned(self) -> Kind[Object] | None:
        return None

    def reconcile(self, request: Request) -> Result:
        self.calls.append(request.key)
        if self.calls.count(request.key) <= self.failures:
            raise RuntimeError("transient")
        if self.after and self.calls.count(request.key) == self.failures + 1:
            return Result(requeue_after=self.after)
        return Result()


def test_errors_back_off_then_requeue_after_waits_on_the_clock(embedded_cluster: Cluster) -> None:
    clock = VirtualClock()
    factory = SharedInformerFactory(embedded_cluster)
    reconciler = Flaky(failures=2, after=30.0)
    controller = Controller(
        "flaky",
        reconciler,
        factory,
        clock=clock,
        rate_limiter=ItemExponentialFailureRateLimiter(1.0, 60.0),
    )
    try:
        controller.enqueue(Request("default", "cm"))
        assert controller.process_ready() == 1  # fails: back-off 1 s
        assert controller.process_ready() == 0
        assert controller.queue.num_requeues(Request("default", "cm")) == 1
        clock.advance(1.0)
        _wait_ready(controller)
        assert controller.process_ready() == 1  # fails again: back-off 2 s
        clock.advance(1.0)
        assert controller.process_ready() == 0
        clock.advance(1.0)
        _wait_ready(controller)
        assert controller.process_ready() == 1  # succeeds, asks again in 30 s; failures forgotten
        assert controller.queue.num_requeues(Request("default", "cm")) == 0
        clock.advance(29.0)
        assert controller.process_ready() == 0
        clock.advance(1.0)
        _wait_ready(controller)
        assert controller.process_ready() == 1
        assert controller.stats.errors == 2 and controller.stats.requeues_after == 1
        assert [o.error is None for o in controller.history] == [False, False, True, True]
    finally:
        controller.stop()


def _wait_ready(controller: Controller[Any, Any], timeout: float = 2.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while len(controller.queue) == 0 and time.monotonic() < deadline:
        time.sleep(0.002)  # the delaying queue's own thread moves due items in


def test_workers_must_be_positive(embedded_cluster: Cluster) -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        Controller("x", Flaky(0), SharedInformerFactory(embedded_cluster), workers=0)


def test_threaded_workers(rs_cluster: Cluster, factories: list[SharedInformerFactory]) -> None:
    rs_cluster.create(mrs.RESOURCE, mrs.make_mini_replica_set("api", 5))
    factory = SharedInformerFactory(rs_cluster)
    factories.append(factory)
    controller = Controller("mrs", mrs.MiniReplicaSetReconciler(rs_cluster, factory), factory, workers=2)
    controller.start()
    try:
        import time

        deadline = time.monotonic() + 10
        while len(pod_names(rs_cluster)) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert pod_names(rs_cluster) == [f"api-{i}" for i in range(5)]
    finally:
        controller.stop()
