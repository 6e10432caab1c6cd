"""Event handlers: what an informer calls when the objects it watches change.

- on_add(obj, is_in_initial_list): a new object; is_in_initial_list is True for objects of the
  first list (or, for a handler added later, of the cache as it was when it was added).
- on_update(old, new): a change. During a periodic resync, old and new have the same
  resourceVersion: nothing changed, the handler is being reminded (level-based controllers rely
  on it to retry).
- on_delete(obj): obj is the final state, or a `DeletedFinalStateUnknown` tombstone when the
  deletion happened while the watch was down (use `unwrap_tombstone`).

The objects are shared with the informer's cache and other handlers: read-only. Deep-copy
(minisched.meta.deep_copy) before changing one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from minisched.informer.keys import DeletedFinalStateUnknown

Object = dict[str, Any]


@runtime_checkable
class ResourceEventHandler(Protocol):
    def on_add(self, obj: Object, is_in_initial_list: bool) -> None: ...

    def on_update(self, old: Object, new: Object) -> None: ...

    def on_delete(self, obj: Object | DeletedFinalStateUnknown) -> None: ...


@dataclass
class ResourceEventHandlerFuncs:
    """A handler from plain functions; any of them may be left out."""

    add: Callable[[Object, bool], None] | None = None
    update: Callable[[Object, Object], None] | None = None
    delete: Callable[[Object | DeletedFinalStateUnknown], None] | None = None

    def on_add(self, obj: Object, is_in_initial_list: bool) -> None:
        if self.add is not None:
            self.add(obj, is_in_initial_list)

    def on_update(self, old: Object, new: Object) -> None:
        if self.update is not None:
            self.update(old, new)

    def on_delete(self, obj: Object | DeletedFinalStateUnknown) -> None:
        if self.delete is not None:
            self.delete(obj)


@dataclass
class FilteringResourceEventHandler:
    """Passes on only objects for which `predicate(obj)` holds.

    An update that makes an object start matching arrives as an add, and one that makes it stop
    matching as a delete, so the inner handler sees a consistent subset (client-go semantics).
    """

    predicate: Callable[[Object], bool]
    handler: ResourceEventHandler

    def on_add(self, obj: Object, is_in_initial_list: bool) -> None:
        if self.predicate(obj):
            self.handler.on_add(obj, is_in_initial_list)

    def on_update(self, old: Object, new: Object) -> None:
        was, now = self.predicate(old), self.predicate(new)
        if was and now:
            self.handler.on_update(old, new)
        elif now:
            self.handler.on_add(new, False)
        elif was:
            self.handler.on_delete(old)

    def on_delete(self, obj: Object | DeletedFinalStateUnknown) -> None:
        inner = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if inner is not None and self.predicate(inner):
            self.handler.on_delete(obj)
