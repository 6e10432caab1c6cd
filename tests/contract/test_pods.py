"""Pods: defaults and priority admission, pods/binding, graceful deletion, pods/eviction."""

from __future__ import annotations

import pytest

from minisched.cluster import Cluster
from minisched.errors import ApiError, Conflict, Forbidden, NotFound, TooManyRequests
from minisched.objects import make_pod, make_priority_class
from minisched.resources import POD_DISRUPTION_BUDGETS, PODS, PRIORITY_CLASSES

from .conftest import unique


def test_pod_defaults(cluster: Cluster, ns: str) -> None:
    obj = make_pod("d", namespace=ns)
    del obj["spec"]["schedulerName"]
    pod = cluster.create(PODS, obj)
    spec = pod["spec"]
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["restartPolicy"] == "Always"
    assert spec["priority"] == 0
    assert spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["qosClass"] == "Burstable"
    tolerated = {(t.get("key"), t.get("effect"), t.get("tolerationSeconds")) for t in spec["tolerations"]}
    assert ("node.kubernetes.io/not-ready", "NoExecute", 300) in tolerated
    assert ("node.kubernetes.io/unreachable", "NoExecute", 300) in tolerated


@pytest.mark.parametrize(
    ("requests", "limits", "qos"),
    [
        (None, None, "BestEffort"),
        ({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}, "Guaranteed"),
        (None, {"cpu": "1", "memory": "1Gi"}, "Guaranteed"),
        ({"cpu": "500m"}, {"cpu": "1"}, "Burstable"),
    ],
)
def test_qos_class(cluster: Cluster, ns: str, requests: dict | None, limits: dict | None, qos: str) -> None:
    obj = make_pod(unique("q"), namespace=ns, cpu=None, memory=None, limits=limits)
    if requests:
        obj["spec"]["containers"][0]["resources"]["requests"] = requests
    assert cluster.create(PODS, obj)["status"]["qosClass"] == qos


def test_requests_default_to_limits(cluster: Cluster, ns: str) -> None:
    pod = cluster.create(PODS, make_pod("l", namespace=ns, cpu=None, memory=None, limits={"cpu": "2"}))
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}


def test_priority_comes_from_the_priority_class(cluster: Cluster, ns: str) -> None:
    pc = unique("high")
    cluster.create(PRIORITY_CLASSES, make_priority_class(pc, 1000))
    try:
        pod = cluster.create(PODS, make_pod("p", namespace=ns, priority_class_name=pc))
        assert pod["spec"]["priority"] == 1000
        assert pod["spec"]["priorityClassName"] == pc
    finally:
        cluster.delete(PRIORITY_CLASSES, pc)


def test_system_priority_classes_exist(cluster: Cluster, ns: str) -> None:
    pod = cluster.create(PODS, make_pod("crit", namespace=ns, priority_class_name="system-cluster-critical"))
    assert pod["spec"]["priority"] == 2000000000


def test_a_missing_priority_class_is_forbidden(cluster: Cluster, ns: str) -> None:
    with pytest.raises(Forbidden) as err:
        cluster.create(PODS, make_pod("p", namespace=ns, priority_class_name="no-such-class"))
    assert err.value.status == 403
    assert "no PriorityClass with name no-such-class was found" in err.value.message


def test_an_explicit_priority_that_disagrees_with_the_class_is_forbidden(cluster: Cluster, ns: str) -> None:
    with pytest.raises(Forbidden) as err:
        cluster.create(PODS, make_pod("p", namespace=ns, priority=7))
    assert "must not be provided in pod spec" in err.value.message


def test_priority_class_value_is_immutable(cluster: Cluster) -> None:
    name = unique("pc")
    pc = cluster.create(PRIORITY_CLASSES, make_priority_class(name, 10))
    try:
        pc["value"] = 20
        with pytest.raises(Exception) as err:
            cluster.update(PRIORITY_CLASSES, pc)
        assert getattr(err.value, "status", None) == 422
    finally:
        cluster.delete(PRIORITY_CLASSES, name)


# --- binding --------------------------------------------------------------------------------


def test_bind_sets_node_name_and_pod_scheduled(cluster: Cluster, ns: str) -> None:
    created = cluster.create(PODS, make_pod("b", namespace=ns))
    cluster.bind(ns, "b", "node-1", uid=created["metadata"]["uid"])
    pod = cluster.get(PODS, "b", ns)
    assert pod["spec"]["nodeName"] == "node-1"
    scheduled = [c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    assert scheduled and scheduled[0]["status"] == "True"
    assert int(pod["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


def test_bind_twice_is_a_conflict(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("b", namespace=ns))
    cluster.bind(ns, "b", "node-1")
    with pytest.raises(Conflict) as err:
        cluster.bind(ns, "b", "node-2")
    assert err.value.status == 409
    assert err.value.message == 'Operation cannot be fulfilled on pods/binding "b": pod b is already assigned to node "node-1"'
    assert cluster.get(PODS, "b", ns)["spec"]["nodeName"] == "node-1"


def test_bind_a_missing_pod_is_not_found(cluster: Cluster, ns: str) -> None:
    with pytest.raises(NotFound):
        cluster.bind(ns, "ghost", "node-1")


def _precondition_failed(ns: str, name: str, why: str) -> str:
    """kube-apiserver's text for a Binding whose metadata.uid/resourceVersion precondition fails: the
    storage error, wrapped as a 409 on "pods" (not "pods/binding")."""
    return (f'Operation cannot be fulfilled on pods "{name}": StorageError: invalid object, Code: 4, '
            f"Key: /registry/pods/{ns}/{name}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {why}")


def test_bind_with_a_stale_uid_is_a_conflict(cluster: Cluster, ns: str) -> None:
    created = cluster.create(PODS, make_pod("b", namespace=ns))
    stale_uid = "00000000-0000-0000-0000-000000000000"
    # the current resourceVersion does not save a binding for another pod of that name
    with pytest.raises(Conflict) as err:
        cluster.bind(ns, "b", "node-1", uid=stale_uid, resource_version=created["metadata"]["resourceVersion"])
    assert err.value.status == 409 and err.value.details == {"name": "b", "kind": "pods"}
    assert err.value.message == _precondition_failed(
        ns, "b", f"UID in precondition: {stale_uid}, UID in object meta: {created['metadata']['uid']}")
    assert not cluster.get(PODS, "b", ns)["spec"].get("nodeName")


def test_bind_with_a_stale_resource_version_is_a_conflict_and_with_the_current_one_binds(
        cluster: Cluster, ns: str) -> None:
    # Sharding's pod fence (minisched.sharding): a binding carries the resourceVersion its replica
    # decided on, and any write to the pod since refuses it.
    created = cluster.create(PODS, make_pod("b", namespace=ns))
    uid, decided = created["metadata"]["uid"], created["metadata"]["resourceVersion"]
    now = cluster.patch(PODS, "b", {"metadata": {"annotations": {"example.com/touched": "yes"}}}, ns)
    current = now["metadata"]["resourceVersion"]
    assert current != decided
    with pytest.raises(Conflict) as err:
        cluster.bind(ns, "b", "node-1", uid=uid, resource_version=decided)
    assert err.value.status == 409 and err.value.details == {"name": "b", "kind": "pods"}
    assert err.value.message == _precondition_failed(
        ns, "b", f"ResourceVersion in precondition: {decided}, ResourceVersion in object meta: {current}")
    pod = cluster.get(PODS, "b", ns)
    assert not pod["spec"].get("nodeName") and pod["metadata"]["resourceVersion"] == current  # nothing written
    cluster.bind(ns, "b", "node-1", uid=uid, resource_version=current)
    assert cluster.get(PODS, "b", ns)["spec"]["nodeName"] == "node-1"
    # checked before the pod's own state: a stale version on a bound pod names the version
    with pytest.raises(Conflict) as err:
        cluster.bind(ns, "b", "node-2", resource_version=current)
    assert "Precondition failed: ResourceVersion in precondition: " + current in err.value.message


def test_bind_a_pod_being_deleted_is_a_conflict(cluster: Cluster, ns: str) -> None:
    obj = make_pod("b", namespace=ns)
    obj["metadata"]["finalizers"] = ["minisched.io/hold"]
    cluster.create(PODS, obj)
    cluster.delete(PODS, "b", ns)
    with pytest.raises(Conflict) as err:
        cluster.bind(ns, "b", "node-1")
    assert "is being deleted" in err.value.message
    cluster.patch(PODS, "b", {"metadata": {"finalizers": None}}, ns)


# --- deletion -------------------------------------------------------------------------------


def test_an_unbound_pod_is_deleted_at_once(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("u", namespace=ns))
    cluster.delete(PODS, "u", ns)
    with pytest.raises(NotFound):
        cluster.get(PODS, "u", ns)


def test_a_bound_pod_is_deleted_gracefully(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("g", namespace=ns))
    cluster.bind(ns, "g", "nowhere")
    before = cluster.get(PODS, "g", ns)
    returned = cluster.delete(PODS, "g", ns)
    assert returned["metadata"]["deletionTimestamp"]
    pod = cluster.get(PODS, "g", ns)
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    assert pod["metadata"]["deletionTimestamp"] >= pod["metadata"]["creationTimestamp"]
    assert pod["metadata"]["generation"] == before["metadata"]["generation"] + 1
    again = cluster.delete(PODS, "g", ns)  # a pending graceful deletion stays as it is
    assert again["metadata"]["deletionGracePeriodSeconds"] == 30
    cluster.delete(PODS, "g", ns, grace_period_seconds=5)  # but may be shortened
    assert cluster.get(PODS, "g", ns)["metadata"]["deletionGracePeriodSeconds"] == 5
    cluster.delete(PODS, "g", ns, grace_period_seconds=0)
    with pytest.raises(NotFound):
        cluster.get(PODS, "g", ns)


def test_a_bound_pod_with_a_grace_period_option(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("g", namespace=ns))
    cluster.bind(ns, "g", "nowhere")
    cluster.delete(PODS, "g", ns, grace_period_seconds=12)
    assert cluster.get(PODS, "g", ns)["metadata"]["deletionGracePeriodSeconds"] == 12


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_terminated_pod_is_deleted_at_once(cluster: Cluster, ns: str, phase: str) -> None:
    cluster.create(PODS, make_pod("t", namespace=ns))
    cluster.bind(ns, "t", "nowhere")
    cluster.patch(PODS, "t", {"status": {"phase": phase}}, ns, subresource="status")
    cluster.delete(PODS, "t", ns)
    with pytest.raises(NotFound):
        cluster.get(PODS, "t", ns)


# --- eviction -------------------------------------------------------------------------------


def running(cluster: Cluster, ns: str, name: str, labels: dict[str, str]) -> None:
    cluster.create(PODS, make_pod(name, namespace=ns, labels=labels))
    cluster.bind(ns, name, "nowhere")
    cluster.patch(PODS, name, {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}}, ns, subresource="status")


def pdb(name: str, labels: dict[str, str], **spec: object) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels}, **spec}}


def test_evicting_a_pending_pod_deletes_it(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("e", namespace=ns))
    cluster.evict(ns, "e")
    with pytest.raises(NotFound):
        cluster.get(PODS, "e", ns)


def test_evicting_a_missing_pod_is_not_found(cluster: Cluster, ns: str) -> None:
    with pytest.raises(NotFound):
        cluster.evict(ns, "ghost")


def test_evicting_a_running_pod_is_graceful(cluster: Cluster, ns: str) -> None:
    running(cluster, ns, "r", {"app": "x"})
    cluster.evict(ns, "r")
    pod = cluster.get(PODS, "r", ns)
    assert pod["metadata"]["deletionTimestamp"]
    target = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert target and target[0]["reason"] == "EvictionByEvictionAPI"


def test_a_budget_with_no_disruptions_allowed_blocks_eviction(cluster: Cluster, ns: str) -> None:
    running(cluster, ns, "r", {"app": "db"})
    cluster.create(POD_DISRUPTION_BUDGETS, pdb("db", {"app": "db"}, minAvailable=1), ns)
    with pytest.raises(TooManyRequests) as err:
        cluster.evict(ns, "r")
    assert err.value.status == 429
    assert err.value.message == "Cannot evict pod as it would violate the pod's disruption budget."
    assert not cluster.get(PODS, "r", ns)["metadata"].get("deletionTimestamp")


def test_a_budget_that_allows_a_disruption_lets_one_eviction_through(cluster: Cluster, ns: str) -> None:
    running(cluster, ns, "r1", {"app": "web"})
    running(cluster, ns, "r2", {"app": "web"})
    budget = cluster.create(POD_DISRUPTION_BUDGETS, pdb("web", {"app": "web"}, minAvailable=1), ns)
    # No disruption controller runs on a bare apiserver either: write the status it would write.
    cluster.patch(POD_DISRUPTION_BUDGETS, "web", {"status": {
        "observedGeneration": budget["metadata"]["generation"], "disruptionsAllowed": 1,
        "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}}, ns, subresource="status")
    cluster.evict(ns, "r1")
    assert cluster.get(PODS, "r1", ns)["metadata"]["deletionTimestamp"]
    status = cluster.get(POD_DISRUPTION_BUDGETS, "web", ns)["status"]
    assert status["disruptionsAllowed"] == 0
    assert "r1" in status.get("disruptedPods", {})
    with pytest.raises(TooManyRequests):
        cluster.evict(ns, "r2")


def test_a_global_default_priority_class_applies_to_pods_without_one(cluster: Cluster, ns: str) -> None:
    default, other = unique("default"), unique("other")
    cluster.create(PRIORITY_CLASSES, make_priority_class(default, 42, global_default=True))
    try:
        pod = cluster.create(PODS, make_pod("p", namespace=ns))
        assert pod["spec"]["priority"] == 42 and pod["spec"]["priorityClassName"] == default
        with pytest.raises(Forbidden) as err:
            cluster.create(PRIORITY_CLASSES, make_priority_class(other, 1, global_default=True))
        assert f"PriorityClass {default} is already marked as default. Only one default can exist" in err.value.message
    finally:
        cluster.delete(PRIORITY_CLASSES, default)


def test_a_pod_under_two_budgets_cannot_be_evicted(cluster: Cluster, ns: str) -> None:
    running(cluster, ns, "r", {"app": "x", "tier": "y"})
    for name, labels in (("one", {"app": "x"}), ("two", {"tier": "y"})):
        made = cluster.create(POD_DISRUPTION_BUDGETS, pdb(name, labels, maxUnavailable=1), ns)
        cluster.patch(POD_DISRUPTION_BUDGETS, name, {"status": {
            "observedGeneration": made["metadata"]["generation"], "disruptionsAllowed": 1,
            "currentHealthy": 1, "desiredHealthy": 0, "expectedPods": 1}}, ns, subresource="status")
    with pytest.raises(ApiError) as err:
        cluster.evict(ns, "r")
    assert err.value.status == 500
    assert "more than one PodDisruptionBudget" in err.value.message


def test_match_label_keys_merge_into_the_spread_selector(cluster: Cluster, ns: str) -> None:
    """kube 1.34+ writes matchLabelKeys into the constraint's labelSelector at creation."""
    pod = make_pod("spread", namespace=ns, labels={"app": "web", "rev": "7"})
    pod["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["rev", "absent"]},
        {"maxSkew": 1, "topologyKey": "host", "whenUnsatisfiable": "ScheduleAnyway"},
    ]
    created = cluster.create("pods", pod, ns)
    first, second = created["spec"]["topologySpreadConstraints"]
    assert first["labelSelector"] == {"matchLabels": {"app": "web"},
                                      "matchExpressions": [{"key": "rev", "operator": "In", "values": ["7"]}]}
    assert first["matchLabelKeys"] == ["rev", "absent"]
    assert "labelSelector" not in second


def test_pod_level_requests_default_from_containers_then_limits(cluster: Cluster, ns: str) -> None:
    """kube's defaultPodRequests: the containers' aggregate request first, else the pod-level limit."""
    pod = make_pod("pod-level", namespace=ns, cpu="250m", memory=None)
    pod["spec"]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    created = cluster.create(PODS, pod, ns)
    assert created["spec"]["resources"]["requests"] == {"cpu": "250m", "memory": "1Gi"}
