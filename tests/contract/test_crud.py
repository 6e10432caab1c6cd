"""Create, get, update and delete: metadata the server fills, and the errors it answers."""

from __future__ import annotations

import re

import pytest

from minisched.cluster import Cluster
from minisched.errors import AlreadyExists, BadRequest, Conflict, Invalid, NotFound
from minisched.objects import make_node, make_pod
from minisched.resources import CONFIG_MAPS, LEASES, NODES, PODS, Resource

from .conftest import unique

RFC3339_SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def configmap(name: str, data: dict[str, str] | None = None, **meta: object) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": data or {}}


def test_create_fills_metadata_as_the_api_server_does(cluster: Cluster, ns: str) -> None:
    pod = cluster.create(PODS, make_pod("p", namespace=ns))
    meta = pod["metadata"]
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"
    assert meta["name"] == "p" and meta["namespace"] == ns
    assert re.match(r"^[0-9a-f-]{36}$", meta["uid"])
    assert meta["resourceVersion"].isdigit()
    assert RFC3339_SECONDS.match(meta["creationTimestamp"])
    assert meta["generation"] == 1
    assert "deletionTimestamp" not in meta
    assert cluster.get(PODS, "p", ns) == pod


def test_resource_versions_increase_across_kinds(cluster: Cluster, ns: str) -> None:
    a = cluster.create(CONFIG_MAPS, configmap("a"), ns)
    b = cluster.create(PODS, make_pod("b", namespace=ns))
    c = cluster.create(CONFIG_MAPS, configmap("c"), ns)
    rvs = [int(o["metadata"]["resourceVersion"]) for o in (a, b, c)]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


def test_returned_objects_are_copies(cluster: Cluster, ns: str) -> None:
    created = cluster.create(CONFIG_MAPS, configmap("cm", {"k": "v"}), ns)
    created["data"]["k"] = "changed"
    fetched = cluster.get(CONFIG_MAPS, "cm", ns)
    assert fetched["data"] == {"k": "v"}
    fetched["data"]["k"] = "changed again"
    assert cluster.list(CONFIG_MAPS, ns)["items"][0]["data"] == {"k": "v"}


def test_create_takes_the_namespace_from_the_object(cluster: Cluster, ns: str) -> None:
    created = cluster.create(CONFIG_MAPS, configmap("cm", namespace=ns))
    assert created["metadata"]["namespace"] == ns


def test_create_twice_is_already_exists(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("dup", namespace=ns))
    with pytest.raises(AlreadyExists) as err:
        cluster.create(PODS, make_pod("dup", namespace=ns))
    assert err.value.status == 409
    assert err.value.message == 'pods "dup" already exists'


def test_create_in_a_missing_namespace_is_not_found(cluster: Cluster) -> None:
    missing = unique("nope")
    with pytest.raises(NotFound) as err:
        cluster.create(PODS, make_pod("p", namespace=missing))
    assert err.value.message == f'namespaces "{missing}" not found'


def test_generate_name(cluster: Cluster, ns: str) -> None:
    obj = configmap("")
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "gen-"
    a = cluster.create(CONFIG_MAPS, obj, ns)
    b = cluster.create(CONFIG_MAPS, obj, ns)
    assert a["metadata"]["name"].startswith("gen-") and len(a["metadata"]["name"]) == len("gen-") + 5
    assert a["metadata"]["name"] != b["metadata"]["name"]
    assert a["metadata"]["generateName"] == "gen-"


def test_a_generated_name_cuts_a_long_prefix_to_stay_within_63_characters(cluster: Cluster, ns: str) -> None:
    obj = configmap("")
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "g" * 70
    made = cluster.create(CONFIG_MAPS, obj, ns)
    assert len(made["metadata"]["name"]) == 63
    assert made["metadata"]["name"].startswith("g" * 58) and not made["metadata"]["name"].startswith("g" * 63)
    assert made["metadata"]["generateName"] == "g" * 70


def _taken_names_first(cluster: Cluster, taken: str, times: int) -> list[str] | None:
    """Make the server's next `times` generated names be `taken`, where the backend lets a test do
    that (the embedded cluster's name_generator); the calls made, or None (a real server's names
    are random: its retries cannot be forced, and the test checks what is left)."""
    generate = getattr(cluster, "name_generator", None)
    if generate is None:
        return None
    calls: list[str] = []

    def colliding(base: str) -> str:
        calls.append(base)
        return taken if len(calls) <= times else generate(base)

    cluster.name_generator = colliding  # type: ignore[attr-defined]
    return calls


def test_a_generated_name_that_is_taken_is_generated_again(cluster: Cluster, ns: str) -> None:
    # kube-apiserver's RetryGenerateName (GA, locked on since 1.32): up to 8 tries, each a new name
    obj = configmap("")
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "gen-"
    first = cluster.create(CONFIG_MAPS, obj, ns)["metadata"]["name"]
    calls = _taken_names_first(cluster, first, 7)
    second = cluster.create(CONFIG_MAPS, obj, ns)
    name = second["metadata"]["name"]
    assert name != first and name.startswith("gen-") and len(name) == len("gen-") + 5
    assert cluster.get(CONFIG_MAPS, name, ns)["metadata"]["uid"] == second["metadata"]["uid"]
    assert "name" not in obj["metadata"]  # the request's object is the client's: never written to
    if calls is not None:
        assert calls == ["gen-"] * 8  # seven taken names, then a free one on the last try
    # a name the client chose is never replaced
    with pytest.raises(AlreadyExists) as err:
        cluster.create(CONFIG_MAPS, configmap(first), ns)
    assert err.value.message == f'configmaps "{first}" already exists'


@pytest.mark.parametrize(
    ("resource", "obj", "field"),
    [
        (CONFIG_MAPS, {"metadata": {}, "data": {}}, "metadata.name"),
        (PODS, {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
         "metadata.name"),
        (CONFIG_MAPS, {"metadata": {"name": "Not_A_DNS_Name"}}, "metadata.name"),
        (PODS, {"metadata": {"name": "nocontainers"}, "spec": {"containers": []}}, "spec.containers"),
        (PODS, {"metadata": {"name": "noimage"}, "spec": {"containers": [{"name": "c"}]}},
         "spec.containers[0].image"),
        (PODS, {"metadata": {"name": "neg"}, "spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"requests": {"cpu": "-1"}}}]}},
         "spec.containers[0].resources.requests[cpu]"),
        (CONFIG_MAPS, {"metadata": {"name": "badlabel", "labels": {"a b": "c"}}}, "metadata.labels"),
    ],
    ids=["configmap-no-name", "pod-no-name", "bad-dns-name", "no-containers", "no-image", "negative-quantity",
         "bad-label-key"],
)
def test_invalid_objects_are_422_with_field_causes(
    cluster: Cluster, ns: str, resource: Resource, obj: dict, field: str
) -> None:
    with pytest.raises(Invalid) as err:
        cluster.create(resource, obj, ns)
    assert err.value.status == 422
    assert field in [c.field for c in err.value.causes], err.value.causes
    assert "is invalid" in err.value.message


def test_a_missing_name_says_so(cluster: Cluster, ns: str) -> None:
    with pytest.raises(Invalid) as err:
        cluster.create(CONFIG_MAPS, {"metadata": {}}, ns)
    assert "name or generateName is required" in str(err.value)


def test_a_malformed_quantity_is_a_bad_request(cluster: Cluster, ns: str) -> None:
    with pytest.raises(BadRequest) as err:
        cluster.create(PODS, make_pod("q", namespace=ns, cpu="lots"))
    assert "quantities must match the regular expression" in err.value.message


def test_get_missing_is_not_found(cluster: Cluster, ns: str) -> None:
    with pytest.raises(NotFound) as err:
        cluster.get(PODS, "ghost", ns)
    assert err.value.status == 404
    assert err.value.message == 'pods "ghost" not found'
    with pytest.raises(NotFound) as err:
        cluster.get(LEASES, "ghost", ns)
    assert err.value.message == 'leases.coordination.k8s.io "ghost" not found'


def test_an_unknown_resource_is_not_found(cluster: Cluster, ns: str) -> None:
    gadgets = Resource("example.minisched.io", "v1", "gadgets", "Gadget", True)
    with pytest.raises(NotFound):
        cluster.list(gadgets, ns)
    with pytest.raises(NotFound):
        cluster.create(gadgets, {"apiVersion": "example.minisched.io/v1", "kind": "Gadget",
                                 "metadata": {"name": "g"}}, ns)
    with pytest.raises(NotFound):
        cluster.get("gadgets", "g", ns)


def test_update_with_a_stale_resource_version_is_a_conflict(cluster: Cluster, ns: str) -> None:
    first = cluster.create(CONFIG_MAPS, configmap("cm", {"v": "1"}), ns)
    second = dict(first, data={"v": "2"})
    cluster.update(CONFIG_MAPS, second)
    stale = dict(first, data={"v": "3"})
    with pytest.raises(Conflict) as err:
        cluster.update(CONFIG_MAPS, stale)
    assert err.value.status == 409
    assert err.value.message == (
        'Operation cannot be fulfilled on configmaps "cm": the object has been modified; please apply your '
        "changes to the latest version and try again"
    )
    assert cluster.get(CONFIG_MAPS, "cm", ns)["data"] == {"v": "2"}


def test_update_without_resource_version_replaces_unconditionally(cluster: Cluster, ns: str) -> None:
    cluster.create(CONFIG_MAPS, configmap("cm", {"v": "1"}), ns)
    updated = cluster.update(CONFIG_MAPS, configmap("cm", {"v": "2"}, namespace=ns))
    assert updated["data"] == {"v": "2"}


def test_update_of_a_missing_object_is_not_found(cluster: Cluster, ns: str) -> None:
    with pytest.raises(NotFound):
        cluster.update(CONFIG_MAPS, configmap("ghost", namespace=ns))


def test_update_bumps_resource_version_and_keeps_system_fields(cluster: Cluster, ns: str) -> None:
    created = cluster.create(CONFIG_MAPS, configmap("cm", {"v": "1"}), ns)
    changed = dict(created, data={"v": "2"})
    changed["metadata"] = dict(created["metadata"], creationTimestamp="2001-01-01T00:00:00Z")
    updated = cluster.update(CONFIG_MAPS, changed)
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert updated["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]


def test_a_no_op_update_keeps_the_resource_version(cluster: Cluster, ns: str) -> None:
    created = cluster.create(CONFIG_MAPS, configmap("cm", {"v": "1"}), ns)
    again = cluster.update(CONFIG_MAPS, created)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_generation_follows_spec_not_metadata_or_status(cluster: Cluster, ns: str) -> None:
    pod = cluster.create(PODS, make_pod("g", namespace=ns))
    pod["metadata"]["labels"] = {"x": "y"}
    pod = cluster.update(PODS, pod)
    assert pod["metadata"]["generation"] == 1
    pod = cluster.patch(PODS, "g", {"status": {"message": "hello"}}, ns, subresource="status")
    assert pod["metadata"]["generation"] == 1
    pod["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.9"
    pod = cluster.update(PODS, pod)
    assert pod["metadata"]["generation"] == 2


def test_main_update_ignores_status_and_status_update_ignores_the_rest(cluster: Cluster, ns: str) -> None:
    pod = cluster.create(PODS, make_pod("s", namespace=ns))
    pod["status"]["phase"] = "Running"
    pod["metadata"]["labels"] = {"seen": "yes"}
    pod = cluster.update(PODS, pod)
    assert pod["status"]["phase"] == "Pending"
    assert pod["metadata"]["labels"] == {"seen": "yes"}
    pod["status"]["phase"] = "Running"
    pod["spec"]["containers"][0]["image"] = "changed:1"
    pod = cluster.update(PODS, pod, subresource="status")
    assert pod["status"]["phase"] == "Running"
    assert pod["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"


def test_create_drops_pod_status(cluster: Cluster, ns: str) -> None:
    obj = make_pod("st", namespace=ns)
    obj["status"] = {"phase": "Running"}
    assert cluster.create(PODS, obj)["status"]["phase"] == "Pending"


def test_status_of_a_kind_without_status_subresource_is_not_found(cluster: Cluster, ns: str) -> None:
    cm = cluster.create(CONFIG_MAPS, configmap("cm"), ns)
    with pytest.raises(NotFound):
        cluster.update(CONFIG_MAPS, cm, subresource="status")


def test_node_status_is_kept_on_create_and_updated_through_status(cluster: Cluster) -> None:
    name = unique("node")
    node = cluster.create(NODES, make_node(name, cpu="8"))
    try:
        assert node["status"]["allocatable"]["cpu"] == "8"
        node["status"]["allocatable"]["cpu"] = "6"
        node = cluster.update(NODES, node, subresource="status")
        assert node["status"]["allocatable"]["cpu"] == "6"
        assert "generation" not in node["metadata"]
    finally:
        cluster.delete(NODES, name)


def test_node_allocatable_defaults_to_capacity(cluster: Cluster) -> None:
    # kube's SetDefaults_NodeStatus: a Node decoded without status.allocatable gets its capacity,
    # on create, on a status update and on a patch alike (a kubelet that reports none)
    name = unique("alloc")
    node = make_node(name, cpu="4000m", memory="16Gi", pods="110")
    del node["status"]["allocatable"]
    try:
        created = cluster.create(NODES, node)
        assert created["status"]["allocatable"] == created["status"]["capacity"] == {
            "cpu": "4", "memory": "16Gi", "pods": "110"}
        assert cluster.get(NODES, name)["status"]["allocatable"] == created["status"]["capacity"]

        created["status"]["allocatable"] = {"cpu": "3", "memory": "15Gi", "pods": "100"}
        given = cluster.update(NODES, created, subresource="status")
        assert given["status"]["allocatable"] == {"cpu": "3", "memory": "15Gi", "pods": "100"}  # kept as given

        del given["status"]["allocatable"]
        given["status"]["capacity"]["cpu"] = "8"
        updated = cluster.update(NODES, given, subresource="status")
        assert updated["status"]["allocatable"] == {"cpu": "8", "memory": "16Gi", "pods": "110"}

        patched = cluster.patch(NODES, name, {"status": {"capacity": {"cpu": "2"}, "allocatable": None}},
                                subresource="status")
        assert patched["status"]["allocatable"] == {"cpu": "2", "memory": "16Gi", "pods": "110"}
    finally:
        cluster.delete(NODES, name)


def test_pod_spec_node_name_cannot_be_changed_by_update(cluster: Cluster, ns: str) -> None:
    pod = cluster.create(PODS, make_pod("imm", namespace=ns))
    pod["spec"]["nodeName"] = "somewhere"
    with pytest.raises(Invalid) as err:
        cluster.update(PODS, pod)
    assert "spec" in [c.field for c in err.value.causes]
    assert "pod updates may not change fields other than" in err.value.message


def test_pod_tolerations_may_be_added(cluster: Cluster, ns: str) -> None:
    pod = cluster.create(PODS, make_pod("tol", namespace=ns))
    pod["spec"]["tolerations"].append({"key": "k", "operator": "Exists", "effect": "NoSchedule"})
    updated = cluster.update(PODS, pod)
    assert {"key": "k", "operator": "Exists", "effect": "NoSchedule"} in updated["spec"]["tolerations"]


def test_delete_missing_is_not_found(cluster: Cluster, ns: str) -> None:
    with pytest.raises(NotFound) as err:
        cluster.delete(CONFIG_MAPS, "ghost", ns)
    assert err.value.message == 'configmaps "ghost" not found'


def test_delete_preconditions(cluster: Cluster, ns: str) -> None:
    cm = cluster.create(CONFIG_MAPS, configmap("cm"), ns)
    with pytest.raises(Conflict) as err:
        cluster.delete(CONFIG_MAPS, "cm", ns, preconditions={"uid": "00000000-0000-0000-0000-000000000000"})
    assert err.value.message == (
        'Operation cannot be fulfilled on ConfigMap "cm": the UID in the precondition '
        f"(00000000-0000-0000-0000-000000000000) does not match the UID in record ({cm['metadata']['uid']}). "
        "The object might have been deleted and then recreated")
    with pytest.raises(Conflict) as err:
        cluster.delete(CONFIG_MAPS, "cm", ns, preconditions={"resourceVersion": "1"})
    assert err.value.message.startswith(
        'Operation cannot be fulfilled on ConfigMap "cm": the ResourceVersion in the precondition (1) does not '
        "match the ResourceVersion in record")
    cluster.delete(CONFIG_MAPS, "cm", ns, preconditions={"uid": cm["metadata"]["uid"],
                                                          "resourceVersion": cm["metadata"]["resourceVersion"]})
    with pytest.raises(NotFound):
        cluster.get(CONFIG_MAPS, "cm", ns)


def test_finalizers_keep_a_deleted_object_until_removed(cluster: Cluster, ns: str) -> None:
    cluster.create(CONFIG_MAPS, configmap("fin", finalizers=["minisched.io/hold"]), ns)
    deleted = cluster.delete(CONFIG_MAPS, "fin", ns)
    assert deleted["metadata"]["deletionTimestamp"]
    held = cluster.get(CONFIG_MAPS, "fin", ns)
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == ["minisched.io/hold"]
    held["metadata"]["finalizers"].append("minisched.io/another")
    with pytest.raises(Invalid):
        cluster.update(CONFIG_MAPS, held)
    cluster.patch(CONFIG_MAPS, "fin", {"metadata": {"finalizers": None}}, ns)
    with pytest.raises(NotFound):
        cluster.get(CONFIG_MAPS, "fin", ns)


def test_lease_update_without_version_creates(cluster: Cluster, ns: str) -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "lock", "namespace": ns},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
    created = cluster.update(LEASES, lease)
    assert created["spec"]["holderIdentity"] == "a"
    assert cluster.get(LEASES, "lock", ns)["metadata"]["uid"] == created["metadata"]["uid"]


def test_bad_input_is_a_clear_error(cluster: Cluster, ns: str) -> None:
    with pytest.raises(BadRequest):
        cluster.list(PODS, ns, label_selector="app in web")
    with pytest.raises(NotFound):
        cluster.list("no-such-kind", ns)
    cluster.create(CONFIG_MAPS, configmap("x"), ns)
    with pytest.raises(BadRequest):
        cluster.patch(CONFIG_MAPS, "x", ["not", "an", "object"], ns)  # type: ignore[arg-type]
    with pytest.raises(Invalid):
        cluster.create(CONFIG_MAPS, {"metadata": {}}, ns)


def test_an_object_of_another_kind_is_a_bad_request(cluster: Cluster, ns: str) -> None:
    with pytest.raises(BadRequest):
        cluster.create(CONFIG_MAPS, make_pod("p", namespace=ns))
    with pytest.raises(BadRequest):
        cluster.create(LEASES, {"apiVersion": "coordination.k8s.io/v2", "kind": "Lease", "metadata": {"name": "l"}}, ns)
