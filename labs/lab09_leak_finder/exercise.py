"""Lab 9 starter: fill in growing_lines (see README.md)."""

from __future__ import annotations

import gc  # noqa: F401 (yours to use)
import tracemalloc  # noqa: F401 (yours to use)
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Growth:
    location: str  # "path/to/file.py:123"
    bytes_per_round: float


def growing_lines(run_round: Callable[[], object], rounds: int = 4, warmup: int = 2, min_bytes: int = 1) -> list[Growth]:
    raise NotImplementedError("growing_lines")  # your code here
