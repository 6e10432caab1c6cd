"""ListWatch: how an informer lists and watches one kind of object (client-go ListWatch).

It binds a cluster, a resource, a namespace (None: all) and label/field selectors, so the reflector
only says which resourceVersion it wants. The selectors are sent to the server with both the list
and the watch ("pushed down"), so objects that do not match never reach the client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minisched.cluster.base import Cluster, Watch
from minisched.resources import Resource, ResourceLike, resolve

Object = dict[str, Any]


@dataclass(frozen=True)
class ListWatch:
    cluster: Cluster
    resource: Resource
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    @classmethod
    def for_resource(
        cls,
        cluster: Cluster,
        resource: ResourceLike,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ListWatch:
        res = resolve(resource)
        if namespace and not res.namespaced:
            raise ValueError(f"{res.group_resource} is cluster-scoped: it cannot be watched in namespace {namespace!r}")
        return cls(cluster, res, namespace or None, label_selector or None, field_selector or None)

    def list(
        self, *, resource_version: str | None = None, limit: int | None = None, continue_token: str | None = None
    ) -> Object:
        return self.cluster.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            resource_version=resource_version,
            limit=limit,
            continue_token=continue_token,
        )

    def watch(self, *, resource_version: str, timeout_seconds: float | None = None, **options: Any) -> Watch:
        return self.cluster.watch(
            self.resource,
            self.namespace,
            resource_version=resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            allow_bookmarks=True,
            timeout_seconds=timeout_seconds,
            **options,
        )

    def watch_list(self, *, resource_version: str, timeout_seconds: float | None = None) -> Watch:
        """A watch that starts with the state at a version not older than `resource_version` ("":
        the latest), ended by the k8s.io/initial-events-end bookmark (client-go's watchList)."""
        return self.watch(resource_version=resource_version, timeout_seconds=timeout_seconds,
                          send_initial_events=True, resource_version_match="NotOlderThan")

    def describe(self) -> str:
        return describe_scope(self.resource, self.namespace, self.label_selector, self.field_selector)


def describe_scope(
    resource: Resource, namespace: str | None, label_selector: str | None, field_selector: str | None
) -> str:
    """What a list/watch covers, for logs: "pods namespace=a labels=app=web"."""
    parts = [resource.group_resource]
    if namespace:
        parts.append(f"namespace={namespace}")
    if label_selector:
        parts.append(f"labels={label_selector}")
    if field_selector:
        parts.append(f"fields={field_selector}")
    return " ".join(parts)
