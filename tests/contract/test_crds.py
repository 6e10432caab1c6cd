"""CustomResourceDefinitions and custom resources: served only while their CRD exists."""

from __future__ import annotations

import pytest

from minisched.cluster import Cluster
from minisched.errors import Invalid, NotFound
from minisched.resources import CRDS, Resource

from .conftest import collect, eventually, unique


def widget_crd(group: str, *, status: bool = True) -> dict:
    version: dict = {
        "name": "v1", "served": True, "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [version]},
    }


def widget(name: str, group: str, size: int = 1) -> dict:
    return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": size}}


@pytest.fixture
def widgets(cluster: Cluster, ns: str) -> Resource:
    group = f"{unique('g')}.minisched.io"
    crd = cluster.create(CRDS, widget_crd(group))
    resource = Resource.from_crd(crd)
    eventually(lambda: cluster.list(resource, ns) is not None)  # a real server serves it shortly after
    return resource


def test_custom_resources_need_their_crd(cluster: Cluster, ns: str) -> None:
    resource = Resource.from_crd(widget_crd(f"{unique('g')}.minisched.io"))
    with pytest.raises(NotFound):
        cluster.create(resource, widget("w", resource.group), ns)


def test_crd_is_established(cluster: Cluster, ns: str, widgets: Resource) -> None:
    crd = eventually(lambda: cluster.get(CRDS, f"widgets.{widgets.group}"))
    conditions = eventually(lambda: {c["type"]: c["status"] for c in
                                     cluster.get(CRDS, crd["metadata"]["name"])["status"].get("conditions", [])})
    assert conditions.get("NamesAccepted") == "True"
    assert crd["metadata"]["generation"] == 1


def test_custom_resource_lifecycle(cluster: Cluster, ns: str, widgets: Resource) -> None:
    created = cluster.create(widgets, widget("w", widgets.group), ns)
    assert created["apiVersion"] == f"{widgets.group}/v1" and created["kind"] == "Widget"
    assert created["metadata"]["generation"] == 1
    assert cluster.get(widgets, "w", ns)["spec"] == {"size": 1}
    listed = cluster.list(widgets, ns)
    assert listed["kind"] == "WidgetList" and [i["metadata"]["name"] for i in listed["items"]] == ["w"]
    created["spec"]["size"] = 2
    updated = cluster.update(widgets, created)
    assert updated["metadata"]["generation"] == 2
    status = cluster.patch(widgets, "w", {"status": {"ready": True}, "spec": {"size": 99}}, ns, subresource="status")
    assert status["status"] == {"ready": True} and status["spec"] == {"size": 2}
    assert status["metadata"]["generation"] == 2
    relabelled = cluster.patch(widgets, "w", {"metadata": {"labels": {"a": "b"}}}, ns)
    assert relabelled["metadata"]["generation"] == 2
    cluster.delete(widgets, "w", ns)
    with pytest.raises(NotFound):
        cluster.get(widgets, "w", ns)


def test_custom_resource_create_drops_status(cluster: Cluster, ns: str, widgets: Resource) -> None:
    obj = widget("w", widgets.group)
    obj["status"] = {"ready": True}
    assert "status" not in cluster.create(widgets, obj, ns)


def test_custom_resource_update_needs_a_resource_version(cluster: Cluster, ns: str, widgets: Resource) -> None:
    cluster.create(widgets, widget("w", widgets.group), ns)
    with pytest.raises(Invalid):
        cluster.update(widgets, {**widget("w", widgets.group, size=3), "metadata": {"name": "w", "namespace": ns}})


def test_custom_resource_watch(cluster: Cluster, ns: str, widgets: Resource) -> None:
    rv = cluster.list(widgets, ns)["metadata"]["resourceVersion"]
    w = cluster.watch(widgets, ns, resource_version=rv, timeout_seconds=30)
    cluster.create(widgets, widget("w", widgets.group), ns)
    cluster.patch(widgets, "w", {"spec": {"size": 5}}, ns)
    events = collect(w, 2)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED"]
    assert events[1]["object"]["spec"]["size"] == 5


def test_crd_name_must_match_its_names(cluster: Cluster) -> None:
    crd = widget_crd(f"{unique('g')}.minisched.io")
    crd["metadata"]["name"] = "wrong.minisched.io"
    with pytest.raises(Invalid) as err:
        cluster.create(CRDS, crd)
    assert "metadata.name" in [c.field for c in err.value.causes]


def test_deleting_the_crd_stops_serving_its_resources(cluster: Cluster, ns: str, widgets: Resource) -> None:
    cluster.create(widgets, widget("w", widgets.group), ns)
    cluster.delete(CRDS, f"widgets.{widgets.group}")

    def gone() -> bool:
        try:
            cluster.list(widgets, ns)
        except NotFound:
            return True
        return False

    assert eventually(gone, timeout=30)


def sized_crd(group: str) -> dict:
    crd = widget_crd(group)
    crd["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            }},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }}
    return crd


@pytest.fixture
def sized(cluster: Cluster, ns: str) -> Resource:
    crd = cluster.create(CRDS, sized_crd(f"{unique('g')}.minisched.io"))
    resource = Resource.from_crd(crd)
    eventually(lambda: cluster.list(resource, ns) is not None)
    return resource


def test_custom_resources_are_validated_against_the_schema(cluster: Cluster, ns: str, sized: Resource) -> None:
    with pytest.raises(Invalid) as err:
        cluster.create(sized, widget("big", sized.group, size=11), ns)
    assert [c.field for c in err.value.causes] == ["spec.size"]
    assert "should be less than or equal to 10" in err.value.causes[0].message
    with pytest.raises(Invalid) as err:
        cluster.create(sized, {**widget("none", sized.group), "spec": {}}, ns)
    assert [(c.field, c.reason) for c in err.value.causes] == [("spec.size", "FieldValueRequired")]


def test_custom_resources_are_pruned_and_defaulted(cluster: Cluster, ns: str, sized: Resource) -> None:
    obj = widget("w", sized.group, size=3)
    obj["spec"]["unknown"] = "dropped"
    stored = cluster.create(sized, obj, ns)
    assert stored["spec"] == {"size": 3, "color": "red"}
    stored["spec"]["size"] = 0
    with pytest.raises(Invalid):
        cluster.update(sized, stored)


def test_crds_need_a_schema(cluster: Cluster) -> None:
    crd = widget_crd(f"{unique('g')}.minisched.io")
    del crd["spec"]["versions"][0]["schema"]
    with pytest.raises(Invalid) as err:
        cluster.create(CRDS, crd)
    assert [c.field for c in err.value.causes] == ["spec.versions[0].schema.openAPIV3Schema"]
