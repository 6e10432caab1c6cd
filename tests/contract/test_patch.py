"""JSON merge patch (RFC 7386) on objects and on the status subresource."""

from __future__ import annotations

import pytest

from minisched.cluster import Cluster
from minisched.errors import BadRequest, Conflict, NotFound
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
