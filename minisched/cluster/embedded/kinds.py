"""How the server treats each resource: its registry strategy, in a few flags.

(In kube-apiserver each resource's REST strategy decides these: whether status is a separate
subresource, whether metadata.generation tracks spec changes, whether an update without a
resourceVersion is allowed, whether an update may create the object.)
"""

from __future__ import annotations

from dataclasses import dataclass

from minisched.resources import (
    CONFIG_MAPS,
    CRDS,
    CSI_NODES,
    EVENTS,
    EVENTS_V1,
    LEASES,
    LIMIT_RANGES,
    NAMESPACES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    PRIORITY_CLASSES,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    RUNTIME_CLASSES,
    SERVICES,
    STATEFUL_SETS,
    STORAGE_CLASSES,
    Resource,
)


@dataclass(frozen=True)
class Kind:
    status_subresource: bool = False
    tracks_generation: bool = False
    unconditional_update: bool = True
    create_on_update: bool = False


BUILTIN_KINDS: dict[tuple[str, str, str], tuple[Resource, Kind]] = {
    (r.group, r.version, r.plural): (r, k)
    for r, k in (
        (PODS, Kind(status_subresource=True, tracks_generation=True)),
        (NODES, Kind(status_subresource=True)),
        (NAMESPACES, Kind(status_subresource=True)),
        (EVENTS, Kind(create_on_update=True)),
        (EVENTS_V1, Kind(create_on_update=True)),
        (PRIORITY_CLASSES, Kind()),
        (LEASES, Kind(create_on_update=True)),
        (CONFIG_MAPS, Kind()),
        (POD_DISRUPTION_BUDGETS, Kind(status_subresource=True, tracks_generation=True)),
        (CRDS, Kind(status_subresource=True, tracks_generation=True, unconditional_update=False)),
        (SERVICES, Kind(status_subresource=True)),
        (REPLICATION_CONTROLLERS, Kind(status_subresource=True, tracks_generation=True)),
        (REPLICA_SETS, Kind(status_subresource=True, tracks_generation=True)),
        (STATEFUL_SETS, Kind(status_subresource=True, tracks_generation=True)),
        (RUNTIME_CLASSES, Kind()),
        (LIMIT_RANGES, Kind()),
        (PERSISTENT_VOLUME_CLAIMS, Kind(status_subresource=True)),
        (PERSISTENT_VOLUMES, Kind(status_subresource=True)),
        (STORAGE_CLASSES, Kind()),
        (CSI_NODES, Kind()),
    )
}


def custom_kind(resource: Resource) -> Kind:
    """Custom resources: generation always tracked; an update must carry a resourceVersion."""
    return Kind(status_subresource="status" in resource.subresources, tracks_generation=True,
                unconditional_update=False)


_STORAGE_KEYS: dict[int, tuple[Resource, str]] = {}  # id(resource) -> (resource, its key)


def storage_key(resource: Resource) -> str:
    """Where objects live: both Event APIs share one storage, as on the real server."""
    # Asked several times per request: remembered per Resource object (kept alive with its entry,
    # so an id is never reused while it is in the table; bounded for CRD resources made per call).
    hit = _STORAGE_KEYS.get(id(resource))
    if hit is not None and hit[0] is resource:
        return hit[1]
    key = "/events" if resource == EVENTS_V1 else f"{resource.group}/{resource.plural}"
    if len(_STORAGE_KEYS) < 1024:
        _STORAGE_KEYS[id(resource)] = (resource, key)
    return key
