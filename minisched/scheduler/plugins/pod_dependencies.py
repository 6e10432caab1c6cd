"""PodDependencies (PreEnqueue): a pod waits until the pods it depends on are bound.

A pod declares what it depends on with an annotation naming pods of its own namespace:

    metadata:
      annotations:
        minisched.io/depends-on: "db,cache"

The pod is held out of the active queue, as spec.schedulingGates hold a pod (kube's
SchedulingGates PreEnqueue), and shows why: the scheduler writes PodScheduled=False with reason
SchedulingGated and this plugin's message ("waiting for pods to be bound: [db cache]"). When a pod
becomes bound, the queue asks this plugin again about the pods it holds (the plugin registers for
the assigned-pod-add event), so the dependants go to the active queue in dependency order.

Pods that depend on each other in a cycle would wait forever; the plugin keeps the dependencies of
the pods it holds as a PodGraph and names the cycle instead ("dependency cycle: a -> b -> a").

Not in the default profile (kube has no such plugin): enable it in a profile's preEnqueue.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from minisched.graph import PodGraph
from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework.interface import Handle
from minisched.scheduler.framework.status import Status

NAME = "PodDependencies"
DEPENDS_ON_ANNOTATION = "minisched.io/depends-on"


Object = dict[str, Any]
BoundNode = Callable[[str], "str | None"]

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class BadDependencies(ValueError):
    """The annotation does not parse as a list of pod names."""


def dependencies(pod: Object) -> list[str]:
    """The pure rule: the names the pod depends on ([] when it declares none). BadDependencies
    names the bad entry."""
    meta = pod.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(DEPENDS_ON_ANNOTATION)
    if raw is None or not str(raw).strip():
        return []
    names = [part.strip() for part in str(raw).split(",")]
    for name in names:
        if not name or len(name) > 253 or not _DNS1123.match(name):
            raise BadDependencies(f"annotation {DEPENDS_ON_ANNOTATION}={raw!r}: {name!r} is not a pod name "
                                  "(comma-separated names of pods in the same namespace)")
    return list(dict.fromkeys(names))  # duplicates collapse, order kept


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


class PodDependencies:
    name = NAME

    def __init__(self, bound_node: BoundNode) -> None:
        self._bound_node = bound_node
        self._lock = threading.Lock()
        # pod key -> the keys it waits for, for the pods this plugin holds now (what the cycle
        # check looks at); a pod leaves when it passes, or when forget() hears it was deleted.
        self._holding: dict[str, tuple[str, ...]] = {}

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """A pod it holds may go once the pods it waits for are bound: an assigned pod's add."""
        return ce.events(None, ce.ASSIGNED_POD_ADD)

    def pre_enqueue(self, pod: Object) -> Status:
        try:
            names = dependencies(pod)
        except BadDependencies as err:
            return Status.unschedulable(str(err), plugin=NAME, unresolvable=True)
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        key = _key(namespace, meta.get("name") or "")
        deps = tuple(_key(namespace, n) for n in names)
        waiting = [d for d in deps if self._bound_node(d) is None]
        with self._lock:
            if not waiting:
                self._holding.pop(key, None)
                return Status.success()
            self._holding[key] = deps
            cycle = PodGraph.from_dependencies(self._holding).find_cycle(through=key) if key in deps or any(
                d in self._holding for d in deps) else None
        if cycle is not None:
            waits = " -> ".join(reversed(cycle))  # edges point from a dependency to its dependant
            return Status.unschedulable(f"dependency cycle: {waits} (each waits for the next)", plugin=NAME,
                                        unresolvable=True)
        short = [d.split("/", 1)[1] for d in waiting]
        return Status.unschedulable(f"waiting for pods to be bound: [{' '.join(short)}]", plugin=NAME,
                                    unresolvable=True)

    def forget(self, key: str) -> None:
        """The pod is gone: stop counting it in cycle checks."""
        with self._lock:
            self._holding.pop(key, None)

    def holding(self) -> dict[str, tuple[str, ...]]:
        with self._lock:
            return dict(self._holding)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> PodDependencies:
    if handle is None:
        raise ValueError(f"{NAME} needs a handle (it asks which pods are bound)")
    return PodDependencies(handle.bound_node)
