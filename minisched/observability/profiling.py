"""A sampling profile of the scheduling loop with pyinstrument, and its hot spots by name
(Part II §2.5).

Go has pprof built in; Python's equivalents are external samplers. pyinstrument samples the
thread that started it (every `interval` seconds of wall-clock time), so `profile_scheduling`
runs the scheduling cycles in the calling thread (`Scheduler.start(loop=False)` then
`schedule_one()`), which is exactly the loop the scheduler's own thread runs. Wall-clock samples
include time the thread spent waiting for the GIL while informer and binding threads ran: a
sample lands in whatever call was waiting, which is why `CPU time` and `Duration` differ.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from pyinstrument import Profiler
from pyinstrument.frame import Frame
from pyinstrument.session import Session

__all__ = ["HotSpot", "call_tree", "hot_spots", "profile_calls", "share_of", "without_machine_paths"]


@dataclass(frozen=True)
class HotSpot:
    function: str  # "Class.method" or "function"
    location: str  # "minisched/scheduler/plugins/node_resources_fit.py:332"
    self_seconds: float
    share: float  # of the whole profile's duration


def profile_calls(step: Callable[[], bool], *, interval: float = 0.0005, limit: int = 100_000) -> Session:
    """Call `step()` under the profiler until it returns False (or `limit` calls)."""
    profiler = Profiler(interval=interval)
    profiler.start()
    try:
        for _ in range(limit):
            if not step():
                break
    finally:
        session = profiler.stop()
    return session


def call_tree(session: Session, *, show_all: bool = False) -> str:
    """The profile as pyinstrument's text call tree (no colour: it goes into a notebook)."""
    from pyinstrument.renderers import ConsoleRenderer

    text = ConsoleRenderer(unicode=True, color=False, show_all=show_all, short_mode=False).render(session)
    return without_machine_paths(text)


# a path of this machine up to the package ("/home/x/src/", "../"), and IPython's per-kernel file
# names for cell code ("/tmp/ipykernel_12154/4049003704.py")
_PACKAGE_PREFIX = re.compile(r"(?:(?<=\s)|^)(?:[^\s]*?[/\\])?(?=minisched[/\\])", re.MULTILINE)
_KERNEL_CELL = re.compile(r"[^\s]*ipykernel_\d+[/\\]\d+\.py")
_INSTALLED = re.compile(r"[^\s]*[/\\]site-packages[/\\]")  # a library: from its package on
_STDLIB = re.compile(r"[^\s]*[/\\]lib[/\\](python3\.\d+)[/\\]")  # the standard library


def without_machine_paths(text: str) -> str:
    """`text` with the paths of the machine that ran it cut back to `minisched/...`, and a
    notebook cell's temporary file named `<cell>`: a stored output that reads the same anywhere."""
    text = _INSTALLED.sub("", _KERNEL_CELL.sub("<cell>", text))
    return _PACKAGE_PREFIX.sub("", _STDLIB.sub(r"\1/", text))


def _short(path: str) -> str:
    marker = f"{os.sep}minisched{os.sep}"
    i = path.rfind(marker)
    return path[i + 1 :] if i >= 0 else os.path.basename(path)


def hot_spots(session: Session, *, limit: int = 8, under: str = "minisched") -> list[HotSpot]:
    """Functions of ours (file path contains `under`) by their own time, summed over every place
    they were called from. Time in libraries they call (numpy, builtins, the standard library) is
    counted as theirs: the question is which of OUR functions to look at."""
    root = session.root_frame()
    if root is None:
        return []
    totals: dict[tuple[str, str], float] = defaultdict(float)

    def walk(frame: Frame) -> None:
        path = frame.file_path or ""
        if under in path and frame.function and path != __file__:  # not the profiler's own frames
            name = f"{frame.class_name}.{frame.function}" if frame.class_name else frame.function
            # its own time: all of it except what deeper frames of our own code took (calls into
            # numpy, builtins and the standard library count for the line of ours that made them)
            own = frame.time - sum(c.time for c in frame.children if under in (c.file_path or ""))
            totals[(name, f"{_short(path)}:{frame.line_no}")] += own
        for child in frame.children:
            walk(child)

    walk(root)
    duration = session.duration or 1.0
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:limit]
    return [HotSpot(fn, loc, seconds, seconds / duration) for (fn, loc), seconds in ranked]



def share_of(session: Session, function: str) -> float:
    """The fraction of the profile's time spent in frames of `function` (outermost ones only, so
    recursion is not counted twice)."""
    root = session.root_frame()
    if root is None:
        return 0.0

    def walk(frame: Frame) -> float:
        if frame.function == function:
            return frame.time
        return sum(walk(child) for child in frame.children)

    return walk(root) / (session.duration or 1.0)
