"""Lab 5, the instructor's solution."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minisched.scheduler.framework.interface import QueuedPod

NAME = "AgingSort"


class AgingSort:
    name = NAME

    def __init__(self, aging_seconds: float = 60.0) -> None:
        if not aging_seconds > 0:
            raise ValueError(f"agingSeconds must be positive, got {aging_seconds}")
        self.aging_seconds = aging_seconds

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        # priority + (now - t) / s: `now` is the same for both pods and cancels out
        ka = a.priority - a.timestamp / self.aging_seconds
        kb = b.priority - b.timestamp / self.aging_seconds
        return ka > kb or (ka == kb and a.timestamp < b.timestamp)


def new(args: Mapping[str, Any] | None, handle: Any) -> AgingSort:
    return AgingSort(float((args or {}).get("agingSeconds", 60.0)))
