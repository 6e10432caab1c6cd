"""Helpers for the runtime tests: wait for a condition, look at pods and events."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from minisched.cluster.base import Cluster
from minisched.objects import make_priority_class
from minisched.resources import PODS, PRIORITY_CLASSES
from minisched.scheduler.queue import SchedulingQueue


def wait_until(cond: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    # Generous: it returns as soon as cond holds; only a failure waits this long (CI is loaded).
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def node_of(cluster: Cluster, name: str, namespace: str = "default") -> str | None:
    return cluster.get(PODS, name, namespace)["spec"].get("nodeName")


def bound_pods(cluster: Cluster) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in cluster.list(PODS)["items"]
            if p["spec"].get("nodeName")}


def priority_classes(cluster: Cluster, **values: int) -> None:
    for name, value in values.items():
        cluster.create(PRIORITY_CLASSES, make_priority_class(name, value))


def wait_for_nodes(sched: Any, count: int, timeout: float = 10.0) -> None:
    """Wait until the scheduler's cache has `count` nodes (pods created earlier would fail once and
    back off for a second, as in kube, which makes tests slow and their event counts racy)."""
    wait_until(lambda: len(sched.cache.node_names()) == count, timeout, f"{count} nodes in the cache")


def advance_until(clock: Any, cond: Callable[[], Any], timeout: float = 10.0, what: str = "condition",
                  step: float = 0.5) -> Any:
    """Like wait_until, moving a VirtualClock forward `step` seconds each round (backoffs elapse)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        clock.advance(step)
        time.sleep(0.01)


def park_unschedulable(q: SchedulingQueue, pod: dict[str, Any], rejected_by: str) -> str:
    """Add `pod`, pop it and park it as rejected by the plugin `rejected_by`; its queue key."""
    q.add(pod)
    qpi = q.pop(timeout=0)
    assert qpi is not None
    q.add_unschedulable(qpi, rejected_by=[rejected_by])
    assert q.where(qpi.key) == "unschedulable"
    return qpi.key


class Allowlist:
    """kube's test preEnqueuePlugin: lets a pod through when one of its labels is allowed."""

    def __init__(self, name: str, *allowed: str) -> None:
        self.name, self.allowed = name, set(allowed)

    def __call__(self, pod: dict[str, Any]) -> str | None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return None if self.allowed & set(labels) else self.name
