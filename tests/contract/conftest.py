"""Helpers for the backend contract suite. Every test takes `cluster` (embedded, then real), makes its
own uniquely named namespace and objects, and relies on nothing an API server would not do."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from minisched.cluster import Cluster, Watch, WatchEvent
from minisched.objects import make_namespace

Object = dict[str, Any]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def ns(cluster: Cluster) -> str:
    """A fresh namespace for this test (the real_cluster fixture deletes it afterwards)."""
    name = unique("ct")
    cluster.create("namespaces", make_namespace(name))
    return name


def collect(watch: Watch, count: int, timeout: float = 5.0) -> list[WatchEvent]:
    """The first `count` non-bookmark events of `watch`, or fewer if `timeout` passes first."""
    events: list[WatchEvent] = []
    done = threading.Event()

    def read() -> None:
        try:
            for ev in watch:
                if ev["type"] == "BOOKMARK":
                    continue
                events.append(ev)
                if len(events) >= count:
                    break
        finally:
            done.set()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    done.wait(timeout)
    watch.stop()
    thread.join(2)
    return list(events)


def eventually(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll `check` until it returns a truthy value without raising; re-raise the last failure."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception:
            if time.monotonic() >= deadline:
                raise
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def names(items: list[Object]) -> list[str]:
    return [i["metadata"]["name"] for i in items]
