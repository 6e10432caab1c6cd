"""A body whose apiVersion is not the endpoint's, worded as kube-apiserver 1.35 words it (Part II
§4.1's book CRD carries its own group's version where apiextensions.k8s.io/v1 belongs)."""

from __future__ import annotations

import pytest

from minisched.cluster import Cluster
from minisched.errors import ApiError
from minisched.resources import CRDS, PODS, PRIORITY_CLASSES

from .conftest import unique


def test_another_groups_version_is_no_registered_kind(cluster: Cluster, ns: str) -> None:
    crd = {"apiVersion": "graph.example.com/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "graphnodes.graph.example.com"}, "spec": {}}
    with pytest.raises(ApiError) as err:
        cluster.create(CRDS, crd)
    assert (err.value.status, err.value.reason) == (400, "BadRequest")
    assert err.value.message == (
        'CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: no kind '
        '"CustomResourceDefinition" is registered for version "graph.example.com/v1" in scheme '
        '"pkg/runtime/scheme.go:111"')
    pod = {"apiVersion": "apps/v1", "kind": "Pod", "metadata": {"name": unique("p")},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    with pytest.raises(ApiError) as err:
        cluster.create(PODS, pod, ns)
    assert err.value.message == ('Pod in version "v1" cannot be handled as a Pod: no kind "Pod" is registered '
                                 'for version "apps/v1" in scheme "pkg/runtime/scheme.go:111"')


def test_another_version_of_the_same_group_does_not_match(cluster: Cluster) -> None:
    pc = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PriorityClass", "metadata": {"name": unique("pc")},
          "value": 1}
    with pytest.raises(ApiError) as err:
        cluster.create(PRIORITY_CLASSES, pc)
    assert (err.value.status, err.value.message) == (
        400, "the API version in the data (scheduling.k8s.io/v1beta1) does not match the expected API version "
             "(scheduling.k8s.io/v1)")
