"""PrioritySort (QueueSort): higher priority first; equal priority, the pod queued earlier first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minisched.scheduler.framework.interface import Handle, QueuedPod

NAME = "PrioritySort"


def less(a_priority: int, a_time: float, b_priority: int, b_time: float) -> bool:
    """The pure rule: does pod a go before pod b?"""
    return a_priority > b_priority or (a_priority == b_priority and a_time < b_time)


class PrioritySort:
    name = NAME

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        return less(a.priority, a.timestamp, b.priority, b.timestamp)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> PrioritySort:
    return PrioritySort()
