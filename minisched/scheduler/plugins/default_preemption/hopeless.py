"""A shortcut past the dry run for the common hopeless node (minisched's, not kube's): a node that
failed Filter only for NodeResourcesFit's resources, where evicting every lower-priority pod would
still leave too little. The answer is the dry run's own ("Insufficient cpu", "Too many pods"),
found by arithmetic on the snapshot instead of running the filters on a working copy of the node;
tests pin it against the full dry run on random clusters."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo


def hopeless_nodes(
    pod: PodInfo, table: Any, statuses: Mapping[str, Status], nominated: Mapping[str, list[PodInfo]] | None = None
) -> Callable[[str], list[str] | None]:
    """node name -> the reasons the dry run would give there when it is hopeless for `pod` for
    resources alone, counting the pods nominated there; None where the dry run must decide."""
    resources = [r for r, amount in pod.requests.items() if amount]
    alloc = {r: table.allocatable(r).tolist() for r in [*resources, "pods"]}
    used = {r: table.requested(r).tolist() for r in [*resources, "pods"]}

    def check(name: str) -> list[str] | None:
        # Pods nominated there (of the preemptor's priority or higher) hold room the table does
        # not show: the dry run's first question puts them on with every lower pod off
        # (kube's RunFilterPluginsWithNominatedPods), so they count here the same way.
        status = statuses.get(name)
        if status is None or status.plugin != "NodeResourcesFit" or not status.reasons:
            return None
        held = [p for p in nominated.get(name) or () if not table.has_pod(name, p.key)] if nominated else []
        row = table.row(name)
        lower = [p for p in table.pods_on(name) if p.priority < pod.priority]
        if row is None or not lower:
            return None  # no victims: select_victims_on_node answers that without filtering
        short = set()
        if used["pods"][row] - len(lower) + len(held) + 1 > alloc["pods"][row]:
            short.add("pods")
        for r in resources:
            freed = sum(p.requests.get(r, 0) for p in lower)
            taken = sum(p.requests.get(r, 0) for p in held)
            if used[r][row] - freed + taken + pod.requests[r] > alloc[r][row]:
                short.add(r)
        if not short:
            return None
        # Removing pods never makes an earlier filter fail, so NodeResourcesFit stays the first
        # failure, and its reasons are the resources still short (in its order).
        reasons = [m for m in status.reasons if _reason_resource(m) in short]
        return reasons if len(reasons) == len(short) else None

    return check


def _reason_resource(reason: str) -> str:
    """The resource a NodeResourcesFit reason is about: "Insufficient cpu" -> cpu."""
    if reason == "Too many pods":
        return "pods"
    return reason.removeprefix("Insufficient ")
