"""A handler that records what it is told and keeps its own view of the objects.

The view is built only from notifications, so comparing it with the server shows whether the
handler lost or duplicated anything; contradictions (an add for an object it already has, an update
or delete for one it lacks) are collected in `violations`.
"""

from __future__ import annotations

import threading
from typing import Any

from minisched.informer import DeletedFinalStateUnknown, deletion_handling_key, unwrap_tombstone
from minisched.meta import resource_version_of

Object = dict[str, Any]


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[Any, ...]] = []
        self.view: dict[str, str] = {}  # key -> resourceVersion
        self.violations: list[str] = []

    def on_add(self, obj: Object, is_in_initial_list: bool) -> None:
        key = deletion_handling_key(obj)
        with self.lock:
            self.events.append(("add", key, resource_version_of(obj), is_in_initial_list))
            if key in self.view:
                self.violations.append(f"add of {key} already seen")
            self.view[key] = resource_version_of(obj)

    def on_update(self, old: Object, new: Object) -> None:
        key = deletion_handling_key(new)
        with self.lock:
            self.events.append(("update", key, resource_version_of(old), resource_version_of(new)))
            if key not in self.view:
                self.violations.append(f"update of unknown {key}")
            elif self.view[key] != resource_version_of(old):
                self.violations.append(f"update of {key}: old rv {resource_version_of(old)}, had {self.view[key]}")
            self.view[key] = resource_version_of(new)

    def on_delete(self, obj: Object | DeletedFinalStateUnknown) -> None:
        key = deletion_handling_key(obj)
        inner = unwrap_tombstone(obj)
        with self.lock:
            self.events.append(
                ("delete", key, resource_version_of(inner) if inner else "", isinstance(obj, DeletedFinalStateUnknown))
            )
            if key not in self.view:
                self.violations.append(f"delete of unknown {key}")
            self.view.pop(key, None)

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        with self.lock:
            return [e for e in self.events if e[0] == kind]

    def snapshot(self) -> dict[str, str]:
        with self.lock:
            return dict(self.view)
