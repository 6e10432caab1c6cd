"""The informer's cache: a thread-safe map from key to object, with indexes (client-go Indexer).

An index maps a value computed from each object (its namespace, its node, a label...) to the keys
of the objects that have it, so "all pods on node-3" is one lookup instead of a scan. The
"namespace" index is built in; add your own with `indexers={"name": func}` or add_indexers(),
where func(obj) returns the list of values the object is filed under.

The objects are the cache's own: treat them as read-only (deep-copy before changing one), as
client-go asks of its callers. Copying each object on every read would cost more than the cache.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable
from typing import Any

from minisched.informer.keys import DeletedFinalStateUnknown, KeyFunc, deletion_handling_key
from minisched.meta import namespace_of

Object = dict[str, Any]
IndexFunc = Callable[[Object], list[str]]
Indexers = dict[str, IndexFunc]

NAMESPACE_INDEX = "namespace"


def meta_namespace_index(obj: Object) -> list[str]:
    """The namespace index: an object is filed under its namespace ("" if cluster-scoped)."""
    return [namespace_of(obj)]


class Store:
    """A thread-safe, indexed store of API objects keyed by "namespace/name"."""

    def __init__(
        self,
        indexers: Indexers | None = None,
        *,
        key_func: KeyFunc = deletion_handling_key,
        namespace_index: bool = True,
    ) -> None:
        self._key_func = key_func
        self._lock = threading.RLock()
        self._items: dict[str, Object] = {}
        self._indexers: Indexers = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        initial: Indexers = {NAMESPACE_INDEX: meta_namespace_index} if namespace_index else {}
        initial.update(indexers or {})
        self.add_indexers(initial)

    # -- writes -------------------------------------------------------------------------------

    def add(self, obj: Object) -> None:
        self._put(self._key_func(obj), obj)

    def update(self, obj: Object) -> None:
        self._put(self._key_func(obj), obj)

    def delete(self, obj: Object | DeletedFinalStateUnknown) -> None:
        key = self._key_func(obj)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._unindex(key, old)

    def replace(self, objs: Iterable[Object], resource_version: str = "") -> None:
        """Make the store hold exactly `objs` (the reflector's relist, when it writes directly here)."""
        with self._lock:
            self._items = {self._key_func(obj): obj for obj in objs}
            self._indices = {name: {} for name in self._indexers}
            for key, obj in self._items.items():
                self._index(key, obj)

    def resync(self) -> None:
        """Nothing to do for a plain store (a DeltaFIFO re-queues its objects here)."""

    # -- reads --------------------------------------------------------------------------------

    def get(self, obj: Object | DeletedFinalStateUnknown) -> Object | None:
        return self.get_by_key(self._key_func(obj))

    def get_by_key(self, key: str) -> Object | None:
        with self._lock:
            return self._items.get(key)

    def list(self) -> builtins.list[Object]:
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    # -- indexes ------------------------------------------------------------------------------

    def add_indexers(self, indexers: Indexers) -> None:
        """Add indexes; objects already stored are indexed at once. Names must be new."""
        with self._lock:
            clash = sorted(set(indexers) & set(self._indexers))
            if clash:
                raise ValueError(f"index {', '.join(clash)} already exists")
            for name, func in indexers.items():
                if not callable(func):
                    raise TypeError(f"index {name!r}: the index function must be callable, got {func!r}")
                self._indexers[name] = func
                self._indices[name] = {}
                for key, obj in self._items.items():
                    self._index_one(name, key, obj)

    def get_indexers(self) -> Indexers:
        with self._lock:
            return dict(self._indexers)

    def by_index(self, index_name: str, value: str) -> builtins.list[Object]:
        """Objects filed under `value` in the index `index_name`."""
        with self._lock:
            return [self._items[k] for k in self._index_of(index_name).get(value, ())]

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        with self._lock:
            return sorted(self._index_of(index_name).get(value, ()))

    def index(self, index_name: str, obj: Object) -> builtins.list[Object]:
        """Objects sharing any of `obj`'s values in the index `index_name`."""
        with self._lock:
            index = self._index_of(index_name)
            keys: set[str] = set()
            for value in self._indexers[index_name](obj):
                keys |= index.get(value, set())
            return [self._items[k] for k in keys]

    def list_index_func_values(self, index_name: str) -> builtins.list[str]:
        """Every value the index `index_name` currently holds."""
        with self._lock:
            return sorted(self._index_of(index_name))

    # -- internals ----------------------------------------------------------------------------

    def _put(self, key: str, obj: Object) -> None:
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                self._unindex(key, old)
            self._items[key] = obj
            self._index(key, obj)

    def _index_of(self, index_name: str) -> dict[str, set[str]]:
        try:
            return self._indices[index_name]
        except KeyError:
            known = ", ".join(sorted(self._indexers)) or "none"
            raise KeyError(f"no index named {index_name!r} (indexes: {known})") from None

    def _index(self, key: str, obj: Object) -> None:
        for name in self._indexers:
            self._index_one(name, key, obj)

    def _index_one(self, name: str, key: str, obj: Object) -> None:
        index = self._indices[name]
        for value in self._indexers[name](obj):
            index.setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: Object) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]  # keep list_index_func_values() to live values only
