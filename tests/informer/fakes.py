"""A scripted stand-in for a cluster, to drive a reflector through exact situations.

Each list() call takes the next scripted answer (a list of objects with its resourceVersion, or an
exception); each watch() call takes the next scripted stream (events and exceptions, then either
the end of the stream or, with `hold=True`, a wait until the watch is stopped).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from minisched.cluster.base import WatchEvent
from minisched.informer import ListWatch
from minisched.resources import PODS

Object = dict[str, Any]


def pod(name: str, rv: int | str, namespace: str = "default", **labels: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(rv), "labels": labels},
    }


def event(kind: str, obj: Object) -> WatchEvent:
    return {"type": kind, "object": obj}  # type: ignore[typeddict-item]


def bookmark(rv: int) -> WatchEvent:
    return {"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}}}


@dataclass
class ListAnswer:
    items: list[Object]
    rv: str


@dataclass
class Stream:
    steps: list[WatchEvent | Exception] = field(default_factory=list)
    hold: bool = False  # after the steps, block until stop() instead of ending


class ScriptedWatch:
    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._stopped = threading.Event()

    def __iter__(self):
        for step in self._stream.steps:
            if self._stopped.is_set():
                return
            if isinstance(step, Exception):
                raise step
            yield step
        if self._stream.hold:
            self._stopped.wait(10)

    def stop(self) -> None:
        self._stopped.set()


class ScriptedCluster:
    name = "scripted"

    def __init__(self, lists: list[ListAnswer | Exception], watches: list[Stream]) -> None:
        self._lists: deque[ListAnswer | Exception] = deque(lists)
        self._watches: deque[Stream] = deque(watches)
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.exhausted = threading.Event()

    def list(self, resource: Any, namespace: str | None = None, **kw: Any) -> Object:
        with self.lock:
            self.list_calls.append({"namespace": namespace, **kw})
            if not self._lists:
                self.exhausted.set()
                raise RuntimeError("script has no more list answers")
            answer = self._lists.popleft()
        if isinstance(answer, Exception):
            raise answer
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": answer.rv},
                "items": answer.items}

    def watch(self, resource: Any, namespace: str | None = None, **kw: Any) -> ScriptedWatch:
        with self.lock:
            self.watch_calls.append({"namespace": namespace, **kw})
            if not self._watches:
                self.exhausted.set()
                return ScriptedWatch(Stream(hold=True))
            stream = self._watches.popleft()
        return ScriptedWatch(stream)


class GatedListWatch(ListWatch):
    """Holds every watch after the first until the test opens the gate."""

    def __init__(self, base: ListWatch) -> None:
        super().__init__(base.cluster, base.resource, base.namespace, base.label_selector, base.field_selector)
        object.__setattr__(self, "gate", threading.Event())
        object.__setattr__(self, "held", threading.Event())
        object.__setattr__(self, "watches", [0])

    def watch(self, **kw: Any) -> Any:
        self.watches[0] += 1  # type: ignore[attr-defined]
        if self.watches[0] > 1:  # type: ignore[attr-defined]
            self.held.set()  # type: ignore[attr-defined]
            self.gate.wait(30)  # type: ignore[attr-defined]
        return super().watch(**kw)


def list_watch(cluster: ScriptedCluster, **kw: Any):
    return ListWatch.for_resource(cluster, PODS, **kw)  # type: ignore[arg-type]
