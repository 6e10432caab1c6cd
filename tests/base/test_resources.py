from __future__ import annotations

import pytest

from minisched import errors, resources
from minisched.resources import Resource


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("pods", resources.PODS),
        ("Pod", resources.PODS),
        ("nodes", resources.NODES),
        ("leases.coordination.k8s.io", resources.LEASES),
        ("lease", resources.LEASES),
        ("events", resources.EVENTS),
        ("events.events.k8s.io", resources.EVENTS_V1),
        ("priorityclasses.scheduling.k8s.io", resources.PRIORITY_CLASSES),
        ("customresourcedefinitions.apiextensions.k8s.io", resources.CRDS),
    ],
)
def test_resolve_names(name, expected):
    assert resources.resolve(name) is expected


def test_unknown_resource_is_a_clear_not_found():
    with pytest.raises(errors.NotFound, match="doesn't have a resource type 'widgets'"):
        resources.resolve("widgets")


@pytest.mark.parametrize(
    ("resource", "args", "path"),
    [
        (resources.PODS, ("ns1", "p", "binding"), "/api/v1/namespaces/ns1/pods/p/binding"),
        (resources.PODS, (None, None, None), "/api/v1/pods"),
        (resources.NODES, ("ignored", "n1", None), "/api/v1/nodes/n1"),
        (resources.LEASES, ("kube-system", "minisched", None),
         "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/minisched"),
    ],
)
def test_paths(resource, args, path):
    assert resource.path(*args) == path


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {"name": "v1alpha1", "served": True, "storage": False},
            {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}},
        ],
    },
}


def test_from_crd_uses_the_storage_version():
    r = Resource.from_crd(CRD)
    assert (r.group, r.version, r.plural, r.kind, r.namespaced) == ("example.com", "v1", "widgets", "Widget", True)
    assert r.subresources == frozenset({"status"})
    assert r.api_version == "example.com/v1"
    assert Resource.from_crd(CRD, "v1alpha1").version == "v1alpha1"


def test_from_crd_names_what_is_missing():
    with pytest.raises(ValueError, match="spec.group"):
        Resource.from_crd({"spec": {}})
    with pytest.raises(ValueError, match="no version 'v2'"):
        Resource.from_crd(CRD, "v2")


def test_for_object():
    assert resources.for_object({"apiVersion": "v1", "kind": "Pod"}) is resources.PODS
    with pytest.raises(errors.NotFound):
        resources.for_object({"apiVersion": "v9", "kind": "Pod"})
