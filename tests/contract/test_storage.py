"""Storage objects the volume plugins read (PersistentVolumeClaim, PersistentVolume, StorageClass,
CSINode): what the API server fills in (defaults, DefaultStorageClass, StorageObjectInUseProtection)
and what it refuses, on both backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from minisched.cluster import Cluster
from minisched.errors import ApiError, NotFound
from minisched.objects import make_claim, make_csi_node, make_storage_class, make_volume
from minisched.resources import (
    CSI_NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    Resource,
)

from .conftest import unique

Object = dict[str, Any]
Make = Callable[[Resource, Object], Object]


@pytest.fixture
def cluster_scoped(cluster: Cluster) -> Iterator[Make]:
    """Create cluster-scoped objects and remove them afterwards (finalizers cleared first: no
    controller runs to clear the protection finalizers)."""
    made: list[tuple[Resource, str]] = []

    def make(resource: Resource, obj: Object) -> Object:
        created = cluster.create(resource, obj)
        made.append((resource, created["metadata"]["name"]))
        return created

    yield make
    for resource, name in reversed(made):
        try:
            cluster.patch(resource, name, {"metadata": {"finalizers": None}})
            cluster.delete(resource, name)
        except NotFound:
            pass


def test_a_claim_is_defaulted_and_protected(cluster: Cluster, ns: str) -> None:
    pvc = cluster.create(PERSISTENT_VOLUME_CLAIMS, make_claim("data", namespace=ns, storage="1024Mi",
                                                             storage_class=""))
    assert pvc["spec"]["volumeMode"] == "Filesystem"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert pvc["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert pvc["status"]["phase"] == "Pending"


def test_a_claim_without_a_class_gets_the_default_one(cluster: Cluster, ns: str, cluster_scoped: Make) -> None:
    name = unique("default")
    sc = cluster_scoped(STORAGE_CLASSES, make_storage_class(name, default=True))
    assert sc["reclaimPolicy"] == "Delete" and sc["volumeBindingMode"] == "Immediate"
    pvc = cluster.create(PERSISTENT_VOLUME_CLAIMS, make_claim("data", namespace=ns))
    assert pvc["spec"]["storageClassName"] == name
    explicit = cluster.create(PERSISTENT_VOLUME_CLAIMS, make_claim("none", namespace=ns, storage_class=""))
    assert explicit["spec"]["storageClassName"] == ""


def test_a_volume_is_defaulted_and_protected(cluster: Cluster, cluster_scoped: Make) -> None:
    pv = cluster_scoped(PERSISTENT_VOLUMES, make_volume(unique("pv"), storage="10Gi"))
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["volumeMode"] == "Filesystem"
    assert pv["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    assert pv["status"]["phase"] == "Pending"


def test_a_csi_node_is_stored(cluster: Cluster, cluster_scoped: Make) -> None:
    name = unique("node")
    made = cluster_scoped(CSI_NODES, make_csi_node(name, {"ebs.csi.aws.com": 25}))
    assert made["spec"]["drivers"][0]["allocatable"] == {"count": 25}
    assert cluster.get(CSI_NODES, name)["spec"] == made["spec"]


@pytest.mark.parametrize(("change", "message", "fields"), [
    (lambda c: c["spec"].pop("accessModes"),
     'PersistentVolumeClaim "bad" is invalid: spec.accessModes: Required value: at least 1 access mode is required',
     ["spec.accessModes"]),
    (lambda c: c["spec"]["resources"].pop("requests"),
     'PersistentVolumeClaim "bad" is invalid: spec.resources[storage]: Required value', ["spec.resources[storage]"]),
    (lambda c: c["spec"].update(accessModes=["ReadWriteOncePod", "ReadWriteOnce"]),
     'PersistentVolumeClaim "bad" is invalid: spec.accessModes: Forbidden: may not use ReadWriteOncePod with other '
     "access modes", ["spec.accessModes"]),
])
def test_an_invalid_claim_is_refused(cluster: Cluster, ns: str, change: Callable[[Object], Any], message: str,
                                     fields: list[str]) -> None:
    claim = make_claim("bad", namespace=ns)
    change(claim)
    with pytest.raises(ApiError) as err:
        cluster.create(PERSISTENT_VOLUME_CLAIMS, claim)
    assert (err.value.status, err.value.reason) == (422, "Invalid")
    assert err.value.message == message
    assert [c.field for c in err.value.causes] == fields


def test_a_volume_without_a_source_is_refused(cluster: Cluster) -> None:
    name = unique("pv")
    volume = make_volume(name)
    del volume["spec"]["hostPath"]
    with pytest.raises(ApiError) as err:
        cluster.create(PERSISTENT_VOLUMES, volume)
    assert (err.value.status, err.value.reason) == (422, "Invalid")
    assert err.value.message == f'PersistentVolume "{name}" is invalid: spec: Required value: must specify a volume type'
