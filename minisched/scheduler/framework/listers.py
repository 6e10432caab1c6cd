"""The listers plugins read other objects through (kube's framework.Handle listers): namespaces for a
namespaceSelector (InterPodAffinity), the Services and controllers default spreading takes its
selectors from (PodTopologySpread), and storage objects (the volume plugins).

Each is a Protocol with the ways to back it: an informer's store (what the Scheduler gives its
plugins), reads through the API on each call (a Framework driven by hand with a cluster), or fixed
objects (tests, benchmarks). The Handle gives plugins one of each, never None (interface.Handle):
a plugin asks no question about where its objects come from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from minisched.errors import NotFound
from minisched.resources import (
    CSI_NODES,
    NAMESPACES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    SERVICES,
    STATEFUL_SETS,
    STORAGE_CLASSES,
    Resource,
)

Object = dict[str, Any]


# ---- namespaces: what a namespaceSelector needs ----------------------------------------------------
class Namespaces(Protocol):
    """Namespace labels, as kube's namespace lister gives them."""

    def labels_of(self, name: str) -> Mapping[str, str] | None: ...

    def all(self) -> Iterable[tuple[str, Mapping[str, str]]]: ...


@dataclass
class StaticNamespaces:
    """Namespaces from a dict (tests, and the pure rules)."""

    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def labels_of(self, name: str) -> Mapping[str, str] | None:
        return self.labels.get(name)

    def all(self) -> Iterable[tuple[str, Mapping[str, str]]]:
        return self.labels.items()


class StoreNamespaces:
    """Namespaces from an informer's store (what the Scheduler gives its plugins)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def labels_of(self, name: str) -> Mapping[str, str] | None:
        ns = self.store.get_by_key(name)
        return None if ns is None else dict((ns.get("metadata") or {}).get("labels") or {})

    def all(self) -> Iterable[tuple[str, Mapping[str, str]]]:
        for ns in self.store.list():
            meta = ns.get("metadata") or {}
            yield str(meta.get("name") or ""), dict(meta.get("labels") or {})


class ClusterNamespaces:
    """Namespaces read from the API when asked (a Framework used without a Scheduler's informers);
    asked only for terms with a namespaceSelector."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster

    def labels_of(self, name: str) -> Mapping[str, str] | None:
        try:
            ns = self.cluster.get(NAMESPACES, name)
        except NotFound:
            return None
        return dict((ns.get("metadata") or {}).get("labels") or {})

    def all(self) -> Iterable[tuple[str, Mapping[str, str]]]:
        for ns in self.cluster.list(NAMESPACES).get("items") or []:
            meta = ns.get("metadata") or {}
            yield str(meta.get("name") or ""), dict(meta.get("labels") or {})


# ---- Services and controllers: where default spreading takes its selectors ------------------------
class WorkloadLister(Protocol):
    """Read access to the Services and controllers in the cluster (kube's listers)."""

    def services(self, namespace: str) -> Sequence[Object]: ...

    def get(self, resource: Resource, namespace: str, name: str) -> Object | None: ...


class InformerWorkloads:
    """Listers over shared informers: kube's plugin asks the informer factory for the same four."""

    def __init__(self, factory: Any) -> None:
        self._informers = {r: factory.informer_for(r) for r in
                           (SERVICES, REPLICATION_CONTROLLERS, REPLICA_SETS, STATEFUL_SETS)}

    def services(self, namespace: str) -> Sequence[Object]:
        return list(self._informers[SERVICES].store.by_index("namespace", namespace))

    def get(self, resource: Resource, namespace: str, name: str) -> Object | None:
        obj: Object | None = self._informers[resource].store.get_by_key(f"{namespace}/{name}")
        return obj


@dataclass
class StaticWorkloads:
    """Listers over a fixed list of objects (tests and benchmarks without an API server)."""

    objects: Sequence[Object] = ()

    def services(self, namespace: str) -> Sequence[Object]:
        return [o for o in self.objects if o.get("kind") == "Service"
                and (o.get("metadata") or {}).get("namespace", "default") == namespace]

    def get(self, resource: Resource, namespace: str, name: str) -> Object | None:
        for o in self.objects:
            meta = o.get("metadata") or {}
            if (o.get("kind") == resource.kind and meta.get("name") == name
                    and meta.get("namespace", "default") == namespace):
                return o
        return None


class ClusterWorkloads:
    """Listers that read through the API on each call: for a framework with a cluster but no
    informers (a notebook or test driving a Framework by hand)."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster

    def services(self, namespace: str) -> Sequence[Object]:
        items: list[Object] = self.cluster.list(SERVICES, namespace)["items"]
        return items

    def get(self, resource: Resource, namespace: str, name: str) -> Object | None:
        try:
            obj: Object = self.cluster.get(resource, name, namespace)
        except NotFound:
            return None
        return obj


# ---- storage objects --------------------------------------------------------------------------------
class StorageLister(Protocol):
    """PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes (the volume plugins'
    listers, the Handle's `storage`)."""

    def claim(self, namespace: str, name: str) -> Object | None: ...

    def volume(self, name: str) -> Object | None: ...

    def storage_class(self, name: str) -> Object | None: ...

    def csi_node(self, name: str) -> Object | None: ...

    def volumes(self) -> list[Object]: ...


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


# ---- what a Handle gives when no lister was set ----------------------------------------------------
def workloads_from(factory: Any | None, cluster: Any | None) -> WorkloadLister:
    """Listers over the informers (kube's way; asking registers them with the factory), else reads
    through the cluster, else no Services or controllers at all."""
    if factory is not None:
        return InformerWorkloads(factory)
    return ClusterWorkloads(cluster) if cluster is not None else StaticWorkloads()


def namespaces_from(cluster: Any | None) -> Namespaces:
    """Namespaces read through the cluster (before or without a namespace informer), else none."""
    return ClusterNamespaces(cluster) if cluster is not None else StaticNamespaces()


__all__ = ["ClusterNamespaces", "ClusterWorkloads", "InformerStorage", "InformerWorkloads", "Namespaces",
           "StaticNamespaces", "StaticStorage", "StaticWorkloads", "StorageLister", "StoreNamespaces", "WorkloadLister",
           "namespaces_from", "workloads_from"]
