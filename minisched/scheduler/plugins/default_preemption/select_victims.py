"""The dry run on one node (kube's SelectVictimsOnNode): the fewest lower-priority pods whose
eviction lets the preemptor fit there, found as kube finds them.

Every pod of lower priority comes off the node's working copy; if the preemptor still does not
fit, the node is no candidate. Otherwise the victims go back one at a time, in order of importance
(higher priority, then earlier start), those whose eviction would violate a PodDisruptionBudget
first, and each one whose return still lets the preemptor fit stays. The ones that cannot come
back are the victims: a minimal set, not the smallest possible one.

`select_victims_on_node` is a plain function over PodInfos and a WorkingNode, so that a chapter
can call it on its own with `RefilterNode(fits)`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.default_preemption.importance import importance_key
from minisched.scheduler.plugins.default_preemption.names import NAME
from minisched.scheduler.plugins.default_preemption.pdb import Pdb, split_by_pdb_violation

NO_VICTIMS = "No preemption victims found for incoming pod"


class Fits(Protocol):
    """Would `pod` pass every Filter plugin on the single node of `table`?"""

    def __call__(self, state: CycleState, pod: PodInfo, table: Any) -> Status: ...


class WorkingNode(Protocol):
    """One node's what-if copy during the dry run (kube's nodeInfoCopy and its CycleState copy):
    pods come off and go back one at a time, and `fits` asks the filters about the copy as it is."""

    def remove(self, p: PodInfo) -> Status: ...

    def add(self, p: PodInfo) -> Status: ...

    def fits(self) -> Status: ...


class RefilterNode:
    """A WorkingNode over `fits(removed)`: each question re-asks with the whole list of pods taken
    off. The simple form (what a chapter passes, and what tests pin the incremental path against)."""

    def __init__(self, fits: Callable[[list[PodInfo]], Status]) -> None:
        self._fits = fits
        self.removed: list[PodInfo] = []

    def remove(self, p: PodInfo) -> Status:
        self.removed.append(p)
        return Status.success()

    def add(self, p: PodInfo) -> Status:
        self.removed.remove(p)
        return Status.success()

    def fits(self) -> Status:
        return self._fits(list(self.removed))


class _DryRunError(Exception):
    """A working copy's RemovePod/AddPod failed: the node's dry run ends with that status."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


def _checked(status: Status) -> None:
    if not status.is_success:
        raise _DryRunError(status)


def select_victims_on_node(
    pod: PodInfo,
    node_pods: Iterable[PodInfo],
    fits: Callable[[list[PodInfo]], Status] | WorkingNode,
    pdbs: Sequence[Pdb] = (),
) -> tuple[list[PodInfo] | None, int, Status]:
    """The minimal victims on one node, kube's SelectVictimsOnNode.

    `fits` is the node's working copy (a WorkingNode), or `fits(removed)` answering whether `pod`
    passes the filters with `removed` taken off the node. As kube: every lower-priority pod comes
    off, the pod must then fit; the PDB-violating ones, then the others, each in order of importance,
    go back one at a time and stay if the pod still fits. Returns (victims most important first,
    PDB violations, status); victims is None when the node is no candidate, and status then says why."""
    node = RefilterNode(fits) if callable(fits) else fits
    lower = [p for p in node_pods if p.priority < pod.priority]
    if not lower:
        return None, 0, Status.unschedulable(NO_VICTIMS, plugin=NAME, unresolvable=True)
    victims: list[PodInfo] = []
    violations = 0
    try:
        for p in lower:
            _checked(node.remove(p))
        status = node.fits()
        if not status.is_success:
            return None, 0, status
        lower.sort(key=importance_key)
        violating, non_violating = split_by_pdb_violation(lower, pdbs)

        def reprieve(p: PodInfo) -> bool:
            _checked(node.add(p))
            if node.fits().is_success:
                return True
            _checked(node.remove(p))
            victims.append(p)
            return False

        for p in violating:
            if not reprieve(p):
                violations += 1
        for p in non_violating:
            reprieve(p)
    except _DryRunError as err:
        return None, 0, err.status
    if not victims:  # kube: a node that needs no victims is an error, never a candidate
        return None, 0, Status.from_error(
            RuntimeError("expected at least one victim pod on the node"), plugin=NAME)
    victims.sort(key=importance_key)
    return victims, violations, Status.success()
