"""JSON merge patch (RFC 7386) and strategic merge patch on objects and on the status subresource."""

from __future__ import annotations

import pytest

from minisched.cluster import Cluster
from minisched.errors import BadRequest, Conflict, NotFound, UnsupportedMediaType
from minisched.objects import make_pod
from minisched.resources import CONFIG_MAPS, PODS


@pytest.fixture
def cm(cluster: Cluster, ns: str) -> dict:
    return cluster.create(CONFIG_MAPS, {"metadata": {"name": "cm", "labels": {"a": "1", "b": "2"}},
                                        "data": {"x": "1", "y": "2"}}, ns)


@pytest.mark.parametrize(
    ("patch", "labels", "data"),
    [
        ({"metadata": {"labels": {"c": "3"}}}, {"a": "1", "b": "2", "c": "3"}, {"x": "1", "y": "2"}),
        ({"metadata": {"labels": {"a": None}}}, {"b": "2"}, {"x": "1", "y": "2"}),
        ({"data": {"x": "9", "z": "3"}}, {"a": "1", "b": "2"}, {"x": "9", "y": "2", "z": "3"}),
        ({"data": None}, {"a": "1", "b": "2"}, None),
        ({}, {"a": "1", "b": "2"}, {"x": "1", "y": "2"}),
    ],
    ids=["add-label", "remove-label", "merge-data", "remove-data", "empty"],
)
def test_merge_patch(cluster: Cluster, ns: str, cm: dict, patch: dict, labels: dict, data: dict | None) -> None:
    out = cluster.patch(CONFIG_MAPS, "cm", patch, ns)
    assert out["metadata"]["labels"] == labels
    assert out.get("data") == data
    assert cluster.get(CONFIG_MAPS, "cm", ns) == out


def test_patch_replaces_lists(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("p", namespace=ns))
    out = cluster.patch(PODS, "p", {"spec": {"tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "extra", "operator": "Exists"}]}}, ns)
    assert out["spec"]["tolerations"][-1] == {"key": "extra", "operator": "Exists"}


def test_patch_with_a_stale_resource_version_is_a_conflict(cluster: Cluster, ns: str, cm: dict) -> None:
    cluster.patch(CONFIG_MAPS, "cm", {"data": {"x": "2"}}, ns)
    with pytest.raises(Conflict):
        cluster.patch(CONFIG_MAPS, "cm", {"metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]},
                                          "data": {"x": "3"}}, ns)


def test_patch_of_a_missing_object_is_not_found(cluster: Cluster, ns: str) -> None:
    with pytest.raises(NotFound):
        cluster.patch(CONFIG_MAPS, "ghost", {"data": {"x": "1"}}, ns)


@pytest.mark.parametrize("bad", [["a"], "text", 3])
def test_a_patch_that_is_not_an_object_is_a_bad_request(cluster: Cluster, ns: str, cm: dict, bad: object) -> None:
    with pytest.raises(BadRequest):
        cluster.patch(CONFIG_MAPS, "cm", bad, ns)  # type: ignore[arg-type]


def test_a_patch_may_not_rename(cluster: Cluster, ns: str, cm: dict) -> None:
    with pytest.raises(BadRequest):
        cluster.patch(CONFIG_MAPS, "cm", {"metadata": {"name": "other"}}, ns)
    assert cluster.get(CONFIG_MAPS, "cm", ns)["metadata"]["name"] == "cm"


def test_status_patch_changes_only_status(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("p", namespace=ns))
    out = cluster.patch(PODS, "p", {"spec": {"nodeName": "sneaky"}, "status": {"phase": "Running"}}, ns,
                        subresource="status")
    assert out["status"]["phase"] == "Running"
    assert not out["spec"].get("nodeName")


def test_main_patch_ignores_status(cluster: Cluster, ns: str) -> None:
    cluster.create(PODS, make_pod("p", namespace=ns))
    out = cluster.patch(PODS, "p", {"metadata": {"labels": {"l": "v"}}, "status": {"phase": "Running"}}, ns)
    assert out["status"]["phase"] == "Pending"
    assert out["metadata"]["labels"] == {"l": "v"}


# --- strategic merge patch (application/strategic-merge-patch+json) -----------------------------------


def _conditions(pod: dict) -> list[tuple[str, str, str | None]]:
    return [(c["type"], c["status"], c.get("reason")) for c in pod["status"].get("conditions") or []]


@pytest.fixture
def conditioned(cluster: Cluster, ns: str) -> dict:
    """A pod with two conditions of its own, as a kubelet would have written them."""
    cluster.create(PODS, make_pod("sp", namespace=ns))
    return cluster.patch(PODS, "sp", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]}}, ns, subresource="status")


def test_strategic_patch_adds_a_condition_and_keeps_the_others(cluster: Cluster, ns: str, conditioned: dict) -> None:
    out = cluster.patch(PODS, "sp", {"status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}}, ns,
        subresource="status", patch_type="strategic")
    # a new element goes before the server's own (kube's mergeSortedSlice), the others stay
    assert _conditions(out) == [("DisruptionTarget", "True", "PreemptionByScheduler"),
                                ("PodScheduled", "True", None), ("Ready", "False", "ContainersNotReady")]
    assert cluster.get(PODS, "sp", ns) == out


def test_strategic_patch_merges_into_the_condition_of_the_same_type(
    cluster: Cluster, ns: str, conditioned: dict
) -> None:
    out = cluster.patch(PODS, "sp", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, ns,
                        subresource="status", patch_type="strategic")
    # merged in place, field by field: the reason it did not name stays
    assert _conditions(out) == [("PodScheduled", "True", None), ("Ready", "True", "ContainersNotReady")]


def test_merge_patch_of_the_same_body_replaces_the_conditions(cluster: Cluster, ns: str, conditioned: dict) -> None:
    out = cluster.patch(PODS, "sp", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, ns,
                        subresource="status")
    assert _conditions(out) == [("Ready", "True", None)]


def test_strategic_patch_directives(cluster: Cluster, ns: str, conditioned: dict) -> None:
    out = cluster.patch(PODS, "sp", {"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}}, ns,
                        subresource="status", patch_type="strategic")
    assert _conditions(out) == [("PodScheduled", "True", None)]
    out = cluster.patch(PODS, "sp", {"status": {
        "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "PodScheduled"}],
        "conditions": [{"type": "Initialized", "status": "True"}]}}, ns, subresource="status", patch_type="strategic")
    assert _conditions(out) == [("Initialized", "True", None), ("PodScheduled", "True", None)]
    out = cluster.patch(PODS, "sp", {"status": {"conditions": [{"$patch": "replace"}, {"type": "Ready", "status": "True"}]}},
                        ns, subresource="status", patch_type="strategic")
    assert _conditions(out) == [("Ready", "True", None)]


def test_strategic_patch_merges_containers_by_name(cluster: Cluster, ns: str) -> None:
    pod = make_pod("c", namespace=ns)
    pod["spec"]["containers"].append({"name": "side", "image": "side:1"})
    created = cluster.create(PODS, pod)
    first = created["spec"]["containers"][0]["name"]
    out = cluster.patch(PODS, "c", {"spec": {"containers": [{"name": "side", "image": "side:2"}]}}, ns,
                        patch_type="strategic")
    assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [
        (first, created["spec"]["containers"][0]["image"]), ("side", "side:2")]
    # finalizers (a list of strings with strategy merge) are a union
    cluster.patch(PODS, "c", {"metadata": {"finalizers": ["a.io/x"]}}, ns, patch_type="strategic")
    out = cluster.patch(PODS, "c", {"metadata": {"finalizers": ["b.io/y"]}}, ns, patch_type="strategic")
    assert sorted(out["metadata"]["finalizers"]) == ["a.io/x", "b.io/y"]
    out = cluster.patch(PODS, "c", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/x", "b.io/y"]}}, ns,
                        patch_type="strategic")
    assert not out["metadata"].get("finalizers")


def test_strategic_patch_replaces_lists_without_a_strategy(cluster: Cluster) -> None:
    from minisched.objects import make_node
    from minisched.resources import NODES

    from .conftest import unique

    name = unique("smp")
    node = make_node(name)
    node["spec"]["taints"] = [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]
    cluster.create(NODES, node)
    try:
        out = cluster.patch(NODES, name, {"spec": {"taints": [{"key": "c", "effect": "NoSchedule"}]}},
                            patch_type="strategic")
        assert out["spec"]["taints"] == [{"key": "c", "effect": "NoSchedule"}]  # no patchStrategy: replaced
    finally:
        cluster.delete(NODES, name)


def test_strategic_patch_of_a_custom_resource_is_unsupported(cluster: Cluster, ns: str) -> None:
    from minisched.resources import CRDS, Resource

    from .conftest import eventually, unique
    from .test_crds import widget, widget_crd

    group = f"{unique('g')}.minisched.io"
    widgets = Resource.from_crd(cluster.create(CRDS, widget_crd(group)))
    eventually(lambda: cluster.list(widgets, ns) is not None)
    cluster.create(widgets, widget("w", group), ns)
    with pytest.raises(UnsupportedMediaType) as refused:
        cluster.patch(widgets, "w", {"spec": {"size": 2}}, ns, patch_type="strategic")
    assert refused.value.status == 415
    assert "application/merge-patch+json" in refused.value.message
    assert cluster.patch(widgets, "w", {"spec": {"size": 2}}, ns)["spec"]["size"] == 2  # merge patch still works
