"""The interface both backends implement: the part of the Kubernetes API that minisched uses.

Objects go in and come out as the API's own JSON (plain dicts), exactly as the API server would
serve them, so code that runs on the embedded cluster runs unchanged on a real one. Failures are
raised as `minisched.errors.ApiError` subclasses (NotFound, Conflict, Expired, ...), never as a
backend's own exception types.

The shape follows client-go's dynamic client: resources are addressed by `Resource` (or a
kubectl-style name such as "pods"), with the namespace passed separately.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from minisched.resources import ResourceLike

Object = dict[str, Any]

WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]

# How a patch is applied: "merge" is JSON merge patch (RFC 7386, application/merge-patch+json: a
# list in the patch replaces the server's); "strategic" is Kubernetes' strategic merge patch
# (application/strategic-merge-patch+json: keyed lists such as a pod's status.conditions merge
# element by element, by `type`). Built-in kinds only: custom resources answer 415.
PatchType = Literal["merge", "strategic"]
PATCH_TYPES: tuple[PatchType, ...] = ("merge", "strategic")


class WatchEvent(TypedDict):
    type: WatchEventType
    object: Object


@runtime_checkable
class Watch(Protocol):
    """An open watch stream.

    Iterating yields events in commit order. Iteration ends when the stream closes: its timeout
    passed, `stop()` was called, or the connection dropped (the caller re-watches from the last
    resourceVersion it saw). When the server answers 410 Gone, for a resourceVersion it no longer
    keeps, iteration raises `minisched.errors.Expired`, whether the 410 came as the HTTP status or
    as an ERROR event in the stream; any other ERROR event raises its ApiError. So a consumer never
    sees an event of type ERROR.
    """

    def __iter__(self) -> Iterator[WatchEvent]: ...

    def stop(self) -> None: ...


@runtime_checkable
class Cluster(Protocol):
    """A Kubernetes API: the embedded in-process server or a real one."""

    @property
    def name(self) -> str:
        """Which backend this is: "embedded" or "real"."""
        ...

    def get(self, resource: ResourceLike, name: str, namespace: str | None = None) -> Object: ...

    def list(
        self,
        resource: ResourceLike,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Object:
        """A list object: {"apiVersion", "kind": "<Kind>List", "metadata": {"resourceVersion",
        "continue"?}, "items": [...]}. Items carry apiVersion and kind. namespace=None lists
        across all namespaces."""
        ...

    def create(self, resource: ResourceLike, obj: Object, namespace: str | None = None) -> Object:
        """Create `obj`; the namespace defaults to obj.metadata.namespace. 409 AlreadyExists."""
        ...

    def update(self, resource: ResourceLike, obj: Object, *, subresource: str | None = None) -> Object:
        """Replace the object named by obj.metadata. With metadata.resourceVersion set, a stale
        version is a 409 Conflict. subresource="status" updates only the status."""
        ...

    def patch(
        self,
        resource: ResourceLike,
        name: str,
        patch: Object,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        patch_type: PatchType = "merge",
    ) -> Object:
        """Apply a patch and return the result: a JSON merge patch (RFC 7386) by default, or with
        patch_type="strategic" a strategic merge patch, whose keyed lists merge by their key (a
        condition by its type, a container by its name) and which knows the `$patch`,
        `$setElementOrder`, `$deleteFromPrimitiveList` and `$retainKeys` directives. A custom
        resource refuses a strategic patch with 415 UnsupportedMediaType, as kube-apiserver does."""
        ...

    def delete(
        self,
        resource: ResourceLike,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        preconditions: dict[str, str] | None = None,
    ) -> Object:
        """Delete; returns the object as last seen (with deletionTimestamp set when the deletion
        is graceful and still pending). preconditions: {"uid": ..., "resourceVersion": ...}."""
        ...

    def watch(
        self,
        resource: ResourceLike,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = False,
        timeout_seconds: float | None = None,
        send_initial_events: bool | None = None,
        resource_version_match: str | None = None,
    ) -> Watch:
        """Watch changes after `resource_version`.

        With a resourceVersion, events after it (410 Expired if the server no longer keeps it).
        With "", None or "0", the stream starts with a synthetic ADDED event for every object that
        exists now, then goes on with changes, as kube-apiserver's watch cache does.

        A watch-list (client-go's WatchListClient, on by default in 1.35): send_initial_events=True
        with resource_version_match="NotOlderThan" and allow_bookmarks starts with the state at a
        version not older than `resource_version`, then a BOOKMARK whose metadata.annotations
        carry "k8s.io/initial-events-end": "true" and that version, then the changes after it. A
        server without the WatchList gate (on by default since 1.34) refuses it with 422 Invalid,
        as it refuses resource_version_match without send_initial_events."""
        ...

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None,
             resource_version: str | None = None) -> None:
        """POST pods/binding. 409 Conflict if the pod is already bound or being deleted,
        404 if it does not exist. The node's existence is not checked (as on a real server).

        `uid` and `resource_version` go in the Binding's metadata, and the server checks them as
        preconditions on the pod (kube's BindingREST.setPodNodeAndMetadata): 409 Conflict, nothing
        bound, if the pod's UID or its resourceVersion is not the one given. A resourceVersion makes
        the binding conditional on the pod as the caller last saw it: any write to the pod since
        (a label, a status, another replica fencing it off) refuses it."""
        ...

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> None:
        """POST pods/eviction (policy/v1 Eviction)."""
        ...

    def close(self) -> None: ...
