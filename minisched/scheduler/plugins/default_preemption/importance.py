"""Which of two pods matters more (kube's util.MoreImportantPod and GetPodStartTime): the order in
which the dry run puts victims back, and the last tie-breaker between candidate nodes."""

from __future__ import annotations

from minisched.scheduler.framework.types import PodInfo

# A pod that never started counts as starting now (kube's GetPodStartTime), i.e. the latest.
NOT_STARTED = float("inf")


def more_important(a: PodInfo, b: PodInfo) -> bool:
    """kube's MoreImportantPod: higher priority, then the one that started earlier."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return start_time(a) < start_time(b)


def start_time(p: PodInfo) -> float:
    return p.started if p.started is not None else NOT_STARTED


def importance_key(p: PodInfo) -> tuple[int, float]:
    """A sort key putting the most important pod first (the order more_important says)."""
    return (-p.priority, start_time(p))
