"""API resources: which group, version and plural name an object kind is served under.

Both backends address objects by `Resource`, as client-go's dynamic client addresses them by
GroupVersionResource. Built-in kinds are registered here; a custom resource gets its `Resource`
from its CustomResourceDefinition (`Resource.from_crd`), and, as on a real server, the embedded
cluster serves it only after that CRD has been created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minisched.errors import NotFound


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()

    @property
    def api_version(self) -> str:
        """The apiVersion field of objects of this resource: "v1" or "group/version"."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """kubectl's name for it: "pods", "leases.coordination.k8s.io"."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The REST path of a collection or an object, as the API server serves it."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base

    def __str__(self) -> str:
        return f"{self.group_resource} ({self.api_version}, Kind={self.kind})"

    def __eq__(self, other: object) -> bool:
        # Compared on every request (`r == PODS`, ...): identity first, then the field that
        # usually differs, instead of the generated method's two tuples of every field.
        if self is other:
            return True
        if other.__class__ is not Resource:
            return NotImplemented
        assert isinstance(other, Resource)
        return (self.plural == other.plural and self.group == other.group and self.version == other.version
                and self.kind == other.kind and self.namespaced == other.namespaced
                and self.subresources == other.subresources)

    @classmethod
    def from_crd(cls, crd: dict[str, Any], version: str | None = None) -> Resource:
        """The resource a CustomResourceDefinition (apiextensions.k8s.io/v1) serves.

        Without `version`, the storage version (the one a client normally talks to)."""
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        versions = spec.get("versions") or []
        if not spec.get("group") or not names.get("plural") or not names.get("kind") or not versions:
            raise ValueError("CustomResourceDefinition needs spec.group, spec.names.plural/kind and spec.versions")
        if version is None:
            stored = [v["name"] for v in versions if v.get("storage")]
            version = stored[0] if stored else versions[0]["name"]
        chosen = [v for v in versions if v.get("name") == version]
        if not chosen:
            raise ValueError(f"CustomResourceDefinition {names['plural']}.{spec['group']} has no version {version!r}")
        subresources = frozenset((chosen[0].get("subresources") or {}).keys())
        return cls(
            group=spec["group"],
            version=version,
            plural=names["plural"],
            kind=names["kind"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            subresources=subresources,
        )


PODS = Resource("", "v1", "pods", "Pod", True, frozenset({"status", "binding", "eviction"}))
NODES = Resource("", "v1", "nodes", "Node", False, frozenset({"status"}))
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False, frozenset({"status"}))
EVENTS = Resource("", "v1", "events", "Event", True)
EVENTS_V1 = Resource("events.k8s.io", "v1", "events", "Event", True)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
    frozenset({"status"}),
)
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True)
# the workload objects whose selectors PodTopologySpread's default constraints spread by
SERVICES = Resource("", "v1", "services", "Service", True, frozenset({"status"}))
REPLICATION_CONTROLLERS = Resource("", "v1", "replicationcontrollers", "ReplicationController", True,
                                   frozenset({"status", "scale"}))
REPLICA_SETS = Resource("apps", "v1", "replicasets", "ReplicaSet", True, frozenset({"status", "scale"}))
STATEFUL_SETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True, frozenset({"status", "scale"}))
RUNTIME_CLASSES = Resource("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False)
LIMIT_RANGES = Resource("", "v1", "limitranges", "LimitRange", True)
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True,
                                    frozenset({"status"}))
PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", False, frozenset({"status"}))
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)
CSI_NODES = Resource("storage.k8s.io", "v1", "csinodes", "CSINode", False)

BUILTIN: tuple[Resource, ...] = (
    PODS, NODES, NAMESPACES, EVENTS, EVENTS_V1, PRIORITY_CLASSES, LEASES, CRDS, CONFIG_MAPS,
    POD_DISRUPTION_BUDGETS, SERVICES, REPLICATION_CONTROLLERS, REPLICA_SETS, STATEFUL_SETS,
    RUNTIME_CLASSES, LIMIT_RANGES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES, CSI_NODES,
)

_ALIASES: dict[str, Resource] = {}
for _r in BUILTIN:
    for _alias in (_r.group_resource, _r.kind.lower(), f"{_r.kind.lower()}.{_r.group}" if _r.group else ""):
        if _alias:
            _ALIASES.setdefault(_alias, _r)
_ALIASES["pod"] = PODS
_ALIASES["node"] = NODES
_ALIASES["namespace"] = NAMESPACES
_ALIASES["ns"] = NAMESPACES
_ALIASES["events"] = EVENTS  # core/v1 wins the short name, as in kubectl
_ALIASES["event"] = EVENTS
_ALIASES["lease"] = LEASES
_ALIASES["priorityclass"] = PRIORITY_CLASSES
_ALIASES["crd"] = CRDS
_ALIASES["svc"] = SERVICES
_ALIASES["rc"] = REPLICATION_CONTROLLERS
_ALIASES["rs"] = REPLICA_SETS
_ALIASES["sts"] = STATEFUL_SETS
_ALIASES["limits"] = LIMIT_RANGES
_ALIASES["pvc"] = PERSISTENT_VOLUME_CLAIMS
_ALIASES["pv"] = PERSISTENT_VOLUMES
_ALIASES["sc"] = STORAGE_CLASSES


ResourceLike = Resource | str


def resolve(resource: ResourceLike) -> Resource:
    """A `Resource` for a Resource or a kubectl-style name ("pods", "leases.coordination.k8s.io")."""
    if isinstance(resource, Resource):
        return resource
    found = _ALIASES.get(resource.strip().lower())
    if found is None:
        known = ", ".join(sorted({r.group_resource for r in BUILTIN}))
        raise NotFound(
            f"the server doesn't have a resource type {resource!r} (built in: {known}; "
            "custom resources are addressed with Resource.from_crd(crd))"
        )
    return found


def for_object(obj: dict[str, Any]) -> Resource:
    """The built-in resource an object's apiVersion and kind belong to."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    for r in BUILTIN:
        if r.api_version == api_version and r.kind == kind:
            return r
    raise NotFound(f"no built-in resource for apiVersion={api_version!r} kind={kind!r}")
