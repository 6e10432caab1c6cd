"""The cluster as one client reaches it over the network, with a switch to cut that network.

`ClusterLink(cluster)` is itself a `Cluster`. While it is cut (`cut()`), every call fails as a
partitioned client's would (503 ServiceUnavailable, "connection refused"), and the watches opened
through it end at once, as their TCP connections would. `restore()` ends the partition.
`drop_watches()` ends the open watches without cutting: a load balancer or API server restart.

Because the fault is on the client's side of the wire, it behaves the same on the embedded cluster
and on a real API server: chapters use it where the lesson is "this client lost the server" (an
informer's outage in 2.2, a leader cut off in 4.4 and the capstone).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from minisched.cluster.base import Cluster, Object, PatchType, Watch, WatchEvent
from minisched.errors import ServiceUnavailable
from minisched.resources import ResourceLike

PARTITIONED = "dial tcp: connection refused (partitioned)"


class _LinkedWatch:
    """A watch opened through a link: ends when the link is cut or its watches are dropped."""

    def __init__(self, link: ClusterLink, inner: Watch) -> None:
        self._link, self._inner = link, inner
        self.dropped = False

    def __iter__(self) -> Iterator[WatchEvent]:
        try:
            for event in self._inner:
                if self.dropped:
                    return
                yield event
        finally:
            self._link._forget(self)

    def stop(self) -> None:
        self._inner.stop()

    def drop(self) -> None:
        self.dropped = True
        self._inner.stop()


class ClusterLink:
    """A `Cluster` that forwards to `cluster` unless cut."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._cut = False
        self._lock = threading.Lock()
        self._watches: list[_LinkedWatch] = []
        self.refused = 0  # calls refused while cut

    # -- the switch ------------------------------------------------------------------------------------

    @property
    def is_cut(self) -> bool:
        return self._cut

    def cut(self) -> None:
        """Partition: every call from now on fails, and the open watches end."""
        self._cut = True
        self.drop_watches()

    def restore(self) -> None:
        self._cut = False

    def drop_watches(self) -> int:
        """End every watch open through this link (their consumers see the stream close);
        returns how many were open."""
        with self._lock:
            watches, self._watches = self._watches, []
        for watch in watches:
            watch.drop()
        return len(watches)

    def _forget(self, watch: _LinkedWatch) -> None:
        with self._lock:
            if watch in self._watches:
                self._watches.remove(watch)

    def _check(self) -> None:
        if self._cut:
            self.refused += 1
            raise ServiceUnavailable(PARTITIONED)

    # -- Cluster ---------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.cluster.name

    def get(self, resource: ResourceLike, name: str, namespace: str | None = None) -> Object:
        self._check()
        return self.cluster.get(resource, name, namespace)

    def list(self, resource: ResourceLike, namespace: str | None = None, **options: Any) -> Object:
        self._check()
        return self.cluster.list(resource, namespace, **options)

    def create(self, resource: ResourceLike, obj: Object, namespace: str | None = None) -> Object:
        self._check()
        return self.cluster.create(resource, obj, namespace)

    def update(self, resource: ResourceLike, obj: Object, *, subresource: str | None = None) -> Object:
        self._check()
        return self.cluster.update(resource, obj, subresource=subresource)

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
        self._check()
        return self.cluster.patch(resource, name, patch, namespace, subresource=subresource, patch_type=patch_type)

    def delete(self, resource: ResourceLike, name: str, namespace: str | None = None, **options: Any) -> Object:
        self._check()
        return self.cluster.delete(resource, name, namespace, **options)

    def watch(self, resource: ResourceLike, namespace: str | None = None, **options: Any) -> Watch:
        self._check()
        watch = _LinkedWatch(self, self.cluster.watch(resource, namespace, **options))
        with self._lock:
            self._watches.append(watch)
        return watch

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None,
             resource_version: str | None = None) -> None:
        self._check()
        self.cluster.bind(namespace, name, node_name, uid=uid, resource_version=resource_version)

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> None:
        self._check()
        self.cluster.evict(namespace, name, grace_period_seconds=grace_period_seconds)

    def close(self) -> None:
        """Closes the link only: the cluster behind it belongs to whoever made it."""
        self.drop_watches()

    def __repr__(self) -> str:
        return f"ClusterLink({self.cluster!r}, cut={self._cut})"
