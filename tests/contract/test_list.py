"""List: label and field selectors, list metadata, pagination."""

from __future__ import annotations

import pytest

from minisched.cluster import Cluster
from minisched.errors import BadRequest
from minisched.objects import make_pod
from minisched.resources import CONFIG_MAPS, NODES, PODS

from .conftest import names, unique

LABELS = {
    "a": {"app": "web", "tier": "front"},
    "b": {"app": "web", "tier": "back"},
    "c": {"app": "db"},
    "d": {},
}


@pytest.fixture
def labelled(cluster: Cluster, ns: str) -> str:
    for name, labels in LABELS.items():
        cluster.create(CONFIG_MAPS, {"metadata": {"name": name, "labels": labels}}, ns)
    return ns


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", ["a", "b", "c", "d"]),
        ("app=web", ["a", "b"]),
        ("app==web", ["a", "b"]),
        ("app!=web", ["c", "d"]),
        ("app in (db,other)", ["c"]),
        ("tier notin (front)", ["b", "c", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("app=web,tier=back", ["b"]),
        ("app in (web),!tier", []),
        ("app=nothing", []),
    ],
)
def test_label_selectors(cluster: Cluster, labelled: str, selector: str, expected: list[str]) -> None:
    got = cluster.list(CONFIG_MAPS, labelled, label_selector=selector)["items"]
    assert sorted(names(got)) == expected


@pytest.mark.parametrize("selector", ["app in web", "app=(", "=web", "a b", "app=web,", "tier notin", "bad key=1"])
def test_malformed_label_selectors_are_bad_requests(cluster: Cluster, ns: str, selector: str) -> None:
    with pytest.raises(BadRequest) as err:
        cluster.list(CONFIG_MAPS, ns, label_selector=selector)
    assert err.value.status == 400


@pytest.fixture
def pods_in_phases(cluster: Cluster, ns: str) -> str:
    for name, node, phase in (("u", None, None), ("b1", "n1", None), ("b2", "n2", "Running")):
        cluster.create(PODS, make_pod(name, namespace=ns))
        if node:
            cluster.bind(ns, name, node)
        if phase:
            cluster.patch(PODS, name, {"status": {"phase": phase}}, ns, subresource="status")
    return ns


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("spec.nodeName=", ["u"]),
        ("spec.nodeName!=", ["b1", "b2"]),
        ("spec.nodeName=n1", ["b1"]),
        ("status.phase=Running", ["b2"]),
        ("status.phase!=Running,spec.nodeName!=", ["b1"]),
        ("metadata.name=u", ["u"]),
        ("metadata.name==u", ["u"]),
        ("spec.schedulerName=minisched", ["b1", "b2", "u"]),
    ],
)
def test_pod_field_selectors(cluster: Cluster, pods_in_phases: str, selector: str, expected: list[str]) -> None:
    got = cluster.list(PODS, pods_in_phases, field_selector=selector)["items"]
    assert sorted(names(got)) == expected


def test_field_selector_on_namespace_across_namespaces(cluster: Cluster, ns: str) -> None:
    cluster.create(CONFIG_MAPS, {"metadata": {"name": "here"}}, ns)
    got = cluster.list(CONFIG_MAPS, field_selector=f"metadata.namespace={ns}")["items"]
    assert names(got) == ["here"]


def test_unknown_field_selectors_are_bad_requests(cluster: Cluster, ns: str) -> None:
    with pytest.raises(BadRequest) as err:
        cluster.list(CONFIG_MAPS, ns, field_selector="data.key=v")
    assert err.value.message.endswith(
        '"data.key" is not a known field selector: only "metadata.name", "metadata.namespace"')
    with pytest.raises(BadRequest) as err:
        cluster.list(PODS, ns, field_selector="spec.priority=5")
    assert "field label not supported: spec.priority" in err.value.message


def test_malformed_field_selector_is_a_bad_request(cluster: Cluster, ns: str) -> None:
    with pytest.raises(BadRequest):
        cluster.list(PODS, ns, field_selector="spec.nodeName")


def test_node_field_selector(cluster: Cluster) -> None:
    name = unique("node")
    cluster.create(NODES, {"metadata": {"name": name}, "spec": {"unschedulable": True}})
    try:
        got = cluster.list(NODES, field_selector=f"metadata.name={name},spec.unschedulable=true")["items"]
        assert names(got) == [name]
        assert cluster.list(NODES, field_selector=f"metadata.name={name},spec.unschedulable=false")["items"] == []
    finally:
        cluster.delete(NODES, name)


def test_list_shape(cluster: Cluster, labelled: str) -> None:
    out = cluster.list(CONFIG_MAPS, labelled)
    assert out["kind"] == "ConfigMapList" and out["apiVersion"] == "v1"
    assert out["metadata"]["resourceVersion"].isdigit()
    newest = max(int(i["metadata"]["resourceVersion"]) for i in out["items"])
    assert int(out["metadata"]["resourceVersion"]) >= newest
    assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in out["items"])
    assert names(out["items"]) == sorted(names(out["items"]))  # key order, as etcd lists


def test_list_of_a_namespace_only_has_that_namespace(cluster: Cluster, ns: str) -> None:
    other = unique("ct")
    cluster.create("namespaces", {"metadata": {"name": other}})
    cluster.create(CONFIG_MAPS, {"metadata": {"name": "mine"}}, ns)
    cluster.create(CONFIG_MAPS, {"metadata": {"name": "theirs"}}, other)
    assert names(cluster.list(CONFIG_MAPS, ns)["items"]) == ["mine"]
    everywhere = cluster.list(CONFIG_MAPS)["items"]
    assert {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere} >= {
        (ns, "mine"), (other, "theirs")}


def test_pagination_returns_every_item_once(cluster: Cluster, ns: str) -> None:
    for i in range(7):
        cluster.create(CONFIG_MAPS, {"metadata": {"name": f"cm-{i}"}}, ns)
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = cluster.list(CONFIG_MAPS, ns, limit=3, continue_token=token)
        pages += 1
        assert len(page["items"]) <= 3
        seen += names(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            break
    assert seen == [f"cm-{i}" for i in range(7)]
    assert pages == 3


def test_pagination_with_a_selector(cluster: Cluster, ns: str) -> None:
    for i in range(6):
        cluster.create(CONFIG_MAPS, {"metadata": {"name": f"cm-{i}", "labels": {"even": str(i % 2 == 0)}}}, ns)
    seen: list[str] = []
    token = None
    while True:
        page = cluster.list(CONFIG_MAPS, ns, label_selector="even=True", limit=2, continue_token=token)
        seen += names(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            break
    assert seen == ["cm-0", "cm-2", "cm-4"]


def test_a_bad_continue_token_is_a_bad_request(cluster: Cluster, ns: str) -> None:
    with pytest.raises(BadRequest):
        cluster.list(CONFIG_MAPS, ns, limit=1, continue_token="not-a-token")


def test_later_pages_show_the_first_pages_snapshot(cluster: Cluster, ns: str) -> None:
    for name in ("a", "b", "c", "d"):
        cluster.create(CONFIG_MAPS, {"metadata": {"name": name}, "data": {"v": "1"}}, ns)
    first = cluster.list(CONFIG_MAPS, ns, limit=2)
    assert names(first["items"]) == ["a", "b"]
    cluster.delete(CONFIG_MAPS, "c", ns)
    cluster.patch(CONFIG_MAPS, "d", {"data": {"v": "2"}}, ns)
    cluster.create(CONFIG_MAPS, {"metadata": {"name": "e"}}, ns)
    rest = cluster.list(CONFIG_MAPS, ns, limit=10, continue_token=first["metadata"]["continue"])
    assert names(rest["items"]) == ["c", "d"]
    assert rest["items"][1]["data"] == {"v": "1"}
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert names(cluster.list(CONFIG_MAPS, ns)["items"]) == ["a", "b", "d", "e"]
