"""Cache keys and deletion tombstones (client-go MetaNamespaceKeyFunc, DeletedFinalStateUnknown).

An informer files each object under "namespace/name" ("name" if cluster-scoped). When it relists
after losing its watch, objects that vanished meanwhile are reported deleted without their final
state: the handler gets a `DeletedFinalStateUnknown` holding the key and the last state the cache
had, and must be ready for it in on_delete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minisched.meta import key_of

Object = dict[str, Any]
KeyFunc = Callable[[Any], str]


@dataclass(frozen=True)
class DeletedFinalStateUnknown:
    """An object deleted while the watch was down: `obj` is its last known state (may be stale)."""

    key: str
    obj: Object | None


def meta_namespace_key(obj: Object) -> str:
    """ "namespace/name", or "name" for a cluster-scoped object."""
    return key_of(obj)


def deletion_handling_key(obj: Object | DeletedFinalStateUnknown) -> str:
    """Like meta_namespace_key, but a tombstone's key is the key it carries."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return key_of(obj)


def unwrap_tombstone(obj: Object | DeletedFinalStateUnknown) -> Object | None:
    """The object itself, or the last known state inside a tombstone."""
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
