"""DeltaFIFO: the queue between the reflector and the cache (client-go tools/cache DeltaFIFO).

It keeps, for each key, the list of changes ("deltas") not yet processed, and hands out keys in
the order they first changed. Popping a key yields all its deltas at once, oldest first, so a
consumer sees every change of an object in order while a busy object cannot starve the others.

Delta types: Added, Updated, Deleted (from the watch); Replaced (each object of a relist); Sync
(a periodic resync of an object already cached). After a relist, an object the cache knows but the
new list lacks was deleted while the watch was down: it is queued as Deleted with a
`DeletedFinalStateUnknown` tombstone carrying its last known state.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from minisched.informer.keys import DeletedFinalStateUnknown, KeyFunc, deletion_handling_key

Object = dict[str, Any]
TransformFunc = Callable[[Object], Object]


def strip_managed_fields(obj: Object) -> Object:
    """A transform that drops `metadata.managedFields` (client-go's TransformStripManagedFields):
    server-side apply's bookkeeping, which the API server adds to every object it stores and no
    informer reader needs; kube-scheduler drops it from its pods to save memory. The caller's dict
    is not changed: a new top level and metadata are made when there is something to drop."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


class DeltaType(StrEnum):
    ADDED = "Added"
    UPDATED = "Updated"
    DELETED = "Deleted"
    REPLACED = "Replaced"  # an object in a relist
    SYNC = "Sync"  # a periodic resync


@dataclass(frozen=True, slots=True)
class Delta:
    type: DeltaType
    object: Object | DeletedFinalStateUnknown


class KnownObjects(Protocol):
    """What the FIFO needs of the cache behind it (a `Store`) to detect deletions and resync."""

    def list_keys(self) -> list[str]: ...

    def get_by_key(self, key: str) -> Object | None: ...


class FIFOClosedError(Exception):
    """pop() on a closed DeltaFIFO."""


class DeltaFIFO:
    def __init__(
        self,
        *,
        known_objects: KnownObjects | None = None,
        key_func: KeyFunc = deletion_handling_key,
        emit_delta_type_replaced: bool = True,
        transform: TransformFunc | None = None,
    ) -> None:
        self._known = known_objects
        self._key_func = key_func
        # client-go's default is Sync for relisted objects (old behaviour); informers ask for Replaced.
        self._emit_replaced = emit_delta_type_replaced
        self._transform = transform
        self._cond = threading.Condition()
        self._items: dict[str, list[Delta]] = {}
        self._queue: deque[str] = deque()
        self._populated = False  # something was added, or replace() was called
        self._initial_population_count = 0  # items of the first replace() not popped yet
        self._closed = False

    @property
    def transformer(self) -> TransformFunc | None:
        """The transform applied to every object queued (client-go's TransformingStore): a
        watch-list applies it to each streamed object, so the untransformed state is never held."""
        return self._transform

    # -- what the reflector calls -------------------------------------------------------------

    def add(self, obj: Object) -> None:
        with self._cond:
            self._populated = True
            self._queue_action(DeltaType.ADDED, obj)

    def update(self, obj: Object) -> None:
        with self._cond:
            self._populated = True
            self._queue_action(DeltaType.UPDATED, obj)

    def delete(self, obj: Object | DeletedFinalStateUnknown) -> None:
        key = self._key_func(obj)
        with self._cond:
            self._populated = True
            known = self._known.get_by_key(key) is not None if self._known is not None else False
            if not known and key not in self._items:
                return  # already reported deleted by a relist: do not report it twice
            self._queue_action(DeltaType.DELETED, obj)

    def replace(self, objs: Iterable[Object], resource_version: str = "") -> None:
        """A relist: queue each object as Replaced, and a tombstone for each that disappeared."""
        action = DeltaType.REPLACED if self._emit_replaced else DeltaType.SYNC
        with self._cond:
            keys: set[str] = set()
            for obj in objs:
                keys.add(self._key_func(obj))
                self._queue_action(action, obj)
            queued_deletions = 0
            # Objects with pending deltas that the new list lacks.
            for key, deltas in list(self._items.items()):
                if key in keys:
                    continue
                newest = deltas[-1].object
                last = newest.obj if isinstance(newest, DeletedFinalStateUnknown) else newest
                queued_deletions += 1
                self._queue_action(DeltaType.DELETED, DeletedFinalStateUnknown(key, last))
            # Objects in the cache, with nothing pending, that the new list lacks.
            if self._known is not None:
                for key in self._known.list_keys():
                    if key in keys or self._items.get(key):
                        continue
                    queued_deletions += 1
                    self._queue_action(
                        DeltaType.DELETED, DeletedFinalStateUnknown(key, self._known.get_by_key(key))
                    )
            if not self._populated:
                self._populated = True
                self._initial_population_count = len(keys) + queued_deletions
            self._cond.notify_all()

    def resync(self) -> None:
        """Queue a Sync delta for every cached object that has nothing pending."""
        if self._known is None:
            return
        with self._cond:
            for key in self._known.list_keys():
                if self._items.get(key):
                    # A pending delta is newer than the cache; a Sync with the cache's copy would
                    # deliver stale state after it.
                    continue
                obj = self._known.get_by_key(key)
                if obj is not None:
                    self._queue_action(DeltaType.SYNC, obj)

    # -- what the informer calls --------------------------------------------------------------

    def pop(self, process: Callable[[list[Delta], bool], None], timeout: float | None = None) -> list[Delta]:
        """Wait for a key, remove it with its deltas and call process(deltas, is_in_initial_list).

        process() runs with the FIFO locked, so the cache it updates never disagrees with what
        replace() and delete() see. It must not block. Raises FIFOClosedError once closed, and
        TimeoutError if `timeout` (real seconds) passes with nothing to pop.
        """
        with self._cond:
            while not self._queue:
                if self._closed:
                    raise FIFOClosedError("DeltaFIFO is closed")
                if not self._cond.wait(timeout) and not self._queue and not self._closed:
                    raise TimeoutError("nothing to pop")
            is_in_initial_list = not self._has_synced_locked()
            key = self._queue.popleft()
            if self._initial_population_count > 0:
                self._initial_population_count -= 1
            deltas = self._items.pop(key)
            process(deltas, is_in_initial_list)
            return deltas

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def is_closed(self) -> bool:
        with self._cond:
            return self._closed

    def has_synced(self) -> bool:
        """True once the first replace() (or any add) happened and the first list was all popped."""
        with self._cond:
            return self._has_synced_locked()

    def list_keys(self) -> list[str]:
        with self._cond:
            return list(self._queue)

    def get_by_key(self, key: str) -> list[Delta] | None:
        with self._cond:
            deltas = self._items.get(key)
            return list(deltas) if deltas is not None else None

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    # -- internals ----------------------------------------------------------------------------

    def _has_synced_locked(self) -> bool:
        return self._populated and self._initial_population_count == 0

    def _queue_action(self, action: DeltaType, obj: Object | DeletedFinalStateUnknown) -> None:
        key = self._key_func(obj)
        deltas = self._items.get(key)
        if action is DeltaType.SYNC and deltas and deltas[-1].type is DeltaType.DELETED:
            return  # the object is about to be deleted: a Sync would bring it back
        if self._transform is not None and not isinstance(obj, DeletedFinalStateUnknown):
            obj = self._transform(obj)
        if deltas is None:
            deltas = self._items[key] = []
            self._queue.append(key)
        # In place: pop() takes the list out of _items before anyone else sees it.
        deltas.append(Delta(action, obj))
        _dedup_deletions(deltas)
        self._cond.notify()


def _dedup_deletions(deltas: list[Delta]) -> None:
    """Two Deleted deltas in a row become one; the one with the real final state is kept."""
    if len(deltas) < 2 or deltas[-1].type is not DeltaType.DELETED or deltas[-2].type is not DeltaType.DELETED:
        return
    newer, older = deltas.pop(), deltas.pop()
    deltas.append(older if isinstance(newer.object, DeletedFinalStateUnknown) else newer)
