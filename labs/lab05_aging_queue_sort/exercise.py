"""Lab 5 starter: fill in AgingSort (see README.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minisched.scheduler.framework.interface import QueuedPod

NAME = "AgingSort"


class AgingSort:
    name = NAME

    def __init__(self, aging_seconds: float = 60.0) -> None:
        self.aging_seconds = aging_seconds

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        raise NotImplementedError("less")  # your code here


def new(args: Mapping[str, Any] | None, handle: Any) -> AgingSort:
    return AgingSort()  # read args["agingSeconds"] here
