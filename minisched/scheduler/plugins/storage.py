"""What the volume plugins read besides nodes and pods: PersistentVolumeClaims, PersistentVolumes,
StorageClasses and CSINodes, through a small lister (kube's listers from the shared informer factory).

`InformerStorage` reads the scheduler's informers (the plugins ask the handle's factory for them, so
they start with the others); `StaticStorage` holds given objects (tests, notebooks). Also here: the
claim helpers the volume plugins share (kube's storage helpers).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from minisched.resources import CSI_NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES
from minisched.scheduler.framework.cluster_event import ClusterEvent
from minisched.scheduler.framework.interface import Handle
from minisched.scheduler.framework.listers import StorageLister
from minisched.volumes import (
    BETA_CLASS_ANNOTATION,
    BIND_COMPLETED,
    WAIT_FOR_FIRST_CONSUMER,
    claim_class,
    fully_bound,
)

Object = dict[str, Any]

__all__ = ("BETA_CLASS_ANNOTATION", "BIND_COMPLETED", "STORAGE_RESOURCES", "WAIT_FOR_FIRST_CONSUMER", "InformerStorage",
           "StaticStorage", "StorageLister", "claim_class", "claim_volumes", "fully_bound", "name_of", "namespace_of", "not_found",
           "storage_from")
STORAGE_RESOURCES = (PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES, CSI_NODES)

# The storage events the scheduler sends (named after the object's kind, as kube's fwk.PersistentVolumeClaim
# etc.), for the volume plugins' registrations. minisched watches no CSIDriver, CSIStorageCapacity or
# VolumeAttachment objects, so kube's registrations for those have no counterpart.
PVC_ADD, PVC_UPDATE = ClusterEvent("PersistentVolumeClaim", "Add"), ClusterEvent("PersistentVolumeClaim", "Update")
PV_ADD, PV_UPDATE = ClusterEvent("PersistentVolume", "Add"), ClusterEvent("PersistentVolume", "Update")
STORAGE_CLASS_ADD, STORAGE_CLASS_UPDATE = ClusterEvent("StorageClass", "Add"), ClusterEvent("StorageClass", "Update")
CSI_NODE_ADD, CSI_NODE_UPDATE = ClusterEvent("CSINode", "Add"), ClusterEvent("CSINode", "Update")


class StaticStorage:
    """Storage objects given up front (or added later with `add`)."""

    def __init__(self, objects: Iterable[Object] = ()) -> None:
        self._objects: dict[tuple[str, str, str], Object] = {}
        for obj in objects:
            self.add(obj)

    def add(self, obj: Object) -> None:
        meta = obj["metadata"]
        self._objects[(obj["kind"], meta.get("namespace") or "", meta["name"])] = obj

    def claim(self, namespace: str, name: str) -> Object | None:
        return self._objects.get(("PersistentVolumeClaim", namespace, name))

    def volume(self, name: str) -> Object | None:
        return self._objects.get(("PersistentVolume", "", name))

    def storage_class(self, name: str) -> Object | None:
        return self._objects.get(("StorageClass", "", name))

    def csi_node(self, name: str) -> Object | None:
        return self._objects.get(("CSINode", "", name))

    def volumes(self) -> list[Object]:
        return [o for (kind, _, _), o in self._objects.items() if kind == "PersistentVolume"]


class InformerStorage:
    """Reads the shared informers' stores; asking for the informers registers them with the factory,
    which starts them with the scheduler's own."""

    def __init__(self, factory: Any) -> None:
        self._claims = factory.informer_for(PERSISTENT_VOLUME_CLAIMS).store
        self._volumes = factory.informer_for(PERSISTENT_VOLUMES).store
        self._classes = factory.informer_for(STORAGE_CLASSES).store
        self._csi_nodes = factory.informer_for(CSI_NODES).store

    def claim(self, namespace: str, name: str) -> Object | None:
        obj: Object | None = self._claims.get_by_key(f"{namespace}/{name}")
        return obj

    def volume(self, name: str) -> Object | None:
        obj: Object | None = self._volumes.get_by_key(name)
        return obj

    def storage_class(self, name: str) -> Object | None:
        obj: Object | None = self._classes.get_by_key(name)
        return obj

    def csi_node(self, name: str) -> Object | None:
        obj: Object | None = self._csi_nodes.get_by_key(name)
        return obj

    def volumes(self) -> list[Object]:
        return list(self._volumes.list())


def storage_from(handle: Handle | None, storage: StorageLister | None = None) -> StorageLister:
    """The lister a volume plugin uses: the one given, else one over the handle's informer factory
    (shared by every volume plugin of that handle), else an empty one."""
    if storage is not None:
        return storage
    factory = handle.informer_factory if handle is not None else None
    if factory is None:
        return StaticStorage()
    shared = _SHARED.get(factory)
    if shared is None:
        shared = _SHARED[factory] = InformerStorage(factory)
    return shared


_SHARED: weakref.WeakKeyDictionary[Any, InformerStorage] = weakref.WeakKeyDictionary()


def claim_volumes(pod: Object) -> Iterator[tuple[str, bool]]:
    """(claim name, is ephemeral) for each volume of `pod` backed by a PersistentVolumeClaim; a
    generic ephemeral volume's claim is named <pod>-<volume> (ephemeral.VolumeClaimName)."""
    spec = pod.get("spec") or {}
    pod_name = (pod.get("metadata") or {}).get("name") or ""
    for v in spec.get("volumes") or []:
        if v.get("persistentVolumeClaim") is not None:
            yield str(v["persistentVolumeClaim"].get("claimName") or ""), False
        elif v.get("ephemeral") is not None:
            yield f"{pod_name}-{v.get('name') or ''}", True


def namespace_of(obj: Object) -> str:
    """A namespaced object's namespace, as the hints compare them (an unset one is "default")."""
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def name_of(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def not_found(kind: str, name: str) -> str:
    """A lister's NotFound error text ("persistentvolumeclaim \"x\" not found")."""
    return f'{kind} "{name}" not found'
