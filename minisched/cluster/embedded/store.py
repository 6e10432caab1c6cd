"""Storage: the objects of each resource, indexed by namespace, and the cluster-wide version counter.

Stored objects are never mutated after they are committed: a write stores a new dict. So readers
can hand a stored object to the watch machinery without copying, and copy only on the way out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Object = dict[str, Any]


class Versioner:
    """One strictly increasing resourceVersion for the whole cluster, like etcd's revision."""

    def __init__(self) -> None:
        self.current = 0

    def next(self) -> int:
        self.current += 1
        return self.current


class ObjectStore:
    """The objects of one resource: namespace -> name -> object ("" for cluster-scoped)."""

    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, Object]] = {}
        self.count = 0

    def get(self, namespace: str, name: str) -> Object | None:
        return self._by_namespace.get(namespace, {}).get(name)

    def put(self, namespace: str, name: str, obj: Object) -> Object | None:
        """Store `obj`; returns the object it replaced, if any."""
        objects = self._by_namespace.setdefault(namespace, {})
        previous = objects.get(name)
        if previous is None:
            self.count += 1
        objects[name] = obj
        return previous

    def remove(self, namespace: str, name: str) -> Object | None:
        objects = self._by_namespace.get(namespace)
        if not objects or name not in objects:
            return None
        self.count -= 1
        obj = objects.pop(name)
        if not objects:
            del self._by_namespace[namespace]
        return obj

    def items(self, namespace: str | None = None, after: tuple[str, str] | None = None) -> Iterator[
            tuple[tuple[str, str], Object]]:
        """(namespace, name), object in key order (as etcd lists them), optionally after a key."""
        namespaces = [namespace] if namespace is not None else sorted(self._by_namespace)
        for ns in namespaces:
            if after is not None and ns < after[0]:
                continue
            objects = self._by_namespace.get(ns) or {}
            for name in sorted(objects):
                if after is not None and (ns, name) <= after:
                    continue
                yield (ns, name), objects[name]

    def namespace_objects(self, namespace: str) -> list[Object]:
        return list((self._by_namespace.get(namespace) or {}).values())
